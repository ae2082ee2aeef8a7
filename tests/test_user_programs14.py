"""tests/programs/edge_progs14.py: round-14 programs (scipy.special at its
special points, tapestry.scipy.stats log-densities, linalg qr / det / inv /
pinv / matrix_power / norm(ord), cumulative ops and differences, convolve /
correlate, sort and quantiles, clip / max ties, masked softmax with -inf,
complex losses and FFTs, int / bool arrays, einsum with repeated indices,
0-d and empty broadcasting, float32, pytrees; and HIPS-autograd-style
programs through tapestry.autograd) under grad, jvp, vmap and jit in both
orders; and the defects the round found, each with the test that failed
before its fix."""
import warnings

import numpy as np
import pytest

import tapestry as tp

from programs.edge_progs14 import AUTOGRAD_PROGRAMS
from programs.edge_progs14 import PROGRAMS as REGISTRY
from programs.runner import (CORRECT, REFUSED, check_every_order, classify, classify_forward,
                             float_argnums)

NAMES = sorted(REGISTRY)

REFUSED_BY_DESIGN: set = set()
#: Python branches on values inside the mapped function, refused by name under vmap.
NOT_VMAPPED = {"bool_sum_count_in_denominator"}


def test_module_has_programs():
    assert len(NAMES) >= 100 and REFUSED_BY_DESIGN <= set(NAMES) and NOT_VMAPPED <= set(NAMES)


