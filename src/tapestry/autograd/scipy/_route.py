"""Calling a SciPy function that is not a ufunc (so not reached by NumPy's
dispatch) on traced values: tapestry's implementation if one is registered
for it, otherwise a refusal naming the function."""
from __future__ import annotations

import functools
import types

from tapestry.core.pytree import tree_flatten
from tapestry.core.registry import FUNCTIONS
from tapestry.core.var import Var


def _traced(args, kwargs):
    return any(x.__class__ is Var for x in tree_flatten([list(args), kwargs])[0])


def routed(fun, qualname):
    """``fun`` that hands traced calls to tapestry's rule for it, if any."""
    @functools.wraps(fun)
    def call(*args, **kwargs):
        if not _traced(args, kwargs):
            return fun(*args, **kwargs)
        impl = FUNCTIONS.get(fun)
        if impl is None:
            raise NotImplementedError(
                f"tapestry: no gradient rule for {qualname}. Write it with "
                "differentiable NumPy operations, or supply the rule with "
                "@tapestry.custom_vjp (see docs/guide.md).")
        return impl(*args, **kwargs)
    return call


def route_module(namespace, module, names, prefix):
    """Fill ``namespace`` with routed versions of ``module``'s ``names``."""
    for n in names:
        f = getattr(module, n, None)
        if isinstance(f, types.FunctionType):
            namespace[n] = routed(f, f"{prefix}.{n}")
