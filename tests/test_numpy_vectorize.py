"""``tnp.vectorize``: NumPy's ``np.vectorize`` (same arguments, same
results) whose loop differentiates; ``np.vectorize`` itself on a traced
input is refused naming it and the fix."""
import numpy as np
import pytest

import tapestry as tp
import tapestry.numpy as tnp
from tapestry.testing import check_grads


def branchy(t):
    if t > 0.5:
        return t * t
    return np.sin(t)


def smooth(t, a=2.0):
    return np.exp(-a * t) * t


X = np.linspace(0.1, 0.9, 6).reshape(2, 3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_smooth_element_function_differentiates(dtype):
    x = X.astype(dtype)
    check_grads(lambda x: np.sum(tnp.vectorize(smooth)(x, 3.0) ** 2), (x,), order=2)
    assert tnp.vectorize(smooth)(x).dtype == np.vectorize(smooth)(x).dtype


def test_a_function_branching_on_its_element_differentiates_element_by_element():
    v = tnp.vectorize(branchy)
    np.testing.assert_array_equal(v(X), np.vectorize(branchy)(X))
    g = tp.grad(lambda x: np.sum(v(x)))(X)
    np.testing.assert_allclose(g, np.where(X > 0.5, 2 * X, np.cos(X)), rtol=1e-14)
    _, t = tp.jvp(lambda x: np.sum(v(x)), (X,), (np.ones_like(X),))
    assert np.isclose(t, np.sum(np.where(X > 0.5, 2 * X, np.cos(X))))


def test_inputs_broadcast_and_excluded_arguments_pass_unchanged():
    vb = tnp.vectorize(lambda a, b: a * b + 1.0)
    check_grads(lambda x, y: np.sum(vb(x, y) ** 2), (X, X[0] + 1.0))
    ve = tnp.vectorize(lambda t, table, a=1.0: table[0] * t ** a, excluded={1, "a"})
    table = [2.0, 3.0]
    got = ve(X, table, a=2.0)
    np.testing.assert_array_equal(got, np.vectorize(lambda t, table, a=1.0: table[0] * t ** a,
                                                    excluded={1, "a"})(X, table, a=2.0))
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(ve(x, table, a=2.0)))(X), 4.0 * X)


def test_signature_core_dimensions():
    dot = lambda a, b: np.dot(a, b)  # noqa: E731
    vd = tnp.vectorize(dot, signature="(n),(n)->()")
    np.testing.assert_allclose(vd(X, X), np.vectorize(dot, signature="(n),(n)->()")(X, X))
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(vd(x, x)))(X), 2 * X)
    outer = tnp.vectorize(np.outer, signature="(m),(n)->(m,n)")
    check_grads(lambda x: np.sum(np.sin(outer(x, x[:, :2]))), (X,))
    with pytest.raises(ValueError, match="inconsistent size for core dimension"):
        tp.grad(lambda x: np.sum(vd(x, x[:, :2])))(X)


def test_several_outputs_and_otypes():
    two = tnp.vectorize(lambda t: (t * 2.0, np.sin(t)))
    a, b = two(X)
    want = np.vectorize(lambda t: (t * 2.0, np.sin(t)))(X)
    np.testing.assert_array_equal(a, want[0])
    np.testing.assert_array_equal(b, want[1])
    g = tp.grad(lambda x: np.sum(two(x)[0] * two(x)[1]))(X)
    np.testing.assert_allclose(g, 2 * np.sin(X) + 2 * X * np.cos(X), rtol=1e-14)
    f32 = tnp.vectorize(smooth, otypes=[np.float32])
    assert tp.vjp(f32, X)[0].dtype == np.float32


def test_the_first_elements_dtype_decides_as_in_numpy():
    """NumPy gives the output the first element's dtype (an int here, the
    later floats cast to it): the same values and dtype."""
    f = lambda t: 0 if t < 0.3 else t  # noqa: E731
    got = tp.vjp(tnp.vectorize(f), X)[0]
    want = np.vectorize(f)(X)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_empty_inputs():
    e = np.ones((0, 3))
    with pytest.raises(ValueError, match="size 0 inputs unless `otypes`"):
        tp.grad(lambda x: np.sum(tnp.vectorize(smooth)(x)))(e)
    g = tp.grad(lambda x: np.sum(tnp.vectorize(smooth, otypes=[float])(x)))(e)
    assert g.shape == (0, 3)


def test_plain_inputs_are_numpys_own_vectorize():
    v = tnp.vectorize(branchy)
    out = v(X)
    assert out.dtype == np.float64 and np.array_equal(out, np.vectorize(branchy)(X))
    assert tnp.vectorize(branchy).__doc__ == np.vectorize(branchy).__doc__


def test_under_jit_and_vmap():
    v = tnp.vectorize(branchy)
    g = tp.grad(lambda x: np.sum(v(x)))
    jg = tp.jit(g)
    for k in range(3):
        x = X * (1.0 + 0.1 * k)
        np.testing.assert_allclose(jg(x), g(x), rtol=1e-14)
    s = tnp.vectorize(smooth)
    batch = np.stack([X, 0.5 * X])
    np.testing.assert_allclose(tp.vmap(tp.grad(lambda x: np.sum(s(x))))(batch),
                               np.stack([tp.grad(lambda x: np.sum(s(x)))(b) for b in batch]))


def test_the_decorator_form():
    @tnp.vectorize(otypes=[float])
    def cube(t):
        return t ** 3
    np.testing.assert_allclose(tp.grad(lambda x: np.sum(cube(x)))(X), 3 * X ** 2)


@pytest.mark.parametrize("signature", [None, "()->()"])
def test_numpys_vectorize_on_a_traced_input_names_the_fix(signature):
    with pytest.raises(TypeError, match=r"np\.vectorize.*tnp\.vectorize"):
        tp.grad(lambda x: np.sum(np.vectorize(np.sin, signature=signature)(x)))(X)


def test_a_function_closing_over_a_traced_value_with_plain_inputs():
    """Plain inputs go to NumPy's own vectorize, whose conversion of the
    traced results is refused: the loop then runs as vmap, so ``f`` reading
    a differentiated value from a closure differentiates in it."""
    t = np.linspace(0.1, 0.9, 4)
    g = tp.grad(lambda a: np.sum(tnp.vectorize(lambda s: np.sin(a * s))(t)))(0.7)
    assert np.isclose(g, np.sum(t * np.cos(0.7 * t)))
    gb = tp.grad(lambda a: np.sum(tnp.vectorize(lambda s: a * s if s > 0.5 else a)(t)))(0.7)
    assert np.isclose(gb, np.sum(np.where(t > 0.5, t, 1.0)))
