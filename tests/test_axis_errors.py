"""An axis that does not exist raises NumPy's error under every
transformation: entry points used to wrap it with ``axis % ndim`` and
quietly worked along another axis (``np.cumsum(x, axis=2)`` on a matrix
summed down axis 0, under grad, vmap, jvp and jit alike)."""
import numpy as np
import pytest

import tapestry as tp

X = np.random.default_rng(0).random((3, 4))

CASES = {
    "cumsum": lambda a, ax: np.cumsum(a, axis=ax),
    "cumprod": lambda a, ax: np.cumprod(a, axis=ax),
    "add.accumulate": lambda a, ax: np.add.accumulate(a, axis=ax),
    "diff": lambda a, ax: np.diff(a, axis=ax),
    "gradient": lambda a, ax: np.gradient(a, axis=ax),
    "sort": lambda a, ax: np.sort(a, axis=ax),
    "partition": lambda a, ax: np.partition(a, 1, axis=ax),
    "take": lambda a, ax: np.take(a, [0, 1], axis=ax),
    "take_along_axis": lambda a, ax: np.take_along_axis(a, np.zeros((3, 4), int), axis=ax),
    "concatenate": lambda a, ax: np.concatenate([a, a], axis=ax),
    "append": lambda a, ax: np.append(a, a, axis=ax),
    "stack": lambda a, ax: np.stack([a, a], axis={2: 3, -3: -4}.get(ax, ax)),
    "array_split": lambda a, ax: np.array_split(a, 2, axis=ax)[0],
    "diagonal": lambda a, ax: np.diagonal(a, axis1=0, axis2=ax),
    "transpose": lambda a, ax: np.transpose(a, (0, ax)),
    "repeat": lambda a, ax: np.repeat(a, 2, axis=ax),
    "fft": lambda a, ax: np.abs(np.fft.fft(a, axis=ax)),
    "rfft": lambda a, ax: np.abs(np.fft.rfft(a, axis=ax)),
    "fftn": lambda a, ax: np.abs(np.fft.fftn(a, axes=(ax,))),
    "norm": lambda a, ax: np.linalg.norm(a, axis=ax),
    "vector_norm": lambda a, ax: np.linalg.vector_norm(a, axis=ax),
    "median": lambda a, ax: np.median(a, axis=ax),
    "percentile": lambda a, ax: np.percentile(a, 50, axis=ax),
    "quantile": lambda a, ax: np.quantile(a, 0.3, axis=ax),
    "quantile_tuple": lambda a, ax: np.quantile(a, 0.3, axis=(0, ax)),
    "trapezoid": lambda a, ax: np.trapezoid(a, axis=ax),
    "tensordot": lambda a, ax: np.tensordot(a, a, axes=([ax], [ax])),
    "average_weights": lambda a, ax: np.average(a, axis=ax, weights=np.ones(4)),
    "maximum.reduce": lambda a, ax: np.maximum.reduce(a, axis=ax),
    "sum": lambda a, ax: np.sum(a, axis=ax),
}
BAD = [2, -3]


def _transforms(f, ax):
    return {
        "plain": lambda: f(X, ax),
        "grad": lambda: tp.grad(lambda a: np.sum(np.real(f(a, ax))))(X),
        "vmap": lambda: tp.vmap(lambda a: f(a, ax))(np.stack([X, X])),
        "jvp": lambda: tp.jvp(lambda a: f(a, ax), (X,), (X,)),
        "jit": lambda: tp.jit(lambda a: f(a, ax))(X),
    }


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("ax", BAD)
def test_a_missing_axis_raises_as_numpy_does(name, ax):
    f = CASES[name]
    with pytest.raises(Exception) as plain:
        f(X, ax)
    for how, call in _transforms(f, ax).items():
        if how == "jvp" and name in ("fft", "rfft", "fftn"):
            continue  # forward mode refuses complex intermediates by name first
        with pytest.raises((IndexError, ValueError, np.exceptions.AxisError)) as got:
            call()
        if isinstance(plain.value, np.exceptions.AxisError) and how != "vmap":
            assert isinstance(got.value, (np.exceptions.AxisError, IndexError)), (how, got.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_negative_axes_that_exist_still_work(name):
    f = CASES[name]
    want = f(X, -1)
    g = tp.grad(lambda a: np.sum(np.real(f(a, -1))))(X)
    assert g.shape == X.shape
    np.testing.assert_allclose(tp.vmap(lambda a: f(a, -1))(np.stack([X, X]))[1], want,
                               rtol=1e-12, atol=1e-12)
