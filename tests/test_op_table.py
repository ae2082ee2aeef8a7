"""The op table (tapestry.coverage.table): every public function of numpy,
numpy.linalg, numpy.fft and every scipy.special ufunc is differentiable,
constant, refused by name, or (transitionally) pending -- exactly one of
them -- and what is declared constant really has a zero derivative almost
everywhere.  docs/ops.md shows the table as generated."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import tapestry as tp
from tapestry.core.registry import FUNCTIONS, NONDIFF, UFUNCS
from tapestry.coverage import refused, table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built():
    return table.build()


def _where(built, cls):
    return sorted(f"{p}.{e.names[0]} {sorted(e.classes)}"
                  for p, entries in built.items() for e in entries if e.cls == cls)


def test_walk_finds_the_namespaces(built):
    names = {f"{p}.{n}" for p, entries in built.items() for e in entries for n in e.names}
    assert {"np.sin", "np.sum", "np.argmax", "np.linalg.svd", "np.fft.fft"} <= names
    assert len(built["np"]) > 250
    if "scipy.special" in built:
        assert {"scipy.special.expit", "scipy.special.jv"} <= names
    _, plain = table.public_functions()
    assert "zeros" in plain["np"] and "sin" not in plain["np"]  # undispatched, listed apart


def test_every_function_is_classified(built):
    missing = _where(built, "missing")
    assert not missing, (
        "functions in no class of the op table; give each a rule, declare it constant "
        "(def_nondiff) or refuse it with a reason in tapestry/coverage/refused.py:\n"
        + "\n".join(missing))


def test_no_function_is_in_two_classes(built):
    conflicts = _where(built, "conflict")
    assert not conflicts, (
        "functions in two classes (a pending or refused function that got a rule: "
        "delete its entry in tapestry/coverage/refused.py):\n" + "\n".join(conflicts))


def test_refused_and_pending_names_are_current():
    names = dict(refused.NUMPY)
    if "scipy.special" in table.build():
        names.update(refused.special_refusals())
    stale = [n for n in names if refused.resolve(n) is not None
             and not isinstance(FUNCTIONS.get(refused.resolve(n), UFUNCS.get(refused.resolve(n))),
                                refused.Refused)]
    assert not stale, f"refused but now ruled or constant, delete from refused.py: {stale}"
    gone = [n for n in refused.PENDING if refused.resolve(n) is None]
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":  # 1.26 lacks a few (unique_all, ...)
        assert not gone, f"pending names that are no function of this NumPy: {gone}"


@pytest.mark.parametrize("call,name", [
    (lambda x: np.nextafter(x, 2 * x), "np.nextafter"),
])
def test_refused_functions_raise_by_name(call, name):
    with pytest.raises(NotImplementedError, match=re.escape(name) + ".*custom_vjp"):
        tp.grad(lambda x: np.sum(call(x)))(np.eye(3) + 0.5)


def test_refused_scipy_special_ufunc_raises_by_name():
    sp = pytest.importorskip("scipy.special")
    with pytest.raises(NotImplementedError, match=r"scipy\.special\.zetac .*zeta'.*custom_vjp"):
        tp.grad(lambda x: np.sum(sp.zetac(x)))(np.ones(2) * 2)
    assert tp.grad(lambda x: np.sum(sp.expit(x)))(np.zeros(2)).tolist() == [0.25, 0.25]


_CALLS = [  # argument patterns: one of them binds each refused function's signature
    lambda f, x: f(x), lambda f, x: f(x, x), lambda f, x: f(x, 1), lambda f, x: f(x, 1, x),
    lambda f, x: f(np.zeros((3, 3)), x), lambda f, x: f(np.sum, x, 0),
    lambda f, x: f(x, np.zeros((3, 1), int), x, 0),
]


def _refusal_through_dispatch(f, name):
    for call in _CALLS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tp.grad(lambda x: np.sum(call(f, x)))(np.eye(3) + 0.5)
        except NotImplementedError as e:
            if name in str(e) and "custom_vjp" in str(e):
                return True
        except Exception:  # noqa: BLE001  (these arguments do not fit f's signature)
            continue
    return False


def test_dispatch_reaches_every_numpy_refusal():
    missed = [n for n in refused.NUMPY if refused.resolve(n) is not None
              and not _refusal_through_dispatch(refused.resolve(n), n)]
    assert not missed, f"traced calls that did not raise the refusal by name: {missed}"


def test_dispatch_reaches_every_scipy_special_refusal():
    pytest.importorskip("scipy.special")
    table.build()  # runs the loaders
    missed = []
    for name in refused.special_refusals():
        f = refused.resolve(name)
        if f is not None and not _refusal_through_dispatch(
                lambda *a, f=f: f(*a[:1] * f.nin), f"scipy.special.{f.__name__}"):
            missed.append(name)
    assert not missed, f"traced calls that did not raise the refusal by name: {missed}"


def test_every_refusal_names_its_function():
    for impl in list(FUNCTIONS.values()) + list(UFUNCS.values()):
        if isinstance(impl, refused.Refused):
            with pytest.raises(NotImplementedError, match=impl.name.replace(".", r"\.")):
                impl(np.ones(2))


# --- constants really are constant ------------------------------------------------------
_RNG = np.random.default_rng(0)
_X1 = np.sort(_RNG.uniform(0.3, 2.0, 7))
_X2 = _RNG.uniform(0.3, 2.0, (3, 3))
_DIRECTION = {x.shape: _RNG.uniform(0.5, 1.0, x.shape) for x in (_X1, _X2)}


def _float_leaves(out):
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _float_leaves(o)]
    a = np.asarray(out) if isinstance(out, (np.ndarray, np.generic, float)) else None
    return [a.astype(complex)] if a is not None and a.dtype.kind in "fc" else []


def _patterns(f):
    if isinstance(f, np.ufunc):
        return [(_X1,) * f.nin, (_X2,) * f.nin]
    return [(_X1,), (_X2,), (_X1, _X1[::-1].copy()), (_X2, _X2.T.copy())]


def _changes(f, args, eps):
    """Output changes when every float input moves by ``eps`` along a fixed direction."""
    moved = tuple(a + eps * _DIRECTION[a.shape] for a in args)
    before, again = _float_leaves(f(*args)), _float_leaves(f(*args))
    if not all(np.array_equal(b, a, equal_nan=True) for b, a in zip(before, again)):
        return None  # not a function of its inputs alone (np.empty_like)
    after = _float_leaves(f(*moved))
    if len(before) != len(after) or any(b.shape != a.shape for b, a in zip(before, after)):
        return None
    return max((float(np.max(np.abs(a - b), initial=0.0)) for b, a in zip(before, after)),
               default=0.0)  # no float output: nothing can move


def _continuous(f):
    """True if ``f`` changes continuously with its float inputs somewhere,
    False if not, None if it accepts none of the probe's float arrays."""
    verdict = None
    for args in _patterns(f):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d1, d2 = _changes(f, args, 1e-6), _changes(f, args, 1e-7)
        except Exception:  # noqa: BLE001  (this pattern of arguments does not fit f)
            continue
        if d1 is None or d2 is None:
            continue
        if d1 > 0 and d2 > 0 and 3 < d1 / d2 < 30:  # scales with the step: a slope
            return True
        verdict = False
    return verdict


