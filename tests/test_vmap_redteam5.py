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
