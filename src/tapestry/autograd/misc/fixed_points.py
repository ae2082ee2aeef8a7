"""``fixed_point``: differentiate through an iteration to its fixed point.

``x* = f(a)(x*)``.  The backward pass never differentiates through the
iterations: by the implicit function theorem the cotangent of ``a`` is
``v^T df(a)(x*)/da`` where ``v`` solves the adjoint fixed point
``v = g + v^T df(a)(x*)/dx``, found (from zero) by ``fixed_point`` itself.
Because both the forward and the adjoint solve are this same
``tapestry.custom_vjp`` operation, higher derivatives are implicit too,
as in autograd."""
from __future__ import annotations

from tapestry.core.api import vjp
from tapestry.core.custom import custom_vjp
from tapestry.core.pytree import tree_map

__all__ = ["fixed_point"]


def _iterate(step, x0, distance, tol):
    x, x_prev = step(x0), x0
    while distance(x, x_prev) > tol:
        x, x_prev = step(x), x
    return x


@custom_vjp
def fixed_point(f, a, x0, distance, tol):
    """The fixed point of ``x -> f(a)(x)`` from ``x0``, iterated until
    ``distance(x, x_prev) <= tol``; differentiable in ``a``."""
    return _iterate(f(a), x0, distance, tol)


def _adjoint_step(f):
    """``(a, x*, g) -> (v -> g + v^T df(a)(x*)/dx)``: the adjoint iteration."""
    def step_of(params):
        a, x_star, g = params
        _, vjp_x = vjp(f(a), x_star)
        return lambda v: tree_map(lambda gi, wi: gi + wi, g, vjp_x(v)[0])
    return step_of


def _fwd(f, a, x0, distance, tol):
    x_star = fixed_point(f, a, x0, distance, tol)  # recorded at outer levels, if any
    return x_star, (f, a, x_star, x0, distance, tol)


def _bwd(res, g):
    f, a, x_star, x0, distance, tol = res
    zeros = tree_map(lambda x: x * 0.0, x_star)
    v = fixed_point(_adjoint_step(f), (a, x_star, g), zeros, distance, tol)
    _, vjp_a = vjp(lambda a: f(a)(x_star), a)
    return None, vjp_a(v)[0], None, None, None


fixed_point.defvjp(_fwd, _bwd)