@pytest.fixture(scope="module")
def outcomes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {n: (classify(REGISTRY[n]), classify_forward(REGISTRY[n])) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_program_reverse_and_forward(name, outcomes):
    rev, fwd = outcomes[name]
    if name in REFUSED_BY_DESIGN:
        assert rev.status == REFUSED and fwd.status == REFUSED, (rev.reason, fwd.reason)
        assert "zeros_like" in rev.reason or "np.stack" in rev.reason
    else:
        assert rev.status == CORRECT, (rev.status, rev.reason, rev.where)
        assert fwd.status == CORRECT, (fwd.status, fwd.reason, fwd.where)


SMOOTH = [n for n in NAMES if n not in REFUSED_BY_DESIGN and float_argnums(REGISTRY[n].make_args())]


@pytest.mark.parametrize("name", SMOOTH)
def test_every_order_of_jit_vmap_and_grad_matches_the_loop(name):
    """vmap(grad f), jit(vmap(grad f)), vmap(jit(grad f)), jit(grad f) and
    grad(jit f) against grad f item by item."""
    check_every_order(REGISTRY[name], vmapped=name not in NOT_VMAPPED)


# --- HIPS autograd style programs (tapestry.autograd) -------------------------------
AG_NAMES = sorted(AUTOGRAD_PROGRAMS)


def _fd(f, tree, direction, eps):
    leaves, td = tp.tree_flatten(tree)
    at = lambda t: f(td.unflatten([np.asarray(l, float) + t * v for l, v in zip(leaves, direction)]))  # noqa: E731
    return (at(eps) - at(-eps)) / (2 * eps)


def test_autograd_module_has_programs():
    assert len(AG_NAMES) >= 20


@pytest.mark.parametrize("name", AG_NAMES)
def test_autograd_style_program(name):
    """autograd.grad against central differences; value_and_grad's value
    against the program run on plain arrays; tp.jit(grad) and the forward
    mode (autograd's make_jvp) agree."""
    from tapestry.autograd import grad, make_jvp, value_and_grad
    f, make = AUTOGRAD_PROGRAMS[name]
    (x,) = make()
    r = np.random.default_rng(7)
    leaves = tp.tree_leaves(x)
    v = [r.standard_normal(np.shape(l)) for l in leaves]
    eps = 1e-6 if "float32" not in name else 1e-3
    fd = _fd(f, x, v, eps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        val, g = value_and_grad(f)(x)
        np.testing.assert_allclose(val, f(make()[0]), rtol=1e-12)
        got = sum(float(np.sum(np.asarray(a) * u)) for a, u in zip(tp.tree_leaves(g), v))
        np.testing.assert_allclose(got, fd, rtol=1e-5 if eps < 1e-4 else 1e-3, atol=1e-7)
        if "fixed_point" not in name and not isinstance(x, dict):
            np.testing.assert_allclose(tp.jit(grad(f))(x), g, rtol=1e-9, atol=1e-12)
            jv = make_jvp(f)(x)(v[0])[1]
            np.testing.assert_allclose(jv, got, rtol=1e-7, atol=1e-10)


def test_autograd_elementwise_grad_jacobian_hessian():
    """elementwise_grad, jacobian and hessian of autograd-style code against
    NumPy's closed forms."""
    import tapestry.autograd.numpy as anp
    import tapestry.autograd.scipy.special as asp
    from tapestry.autograd import elementwise_grad, hessian, jacobian
    x = np.array([-40.0, -2.0, 0.0, 0.5, 3.0, 40.0])
    np.testing.assert_allclose(elementwise_grad(asp.expit)(x), sp_expit(x) * (1 - sp_expit(x)), rtol=1e-12)
    np.testing.assert_allclose(elementwise_grad(anp.tanh)(x), 1 - np.tanh(x) ** 2)
    y = np.array([0.3, 1.5, 4.0])
    np.testing.assert_allclose(elementwise_grad(asp.gammaln)(y), _digamma(y), rtol=1e-12)
    J = jacobian(lambda z: anp.cumprod(z))(np.array([2.0, 0.0, 3.0]))
    np.testing.assert_allclose(J, [[1, 0, 0], [0, 2, 0], [0, 3 * 2 * 1.0 * 0 + 6, 0]], atol=0)
    A = np.array([[2.0, 0.5], [0.5, 1.0]])
    H = hessian(lambda z: anp.dot(z, anp.dot(A, z)) + anp.sum(z ** 3))(np.array([0.3, -0.4]))
    np.testing.assert_allclose(H, 2 * A + np.diag(6 * np.array([0.3, -0.4])), rtol=1e-12)


def sp_expit(x):
    import scipy.special
    return scipy.special.expit(x)


def _digamma(x):
    import scipy.special
    return scipy.special.digamma(x)


# --- defects found by this round -----------------------------------------------------
_XN = np.array([0.1, -1.0, 2.0, -0.5, 3.0, 0.5])         # sqrt gives NaN at -1.0, -0.5
_YN = np.array([0.4, 0.2, 1.0, 0.3, np.nan, 0.1])
_VN = np.array([0.3, 0.7, -0.2, 0.5, 0.1, 0.9])

#: Functions whose value leaves out NaN entries: their sqrt tangent there is NaN.
NAN_SKIPPING = {
    "fmax": lambda x: np.sum(np.fmax(np.sqrt(x), _YN)),
    "fmin": lambda x: np.sum(np.fmin(np.sqrt(x), _YN)),
    "fmax_reduce": lambda x: np.fmax.reduce(np.sqrt(x)),
    "fmax_accumulate": lambda x: np.sum(np.fmax.accumulate(np.sqrt(x)) * np.arange(6.0)),
    "nanmax": lambda x: np.nanmax(np.sqrt(x)),
    "nanmin_axis": lambda x: np.sum(np.nanmin(np.sqrt(x).reshape(2, 3), axis=1)),
    "nan_to_num": lambda x: np.sum(np.nan_to_num(np.sqrt(x)) * np.arange(6.0)),
    "heaviside_h": lambda x: np.sum(np.heaviside(np.array([0.0, 1.0, 0.0, -2.0, 0.0, 0.0]), np.sqrt(x))),
    "clip_of_inf_tangent": lambda x: np.sum(np.clip(np.sqrt(np.abs(x) * (x > 0)), 0.4, 2.0)),
}


@pytest.mark.parametrize("how", ["jvp", "jit_jvp", "vmap_jvp", "jacfwd", "linearize"])
@pytest.mark.parametrize("case", sorted(NAN_SKIPPING))
def test_forward_mode_ignores_nan_tangents_of_entries_the_value_leaves_out(case, how):
    """Before: jvp of np.nanmax(np.sqrt(x)) (x with negative entries) was NaN:
    forward mode transposes the backward rule g * mask, and the NaN tangent
    sqrt gives at a negative entry times the 0 of the mask is NaN.  Right:
    0.0289, the central difference and <grad, v> (reverse mode was right).
    Same for fmax / fmin / fmax.reduce / accumulate / nanmin / nan_to_num,
    heaviside's h (read only where x == 0),
    and clip of an entry with an infinite tangent (sqrt at 0)."""
    f = NAN_SKIPPING[case]
    x = _XN if case != "clip_of_inf_tangent" else np.array([0.0, 0.25, 0.5, 9.0, -1.0, 1.0])
    eps = 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fd = (f(x + eps * _VN) - f(x - eps * _VN)) / (2 * eps) if case != "clip_of_inf_tangent" \
            else (f(x + eps * np.abs(_VN)) - f(x)) / eps      # one-sided at sqrt's 0: flat there
        g = tp.grad(f)(x)
        want = np.sum(np.where(np.isnan(g), 0.0, g) * (_VN if case != "clip_of_inf_tangent" else np.abs(_VN)))
        v = _VN if case != "clip_of_inf_tangent" else np.abs(_VN)
        got = {"jvp": lambda: tp.jvp(f, (x,), (v,))[1],
               "jit_jvp": lambda: tp.jit(lambda x: tp.jvp(f, (x,), (v,))[1])(x),
               "vmap_jvp": lambda: tp.vmap(lambda u: tp.jvp(f, (x,), (u,))[1])(np.stack([v, 2 * v]))[1] / 2,
               "jacfwd": lambda: np.nansum(tp.jacfwd(f)(x) * v),   # NaN entries: sqrt's own, as grad's
               "linearize": lambda: tp.linearize(f, x)[1](v)}[how]()
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
