"""Red-team round 5 of vmap: what the realistic programs of
tests/programs/vmap_progs5.py found that is not a comparison of values --
refusals that must name the operation and say what to write instead."""
import warnings

import numpy as np
import pytest

import tapestry as tp
from tapestry.testing import check_grads

RNG = np.random.default_rng(55)
X = RNG.standard_normal((4, 3))


def _rnn_preallocated(x):
    """The NumPy habit: a buffer of zeros filled one step at a time."""
    h = np.zeros(3)
    for t in range(3):
        h[t] = np.tanh(x[t] + (h[t - 1] if t else 0.0))
    return h


def _loss(x):
    return np.sum(_rnn_preallocated(x))


# --- a traced value written into a plain float array: refused by name ------------------
WRITES = {
    "grad": lambda: tp.grad(_loss)(X[0]),
    "value_and_grad": lambda: tp.value_and_grad(_loss)(X[0]),
    "vmap of grad (per-example gradients)": lambda: tp.vmap(tp.grad(_loss))(X),
    "grad of vmap": lambda: tp.grad(lambda x: np.sum(tp.vmap(_rnn_preallocated)(x)))(X),
    "jacfwd": lambda: tp.jacfwd(_rnn_preallocated)(X[0]),
    "jacrev": lambda: tp.jacrev(_rnn_preallocated)(X[0]),
    "vjp": lambda: tp.vjp(_rnn_preallocated, X[0]),
    "hessian": lambda: tp.hessian(_loss)(X[0]),
    "float32 buffer": lambda: tp.grad(lambda x: np.sum(
        (lambda h: (h.__setitem__(0, x[0]), h)[1])(np.zeros(2, np.float32))))(X[0]),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_traced_value_written_into_a_plain_array_is_refused_by_name(name):
    """NumPy converts a 0-d value written into one element with float() and
    raises its own ValueError ("setting an array element with a
    sequence"), which names neither the write nor tapestry; the transform
    says what happened and what to write instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=r"plain NumPy array.*np\.stack"):
            WRITES[name]()


def test_the_write_of_a_plain_value_still_runs_and_vmap_alone_still_loops():
    """Only the write of a traced value is refused: vmap alone runs the
    function item by item (a loop's results), and a constant write is fine."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(_rnn_preallocated)(X)
    np.testing.assert_allclose(got, np.stack([_rnn_preallocated(x) for x in X]))

    def f(x):
        h = np.zeros(3)
        h[0] = 2.0
        return np.sum(h * x)
    np.testing.assert_allclose(tp.vmap(tp.grad(f))(X), np.tile([2.0, 0.0, 0.0], (4, 1)))


def test_an_error_of_the_functions_own_is_not_rewritten():
    """A ValueError the function raises itself passes through unchanged."""
    def f(x):
        raise ValueError("setting an array element with a sequence.")
    with pytest.raises(ValueError, match="sequence"):
        tp.grad(f)(X[0])


# --- x.copy(order) of a batched, traced or shared value --------------------------------
@pytest.mark.parametrize("call", ["x.copy(order='F')", "x.copy('C')", "x.T.copy(order='K')"])
def test_copy_takes_numpys_order_argument(call):
    """``ndarray.copy(order)``: the layout changes no value, so every kind
    of value accepts it (the batched and traced ones refused the keyword)."""
    f = eval("lambda x, w: " + call.replace("x.", "(x * w).") + " + " + call.replace("x", "w"))
    A = RNG.standard_normal((4, 2, 3))
    W = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(tp.vmap(f, in_axes=(0, None))(A, W), np.stack([f(a, W) for a in A]))
    check_grads(lambda a: np.sum(np.sin(f(a, W))), (A[0],))
    check_grads(lambda a: np.sum(np.sin(tp.vmap(f, in_axes=(0, None))(a, W))), (A,))


# --- an array passed with in_axes=None is an ndarray to the function --------------------
def _bias_as_scalar_unless_array(x, b):
    """Library-style argument handling: an array bias is averaged."""
    if isinstance(b, np.ndarray):
        b = b.mean()
    return x + b


def _rows_if_ndarray(x, w):
    return x @ (w.T if isinstance(w, np.ndarray) and w.ndim == 2 else np.eye(3))


@pytest.mark.parametrize("f", [_bias_as_scalar_unless_array, _rows_if_ndarray])
def test_isinstance_ndarray_of_a_shared_argument_is_true_as_in_a_loop(f):
    """The proxy that lets ``W[i]`` gather for the batch is an ndarray
    subclass: ``isinstance(w, np.ndarray)`` holds, as in a loop and in
    ``jax.vmap`` (which hands a NumPy array with in_axes=None over as it
    is); it was False, and such a branch silently took the other path."""
    W = RNG.standard_normal((3, 3))
    np.testing.assert_allclose(tp.vmap(f, in_axes=(0, None))(X, W), np.stack([f(x, W) for x in X]))
    # a value being differentiated is not an ndarray, with or without vmap
    g = tp.grad(lambda x: np.sum(np.sin(tp.vmap(f, in_axes=(0, None))(x, W))))(X)
    np.testing.assert_allclose(g, tp.grad(lambda x: sum(np.sum(np.sin(f(v, W))) for v in x))(X))


def test_the_shared_argument_still_gathers_and_writes_into_the_callers_array():
    """Being an ndarray changes none of the proxy's other behaviour:
    ``W[i]`` gathers with per-item indices without a loop, a view of it
    (``W.T``) is a plain array, a constant written into it reaches the
    caller's array, a per-item write is refused, and an output that is the
    argument is the caller's array."""
    from tapestry.core.batched import FALLBACKS
    W = RNG.standard_normal((5, 3))
    i = np.array([0, 4, 2, 2])
    FALLBACKS.clear()
    got = tp.vmap(lambda i, W: (W[i], W[i, 1:], np.take(W, i, axis=0)), in_axes=(0, None))(i, W)
    assert not FALLBACKS
    for g, w in zip(got, (W[i], W[i, 1:], W[i])):
        np.testing.assert_allclose(g, w)
    seen = []
    tp.vmap(lambda x, W: (seen.extend([type(W.T), type(W[1:]), type(W.reshape(-1)),
                                       type(W + 1), type(np.sin(W)), type(W.sum())]), x)[1],
            in_axes=(0, None))(X, W)
    assert seen[:5] == [np.ndarray] * 5 and seen[5] is np.float64
    view = W[::2]
    reads = tp.vmap(lambda x, W, V: x * (W.base is None) * (V.base is not None) * W.flags.owndata,
                    in_axes=(0, None, None))(X, W, view)
    np.testing.assert_array_equal(reads, X)  # as the loop reads them
    w2 = np.zeros(3)
    tp.vmap(lambda x, w: (w.__setitem__(0, 5.0), x)[1], in_axes=(0, None))(X, w2)
    assert w2[0] == 5.0
    with pytest.raises(TypeError, match="in_axes=None"):
        tp.vmap(lambda x, w: (w.__setitem__(0, x[0]), x)[1], in_axes=(0, None))(X, w2)
    out = tp.vmap(lambda x, w: (x, w), in_axes=(0, None), out_axes=(0, None))(X, w2)[1]
    assert out is w2 and type(out) is np.ndarray


def test_augmented_assignment_to_a_shared_argument_binds_a_new_array():
    """``w += x`` (and the other in-place operators) inside f binds a new
    array, as for a batched value: the caller's array keeps its values,
    each item gets ``w + x`` (NumPy's in-place operator of the ndarray
    proxy would have written every item into the caller's array)."""
    ops = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.true_divide,
           "**=": np.power, "//=": np.floor_divide, "%=": np.remainder}
    for op, fn in ops.items():
        w = np.arange(1.0, 4.0)
        before = w.copy()
        ns = {}
        exec(f"def f(x, w):\n    w {op} x\n    return w", ns)
        got = tp.vmap(ns["f"], in_axes=(0, None))(np.abs(X) + 1, w)
        np.testing.assert_allclose(got, fn(before, np.abs(X) + 1), err_msg=op)
        np.testing.assert_array_equal(w, before, err_msg=op)


# --- a library that type-checks its input and rejects a batched value --------------------
SEEDED = {
    "default_rng(seed)": lambda s, mu: mu + np.random.default_rng(s).normal(size=3),
    "default_rng([seed, 7])": lambda s, mu: np.random.default_rng([s, 7]).uniform(size=2) + mu,
    "SeedSequence(seed)": lambda s, mu: np.random.Generator(np.random.PCG64(
        np.random.SeedSequence(s))).standard_normal(2) * mu,
    "RandomState(seed)": lambda s, mu: np.random.RandomState(s).randn(2) + mu,
}


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_a_generator_seeded_per_item_runs_item_by_item(name):
    """JAX's ``vmap(lambda key: random.normal(key))(keys)`` ported to NumPy:
    a generator seeded by each item's own seed.  NumPy type-checks the seed
    and rejects the batched value (a TypeError quoting it); vmap then runs
    ``f`` once per item, each with its own generator, as a loop does."""
    f = SEEDED[name]
    seeds, mu = np.array([3, 1, 4, 1]), np.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(f)(seeds, mu)
        per_example = tp.vmap(tp.grad(lambda m, s: np.sum(f(s, m) ** 2)))(mu, seeds)
    np.testing.assert_array_equal(got, np.stack([f(s, m) for s, m in zip(seeds, mu)]))
    np.testing.assert_allclose(per_example, [tp.grad(lambda m: np.sum(f(s, m) ** 2))(m)
                                             for s, m in zip(seeds, mu)])


def test_a_library_rejecting_an_outer_batched_value_runs_the_outer_vmap_item_by_item():
    seeds = np.array([[3, 1], [4, 1], [5, 9]])

    def inner(s, t):
        return np.random.default_rng(t).normal() + s

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = tp.vmap(lambda row: tp.vmap(inner, in_axes=(0, None))(row * 1.0, row[0]))(seeds)
    np.testing.assert_array_equal(
        got, np.stack([[inner(s * 1.0, row[0]) for s in row] for row in seeds]))


def test_an_error_of_the_loop_is_still_raised():
    """Item by item, an item whose own call raises raises the loop's error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="negative"):
            tp.vmap(lambda s: np.random.default_rng(s).normal())(np.array([1, -1]))


# --- x.reshape(shape) with the shape an integer array ------------------------------------
@pytest.mark.parametrize("shape", [np.array([3, 2]), np.array([-1, 3]), np.array(6)])
def test_reshape_method_takes_an_integer_array_shape(shape):
    """``ndarray.reshape(np.array([3, 2]))`` is NumPy's; batched, traced and
    staged values refused it (NumPy's "only integer scalar arrays ..."),
    and so did a shape passed with in_axes=None."""
    A = RNG.standard_normal((4, 2, 3))
    want = np.stack([a.reshape(shape) for a in A])
    np.testing.assert_array_equal(tp.vmap(lambda a: a.reshape(shape))(A), want)
    np.testing.assert_array_equal(tp.vmap(lambda a, s: a.reshape(s), in_axes=(0, None))(A, shape),
                                  want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no JitWarning: the staged value reshapes too
        np.testing.assert_array_equal(tp.jit(lambda a: a.reshape(shape))(A[0]), want[0])
    check_grads(lambda a: np.sum(np.sin(a.reshape(shape)) * np.arange(6.0).reshape(want[0].shape)),
                (A[0],))


# --- an axis given as a NumPy integer or a 0-d integer array ---------------------------
NUMPY_AXES = {
    "a.sum(axis=np.int64(1))": lambda a: a.sum(axis=np.int64(1)),
    "np.mean(a, np.int32(0))": lambda a: np.mean(a, np.int32(0)),
    "a.std(axis=np.int64(1), ddof=np.int64(1))": lambda a: a.std(axis=np.int64(1), ddof=np.int64(1)),
    "a.max(axis=np.array(1))": lambda a: a.max(axis=np.array(1)),
    "np.linalg.norm(a, axis=np.int64(1))": lambda a: np.linalg.norm(a, axis=np.int64(1)),
    "np.linalg.norm(a, axis=np.argmax(a.shape))": lambda a: np.linalg.norm(a, axis=np.argmax(a.shape)),
    "a.transpose(np.array([1, 0]))": lambda a: a.transpose(np.array([1, 0])),
    "np.prod(a, axis=np.argmin(a.shape))": lambda a: np.prod(a, axis=np.argmin(a.shape)),
}


@pytest.mark.parametrize("name", sorted(NUMPY_AXES))
def test_an_axis_given_as_a_numpy_integer(name):
    """NumPy takes ``axis=np.int64(1)`` (an axis computed by NumPy,
    ``np.argmax(x.shape)``) as it takes 1; the rules iterated over it
    ("'numpy.int64' object is not iterable") under grad, and some under vmap."""
    f = NUMPY_AXES[name]
    A = RNG.standard_normal((4, 2, 3))
    np.testing.assert_allclose(tp.vmap(f)(A), np.stack([f(a) for a in A]), rtol=1e-12)
    check_grads(lambda a: np.sum(np.sin(f(a))), (A[0],))
    g = tp.grad(lambda A: np.sum(np.sin(tp.vmap(f)(A))))(A)
    np.testing.assert_allclose(g, np.stack([tp.grad(lambda a: np.sum(np.sin(f(a))))(a) for a in A]))
