"""autograd's deprecated ``util.quick_grad_check``."""
from __future__ import annotations

import warnings

from .test_util import check_grads


def quick_grad_check(fun, arg0, extra_args=(), kwargs=None, verbose=True, eps=1e-4,
                     rtol=1e-4, atol=1e-6, rs=None):
    """Deprecated in autograd: ``check_grads(fun, modes=["rev"], order=1)``."""
    warnings.warn("quick_grad_check is deprecated; use "
                  "tapestry.autograd.test_util.check_grads.", DeprecationWarning,
                  stacklevel=2)
    kwargs = kwargs or {}
    check_grads(lambda x: fun(x, *extra_args, **kwargs), modes=["rev"], order=1)(arg0)
