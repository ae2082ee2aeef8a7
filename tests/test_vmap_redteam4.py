"""Red-team programs for vmap's item-by-item fallback and its per-op short
paths: each compared against a Python loop over the items of the unmapped
function (and JAX where it can express the program), values, dtypes and
gradients; plus the gradient that must not be (a view of) a caller's array."""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

from vmap_checks import loop

RNG = np.random.default_rng(44)


def _same_exactly(got, ref):
    for x, y in zip(tp.tree_util.tree_leaves(got), tp.tree_util.tree_leaves(ref)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def _vmapped(f, in_axes, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tp.vmap(f, in_axes=in_axes)(*args)


# --- integer dtype= of a reduction on a vmapped item that is not differentiated ----
X = np.array([[1.7, -2.5, 3.0], [4.0, 5.0, -6.0]])
INT_DTYPE = {
    "sum int": lambda x: np.sum(x, dtype=int),
    "sum int8 axis keepdims": lambda x: np.sum(x, dtype=np.int8, axis=0, keepdims=True),
    "sum int16 initial": lambda x: np.sum(x, dtype=np.int16, initial=3),
    "method sum": lambda x: x.sum(dtype=np.int32),
    "mean int": lambda x: np.mean(x, dtype=int),
    "prod int32": lambda x: np.prod(x, dtype=np.int32),
    "prod int8 wraps": lambda x: np.prod(x * 40, dtype=np.int8),
    "cumsum uint8": lambda x: np.cumsum(x, dtype=np.uint8),
    "cumprod int64 axis": lambda x: np.cumprod(x, dtype=np.int64, axis=0),
}


@pytest.mark.parametrize("name", sorted(INT_DTYPE))
@pytest.mark.parametrize("data", [X, X > 0, (X * 30).astype(np.int8)], ids=["f64", "bool", "int8"])
def test_integer_dtype_reduction_of_an_item_is_numpys(name, data):
    f = INT_DTYPE[name]
    _same_exactly(_vmapped(f, (0,), (data,)), loop(f, (0,), (data,)))


def test_integer_dtype_reduction_still_refused_when_differentiated():
    f = lambda x: np.sum(tp.vmap(lambda a: np.sum(a, dtype=int))(x) * 1.0)  # noqa: E731
    with pytest.raises(TypeError, match=r"np\.sum\(\.\.\., dtype=int64\).*no gradient"):
        tp.grad(f)(X)


# --- np.power of a bool item -------------------------------------------------------
B = np.array([[True, False, True], [True, True, False]])
POWERS = {
    "np.power(x, 2)": lambda x: np.power(x, 2),
    "x ** 2": lambda x: x ** 2,
    "x ** 3": lambda x: x ** 3,
    "2 ** x": lambda x: 2 ** x,
    "x ** 2.0": lambda x: x ** 2.0,
}


@pytest.mark.parametrize("name", sorted(POWERS))
@pytest.mark.parametrize("data", [B, B[:, 0], B.astype(np.float32)], ids=["bool", "bool 0-d", "f32"])
def test_power_of_a_bool_item_has_numpys_dtype(name, data):
    f = POWERS[name]
    _same_exactly(_vmapped(f, (0,), (data,)), loop(f, (0,), (data,)))


# --- a gradient is never (a view of) the caller's array ------------------------------
N = 5000  # past the size where multiply passes a cotangent of ones on unchanged
W = RNG.normal(size=(50, 100))
ALIASING = {
    "closed-over weight": lambda x: tp.grad(lambda x: np.sum(x * W.reshape(-1)))(x),
    "reshaped input": lambda x: tp.grad(lambda x: np.sum(x.reshape(50, 100) * W))(x),
    "transposed weight": lambda x: tp.grad(lambda x: np.sum(x * W.T.reshape(-1)))(x),
    "other argument": lambda x: tp.grad(lambda x, w: np.sum(x * w), argnums=(0, 1))(
        x, W.reshape(-1))[0],
    "vmap of a shared weight": lambda x: tp.grad(lambda V: np.sum(tp.vmap(
        lambda v, w: np.sum(v * w), in_axes=(0, None))(V, W.reshape(-1))))(
            np.stack([x, x]))[0],
}


@pytest.mark.parametrize("name", sorted(ALIASING))
def test_gradient_does_not_share_memory_with_the_callers_arrays(name):
    x = RNG.normal(size=N)
    before = W.copy()
    g = ALIASING[name](x)
    assert not np.shares_memory(g, W) and not np.shares_memory(g, x)
    g *= 0.0  # an in-place update of the gradient (clipping) leaves W alone
    np.testing.assert_array_equal(W, before)


def test_gradient_does_not_share_memory_with_aux():
    x = RNG.normal(size=N)

    def f(x):
        e = np.exp(x)
        return np.sum(e), e

    (_, aux), g = tp.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_array_equal(g, aux)
    assert not np.shares_memory(g, aux)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_of_a_passed_on_cotangent_is_still_right(dtype):
    w = W.reshape(-1).astype(dtype)
    check_grads(lambda x: np.sum(x * w) + np.sum(np.exp(x) * w), (RNG.normal(size=N).astype(dtype),))


# --- a mapped function that catches vmap's refusal itself ------------------------------
TABLE = RNG.normal(size=3)
XS = RNG.normal(size=(4, 3))
IDX = np.array([2, 0, 5, 1])  # 5: out of the table, for that item only


def _table_or_default(i, x):
    try:
        v = TABLE[i]  # a plain table, per-item index: NumPy converts i
    except Exception:  # noqa: BLE001 (the program's own fallback)
        v = -100.0
    return v * x


def _index_error_only(i, x):
    try:
        v = TABLE[i]
    except IndexError:
        v = -100.0
    return v * x


def _array_or_zeros(x):
    try:
        a = np.array([x[0], x[1]])
    except (TypeError, ValueError):
        a = np.zeros(2)
    return a


def _float_or_other(x):
    try:
        return float(x[0]) * 2
    except TypeError:
        return x[0] * 3


def _branch_or_default(x):
    try:
        return x * 2 if x[0] > 0 else -x
    except TypeError:
        return x * 0


SWALLOWING = {
    "table, except Exception": (_table_or_default, (0, 0), (IDX, XS)),
    "table, except IndexError": (_index_error_only, (0, 0), (IDX, XS)),
    "np.array, except": (_array_or_zeros, (0,), (XS,)),
    "float(), except TypeError": (_float_or_other, (0,), (XS,)),
    "if, except TypeError": (_branch_or_default, (0,), (XS,)),
}


@pytest.mark.parametrize("name", sorted(SWALLOWING))
def test_a_refusal_the_function_catches_runs_item_by_item(name):
    f, in_axes, args = SWALLOWING[name]
    _same_exactly(_vmapped(f, in_axes, args), loop(f, in_axes, args))


def test_a_caught_refusal_under_grad_gives_the_loops_gradient():
    def f(p, i, x):
        try:
            v = TABLE[i]
        except Exception:  # noqa: BLE001
            v = -1.0
        return np.sum(v * p * np.sin(x))

    def batched(p):
        return np.sum(_vmapped(f, (None, 0, 0), (p, IDX, XS)))

    def looped(p):
        return sum(f(p, i, x) for i, x in zip(IDX, XS))

    p = RNG.normal(size=3)
    np.testing.assert_allclose(tp.grad(batched)(p), tp.grad(looped)(p), rtol=1e-12)
    check_grads(batched, (p,))


def test_a_caught_refusal_of_an_inner_vmap_stays_inner():
    def inner(i, x):
        return _table_or_default(i, x)

    got = _vmapped(lambda x: tp.vmap(inner, in_axes=(0, None))(IDX, x), (0,), (XS,))
    ref = np.stack([np.stack([_table_or_default(i, x) for i in IDX]) for x in XS])
    _same_exactly(got, ref)


def _table_or_own_error(i, x):
    try:
        v = TABLE[i]
    except Exception as e:  # noqa: BLE001 (the program's own error for a bad index)
        raise KeyError("no such entry") from e
    return v * x


def test_a_caught_refusal_reraised_as_the_functions_own_error_runs_item_by_item():
    ok = np.array([2, 0, 1, 1])
    _same_exactly(_vmapped(_table_or_own_error, (0, 0), (ok, XS)),
                  loop(_table_or_own_error, (0, 0), (ok, XS)))
    with pytest.raises(KeyError, match="no such entry"):  # the item's own error, as in a loop
        _vmapped(_table_or_own_error, (0, 0), (IDX, XS))


def test_an_uncaught_float_of_an_item_is_still_refused_by_name():
    with pytest.raises(TypeError, match=r"float\(\) of a batched value"):
        _vmapped(lambda x: float(x[0]) * x, (0,), (XS,))


# --- realistic programs that run item by item (a closed-over table) ----------------------
K, D, NX = 4, 3, 6
PARAMS = {"W": RNG.normal(size=(K, D)), "b": RNG.normal(size=K)}
XD = RNG.normal(size=(NX, D))
LABELS = RNG.integers(0, K, size=NX)
EMB = RNG.normal(size=(7, D))
TOK = RNG.integers(0, 7, size=(NX, 2))


def _log_softmax(z):
    m = z.max()
    return z - m - np.log(np.sum(np.exp(z - m)))


def _nll(p, x, label):
    return -np.sum(np.eye(K)[label] * _log_softmax(p["W"] @ x + p["b"]))  # one-hot: item by item


def _emb_loss(E, t, x):
    return np.sum((E[t].sum(0) - x) ** 2)


PROGRAMS = {
    "per-example gradients, one-hot labels": (
        lambda: tp.vmap(tp.grad(_nll), in_axes=(None, 0, 0))(PARAMS, XD, LABELS),
        lambda: loop(tp.grad(_nll), (None, 0, 0), (PARAMS, XD, LABELS))),
    "jit of per-example gradients": (
        lambda: tp.jit(tp.vmap(tp.grad(_nll), in_axes=(None, 0, 0)))(PARAMS, XD, LABELS),
        lambda: loop(tp.grad(_nll), (None, 0, 0), (PARAMS, XD, LABELS))),
    "gradient of the mean loss": (
        lambda: tp.grad(lambda p: np.mean(tp.vmap(_nll, in_axes=(None, 0, 0))(p, XD, LABELS)))(
            PARAMS),
        lambda: tp.grad(lambda p: sum(_nll(p, x, y) for x, y in zip(XD, LABELS)) / NX)(PARAMS)),
    "per-example Hessian diagonal": (
        lambda: tp.vmap(lambda x, y: np.diag(tp.hessian(lambda x: _nll(PARAMS, x, y))(x)))(
            XD, LABELS),
        lambda: loop(lambda x, y: np.diag(tp.hessian(lambda x: _nll(PARAMS, x, y))(x)), (0, 0),
                     (XD, LABELS))),
    "closed-over embedding, gradient in x": (
        lambda: tp.vmap(tp.grad(lambda t, x: _emb_loss(EMB, t, x), argnums=1))(TOK, XD),
        lambda: loop(tp.grad(lambda t, x: _emb_loss(EMB, t, x), argnums=1), (0, 0), (TOK, XD))),
    "embedding as an argument, its gradient": (
        lambda: tp.grad(lambda E: np.sum(tp.vmap(_emb_loss, in_axes=(None, 0, 0))(E, TOK, XD)))(
            EMB),
        lambda: tp.grad(lambda E: sum(_emb_loss(E, t, x) for t, x in zip(TOK, XD)))(EMB)),
    "nested, inner one-hot": (
        lambda: tp.vmap(lambda x: tp.vmap(lambda y: _nll(PARAMS, x, y))(LABELS))(XD),
        lambda: np.array([[_nll(PARAMS, x, y) for y in LABELS] for x in XD])),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_realistic_programs_match_the_loop(name):
    ours, reference = PROGRAMS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ours()
    ref = reference()
    for x, y in zip(tp.tree_util.tree_leaves(got), tp.tree_util.tree_leaves(ref)):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


# --- initial= of a reduction is cast to the reduction's dtype, as NumPy does ------------
INITIAL = {
    "sum, initial 0.7": lambda x: np.sum(x, initial=0.7),
    "method sum, initial 5.0": lambda x: x.sum(initial=5.0),
    "sum axis keepdims, initial 1.2": lambda x: np.sum(x, axis=0, initial=1.2, keepdims=True),
    "sum, float64 initial": lambda x: np.sum(x, initial=np.float64(0.1)),
    "prod, initial 1.5": lambda x: np.prod(x, initial=1.5),
    "max, initial 2.5": lambda x: np.max(x, initial=2.5),
    "min, float64 initial": lambda x: np.min(x, initial=np.float64(0.5)),
    "max where, initial 1.5": lambda x: np.max(x, initial=1.5, where=np.array([True, False, True])),
}
XI = np.array([[1, 2, -3], [4, 0, 1]])


@pytest.mark.parametrize("name", sorted(INITIAL))
@pytest.mark.parametrize("data", [XI, XI * 1.5, (XI * 1.5).astype(np.float32), XI > 0],
                         ids=["int", "f64", "f32", "bool"])
def test_initial_takes_the_reductions_dtype(name, data):
    f = INITIAL[name]
    _same_exactly(_vmapped(f, (0,), (data,)), loop(f, (0,), (data,)))


@pytest.mark.parametrize("name", sorted(INITIAL))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_initial_gradients(name, dtype):
    x = (XI[0] * 1.5 + 0.1).astype(dtype)
    check_grads(INITIAL[name], (x,))
    assert tp.grad(lambda x: np.sum(INITIAL[name](x)))(x).dtype == dtype
    assert np.result_type(tp.vmap(INITIAL[name])(np.stack([x, x]))) == \
        np.result_type(INITIAL[name](x))


# --- NumPy functions tapestry writes for floats, on integer or bool items -----------------
XINT = np.array([[3, -1, 4, 1], [5, 9, -2, 6], [0, 0, 7, 1]])
INTEGER_ITEMS = {
    "median": np.median,
    "percentile": lambda x: np.percentile(x, 30),
    "quantile": lambda x: np.quantile(x, 0.3),
    "nanmedian": np.nanmedian,
    "nanquantile": lambda x: np.nanquantile(x, 0.7),
    "nansum": np.nansum,
    "nanprod": np.nanprod,
    "nancumsum": np.nancumsum,
    "nancumprod": np.nancumprod,
    "gradient": np.gradient,
    "convolve": lambda x: np.convolve(x, x[::-1]),
    "correlate": lambda x: np.correlate(x, x[::-1], "full"),
    "polyval": lambda x: np.polyval(x, 2),
    "select": lambda x: np.select([x > 0], [x], default=0),
    "diff": np.diff,
    "norm": np.linalg.norm,
    "linspace": lambda x: np.linspace(x, x[::-1], 5),
    "logspace": lambda x: np.logspace(x, x[::-1], 3),
    "vecdot": lambda x: np.vecdot(x, x[::-1]),
    "polymul": lambda x: np.polymul(x, x[::-1]),
}


@pytest.mark.parametrize("name", sorted(INTEGER_ITEMS))
@pytest.mark.parametrize("data", [XINT, XINT.astype(np.int8), (XINT + 2).astype(np.uint8),
                                  XINT > 0], ids=["int64", "int8", "uint8", "bool"])
def test_integer_items_get_numpys_result(name, data):
    f = INTEGER_ITEMS[name]
    try:
        ref = loop(f, (0,), (data,))
    except (TypeError, ValueError):  # NumPy's refusal (np.quantile of bools), or items
        with pytest.raises((TypeError, ValueError)):  # of different shapes (np.polymul)
            _vmapped(f, (0,), (data,))
        return
    _same_exactly(_vmapped(f, (0,), (data,)), ref)


@pytest.mark.parametrize("name", ["median", "quantile", "nansum", "gradient", "convolve"])
def test_float_items_of_those_functions_still_differentiate(name):
    f = INTEGER_ITEMS[name]
    x = XINT * 1.5 + RNG.normal(size=XINT.shape) * 0.1
    check_grads(lambda x: np.sum(tp.vmap(f)(x) ** 2), (x,))


# --- np.nanvar / np.nanstd of complex values: |d|^2, real, as NumPy's ---------------------
ZS = np.array([[1 + 2j, 3 - 1j, np.nan, 2j], [0.5j, np.nan, -1 + 1j, 2.0]])


@pytest.mark.parametrize("fn", [np.nanvar, np.nanstd], ids=["nanvar", "nanstd"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_nan_moments_of_complex_values(fn, dtype):
    z = ZS.astype(dtype)
    _same_exactly(_vmapped(fn, (0,), (z,)), loop(fn, (0,), (z,)))
    check_grads(fn, (np.nan_to_num(ZS[0], nan=0.25),))
    check_grads(lambda r: fn(r * (1 + 1j) + 0.3j * r[::-1]), (np.array([1.0, 2.0, 0.7, 0.5]),))
