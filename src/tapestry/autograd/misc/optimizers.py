"""autograd's ``misc.optimizers``: ``sgd``, ``rmsprop``, ``adam``.

Same signatures and conventions: ``grad(params, iter)`` gives the gradient,
``callback(params, iter, gradient)`` is called each step, parameters may be
any pytree (flattened to one vector inside), and the final parameters are
returned in the caller's structure.  Plain NumPy on plain arrays: the
gradients come from whatever ``grad`` the caller passes (tapestry's).
"""
from __future__ import annotations

import functools

import numpy as np

from .flatten import flatten

__all__ = ["unflatten_optimizer", "sgd", "rmsprop", "adam"]


def _check(where, num_iters, step_size, **in_unit):
    """Refuse settings that would run silently wrong (autograd accepts
    them): nan or inf anywhere, a step size <= 0, a decay or momentum
    outside [0, 1), a negative iteration count."""
    if isinstance(num_iters, bool) or not isinstance(num_iters, (int, np.integer)) \
            or num_iters < 0:
        raise ValueError(f"tapestry.autograd.misc.optimizers.{where}: num_iters must be an "
                         f"integer >= 0, got {num_iters!r}.")
    checks = [("step_size", step_size, step_size > 0, "> 0")]
    checks += [(k, v, 0 <= v < 1, "in [0, 1)") for k, v in in_unit.items()]
    for name, value, ok, rule in checks:
        if not (ok and np.isfinite(value)):
            raise ValueError(f"tapestry.autograd.misc.optimizers.{where}: {name} must be a "
                             f"finite number {rule}, got {value!r}.")


def unflatten_optimizer(optimize):
    """Let ``optimize`` (written for 1-d vectors) take and return pytrees."""
    @functools.wraps(optimize)
    def _optimize(grad, x0, callback=None, *args, **kwargs):
        _x0, unflatten = flatten(x0)
        _grad = lambda x, i: flatten(grad(unflatten(x), i))[0]  # noqa: E731
        _callback = None if callback is None else \
            (lambda x, i, g: callback(unflatten(x), i, unflatten(g)))
        return unflatten(optimize(_grad, _x0, _callback, *args, **kwargs))
    return _optimize


@unflatten_optimizer
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Stochastic gradient descent with momentum ``mass``."""
    _check("sgd", num_iters, step_size, mass=mass)
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@unflatten_optimizer
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=10**-8):
    """RMSProp: steps scaled by a running root mean square of the gradient."""
    _check("rmsprop", num_iters, step_size, gamma=gamma)
    if not (eps > 0 and np.isfinite(eps)):
        raise ValueError(f"tapestry.autograd.misc.optimizers.rmsprop: eps must be a finite "
                         f"number > 0, got {eps!r}.")
    avg_sq_grad = np.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g**2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(avg_sq_grad) + eps)
    return x


@unflatten_optimizer
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999,
         eps=10**-8):
    """Adam (Kingma and Ba, 2014), with bias-corrected moment estimates."""
    _check("adam", num_iters, step_size, b1=b1, b2=b2)
    if not (eps > 0 and np.isfinite(eps)):
        raise ValueError(f"tapestry.autograd.misc.optimizers.adam: eps must be a finite "
                         f"number > 0, got {eps!r}.")
    m = np.zeros(len(x))
    v = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g**2) + b2 * v
        mhat = m / (1 - b1 ** (i + 1))
        vhat = v / (1 - b2 ** (i + 1))
        x = x - step_size * mhat / (np.sqrt(vhat) + eps)
    return x
