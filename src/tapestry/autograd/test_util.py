"""autograd's ``test_util`` (``check_grads``, ``combo_check``, ...), so
tests written for autograd run against tapestry.

``check_grads(f, modes, order)(*args)`` compares ``<u, J v>`` from central
finite differences with ``<J^T u, v>`` from the VJP for random ``u`` and
``v`` (complex values are compared through their real and imaginary parts,
with autograd's convention that a cotangent is conjugated), then checks
the VJP itself the same way up to ``order``.  ``"fwd"`` in ``modes``
checks ``make_jvp`` against finite differences the same way.  The default
is ``["rev"]`` (autograd's is both): tapestry's forward mode refuses
complex values, which autograd's tests often use.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..core.var import unwrap_all
from ..core.pytree import tree_flatten
from .differential_operators import make_jvp_unary, make_vjp_unary
from .wrap_util import get_name, unary_to_nary

__all__ = ["check_grads", "check_vjp", "check_equivalent", "combo_check", "scalar_close",
           "TOL", "RTOL", "EPS"]

TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6


def scalar_close(a, b):
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _leaves(x):
    return [np.asarray(unwrap_all(v)) for v in tree_flatten(x)[0]]


def _signature(x):
    """What autograd's vspace compares: structure, shapes, real/complex."""
    leaves, td = tree_flatten(x)
    return td, [(np.shape(v), np.iscomplexobj(unwrap_all(v))) for v in leaves]


def _randn_like(x):
    leaves, td = tree_flatten(x)
    out = []
    for v in leaves:
        shape, cplx = np.shape(v), np.iscomplexobj(unwrap_all(v))
        r = np.random.randn(*shape)
        if cplx:
            r = r + 1j * np.random.randn(*shape)
        out.append(r if shape else r[()] if isinstance(r, np.ndarray) else r)
    return td.unflatten(out)


def _map2(f, x, y):
    lx, td = tree_flatten(x)
    ly = tree_flatten(y)[0]
    return td.unflatten([f(a, b) for a, b in zip(lx, ly)])


def _inner(x, y):
    """Real inner product, ``Re <x, y>`` summed over the leaves."""
    return sum(float(np.real(np.vdot(np.ravel(a), np.ravel(b))))
               for a, b in zip(_leaves(x), _leaves(y)))


def _conj(x):
    lx, td = tree_flatten(x)
    return td.unflatten([np.conj(v) if np.iscomplexobj(unwrap_all(v)) else v for v in lx])


def _numerical_jvp(f, x, v):
    plus = f(_map2(lambda a, b: a + b * (EPS / 2), x, v))
    minus = f(_map2(lambda a, b: a - b * (EPS / 2), x, v))
    return _map2(lambda p, m: (p - m) / EPS, plus, minus)


def check_vjp(f, x):
    vjp, y = make_vjp_unary(f, x)
    x_v, y_v = _randn_like(x), _randn_like(y)
    vjp_y = _conj(vjp(_conj(y_v)))
    got, want = _signature(vjp_y), _signature(x)
    assert got == want, (f"VJP of {get_name(f)} has the wrong structure, shape or "
                         f"dtype kind: {got} (input: {want})")
    exact = _inner(x_v, vjp_y)
    numeric = _inner(y_v, _numerical_jvp(f, x, x_v))
    assert scalar_close(numeric, exact), (
        f"Derivative (VJP) check of {get_name(f)} failed with arg {x}:\n"
        f"analytic: {exact}\nnumeric:  {numeric}")


def check_jvp(f, x):
    """``make_jvp``'s tangent against central differences, in a random direction."""
    x_v = _randn_like(x)
    check_equivalent(make_jvp_unary(f, x)(x_v)[1], _numerical_jvp(f, x, x_v))


def check_equivalent(x, y):
    assert _signature(x) == _signature(y), f"VSpace mismatch:\nx: {x}\ny: {y}"
    v = _randn_like(x)
    assert scalar_close(_inner(x, v), _inner(y, v)), f"Value mismatch:\nx: {x}\ny: {y}"


@unary_to_nary
def check_grads(f, x, modes=None, order=2):
    """Check ``f``'s reverse-mode derivatives at ``x`` up to ``order``."""
    modes = ["rev"] if modes is None else modes
    assert all(m in ("fwd", "rev") for m in modes)
    if "fwd" in modes:
        check_jvp(f, x)
        if order > 1:
            def jvp_f(x, v):
                return make_jvp_unary(f, x)(v)[1]
            jvp_f.__name__ = f"jvp_{get_name(f)}"
            check_grads(jvp_f, (0, 1), modes, order=order - 1)(x, _randn_like(x))
    if "rev" not in modes:
        return
    check_vjp(f, x)
    if order > 1:
        def grad_f(x, v):
            return make_vjp_unary(f, x)[0](v)
        grad_f.__name__ = f"vjp_{get_name(f)}"
        v = _randn_like(f(x))
        check_grads(grad_f, (0, 1), modes, order=order - 1)(x, v)


def combo_check(fun, *args, **kwargs):
    """``combo_check(fun, argnums, **check_kwargs)(arg_lists, **kwarg_lists)``
    runs :func:`check_grads` on every combination of the listed values."""
    def _combo_check(*arg_lists, **kwarg_lists):
        keyed = [[(k, v) for v in vs] for k, vs in kwarg_lists.items()]
        for _args in itertools.product(*arg_lists):
            for _kwargs in itertools.product(*keyed):
                check_grads(fun, *args, **kwargs)(*_args, **dict(_kwargs))
    return _combo_check
