"""``autograd.scipy.integrate.odeint``: SciPy's ``odeint``, differentiable in
the initial state ``y0``, the times ``t`` and the extra ``args``.

The backward pass is the adjoint method: the state, its cotangent and the
cotangents of ``t`` and ``args`` are integrated backwards in time, one
interval at a time, with ``odeint`` itself (so second derivatives work the
same way).  The dynamics' VJPs come from tapestry (``tapestry.vjp``); the
solver is SciPy's, with the caller's keyword arguments (``rtol``, ...).
"""
from __future__ import annotations

import numpy as np
import scipy.integrate as _int

from tapestry.core.api import vjp
from tapestry.core.custom import custom_vjp
from ..misc.flatten import flatten


@custom_vjp
def _odeint(func, y0, t, args, options):
    return _int.odeint(func, y0, t, args=tuple(args), **dict(options))


def odeint(func, y0, t, args=(), **kwargs):
    """``scipy.integrate.odeint(func, y0, t, args, **kwargs)``; ``func(y, t,
    *args)`` must be written with differentiable NumPy."""
    return _odeint(func, y0, t, tuple(args), tuple(sorted(kwargs.items())))


def _fwd(func, y0, t, args, options):
    yt = _odeint(func, y0, t, args, options)  # recorded at outer levels, if any
    return yt, (func, yt, t, args, options)


def _augmented(func, d, unflatten):
    """Dynamics of (y, y_bar, t_bar, args_bar) backwards in time."""
    def dynamics(state, t, flat_args):
        y, y_bar = state[:d], state[d:2 * d]
        dy, pullback = vjp(lambda y, t, a: func(y, t, *unflatten(a)), y, t, flat_args)
        ybar_dot, tbar_dot, abar_dot = pullback(-y_bar)
        return np.concatenate([dy, ybar_dot, np.reshape(tbar_dot, (1,)), abar_dot])
    return dynamics


def _bwd(res, g):
    func, yt, t, args, options = res
    flat_args, unflatten = flatten(tuple(args))
    d = np.shape(yt)[1]
    dynamics = _augmented(func, d, unflatten)
    y_bar, t0_bar, a_bar = g[-1], 0.0, np.zeros(np.shape(flat_args))
    t_bars = []
    for i in range(np.shape(yt)[0] - 1, 0, -1):
        t_bar = np.dot(func(yt[i], t[i], *args), g[i])
        t_bars.append(t_bar)
        t0_bar = t0_bar - t_bar
        state = np.concatenate([yt[i], y_bar, np.reshape(t0_bar, (1,)), a_bar])
        out = _odeint(dynamics, state, np.stack([t[i], t[i - 1]]), (flat_args,), options)[1]
        y_bar = out[d:2 * d] + g[i - 1]
        t0_bar, a_bar = out[2 * d], out[2 * d + 1:]
    t_bars.append(t0_bar)
    return None, y_bar, np.stack(t_bars[::-1]), unflatten(a_bar), None


_odeint.defvjp(_fwd, _bwd)