def test_constants_have_zero_derivative_almost_everywhere(built):
    pending = {refused.resolve(n) for n in refused.PENDING}
    probed, wrong = 0, []
    for prefix, entries in built.items():
        for e in entries:
            if e.obj not in NONDIFF or e.obj in pending or e.names[0].startswith("save"):
                continue  # pending: being given rules; save*: the first argument is a file
            verdict = _continuous(e.obj)
            probed += verdict is not None
            if verdict:
                wrong.append(f"{prefix}.{e.names[0]}")
    assert not wrong, f"declared constant but their outputs move with their inputs: {wrong}"
    assert probed >= 60, f"the probe ran only {probed} constant functions"


def test_probe_detects_a_continuous_function():
    assert _continuous(np.cumsum) is True and _continuous(np.sin) is True
    assert _continuous(np.floor) is False and _continuous(np.argsort) is False
    # today's wrongly-constant pending functions are caught once they leave PENDING
    assert _continuous(np.unique) is True and _continuous(np.sort_complex) is True


# --- docs/ops.md -----------------------------------------------------------------------
def test_docs_ops_table_is_current(built):
    text = (ROOT / "docs" / "ops.md").read_text()
    assert table.BEGIN in text and table.END in text
    current = text[text.index(table.BEGIN):text.index(table.END) + len(table.END)] + "\n"
    fresh = table.markdown(built)
    versions = fresh.splitlines()[2].split(":")[0]
    if versions not in current:
        pytest.skip(f"docs/ops.md was generated with other versions than this one ({versions})")
    assert current == fresh, ("docs/ops.md's op table is out of date: run "
                              "`python -m tapestry.coverage.table --write docs/ops.md`")


def test_counts_add_up(built):
    c = table.counts(built)
    n = len({id(e.obj) for entries in built.values() for e in entries})
    assert sum(c[k] for k in table.CLASSES) == n and c["conflict"] == c["missing"] == 0


def _documented_modules():
    """(namespace, names-cell) -> module cell, read from docs/ops.md's rows."""
    rows, prefix = {}, None
    for line in (ROOT / "docs" / "ops.md").read_text().splitlines():
        head = re.match(r"### `(.+)`", line)
        if head:
            prefix = head.group(1)
        row = re.match(r"\| (`[^|]+`) \| `([\w.]+)` \| [\w ]+ \|$", line)
        if row:
            rows[prefix, row.group(1)] = row.group(2)
    return rows


def test_module_column_matches_the_registry_and_the_source(built):
    """Each differentiable function's row names the module whose source
    declares its rule: the registry's recorded line lies in that module and
    mentions the function (or sits in a loop over a family of names)."""
    import importlib
    import linecache

    from tapestry.core.registry import DECLARED

    rows = _documented_modules()
    checked = 0
    for prefix, entries in built.items():
        for e in entries:
            if e.cls != "differentiable":
                continue
            cell = "/".join(f"`{n}`" for n in e.names)
            module, line = DECLARED[e.obj].rsplit(":", 1)
            assert rows.get((prefix, cell)) == module.removeprefix("tapestry."), (prefix, cell)
            assert module.startswith(("tapestry.ops.", "tapestry.scipy.", "tapestry.sparse.")), (
                f"{prefix}.{e.names[0]}: recorded at {module}, a helper's module; mark the "
                "helper with tapestry.core.primitive.declares_rules")
            source = importlib.import_module(module).__file__
            near = "".join(linecache.getline(source, int(line) + k) for k in range(-3, 3))
            assert any(n in near for n in e.names) or "getattr(" in near, (
                f"{prefix}.{e.names[0]}: {module}:{line} does not declare it")
            checked += 1
    assert checked > 400
