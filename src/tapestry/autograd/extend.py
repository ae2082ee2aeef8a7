"""autograd's ``extend`` API (``primitive``, ``defvjp``) on tapestry Primitives.

autograd declares a derivative with a *VJP maker*: ``defvjp(f, lambda ans,
x, y: lambda g: ...)``, called with the forward result and the arguments,
returning the map from output cotangent to input cotangent.  tapestry's rules
take everything at once, ``rule(g, ans, *args, **kwargs)``; each maker is
wrapped as such a rule on a :class:`tapestry.core.primitive.Primitive`, so
the engine records and runs it like its own (its ``g`` is always dense, as in
autograd: a sparse cotangent is expanded first).  A maker written with NumPy
functions stays differentiable (higher orders), as in autograd.
"""
from __future__ import annotations

import functools

from .core_bridge import Primitive
from ..core.custom import dense_cotangent as _dense
from ..core.var import Var
from .differential_operators import _FORWARD


class primitive:
    """``@primitive``: ``fun`` becomes an operation recorded as one node;
    its derivatives are what :func:`defvjp` declares (an argument with no
    declared rule is refused by name when differentiated)."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vjps, self.vjp_argnum, self.jvps = {}, None, {}
        self._rebuild()

    def _rebuild(self):
        """tapestry fixes a Primitive's rules when it is made; autograd
        declares them after ``@primitive``: make it again with all of them."""
        self.prim = Primitive(self.fun, getattr(self.fun, "__name__", None),
                                      vjps=dict(self.vjps), vjp_argnum=self.vjp_argnum)

    def __call__(self, *args, **kwargs):
        return self.prim(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # usable as a method
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return f"<autograd primitive {self.__name__} (tapestry)>"

    # autograd's deprecated method forms (autograd warns the same way).
    def defgrad(self, maker, argnum=0):
        """Deprecated: ``defvjp(f, maker, argnums=[argnum])``."""
        _deprecated("defgrad")
        defvjp(self, maker, argnums=[argnum])

    def defvjp(self, vjpfun, argnum=0):
        """Deprecated: ``vjpfun(g, ans, vs, gvs, *args)`` (``vs``/``gvs`` are None)."""
        _deprecated("defvjp")
        defvjp(self, lambda ans, *args, **kw: lambda g: vjpfun(g, ans, None, None, *args,
                                                                **kw),
               argnums=[argnum])

    def defvjp_is_zero(self, argnums=(0,)):
        """Deprecated: declare these arguments' derivatives zero."""
        _deprecated("defvjp_is_zero")
        for i in argnums:
            defvjp(self, None, argnums=[i])


def _deprecated(name):
    import warnings
    warnings.warn(f"{name} is deprecated (as in autograd); use "
                  "tapestry.autograd.extend.defvjp.", DeprecationWarning, stacklevel=3)


def _prim(fun):
    if not isinstance(fun, primitive):
        raise TypeError(f"tapestry.autograd.extend: {getattr(fun, '__name__', fun)!r} "
                        "is not a @primitive; decorate it with "
                        "tapestry.autograd.extend.primitive first.")
    return fun


def _rule(maker):
    if maker is None:  # autograd: None declares a zero derivative
        return lambda g, ans, *args, **kwargs: None
    return lambda g, ans, *args, **kwargs: maker(ans, *args, **kwargs)(_dense(g))


def defvjp(fun, *makers, argnums=None):
    """One VJP maker per argument, ``maker(ans, *args, **kwargs) -> (g ->
    cotangent)``; ``None`` declares that argument's derivative zero."""
    p = _prim(fun)
    for i, maker in zip(range(len(makers)) if argnums is None else argnums, makers):
        p.vjps[i] = _rule(maker)
    p._rebuild()
    return fun


def defvjp_argnum(fun, maker):
    """One maker for every argument: ``maker(argnum, ans, args, kwargs)``."""
    p = _prim(fun)
    p.vjp_argnum = lambda i, g, ans, args, kwargs: maker(i, ans, args, kwargs)(_dense(g))
    p._rebuild()
    return fun


def defvjp_argnums(fun, maker):
    """One maker for all arguments at once: ``maker(argnums, ans, args,
    kwargs)`` returns ``g -> tuple of cotangents`` (called per argument)."""
    p = _prim(fun)
    p.vjp_argnum = lambda i, g, ans, args, kwargs: maker((i,), ans, args, kwargs)(
        _dense(g))[0]
    p._rebuild()
    return fun


def defjvp(fun, *makers, argnums=None):
    """Accepted so that modules declaring both directions import; the rules
    are kept on the primitive but unused (forward mode is not provided)."""
    _prim(fun)
    for i, maker in zip(range(len(makers)) if argnums is None else argnums, makers):
        fun.jvps[i] = maker
    return fun


def defjvp_argnum(fun, maker):
    """As :func:`defjvp`: kept, unused."""
    _prim(fun)
    fun.jvps["argnum"] = maker
    return fun


def def_linear(fun):
    """autograd's shortcut for linear primitives needs forward mode."""
    raise NotImplementedError(_FORWARD.format("def_linear"))


def notrace_primitive(fun):
    """A function whose result carries no derivative: runs on plain values."""
    from ..core.var import unwrap_all

    @functools.wraps(fun)
    def f(*args, **kwargs):
        return fun(*unwrap_all(args), **unwrap_all(kwargs))
    return f


#: autograd's box type; tapestry's traced value plays its part.
Box = Var


class VSpace:
    """Present for imports only; tapestry has no vector-space registry."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("tapestry.autograd: VSpace registration is not "
                                  "supported; tapestry traces NumPy arrays, floats "
                                  "and pytrees (dict, list, tuple) of them.")


def vspace(value):
    raise NotImplementedError("tapestry.autograd: vspace() is autograd-internal and "
                              "not provided.")
