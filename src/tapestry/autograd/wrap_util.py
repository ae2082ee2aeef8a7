"""``unary_to_nary``: turn an operator on one-argument functions into one
that takes ``argnum`` (an int or a tuple of ints), as autograd's do."""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["unary_to_nary", "get_name"]


def _with_args(args, argnum, x):
    """``args`` with position ``argnum`` (or each of a tuple) replaced by ``x``."""
    args = list(args)
    if _single(argnum):
        args[argnum] = x
    else:
        for i, xi in zip(argnum, x):
            args[i] = xi
    return tuple(args)


def _single(argnum):
    """One argument number (a Python or NumPy integer) or several; a bool or
    float is refused (``argnum=True`` would silently mean argument 1)."""
    if isinstance(argnum, (bool, np.bool_)) or isinstance(argnum, float):
        raise TypeError(f"tapestry.autograd: argnum must be an int or a tuple of ints, "
                        f"got {argnum!r} ({type(argnum).__name__}).")
    return isinstance(argnum, (int, np.integer))


def unary_to_nary(unary_operator):
    """``unary_operator(f, x, *op_args)`` becomes ``op(fun, argnum=0,
    *op_args)(*args, **kwargs)``, differentiating ``fun`` at ``args[argnum]``
    (a tuple ``argnum`` makes ``x`` the tuple of those arguments)."""
    @functools.wraps(unary_operator)
    def nary_operator(fun, argnum=0, *op_args, **op_kwargs):
        _single(argnum)  # refuse a bad argnum when the operator is made

        @functools.wraps(fun)
        def nary_f(*args, **kwargs):
            def unary_f(x):
                return fun(*_with_args(args, argnum, x), **kwargs)
            unary_f.__name__ = get_name(fun)
            x = args[argnum] if _single(argnum) else tuple(args[i] for i in argnum)
            return unary_operator(unary_f, x, *op_args, **op_kwargs)
        op, name = unary_operator.__name__, get_name(fun)
        nary_f.__name__ = f"{op}_of_{name}_wrt_argnum_{argnum}"
        nary_f.__qualname__ = nary_f.__name__
        nary_f.__doc__ = (f"    {op} of function {name} with respect to argument number "
                          f"{argnum}. Takes the\n    same arguments as {name} but returns "
                          f"the {op}.\n    ")
        return nary_f
    return nary_operator


def get_name(f):
    return getattr(f, "__name__", "[unknown name]")
