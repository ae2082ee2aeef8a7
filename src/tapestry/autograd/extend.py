"""autograd's ``extend`` API (``primitive``, ``defvjp``) on tapestry Primitives.

autograd declares a derivative with a *VJP maker*: ``defvjp(f, lambda ans,
x, y: lambda g: ...)``, called with the forward result and the arguments,
returning the map from output cotangent to input cotangent.  tapestry's rules
take everything at once, ``rule(g, ans, *args, **kwargs)``; each maker is
wrapped as such a rule on a :class:`tapestry.core.primitive.Primitive`, so
the engine records and runs it like its own (its ``g`` is always dense, as in
autograd: a sparse cotangent is expanded first).  A maker written with NumPy
functions stays differentiable (higher orders), as in autograd.

Forward mode (``make_jvp``, ``deriv``, tapestry's ``jvp``) needs no second
table: tapestry derives every JVP from the VJP rules (docs/forward.md).  A
JVP declared with :func:`defjvp` for an argument that has no VJP becomes its
VJP by transposition (the JVP is linear in the tangent, so its own VJP is
the reverse rule; it must then be written with differentiable NumPy); an
argument declared linear (``def_linear``, ``defjvp(f, "same")``) is pushed
forward by applying the primitive to the tangent, as autograd does.  Where
both directions are declared, the VJP is the one used.
"""
from __future__ import annotations

import functools

import numpy as np

from .core_bridge import Primitive
from ..core.api import vjp as _tp_vjp
from ..core.primitive import dtype_of, shape_of
from ..core.custom import dense_cotangent as _dense
from ..core.var import Var

__all__ = ["primitive", "defvjp", "defvjp_argnum", "defvjp_argnums", "defjvp",
           "defjvp_argnum", "def_linear", "notrace_primitive", "Box", "VSpace", "vspace"]


class primitive:
    """``@primitive``: ``fun`` becomes an operation recorded as one node;
    its derivatives are what :func:`defvjp` declares (an argument with no
    declared rule is refused by name when differentiated)."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vjps, self.vjp_argnum, self.jvps = {}, None, {}
        self.jvp_argnum, self.linear = None, ()  # linear: positions, or _EVERY
        self._rebuild()

    def _rebuild(self):
        """tapestry fixes a Primitive's rules when it is made; autograd
        declares them after ``@primitive``: make it again with all of them
        (JVPs of arguments without a VJP transposed into their VJP)."""
        name = getattr(self.fun, "__name__", None)
        vjps, vjp_argnum = dict(self.vjps), self.vjp_argnum
        if vjp_argnum is None:
            for i, jvp in self.jvps.items():
                if i not in vjps:
                    vjps[i] = _zero if jvp is _zero else _vjp_of_jvp(jvp, i, name)
            if self.jvp_argnum is not None:
                vjp_argnum = _vjp_argnum_of_jvp(self.jvp_argnum, vjps, name)
        self.prim = Primitive(self.fun, name, vjps=vjps, vjp_argnum=vjp_argnum,
                              linear_in=() if self.linear is _EVERY else self.linear)
        if self.linear is _EVERY:
            self.prim.linear_in = _EVERY

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


class _Every(tuple):
    """``linear_in`` of a primitive linear in every argument (``def_linear``)."""

    def __contains__(self, i):
        return True


_EVERY = _Every()


def _zero(g, ans, *args, **kwargs):
    """A rule declaring a zero derivative (autograd's ``None``), either way."""
    return None


def _vjp_of_jvp(jvp, i, name):
    """The VJP rule of argument ``i`` from its JVP ``jvp(t, ans, *args)``:
    the JVP is linear in ``t``, so its VJP at any point (zeros) is the
    transposed map (custom_jvp's reverse mode works the same way)."""
    def rule(g, ans, *args, **kwargs):
        x = args[i]
        zero = np.zeros(shape_of(x), dtype_of(x))
        try:
            _, pb = _tp_vjp(lambda t: jvp(t, ans, *args, **kwargs), zero)
        except TypeError as e:
            raise TypeError(f"tapestry.autograd: {name} has a JVP but no VJP for argument "
                            f"{i}; reverse mode transposes the JVP, which failed on a "
                            f"traced tangent: {e} Write the JVP with differentiable NumPy "
                            "(tapestry.autograd.numpy), or declare the VJP with "
                            "defvjp.") from e
        return pb(g)[0]
    return rule


def _vjp_argnum_of_jvp(jvp_argnum, vjps, name):
    def vjp_argnum(i, g, ans, args, kwargs):
        if i in vjps:
            return vjps[i](g, ans, *args, **kwargs)
        jvp = lambda t, ans, *a, **k: jvp_argnum(i, t, ans, a, k)  # noqa: E731
        return _vjp_of_jvp(jvp, i, name)(g, ans, *args, **kwargs)
    return vjp_argnum


def _subval(args, i, v):
    return args[:i] + (v,) + args[i + 1:]


def _jvp_rule(p, maker, i):
    """autograd's ``translate_jvp``: ``None`` is a zero derivative, ``"same"``
    a function linear in argument ``i`` (its JVP is itself on the tangent)."""
    if maker is None:
        return _zero
    if isinstance(maker, str) and maker == "same":
        raw = p.fun  # not the primitive: transposing it must not record it again
        return lambda g, ans, *args, **kwargs: raw(*_subval(args, i, g), **kwargs)
    if callable(maker):
        return maker
    raise TypeError(f"tapestry.autograd.extend.defjvp: bad JVP {maker!r} for "
                    f"{getattr(p.fun, '__name__', p.fun)} (give a function, None or "
                    "'same').")


def defjvp(fun, *makers, argnums=None):
    """One JVP per argument, ``jvp(g, ans, *args, **kwargs) -> tangent`` (as
    autograd: ``None`` declares a zero derivative, ``"same"`` linearity).
    Forward mode uses it where no VJP is declared (see the module's doc)."""
    p = _prim(fun)
    for i, maker in zip(range(len(makers)) if argnums is None else argnums, makers):
        p.jvps[i] = _jvp_rule(p, maker, i)
        if isinstance(maker, str) and maker == "same" and p.linear is not _EVERY:
            p.linear = tuple(sorted(set(p.linear) | {i}))
    p._rebuild()
    return fun


def defjvp_argnum(fun, maker):
    """One JVP for every argument: ``maker(argnum, g, ans, args, kwargs)``."""
    p = _prim(fun)
    p.jvp_argnum = maker
    p._rebuild()
    return fun


def defjvp_argnums(fun, maker):
    """One JVP for all arguments at once: ``maker(argnums, gs, ans, args,
    kwargs)`` returns the summed tangent (called per argument here)."""
    p = _prim(fun)
    p.jvp_argnum = lambda i, g, ans, args, kwargs: maker((i,), (g,), ans, args, kwargs)
    p._rebuild()
    return fun


def def_linear(fun):
    """``fun`` is linear in every argument (the others held fixed): forward
    mode applies ``fun`` to the tangent, and an argument without a VJP gets
    the transpose of that map as its VJP."""
    p = _prim(fun)
    raw = p.fun
    p.jvp_argnum = lambda i, g, ans, args, kwargs: raw(*_subval(args, i, g), **kwargs)
    p.linear = _EVERY
    p._rebuild()
    return fun


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
