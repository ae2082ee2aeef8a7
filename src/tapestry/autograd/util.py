"""autograd's deprecated ``util.quick_grad_check``."""
from __future__ import annotations

import warnings

from .test_util import check_grads

__all__ = ["quick_grad_check", "func", "subvals", "subval"]


def quick_grad_check(fun, arg0, extra_args=(), kwargs=None, verbose=True, eps=1e-4,
                     rtol=1e-4, atol=1e-6, rs=None):
    """Deprecated in autograd: ``check_grads(fun, modes=["rev"], order=1)``."""
    warnings.warn("quick_grad_check is deprecated; use "
                  "tapestry.autograd.test_util.check_grads.", DeprecationWarning,
                  stacklevel=2)
    kwargs = kwargs or {}
    check_grads(lambda x: fun(x, *extra_args, **kwargs), modes=["rev"], order=1)(arg0)


def func(f):
    """autograd's ``util.func``: ``f`` itself (a marker used in its examples)."""
    return f


def subvals(x, ivs):
    """The tuple ``x`` with ``x[i] = v`` for each ``(i, v)`` in ``ivs``."""
    x = list(x)
    for i, v in ivs:
        x[i] = v
    return tuple(x)


def subval(x, i, v):
    """The tuple ``x`` with ``x[i] = v``."""
    return subvals(x, [(i, v)])
