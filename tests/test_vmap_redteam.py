"""tapestry.vmap red-teamed at the Python level: every way user code touches
a batched value (Python reads, construction, in-place writes, indexing,
ndarray methods, edge batch sizes and dtypes, outputs, nesting) either gives
what a Python loop over the items gives (results stacked: same values, shape
and dtype), or is refused with an error that names the operation and says
what to write instead.  Never an answer taken from one item, or from the
whole batch."""
import math
import warnings

import numpy as np
import pytest

import tapestry as tp
import tapestry.numpy as tnp
from tapestry.core.batched import BatchedConversionError

rng = np.random.default_rng(11)
X = rng.standard_normal((3, 4))
Y = rng.standard_normal((3, 4))
M = rng.standard_normal((3, 4, 5))
S = rng.standard_normal(3)
W = rng.standard_normal((4, 5))
I = np.array([0, 3, 2])
B = np.array([True, False, True])
C = X + 1j * Y


def loop(f, in_axes, args):
    """The reference: ``f`` on each item (``a[i]``, as ``for x in X`` gives
    it: a NumPy scalar for a 0-d item), results stacked."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)])
            for i in range(n)]
    return tp.tree_map(lambda *xs: np.stack(xs), *outs)


def agree(f, *args, in_axes=None):
    """vmap(f) gives the loop's values, shapes, dtypes and structure."""
    in_axes = in_axes or (0,) * len(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fallback loop is fine here: only the result counts
        got = tp.vmap(f, in_axes=in_axes)(*args)
    want = loop(f, in_axes, args)
    lg, tg = tp.tree_flatten(got)
    lw, tw = tp.tree_flatten(want)
    assert tg == tw, (tg, tw)
    for g, w in zip(lg, lw):
        assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
        assert np.asarray(g).dtype == np.asarray(w).dtype, (np.asarray(g).dtype, np.asarray(w).dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def refused(f, *args, match, exc=TypeError, in_axes=None):
    in_axes = in_axes or (0,) * len(args)
    with pytest.raises(exc, match=match):
        tp.vmap(f, in_axes=in_axes)(*args)


def _unpack(x):
    a, b, c, d = x
    return a * d - b * c


def _copy_into_zeros(x):
    out = np.zeros(len(x))
    return out + x   # a new array, not a write: the supported way


# --- Python reading the item's shape: the same for every item, so it works ---------------
SHAPE_READS = {
    "len": (lambda x: x * len(x), (X,)),
    "range(len)": (lambda x: sum(x[i] * i for i in range(len(x))), (X,)),
    "shape": (lambda x: x * x.shape[0], (X,)),
    "ndim": (lambda x: x * x.ndim, (M,)),
    "size": (lambda x: x * x.size, (M,)),
    "dtype": (lambda x: np.zeros(2, x.dtype) + x[:2], (X.astype(np.float32),)),
    "itemsize/nbytes": (lambda x: x * (x.nbytes // x.itemsize), (M,)),
    "np.shape/ndim/size": (lambda x: x * np.shape(x)[1] * np.ndim(x) * np.size(x), (M,)),
    "for row": (lambda x: np.stack([r * 2 for r in x]), (M,)),
    "zip": (lambda x, y: np.stack([a * b for a, b in zip(x, y)]), (X, Y)),
    "unpack": (_unpack, (X,)),
    "x[0] of an item": (lambda x: x[0] - x[-1], (X,)),
    "enumerate/reversed": (lambda x: np.stack([i * r for i, r in enumerate(reversed(x))]), (X,)),
    "sum builtin": (lambda x: sum(x), (M,)),
    "abs builtin": (lambda x: abs(x), (X,)),
    "round builtin, 0-d": (lambda x: round(x), (S * 3,)),
    "round builtin, ndigits": (lambda x: round(x, 2), (S,)),
    "pow/divmod builtin": (lambda x: divmod(pow(x, 2), 0.3), (X,)),
    "dtype queries": (lambda x: x * np.finfo(x.dtype).eps * np.issubdtype(x.dtype, np.floating)
                      * (np.result_type(x, 1.0) == np.float32), (X.astype(np.float32),)),
    "array_equal, differs per item": (lambda x, y: np.array_equal(x, y), (X, np.where(S[:, None] > 0, X, Y))),
    "allclose, the same for all": (lambda x, y: np.allclose(x, y), (X, X)),
}


@pytest.mark.parametrize("name", list(SHAPE_READS))
def test_python_reads_that_agree_with_the_loop(name):
    f, args = SHAPE_READS[name]
    agree(f, *args)


# --- Python reading the values: one per item, so it is refused --------------------------
def _max_builtin(x):
    return max(x)


VALUE_READS = {
    "if x > 0": (lambda x: x if x > 0 else -x, "truth value.*np.where"),
    "bool": (lambda x: bool(x), "truth value"),
    "int": (lambda x: int(x), r"int\(\).*np.where"),
    "float": (lambda x: float(x), r"float\(\)"),
    "item": (lambda x: x.item(), r"\.item\(\)"),
    "tolist": (lambda x: x.tolist(), r"\.tolist\(\)"),
    "format": (lambda x: "{:.3f}".format(x), "format"),
    "hash": (lambda x: {x: 1}, r"hash\(\).*shared"),
    "x == y in if": (lambda x: x if x == 0.5 else -x, "truth value"),
    "np.any in if": (lambda x: x if np.any(x > 0) else -x, "truth value"),
    "max builtin": (_max_builtin, "truth value"),
    "sorted": (lambda x: sorted(x), "truth value"),
    "round of an array item": (lambda x: round(x), r"round\(\).*np.round"),
    "math.exp": (lambda x: math.exp(x), r"float\(\)"),
    "x in list": (lambda x: x in [1.0], "truth value"),
    "v in x": (lambda x: 0.5 in x, r"v in x.*np.any\(x == v\)"),
    "list index": (lambda i: [1.0, 2.0, 3.0][i], r"operator.index"),
    "slice with a per-item start": (lambda i: np.arange(5.0)[i:i + 2], r"np.take\(x, i \+ np.arange"),
}


@pytest.mark.parametrize("name", list(VALUE_READS))
def test_python_reading_values_is_refused_with_the_fix(name):
    f, match = VALUE_READS[name]
    arg = {"list index": I, "slice with a per-item start": I, "max builtin": X, "sorted": X, "v in x": X,
           "round of an array item": X}.get(name, S)
    with pytest.raises(TypeError, match=match) as e:
        tp.vmap(f)(arg)
    assert "tapestry.vmap" in str(e.value)


def test_array_equal_that_differs_between_items_cannot_be_branched_on():
    other = np.where(S[:, None] > 0, X, Y)
    refused(lambda x, y: 1.0 if np.array_equal(x, y) else 0.0, X, other, match="truth value")


# --- construction ------------------------------------------------------------------------
def _fill_with_new_arrays(x):
    rows = [x[i] * 2 for i in range(len(x))]
    return np.stack(rows)


CONSTRUCTION = {
    "np.stack([a, b])": (lambda a, b: np.stack([a, b]), (S, S)),
    "tnp.array([a, b])": (lambda a, b: tnp.array([a, b]), (S, S)),
    "tnp.array nested, int": (lambda a: tnp.array([[a, 1], [2, a]]), (I,)),
    "tnp.asarray dtype": (lambda x: tnp.asarray(x, np.float32), (X,)),
    "tnp.full": (lambda a: tnp.full((2, 3), a), (S,)),
    "tnp.full_like": (lambda x: tnp.full_like(x, x[0]), (X,)),
    "zeros_like": (lambda x: np.zeros_like(x) + x, (X,)),
    "ones_like dtype": (lambda x: np.ones_like(x, dtype=np.float32), (X,)),
    "full_like, per-item fill": (lambda x, s: np.full_like(x, s), (X, S)),
    "np.zeros(x.shape, x.dtype)": (lambda x: np.zeros(x.shape, x.dtype) + x, (X.astype(np.float32),)),
    "np.ones(len(x))": (lambda x: np.ones(len(x)) * x, (X,)),
    "np.eye(len(x))": (lambda x: np.eye(len(x)) @ x, (X,)),
    "np.arange(x.shape[0])": (lambda x: np.arange(x.shape[0]) * x, (X,)),
    "list comprehension": (_fill_with_new_arrays, (M,)),
    "out = zeros + x": (_copy_into_zeros, (X,)),
    "np.copy": (lambda x: np.copy(x), (X,)),
    "np.linspace(0, s)": (lambda s: np.linspace(0, s, 4), (S,)),
}


@pytest.mark.parametrize("name", list(CONSTRUCTION))
def test_construction_agrees_with_the_loop(name):
    f, args = CONSTRUCTION[name]
    agree(f, *args)


# --- in-place writes ---------------------------------------------------------------------
def _set(x):
    x[0] = 1.0
    return x


def _set_mask(x):
    x[x > 0] = 0.0
    return x


def _plain_setitem(x):
    out = np.zeros(3)
    out[1] = x
    return out


def _plain_setitem_row(x):
    out = np.zeros((2, 4))
    out[1] = x
    return out


def _plain_iadd(x):
    out = np.zeros(4)
    out += x
    return out


def _plain_slice_iadd(x):
    out = np.zeros(4)
    out[:2] += x[:2]
    return out


def _out_kw(x):
    out = np.zeros(4)
    np.exp(x, out=out)
    return out


def _add_at(x):
    out = np.zeros(4)
    np.add.at(out, [0, 1], x[:2])
    return out


def _copyto(x):
    out = np.zeros(4)
    np.copyto(out, x)
    return out


def _sort_method(x):
    x.sort()
    return x


def _fill_method(x):
    x.fill(0.0)
    return x


def _shared_setitem_value(x, w):
    w[0] = x[0]
    return w * 1.0


def _shared_setitem_key(i, w):
    w[i] = 0.0
    return w * 1.0


def _plain_fill(x):
    out = np.zeros(4)
    out.fill(x[0])
    return out


IN_PLACE = {
    # (into vmap's argument: NumPy's loop would write into the caller's array)
    "x[0] = 1": (_set, (X,), TypeError, r"item assignment.*argument.*x = x.copy\(\)"),
    "x[mask] = 0": (_set_mask, (X,), TypeError, r"item assignment.*argument.*x = x.copy\(\)"),
    "x.sort()": (_sort_method, (X,), TypeError, r"item assignment.*argument.*x = x.copy\(\)"),
    "x.fill()": (_fill_method, (X,), TypeError, r"item assignment.*argument.*x = x.copy\(\)"),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_writes_are_refused_with_the_fix(name):
    f, args, exc, match = IN_PLACE[name]
    refused(f, *args, exc=exc, match=match)


@pytest.mark.parametrize("f", [_plain_setitem, _plain_fill], ids=["out[i] = x", "out.fill(x)"])
def test_a_plain_array_written_with_one_item_runs_item_by_item(f):
    """NumPy raises its own ValueError for a 0-d value it cannot convert,
    chained to vmap's conversion error: the function runs once per item,
    each writing its own value (a plain array never stores a whole batch)."""
    agree(f, S if f is _plain_setitem else X)


def test_preallocated_output_filled_in_a_loop():
    """The NumPy idiom of a preallocated array filled element by element."""
    def f(v):
        out = np.zeros(3)
        for k in range(3):
            out[k] = np.sum(v * k) + v[k]
        return out
    agree(f, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((TypeError, ValueError)) as e:  # as without vmap: refused
            tp.grad(lambda X: np.sum(tp.vmap(f)(X)))(X)
    assert "traced array" in str(e.value) + str(e.value.__cause__ or e.value.__context__)


def test_writes_into_a_shared_argument_with_per_item_values_are_refused():
    w = np.zeros(4)
    refused(_shared_setitem_value, X, w, in_axes=(0, None), match="in_axes=None.*per-item")
    refused(_shared_setitem_key, I, w, in_axes=(0, None), match="in_axes=None.*per-item")
    assert not w.any()  # nothing was written


def test_a_shared_argument_is_the_callers_array():
    """in_axes=None hands f the caller's array behind a proxy: its
    attributes are the array's own, and writing a constant into it writes
    the caller's array, as the loop would."""
    w = np.arange(20.0).reshape(4, 5)
    agree(lambda x, w: x * w.view()[0, 1] * w.flat[2] * w.nbytes * w.strides[0], X, w,
          in_axes=(0, None))
    w2 = np.zeros(3)
    tp.vmap(lambda x, w: (w.__setitem__(0, 5.0), x)[1], in_axes=(0, None))(S, w2)
    assert w2[0] == 5.0


def test_augmented_assignment_rebinds():
    """``x += 1`` makes a new value, as on JAX arrays (documented): the
    items' results agree with the loop's."""
    def f(x):
        x = x * 1.0
        x += 1
        x -= 0.5
        x *= 2
        x /= 3
        x **= 2
        return x
    agree(f, X)


# --- indexing ----------------------------------------------------------------------------
def _take_along(x):
    return np.take_along_axis(x, np.argsort(x, axis=-1), axis=-1)


INDEXING = {
    "batched idx, shared table": ((lambda i, w: w[i]), (I, W), (0, None)),
    "batched idx, shared table, column": ((lambda i, w: w[:, i]), (I, W), (0, None)),
    "plain idx into batched": ((lambda x: x[np.array([0, 2])]), (X,), None),
    "int": ((lambda x: x[1]), (M,), None),
    "negative int": ((lambda x: x[-1, -2]), (M,), None),
    "x[None]": ((lambda x: x[None]), (X,), None),
    "x[..., 0]": ((lambda x: x[..., 0]), (M,), None),
    "x[::-1]": ((lambda x: x[::-1]), (M,), None),
    "x[:, ::-1]": ((lambda x: x[:, ::-1]), (M,), None),
    "x[1:3, None, 2]": ((lambda x: x[1:3, None, 2]), (M,), None),
    "x[()] 0-d": ((lambda x: x[()]), (S,), None),
    "take_along_axis": (_take_along, (M,), None),
    "x[i] batched int": ((lambda x, i: x[i]), (X, I), None),
    "x[i] negative": ((lambda x, i: x[i]), (X, -1 - I), None),
    "x[:, i]": ((lambda x, i: x[:, i]), (M, I), None),
    "x[i, j]": ((lambda x, i, j: x[i, j]), (M, I, I + 1), None),
    "np.take axis 1": ((lambda x, i: np.take(x, i, axis=1)), (M, I), None),
    "unbatched mask": ((lambda x: x[np.array([True, False, True, False])]), (X,), None),
    "per-item mask, same count": ((lambda x, m: x[m]), (X, np.tile([True, False, True, False], (3, 1))), None),
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_indexing_agrees_with_the_loop(name):
    f, args, in_axes = INDEXING[name]
    agree(f, *args, in_axes=in_axes)


def test_a_mask_that_selects_a_different_count_per_item_is_refused():
    refused(lambda x: x[x > 0], X, exc=ValueError, match=r"boolean mask.*np.where\(mask, x, 0\)")
    refused(lambda x: np.nonzero(x > 0), X, exc=ValueError, match="different shapes")


# --- NumPy itself converting a batched value: the function runs item by item -------------
#: NumPy indexes and converts plain arrays without asking tapestry, so these
#: calls cannot be batched; each item's values can be read: the mapped
#: function runs once per item (a loop's results), counted and warned.
NUMPY_CONVERTS = {
    "np.asarray": (lambda x: np.asarray(x) * 2.0, (S,)),
    "np.array([a, b])": (lambda x: np.array([x, x ** 2]), (X,)),
    "np.sum of a list": (lambda x: np.sum([x, 1.0]), (S,)),
    "out[i] = batched row": (_plain_setitem_row, (X,)),
    "closure table, per-item row": (lambda i: W[i], (I,)),
    "closure table, per-item column": (lambda i: W.T[:, i], (I,)),
    "np.eye(n)[label]": (lambda x, i: np.sum(np.eye(4)[i] * x), (X, I)),
    "table built inside, per-item pair": (lambda i: np.outer(np.arange(4.0), np.arange(5.0))[i, i + 1],
                                          (I,)),
    "np.take of a closure table": (lambda i: np.take(W, i, axis=0), (I,)),
    "out += batched": (_plain_iadd, (X,)),
    "out[:2] += batched": (_plain_slice_iadd, (X,)),
    "out= keyword": (_out_kw, (X,)),
    "np.add.at into plain": (_add_at, (X,)),
    "np.add.at, per-item indices": (lambda x, i: _scatter_add(x, i), (X, np.stack([I, I[::-1]], 1))),
    "np.copyto into plain": (_copyto, (X,)),
    "np.full with a per-item fill": (lambda s: np.full((3,), s), (S,)),
    "np.full_like of a plain array": (lambda s: np.full_like(np.ones(2), s), (S,)),
    "np.vectorize with a branch": (lambda v: np.vectorize(lambda a: a * 2 if a > 0 else -a)(v), (X,)),
    "scipy.stats, which converts": (lambda v: __import__("scipy.stats").stats.norm.logpdf(v, 0.5, 2.0),
                                    (X,)),
    "np.array of a comprehension": (lambda v: np.array([v[0] * k for k in range(3)]), (X,)),
    "np.fromiter": (lambda v: np.fromiter((v[k] for k in range(4)), float), (X,)),
}


def _scatter_add(x, i):
    out = np.zeros(4)
    np.add.at(out, i, x[:2])
    return out


@pytest.mark.parametrize("name", list(NUMPY_CONVERTS))
def test_numpy_converting_a_batched_value_runs_item_by_item(name):
    from tapestry.core.batched import FALLBACKS
    f, args = NUMPY_CONVERTS[name]
    before = sum(FALLBACKS.values())
    agree(f, *args)
    assert sum(FALLBACKS.values()) > before


def test_running_item_by_item_is_warned_once_per_function():
    from tapestry.core.batched import VmapFallbackWarning

    def f(i):
        return W[i] * 2.0
    with pytest.warns(VmapFallbackWarning, match=r"vmap\(f\) runs once per item.*in_axes=None"):
        tp.vmap(f)(I)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tp.vmap(f)(I)


def test_a_closure_table_indexed_per_item_differentiates_through_the_items():
    """The item-by-item run keeps the gradient: grad of a vmap, and vmap of a grad."""
    def f(x, i):
        return np.sum(np.tanh(x) * W[i, :4]) + np.sum(np.eye(4)[i] * x ** 2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = tp.grad(lambda x: np.sum(np.sin(tp.vmap(f)(x, I))))(X)
        want = np.stack([tp.grad(lambda x: np.sin(f(x, i)))(x) for x, i in zip(X, I)])
        np.testing.assert_allclose(g, want, rtol=1e-12)
        np.testing.assert_allclose(tp.vmap(tp.grad(f))(X, I),
                                   np.stack([tp.grad(f)(x, i) for x, i in zip(X, I)]), rtol=1e-12)
        np.testing.assert_allclose(tp.jit(tp.vmap(f))(X, I), loop(f, (0, 0), (X, I)), rtol=1e-12)
        inner = tp.vmap(tp.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(X, I)
        np.testing.assert_allclose(inner, [[f(x, i) for i in I] for x in X], rtol=1e-12)
        empty = tp.vmap(f)(X[:0], I[:0])
        assert empty.shape == (0,) and empty.dtype == np.float64


def test_item_by_item_still_refuses_what_a_loop_refuses():
    """A conversion of a value being differentiated is refused per item as
    without vmap (never a gradient lost); an output that is a buffer the
    function writes again comes back per item, not the last item's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError):
            tp.grad(lambda x: np.sum(tp.vmap(lambda v: np.asarray(v) * v)(x)))(S)
        buf = np.zeros(4)

        def writes(x):
            buf[:] = np.asarray(x)
            return buf
        np.testing.assert_array_equal(tp.vmap(writes)(X), X)
        with pytest.raises(ValueError, match="out_axes is None"):
            tp.vmap(lambda x: np.asarray(x), out_axes=None)(S)


def test_out_of_range_batched_index_raises():
    with pytest.raises(IndexError):
        tp.vmap(lambda x, i: x[i])(X, np.array([0, 9, 2]))


# --- ndarray methods ---------------------------------------------------------------------
METHODS = {
    "sum(axis=-1)": (lambda x: x.sum(axis=-1), (M,)),
    "sum(0, keepdims)": (lambda x: x.sum(0, keepdims=True), (M,)),
    "reshape(-1)": (lambda x: x.reshape(-1), (M,)),
    "reshape(shape0, -1)": (lambda x: x.reshape(x.shape[0], -1), (M,)),
    "reshape order F": (lambda x: x.reshape((5, 4), order="F"), (M,)),
    "T": (lambda x: x.T, (M,)),
    "mT": (lambda x: x.mT, (M,)),
    "transpose()": (lambda x: x.transpose(1, 0), (M,)),
    "astype float32": (lambda x: x.astype(np.float32), (M,)),
    "astype int": (lambda x: (3 * x).astype(int), (M,)),
    "astype bool": (lambda x: x.astype(bool), (M,)),
    "copy": (lambda x: x.copy(), (M,)),
    "flatten F": (lambda x: x.flatten("F"), (M,)),
    "ravel": (lambda x: x.ravel(), (M,)),
    "view()": (lambda x: x.view() * 2, (M,)),
    "real/imag/conj": (lambda x: x.real * x.imag + x.conj(), (C,)),
    "clip": (lambda x: x.clip(-0.5, 0.5), (M,)),
    "argmax()": (lambda x: x.argmax(), (M,)),
    "argmax(axis=0)": (lambda x: x.argmax(axis=0), (M,)),
    "argmin keepdims": (lambda x: x.argmin(axis=1, keepdims=True), (M,)),
    "cumsum()": (lambda x: x.cumsum(), (M,)),
    "round(2)": (lambda x: x.round(2), (M,)),
    "dot": (lambda x, y: x.dot(y), (X, Y)),
    "x @ W (closure)": (lambda x: x @ W, (X,)),
    "W.T @ x (closure)": (lambda x: W.T @ x, (X,)),
    "x @ y, batched both": (lambda x, y: x.T @ y, (M, M)),
    "np.matmul with a stack": (lambda x: np.matmul(np.ones((2, 3, 4)), x), (M,)),
    "norm axis=-1": (lambda x: np.linalg.norm(x, axis=-1), (M,)),
    "norm axis=0 keepdims": (lambda x: np.linalg.norm(x, axis=0, keepdims=True), (M,)),
    "norm ord=2 matrix": (lambda x: np.linalg.norm(x, 2), (M,)),
    "squeeze": (lambda x: x.squeeze(), (rng.standard_normal((3, 1, 4, 1)),)),
    "squeeze axis": (lambda x: np.squeeze(x, 0), (rng.standard_normal((3, 1, 4, 1)),)),
    "swapaxes": (lambda x: x.swapaxes(0, 1), (M,)),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), (rng.standard_normal((2, 3, 4, 5)),)),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 4, 5)), (M,)),
    "broadcast_to 0-d": (lambda x: np.broadcast_to(x, (3,)), (S,)),
    "broadcast_arrays": (lambda x, y: np.broadcast_arrays(x, y), (M, X[:, :1])),
    "atleast_2d": (lambda x: np.atleast_2d(x), (X,)),
    "atleast_3d 0-d": (lambda x: np.atleast_3d(x), (S,)),
    "expand_dims": (lambda x: np.expand_dims(x, (0, 2)), (X,)),
    "argsort None": (lambda x: x.argsort(axis=None), (M,)),
    "sum(where=)": (lambda x: x.sum(where=x > 0), (M,)),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_methods_agree_with_the_loop(name):
    f, args = METHODS[name]
    agree(f, *args)


@pytest.mark.parametrize("name,match", [("searchsorted", r"np.searchsorted\(x"),
                                        ("tobytes", "not available on a batched value"),
                                        ("resize", "in place")])
def test_missing_ndarray_methods_say_what_to_call(name, match):
    refused(lambda x: getattr(x, name)(0), X, exc=AttributeError, match=match)


def test_view_as_another_dtype_is_refused():
    refused(lambda x: x.view(np.int64), X, match=r"view\(dtype\).*astype")


# --- operators: ndarray's, bool and int included ------------------------------------------
OPERATORS = {
    "bool & int": (lambda x: x & 2, (B,)),
    "bool | int": (lambda x: x | 2, (B,)),
    "bool & 0-d int array": (lambda x: x & np.array(3), (B,)),
    "bool & bool": (lambda x, y: x & y, (B, ~B)),
    "int & bool": (lambda x, y: x & y, (I, B)),
    "reflected &": (lambda x: True & x, (B,)),
    "reflected |": (lambda x: 1 | x, (I,)),
    "^": (lambda x, y: x ^ y, (B, ~B)),
    "int ^": (lambda x, y: 5 ^ x ^ y, (I, I + 1)),
    "<< >>": (lambda x: (x << 2) + (16 >> x) + (1 << x) + (x >> 1), (I,)),
    "~": (lambda x: ~x, (I,)),
    "// % divmod": (lambda x: (x // 0.3) + (x % 0.3) + divmod(x, 0.7)[1], (X,)),
    "comparisons reflected": (lambda x: (0.1 < x) & (x <= 1.0), (X,)),
    "x + list": (lambda x: x + [1.0, 2.0, 3.0, 4.0], (X,)),
    "x * nested list": (lambda x: x * [[1.0], [2.0]], (X,)),
    "x == None": (lambda x: x == None, (X,)),  # noqa: E711
}


@pytest.mark.parametrize("name", list(OPERATORS))
def test_operators_agree_with_the_loop(name):
    f, args = OPERATORS[name]
    agree(f, *args)


# --- batch sizes 1 and 0, 0-d items, dtypes -----------------------------------------------
def test_batch_of_one_keeps_its_batch_axis():
    x = rng.standard_normal((1, 4, 1))
    agree(lambda x: x.squeeze(), x)
    agree(lambda x: np.squeeze(x), x)
    agree(lambda x: x.sum(), x)
    agree(lambda x: x.reshape(-1), x)
    assert tp.vmap(lambda x: x.squeeze())(x).shape == (1, 4)
    assert tp.vmap(lambda s: s * 2)(np.ones(1)).shape == (1,)


@pytest.mark.parametrize("f,item_shape,want_shape,want_dtype", [
    (lambda x: x.squeeze(), (4, 1), (0, 4), np.float64),
    (lambda x: x.sum(), (4,), (0,), np.float64),
    (lambda x: x.max(axis=0), (4, 2), (0, 2), np.float64),
    (lambda x: x.argmax(), (4,), (0,), np.intp),
    (lambda x: x.argmin(), (2, 3), (0,), np.intp),
    (lambda x: np.sort(x), (4,), (0, 4), np.float64),
    (lambda x: x @ np.ones((4, 2)), (4,), (0, 2), np.float64),
    (lambda x: 1.0, (4,), (0,), np.float64),
    (lambda x: x.astype(np.float32) * 2, (4,), (0, 4), np.float32),
    (lambda x: x.reshape(-1), (4, 3), (0, 12), np.float64),
    (lambda x: x.reshape(2, -1), (4, 3), (0, 2, 6), np.float64),
    (lambda x: x.ravel(), (4, 3), (0, 12), np.float64),
    (lambda x: np.cumsum(x), (4, 3), (0, 12), np.float64),
    (lambda x: np.median(x), (4, 3), (0,), np.float64),
    (lambda x: np.outer(x, x), (4,), (0, 4, 4), np.float64),
    (lambda x: np.polyfit(np.arange(4.0), x, 1), (4,), (0, 2), np.float64),
], ids=["squeeze", "sum", "max", "argmax", "argmin 2-d", "sort", "matmul", "constant", "float32",
        "reshape(-1)", "reshape(2, -1)", "ravel", "cumsum", "median", "outer", "a loop (polyfit)"])
def test_empty_batch_gives_empty_results_of_the_item_shape(f, item_shape, want_shape, want_dtype):
    """No item to stack: the result is empty, with the item shape a loop's
    results would have (a reshape to (0, -1) or a loop without items could
    not tell it before)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = tp.vmap(f)(np.zeros((0,) + item_shape))
    assert out.shape == want_shape and out.dtype == want_dtype


def test_empty_items_raise_as_numpy_does():
    with pytest.raises(ValueError):
        tp.vmap(lambda x: x.argmax())(np.zeros((3, 0)))
    with pytest.raises(ValueError):
        tp.vmap(lambda x: x.max())(np.zeros((3, 0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, bool,
                                   np.complex64, np.complex128])
def test_dtypes_are_kept_as_the_loop_keeps_them(dtype):
    x = (rng.standard_normal((3, 4)) * 3).astype(dtype)
    agree(lambda x: x * 2, x)
    agree(lambda x: x.sum(), x)
    agree(lambda x: x[1:], x)
    agree(lambda x: np.where(x > 0, x, 0) if dtype is not bool else x, x)
    agree(lambda x: np.stack([x, x]).mean(axis=0), x)


def test_0d_items():
    for f in (lambda x: x.sum(), lambda x: x.reshape(1), lambda x: x[None], lambda x: x.T,
              lambda x: x.argmax(), lambda x: np.atleast_1d(x), lambda x: np.stack([x, x])):
        agree(f, S)
        agree(f, S.astype(np.float32))


# --- outputs -------------------------------------------------------------------------------
class _Box:
    def __init__(self, v):
        self.v = v


OUTPUTS = {
    "float constant": (lambda x: 1.5, (X,)),
    "int constant": (lambda x: 2, (X,)),
    "bool constant": (lambda x: True, (X,)),
    "float32 scalar": (lambda x: np.float32(2), (X,)),
    "tuple with an unbatched array": (lambda x: (x, np.ones(2)), (X,)),
    "dict": (lambda x: {"a": x, "b": 1.0}, (X,)),
    "nested lists": (lambda x: [x, [x * 2, (3.0,)]], (X,)),
    "input unchanged": (lambda x: x, (X,)),
    "shape tuple": (lambda x: x.shape, (M,)),
}


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_outputs_agree_with_the_loop(name):
    f, args = OUTPUTS[name]
    agree(f, *args)


def test_none_and_shared_outputs():
    assert tp.vmap(lambda x: None)(X) is None
    assert tp.vmap(lambda x: ())(X) == ()
    out = tp.vmap(lambda x, w: w, in_axes=(0, None), out_axes=None)(X, W)
    assert out is W or np.array_equal(out, W)
    with pytest.raises(ValueError, match="out_axes is None.*differs between items"):
        tp.vmap(lambda x: x, out_axes=None)(X)
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(tp.vmap(lambda x: x, in_axes=1)(x), x.T)
    np.testing.assert_array_equal(tp.vmap(lambda x: x, out_axes=1)(x), x.T)


def _object_array_holding_an_item(x):
    out = np.zeros(3, dtype=object)
    out[1] = x
    return out


@pytest.mark.parametrize("f", [lambda x: _Box(x), lambda x: (lambda: x), lambda x: object(),
                               lambda x: iter([x]), _object_array_holding_an_item,
                               lambda x: x.dtype],
                         ids=["instance", "closure", "object", "iterator", "object array", "dtype"])
def test_outputs_that_are_not_arrays_are_refused(f):
    """Broadcast, every item would get one object, holding (if anything)
    the whole batch: refused, as JAX refuses non-array outputs."""
    with pytest.raises(TypeError, match="not an array or a number.*register_pytree_node"):
        tp.vmap(f)(S)


# --- nesting -------------------------------------------------------------------------------
def test_inner_vmap_reads_the_outer_batched_value():
    A, Bm = X, rng.standard_normal((5, 4))
    cases = {
        "closure": (lambda a: tp.vmap(lambda b: np.sum(a * b))(Bm),
                    lambda a: np.array([np.sum(a * b) for b in Bm])),
        "argument": (lambda a: tp.vmap(lambda b, c: c @ b, in_axes=(0, None))(Bm, a),
                     lambda a: np.array([a @ b for b in Bm])),
        "inner returns outer": (lambda a: tp.vmap(lambda b: a)(Bm),
                                lambda a: np.array([a for _ in Bm])),
        "inner returns outer, out_axes None": (lambda a: tp.vmap(lambda b: a, out_axes=None)(Bm),
                                               lambda a: a),
        "outer indexed by inner": (lambda a: tp.vmap(lambda b: a[np.argmax(b)])(Bm),
                                   lambda a: np.array([a[np.argmax(b)] for b in Bm])),
        "inner indexed by outer": (lambda a: tp.vmap(lambda b: b[np.argmax(a)])(Bm),
                                   lambda a: np.array([b[np.argmax(a)] for b in Bm])),
        "shapes": (lambda a: tp.vmap(lambda b: len(a) + b.shape[0] + 0 * b)(Bm),
                   lambda a: np.array([len(a) + b.shape[0] + 0 * b for b in Bm])),
        "three levels": (lambda a: tp.vmap(tp.vmap(lambda b, c: a[0] * b * c), in_axes=(0, None))(Bm, a),
                         lambda a: np.array([[a[0] * b[k] * a[k] for k in range(4)] for b in Bm])),
    }
    for name, (f, ref) in cases.items():
        np.testing.assert_allclose(tp.vmap(f)(A), np.stack([ref(a) for a in A]), err_msg=name)
    with pytest.raises(BatchedConversionError, match=r"float\(\)"):
        tp.vmap(lambda a: tp.vmap(lambda b: float(a[0]) * b)(Bm))(A)


def test_vmap_inside_grad_inside_vmap():
    xs = rng.standard_normal((3, 5, 4))
    w = rng.standard_normal(4)

    def loss(w, xs):
        return np.sum(tp.vmap(lambda x: np.tanh(x @ w))(xs) ** 2)

    got = tp.vmap(tp.grad(loss), in_axes=(None, 0))(w, xs)
    np.testing.assert_allclose(got, np.stack([tp.grad(loss)(w, x) for x in xs]), rtol=1e-12)
    got = tp.vmap(tp.grad(loss), in_axes=(0, None))(X, xs[0])
    np.testing.assert_allclose(got, np.stack([tp.grad(loss)(a, xs[0]) for a in X]), rtol=1e-12)


# --- exceptions --------------------------------------------------------------------------
class _Mine(Exception):
    pass


def test_exceptions_from_f_propagate_unchanged():
    def boom(x):
        raise _Mine("mine")
    with pytest.raises(_Mine, match="^mine$") as e:
        tp.vmap(boom)(X)
    assert e.value.__cause__ is None
    with pytest.raises(KeyError):
        tp.vmap(lambda x: {}["k"])(X)
    with pytest.raises(np.linalg.LinAlgError):
        tp.vmap(lambda x: np.linalg.inv(x.reshape(2, 2)))(np.array([[1., 0, 0, 1], [0, 0, 0, 0]]))
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        tp.vmap(np.log)(np.array([1.0, -1.0]))


# --- parameters given per item (a shift, a count, an axis) ---------------------------------
SQ = rng.standard_normal((3, 4, 4))
K = np.array([0, 1, 2])
K1 = np.array([1, 1, 1])

PER_ITEM_PARAMETERS = {
    "roll shift": (lambda x, k: np.roll(x, k), (X, K)),
    "roll shift 2-d": (lambda x, k: np.roll(x, k), (SQ, K)),
    "roll shift axis": (lambda x, k: np.roll(x, k, axis=1), (SQ, K)),
    "tile reps": (lambda x, k: np.tile(x, k), (X, K1 + 1)),
    "repeat count": (lambda x, k: np.repeat(x, k), (X, K1 + 1)),
    "cumsum axis": (lambda x, k: np.cumsum(x, axis=k), (SQ, K1)),
    "sort axis": (lambda x, k: np.sort(x, axis=k), (SQ, K1)),
    "median axis": (lambda x, k: np.median(x, axis=k), (SQ, K1)),
    "sum axis": (lambda x, k: np.sum(x, axis=k), (SQ, K1)),
    "tril k": (lambda x, k: np.tril(x, k), (SQ, K)),
    "rot90 k": (lambda x, k: np.rot90(x, k), (SQ, K)),
    "partition kth": (lambda x, k: np.partition(x, k), (X, K)),
    "round decimals": (lambda x, k: np.round(x, k), (X, K)),
    "std ddof": (lambda x, k: np.std(x, ddof=k), (X, K)),
    "matrix_power n": (lambda x, k: np.linalg.matrix_power(x, k), (SQ, K)),
    "delete obj": (lambda x, k: np.delete(x, k), (X, K)),
    "expand_dims axis": (lambda x, k: np.expand_dims(x, k), (X, K1)),
    "moveaxis": (lambda x, k: np.moveaxis(x, k, 0), (M, K1)),
}


@pytest.mark.parametrize("name", list(PER_ITEM_PARAMETERS))
def test_parameters_given_per_item_agree_with_the_loop(name):
    """A batched shift, count or axis is each item's own: its rule (which
    takes it as one Python value) is not used, the operation runs per item."""
    f, args = PER_ITEM_PARAMETERS[name]
    agree(f, *args)


@pytest.mark.parametrize("f,in_axes", [
    (lambda x: x, 0), (lambda x: x[1:], 0), (lambda x: x.reshape(2, 2), 0), (lambda x: x, 1),
    (lambda x: x.T, 0), (lambda x: x[::-1], 0), (lambda x: (x, x * 2), 0),
], ids=["identity", "slice", "reshape", "in_axes 1", "T", "reversed", "tuple"])
def test_outputs_are_new_arrays_not_views_of_the_inputs(f, in_axes):
    """A loop stacks its results into a new array: writing into vmap's
    output must not write into the caller's input."""
    x = np.arange(12.0).reshape(3, 4)
    keep = x.copy()
    out = tp.vmap(f, in_axes=in_axes)(x)
    for leaf in tp.tree_leaves(out):
        assert not np.shares_memory(leaf, x)
        leaf[...] = -1.0
    np.testing.assert_array_equal(x, keep)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_np_take_of_a_differentiated_table_at_per_item_indices(axis):
    """np.take(w, i) of a table being differentiated (grad outside vmap)
    gathers each item's own index: it produced a value that escaped its vmap
    (the index key went to the tape as a constant)."""
    w = np.arange(20.0).reshape(4, 5)
    i = np.array([0, 3, 1])

    def g(i, w):
        return np.take(w, i, axis=axis) ** 2

    got = tp.grad(lambda w: tp.vmap(g, in_axes=(0, None))(i, w).sum())(w)
    want = tp.grad(lambda w: sum(g(k, w).sum() for k in i))(w)
    np.testing.assert_allclose(got, want)
    got = tp.vmap(tp.grad(lambda w, k: g(k, w).sum()), in_axes=(None, 0))(w, i)
    np.testing.assert_allclose(got, np.stack([tp.grad(lambda w: g(k, w).sum())(w) for k in i]))


def test_np_take_of_a_shared_table_at_per_item_indices():
    """NumPy offers np.take only to its array, not to its indices: through
    the in_axes=None proxy the batched indices still handle the call."""
    agree(lambda i, w: np.take(w, i, axis=0), I, W, in_axes=(0, None))
    agree(lambda i, w: w.take(i, axis=1), I, W, in_axes=(0, None))
    agree(lambda i, w: np.take(w, i), I, W, in_axes=(0, None))


#: NumPy functions that write into their first argument.
_PUTS = {
    "np.put": lambda o, x: np.put(o, [0, 1], x[:2]),
    "np.putmask": lambda o, x: np.putmask(o, np.array([1, 0, 1, 0], bool), x),
    "np.place": lambda o, x: np.place(o, np.array([1, 0, 1, 0], bool), x[:2]),
    "np.put_along_axis": lambda o, x: np.put_along_axis(o, np.array([0, 3]), x[:2], axis=0),
    "np.fill_diagonal": lambda o, x: np.fill_diagonal(o.reshape(2, 2), x[:2]),
}


@pytest.mark.parametrize("name", list(_PUTS))
def test_in_place_functions_write_each_item_into_a_plain_array(name):
    """A plain array written with per-item values: each item writes its own
    (it ran per operation, and the last item's write was every item's)."""
    put = _PUTS[name]

    def f(x):
        out = np.zeros(4)
        put(out, x)
        return out * 1.0
    agree(f, X)


@pytest.mark.parametrize("name", list(_PUTS))
def test_in_place_functions_on_a_batched_value(name):
    """Written into vmap's argument, they wrote into the caller's array (then
    they were refused for every batched value): into the argument refused,
    into a copy of it NumPy's values, as a loop gives them."""
    put, before = _PUTS[name], X.copy()
    refused(lambda x: put(x, x[::-1] * 1.0) or x, X,
            match=r"item assignment.*argument.*x = x.copy\(\)")
    np.testing.assert_array_equal(X, before)

    def f(x):
        y = x.copy()
        put(y, x[::-1] * 2.0)
        return y
    agree(f, X)
    np.testing.assert_array_equal(X, before)


def test_a_shared_array_written_at_per_item_positions_is_written_as_a_loop_writes():
    def f(i, w):
        np.put(w, i, 1.0)
        return w * 1.0
    w, w_loop = np.zeros(4), np.zeros(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f, in_axes=(0, None))(I, w)
    np.testing.assert_array_equal(got, np.stack([f(i, w_loop) for i in I]))
    np.testing.assert_array_equal(w, w_loop)


def test_minimize_per_item_runs_item_by_item():
    """tp.optimize.minimize hands the objective to SciPy, which converts the
    batched starting point: the mapped function runs once per item, each
    item its own optimization; differentiating through it is refused by
    name, as without vmap."""
    def solve(c):
        return tp.optimize.minimize(lambda z: np.sum((z - c) ** 2) + np.sum(z ** 4),
                                    np.zeros(4), method="BFGS").x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(tp.vmap(solve)(X), np.stack([solve(c) for c in X]), rtol=1e-10)
        with pytest.raises(Exception, match="minimize"):
            tp.grad(lambda c: np.sum(tp.vmap(solve)(c)))(X)


def test_item_by_item_for_an_index_batched_by_the_outer_vmap():
    def f(x, i):
        return np.sum(np.tanh(x) * W[i, :4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(tp.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(X, I)
    np.testing.assert_allclose(got, [[f(x, i) for x in X] for i in I], rtol=1e-12)


def _closure_item(v, i):
    return np.sum(np.tanh(v * W[i, :4])) + np.sum(np.eye(5, 4)[i] * v ** 2)


def _loop_map(f):
    return lambda *a: np.stack([f(*[x[k] for x in a]) for k in range(len(a[0]))])


_ITEM_COMPOSITIONS = {
    "jacfwd(vmap)": lambda vm: tp.jacfwd(lambda X: vm(_closure_item)(X, I))(X),
    "jacrev(vmap)": lambda vm: tp.jacrev(lambda X: vm(_closure_item)(X, I))(X),
    "hessian(sum vmap)": lambda vm: tp.hessian(lambda X: np.sum(vm(_closure_item)(X, I)))(X),
    "vmap(hessian)": lambda vm: vm(tp.hessian(_closure_item))(X, I),
    "jvp(vmap)": lambda vm: tp.jvp(lambda X: vm(_closure_item)(X, I), (X,), (X[::-1],)),
    "vjp(vmap)": lambda vm: tp.vjp(lambda X: vm(_closure_item)(X, I), X)[1](np.arange(3.0)),
    "grad(jit(vmap))": lambda vm: tp.grad(lambda X: np.sum(
        (tp.jit(vm(_closure_item)) if vm is tp.vmap else vm(_closure_item))(X, I)))(X),
}


@pytest.mark.parametrize("name", list(_ITEM_COMPOSITIONS))
def test_item_by_item_under_every_transformation(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _ITEM_COMPOSITIONS[name](tp.vmap)
    want = _ITEM_COMPOSITIONS[name](_loop_map)
    for g, w in zip(tp.tree_leaves(got), tp.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_item_by_item_never_writes_into_the_callers_array():
    """Each item is the function's own: writing into its argument
    (v -= mean, v[0] = w) changes neither the caller's array nor the others."""
    def f(v, i):
        w = W[i]  # (NumPy indexes the closure's table: item by item from here)
        v -= v.mean()
        v[0] = w[0]
        return v * w[1]
    X0 = X.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f)(X, I)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_allclose(got, np.stack([f(x.copy(), i) for x, i in zip(X, I)]), rtol=1e-12)
