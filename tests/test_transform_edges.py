"""Edge cases of the transformation API: tree structures where two trees
meet (tangents, cotangents, tree_map), argnums, aliasing of the caller's
arrays by kept traces, dtypes under nesting, Hessian blocks, and errors that
name the transform the user called."""
import dataclasses

import numpy as np
import pytest

import tapestry as tp
import tapestry.tree_util as tu

rng = np.random.default_rng(7)


# --- tree_map and register_dataclass ------------------------------------------------
def test_tree_map_mismatch_names_the_path_and_both_structures():
    with pytest.raises(ValueError, match=r"tree 2 .* differ at \['y'\]: a tuple of length 2 "
                                         r"in the first tree, a tuple of length 1 in tree 2"):
        tp.tree_map(lambda a, b: a, {"x": 1.0, "y": (1.0, 2.0)}, {"x": 1.0, "y": (1.0,)})
    with pytest.raises(ValueError, match=r"keys \['x'\] in the first tree, a dict with keys "
                                         r"\['z'\] in tree 3.*TreeDef\(\{'z': \*\}\)"):
        tp.tree_map(lambda a, b, c: a, {"x": 1.0}, {"x": 2.0}, {"z": 1.0})
    with pytest.raises(ValueError, match=r"at \[1\]\['a'\]: a leaf|at \[1\]: a dict"):
        tp.tree_map(lambda a, b: a, (1.0, {"a": 1.0}), (1.0, [1.0]))


def test_flatten_up_to_names_the_path():
    td = tp.tree_structure({"p": (1.0, 2.0)})
    with pytest.raises(ValueError, match=r"at \['p'\]: a tuple of length 2 expected, a "
                                         r"tuple of length 3 given"):
        tu.flatten_up_to(td, {"p": (1.0, 2.0, 3.0)})


@dataclasses.dataclass
class _Two:
    a: float
    b: float


def test_register_dataclass_checks_its_fields_at_registration():
    with pytest.raises(ValueError, match=r"Missing: \['b'\]"):
        tu.register_dataclass(_Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match=r"Not init fields of _Two: \['c'\]"):
        tu.register_dataclass(_Two, data_fields=["a", "b", "c"], meta_fields=[])
    with pytest.raises(ValueError, match=r"\['a'\] listed more than once"):
        tu.register_dataclass(_Two, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TypeError, match="must be strings"):
        tu.register_dataclass(_Two, data_fields=["a", 1], meta_fields=["b"])
    # nothing was registered by the refused calls: _Two still flattens by field
    assert tp.tree_leaves(_Two(1.0, 2.0)) == [1.0, 2.0]
