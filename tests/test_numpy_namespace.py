"""tapestry.numpy as a complete namespace: real submodules, every NumPy name,
and constructors that build differentiable arrays from traced values."""
import subprocess
import sys

import numpy as np
import pytest

import tapestry as tp
import tapestry.numpy as tnp
from tapestry.testing import check_grads


def test_submodule_imports_neither_replace_nor_copy():
    code = (
        "import sys, numpy, numpy.linalg, numpy.fft\n"
        "import tapestry.numpy as tnp\n"
        "before = tnp.linalg\n"
        "import tapestry.numpy.linalg\n"
        "from tapestry.numpy.linalg import solve\n"
        "from tapestry.numpy.fft import rfft\n"
        "import tapestry.numpy.random as npr\n"
        "assert tnp.linalg is before is sys.modules['tapestry.numpy.linalg']\n"
        "assert solve is numpy.linalg.solve and rfft is numpy.fft.rfft\n"
        "assert npr.randn is numpy.random.randn\n"
        "files = [getattr(m, '__file__', None) for m in list(sys.modules.values())]\n"
        "assert files.count(numpy.linalg.__file__) == 1, 'a second numpy.linalg'\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_solve_from_the_namespace_differentiates():
    from tapestry.numpy.linalg import solve
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(3)
    check_grads(lambda a, b: solve(a, b), (a, b), order=2)


def _public(module):
    return [n for n in dir(module) if not n.startswith("_")]


@pytest.mark.parametrize("np_mod, tnp_mod, prefix", [
    (np, tnp, ""), (np.linalg, tnp.linalg, "linalg."), (np.fft, tnp.fft, "fft."),
    (np.random, tnp.random, "random.")])
def test_every_public_numpy_name_is_numpys_or_a_traced_aware_replacement(np_mod, tnp_mod,
                                                                         prefix):
    ns = {}
    exec(f"from tapestry.numpy{'.' + prefix[:-1] if prefix else ''} import *", ns)
    replaced = set(tnp.REPLACED)
    for name in _public(np_mod):
        ours = getattr(tnp_mod, name)
        if ours is getattr(np_mod, name):
            continue
        assert prefix + name in replaced, \
            f"tapestry.numpy.{prefix}{name} is neither NumPy's nor a listed replacement"
        wrapped = getattr(ours, "__wrapped_numpy__", None)
        assert wrapped is None or wrapped is getattr(np_mod, name)
    for name in getattr(np_mod, "__all__", []):
        if name in ns:
            assert ns[name] is getattr(tnp_mod, name)


def test_replacements_keep_numpys_results_on_plain_values():
    x = [[1, 2], [3, 4]]
    assert np.array_equal(tnp.array(x), np.array(x))
    assert tnp.array(x, dtype=np.float32).dtype == np.float32
    assert tnp.full((2, 3), 7).dtype == np.full((2, 3), 7).dtype
    assert np.array_equal(tnp.r_[1:4, [7, 8]], np.r_[1:4, [7, 8]])
    assert tnp.mean([1.0, 3.0]) == 2.0
    assert tnp.linalg.norm([3.0, 4.0]) == 5.0


def test_array_of_nested_traced_values():
    def f(x):
        m = tnp.array([[x[0], x[1]], [x[1] * 2.0, x[0]]])
        return np.sum(np.tanh(m @ m))
    check_grads(f, (np.array([0.3, -0.7]),), order=2)
    g = tp.grad(lambda a, b: np.sum(tnp.array([a, b * 2, 3.0]) * np.arange(1.0, 4.0)),
                argnums=(0, 1))(1.5, 0.5)
    assert g == (1.0, 4.0)


def test_array_dtype_promotion_is_numpys():
    def dtype_of(*vals):
        out = {}

        def f(x):
            arr = tnp.array([x, *vals])
            out["dt"] = arr.dtype
            return np.sum(arr)
        tp.grad(f)(np.float32(1.0))
        return out["dt"]
    for vals in [(), (2.0,), (np.float32(2.0),), (2,), (np.float64(2.0),)]:
        assert dtype_of(*vals) == np.array([np.float32(1.0), *vals]).dtype


def test_array_dtype_argument_and_ndmin():
    def f(x):
        a = tnp.array([x, x], dtype=np.float32, ndmin=3)
        assert a.dtype == np.float32 and a.shape == (1, 1, 2)
        return np.sum(a)
    assert tp.grad(f)(np.float32(1.0)) == 2.0


def test_ragged_traced_input_gets_numpys_error():
    with pytest.raises(ValueError):
        tp.grad(lambda x: np.sum(tnp.array([x, [x, x]])))(np.array(1.0))


def test_asarray_full_full_like_stack_of_lists():
    check_grads(lambda a: tnp.full((2, 3), a) * np.arange(6.0).reshape(2, 3), (1.5,), order=2)
    check_grads(lambda a: tnp.full_like(np.ones(4), a) ** 2, (np.float64(0.5),), order=2)
    check_grads(lambda a: tnp.stack([[a, 1.0], [2.0, a * a]]), (np.float64(0.3),), order=2)
    check_grads(lambda a: tnp.concatenate([[a, 2 * a], np.ones(2)]), (np.float64(0.3),))
    check_grads(lambda v: tnp.asarray([v[0], v[1]], dtype=float) * 3.0, (np.ones(2),))

    def same(x):
        assert tnp.asarray(x) is x
        return np.sum(x)
    tp.grad(same)(np.ones(3))


def test_full_like_traced_fill_is_not_a_constant():
    # NumPy's own np.full_like dispatches on its first argument only.
    g = tp.grad(lambda a: np.sum(tnp.full_like(np.zeros(5), a)))(2.0)
    assert g == 5.0


def test_functions_of_one_array_accept_lists_of_traced_values():
    assert tp.grad(lambda x: tnp.mean([x, x + 2]))(0.0) == 1.0
    assert tp.grad(lambda x: tnp.std((x, x + 2)))(0.0) == 0.0
    assert tp.grad(lambda x: tnp.linalg.norm([x, x + 2]))(0.0) == 1.0
    check_grads(lambda x: tnp.append([x, 1.0], x * 2), (np.float64(0.5),))


def test_r_and_c_with_traced_items():
    c = np.arange(6.0).reshape(3, 2)
    check_grads(lambda x: tnp.r_[x, c, x], (np.ones((3, 2)),))
    check_grads(lambda x: tnp.c_[x, c, x[:, 0]], (np.ones((3, 2)),))
    check_grads(lambda x: tnp.r_[x, 1:4], (np.ones(2),))
    with pytest.raises(NotImplementedError, match="string directive"):
        tp.grad(lambda x: np.sum(tnp.r_["0,2", x, x]))(np.ones(2))


def test_make_diagonal():
    d = np.arange(1.0, 7.0).reshape(2, 3)
    assert np.array_equal(tnp.make_diagonal(d, axis1=-1, axis2=-2)[1], np.diag(d[1]))
    check_grads(lambda d: tnp.make_diagonal(d, axis1=-1, axis2=-2), (d,))


def test_plain_np_array_refusal_names_the_ways_out():
    with pytest.raises(TypeError, match=r"np\.stack.*tnp\.array"):
        tp.grad(lambda a: np.sum(np.array([a, a])))(1.0)


def test_einsum_interleaved_form():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    assert np.array_equal(tnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b)
    assert np.array_equal(tnp.einsum(a, [1, 0], b, [0, 2]), np.einsum(a, [1, 0], b, [0, 2]))
    check_grads(lambda a, b: tnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), (a, b), order=2)
    check_grads(lambda a: tnp.einsum(a, [Ellipsis, 0]), (a,))


def test_where_keywords_and_lists():
    c = np.array([True, False, True])
    x, y = np.arange(3.0), -np.arange(3.0)
    assert np.array_equal(tnp.where(condition=c, x=x, y=y), np.where(c, x, y))
    assert np.array_equal(tnp.where(c)[0], np.where(c)[0])
    check_grads(lambda a: tnp.where(c, [a, a, a], y), (np.float64(1.5),))


def test_wrapped_functions_keep_keyword_calls():
    x = np.arange(6.0).reshape(2, 3)
    assert tnp.sum(a=x, axis=0).tolist() == np.sum(x, axis=0).tolist()
    assert tnp.reshape(x, shape=(3, 2)).shape == (3, 2)
    assert tnp.where(x > 2, x, 0.0).tolist() == np.where(x > 2, x, 0.0).tolist()
