"""NEP 13 / NEP 18 dispatch: route NumPy calls on traced arrays to primitives."""
from __future__ import annotations

import operator

import numpy as np

from .registry import FUNCTIONS, NONDIFF, UFUNCS
from .var import Var

_REDUCE = {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max,
           np.minimum: np.min, np.fmax: np.nanmax, np.fmin: np.nanmin}
_ACCUMULATE = {np.add: np.cumsum, np.multiply: np.cumprod}

_HELP_RULE = ("Write it with differentiable NumPy operations, or supply the "
              "rule with @tapestry.custom_vjp (see docs/guide.md).")


def unwrap_all(x):
    """Strip every tracing level from ``x`` (recursing into lists/tuples/dicts)."""
    if x.__class__ is Var:
        while x.__class__ is Var:
            x = x._value
        return x
    if type(x) in (list, tuple):
        return type(x)(unwrap_all(v) for v in x)
    if type(x) is dict:
        return {k: unwrap_all(v) for k, v in x.items()}
    return x


def _traced(xs):
    return any(x.__class__ is Var for x in xs)


def dispatch_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.get("out")
    if out is not None:
        outs = out if isinstance(out, tuple) else (out,)
        if _traced(outs) or _traced(inputs):
            raise TypeError(
                f"tapestry: np.{ufunc.__name__}(..., out=...) writes in place, "
                "which cannot be differentiated; drop out= and use the result.")
    if method == "__call__":
        prim = UFUNCS.get(ufunc)
        if prim is None and ufunc not in NONDIFF and _load_special_rules():
            prim = UFUNCS.get(ufunc)
        if prim is not None:
            return prim(*inputs, **kwargs)
        if ufunc in NONDIFF:
            return ufunc(*unwrap_all(inputs), **kwargs)
    elif method == "reduce" and ufunc in _REDUCE:
        # ufunc.reduce defaults to axis=0, np.sum & co. to axis=None.
        return dispatch_function(_REDUCE[ufunc], inputs, {"axis": 0, **kwargs})
    elif method == "accumulate" and ufunc in _ACCUMULATE:
        return dispatch_function(_ACCUMULATE[ufunc], inputs, {"axis": 0, **kwargs})
    elif ufunc in NONDIFF:
        return getattr(ufunc, method)(*unwrap_all(inputs), **kwargs)
    owner = "np" if getattr(np, ufunc.__name__, None) is ufunc else "the ufunc"
    name = f"{owner}.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    raise NotImplementedError(f"tapestry: no gradient rule for {name}. {_HELP_RULE}")


_special_loaded = False


def _load_special_rules():
    """Register the scipy.special rules on first use of a ufunc without a
    rule (importing SciPy at ``import tapestry`` would cost ~0.3 s); a
    program that calls a SciPy ufunc has imported SciPy already."""
    global _special_loaded
    if _special_loaded:
        return False
    _special_loaded = True
    from ..ops import special  # noqa: F401  (fills UFUNCS; import lock serializes)
    return True


def dispatch_function(func, args, kwargs):
    impl = FUNCTIONS.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    if func in NONDIFF:
        return func(*unwrap_all(args), **unwrap_all(kwargs))
    mod = getattr(func, "__module__", "numpy") or "numpy"
    name = f"{mod}.{getattr(func, '__name__', func)}".replace("numpy", "np", 1)
    raise NotImplementedError(f"tapestry: no gradient rule for {name}. {_HELP_RULE}")


def getitem(x, key):
    if type(key) is tuple:
        key = tuple(unwrap_all(k) if k.__class__ is Var else k for k in key)
    elif key.__class__ is Var:
        key = unwrap_all(key)
    return FUNCTIONS[operator.getitem](x, key)


def astype(x, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return FUNCTIONS["astype"](x, dtype)
    return unwrap_all(x).astype(dtype)
