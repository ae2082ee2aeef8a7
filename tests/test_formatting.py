"""Formatting a traced value with a format spec (``f"{loss:.4f}"`` inside a
loss, as NumPy and PyTorch users write for progress): the rounded text of
the value, which is piecewise constant in it (derivative zero almost
everywhere, as ``round()``). Under jit it is read as a guard; under vmap
there is no one number, refused by name."""
import numpy as np
import pytest

import tapestry as tp


def loss_with_progress(x, log):
    loss = np.sum(x ** 2)
    log.append(f"loss={loss:.4f} {np.max(x):.2e} {format(loss, '>10.3g')}")
    return loss


def test_text_is_numpys_and_gradients_are_unchanged():
    x = np.linspace(-1.0, 2.0, 4)
    plain = []
    loss_with_progress(x, plain)
    for transform in (lambda f: tp.grad(f)(x), lambda f: tp.hessian(f)(x),
                      lambda f: tp.jvp(f, (x,), (np.ones(4),)),
                      lambda f: tp.jacfwd(f)(x), lambda f: tp.jacrev(f)(x)):
        log = []
        transform(lambda y: loss_with_progress(y, log))
        assert log and all(line == plain[0] for line in log)
    assert np.allclose(tp.grad(lambda y: loss_with_progress(y, []))(x), 2 * x)


def test_a_multi_element_array_refuses_as_numpy_does():
    with pytest.raises(TypeError):
        f"{np.ones(3):.3f}"
    with pytest.raises(TypeError):
        tp.grad(lambda x: np.sum(x) + 0 * len(f"{x * 2:.3f}"))(np.ones(3))


def test_under_jit_the_text_is_a_guard():
    def f(x):
        loss = np.sum(x * 2)
        if f"{loss:.1f}" > "5":   # a branch on the text: must re-trace
            return loss * 2
        return loss

    j = tp.jit(tp.grad(f))
    assert np.allclose(j(np.ones(3)), 4.0)
    assert np.allclose(j(np.zeros(3)), tp.grad(f)(np.zeros(3)))  # was 4.0 (stale branch)
    assert np.allclose(j(np.ones(3)), 4.0)


def test_under_vmap_there_is_no_one_number():
    def f(x):
        loss = np.sum(x * 2)
        return loss + 0 * len(f"{loss:.3f}")

    with pytest.raises(TypeError, match="format"):
        tp.vmap(tp.grad(f))(np.ones((2, 3)))
    with pytest.raises(TypeError, match="format"):
        tp.grad(lambda x: np.sum(tp.vmap(f)(x)))(np.ones((2, 3)))
