"""User-defined derivative rules: ``custom_vjp`` (a reverse rule), ``custom_jvp``
(a forward rule, transposed for reverse mode) and ``checkpoint``."""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .api import vjp
from .backward import JointRule
from .primitive import dtype_of, record, shape_of
from .pytree import tree_flatten
from .var import Var, innermost_tape


class custom_vjp:
    """A function with a user-supplied reverse rule (``jax.custom_vjp``'s semantics).

    ::

        @tapestry.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, out_bar): return (x_bar, y_bar)   # one per argument
        f.defvjp(f_fwd, f_bwd)

    Arguments and outputs may be pytrees; ``bwd`` returns one cotangent
    pytree (or ``None`` for zero) per positional argument.  Keyword
    arguments are bound to their positions first (with them, defaults are
    filled in), so
    ``fwd`` receives them positionally and ``bwd`` returns one cotangent for
    them too.  ``nondiff_argnums`` (``functools.partial(custom_vjp,
    nondiff_argnums=(1,))`` or ``custom_vjp(nondiff_argnums=(1,))``) marks
    arguments that are not differentiated (flags, callables): ``bwd`` is
    then called as ``bwd(*nondiff_args, residuals, out_bar)`` and returns
    cotangents for the other arguments only.  The rule runs only when an
    argument is being differentiated; a cotangent of the wrong shape or
    structure is an error naming the function and the argument.
    """

    def __new__(cls, fun=None, nondiff_argnums=()):
        if fun is None:  # custom_vjp(nondiff_argnums=...) used as a decorator
            return functools.partial(cls, nondiff_argnums=nondiff_argnums)
        return super().__new__(cls)

    def __getnewargs__(self):
        """Unpickling calls ``__new__`` with these: without ``fun`` it would
        return the decorator's ``partial`` (cloudpickle ships a custom_vjp
        defined in ``__main__`` by value to process and Dask workers)."""
        return (self.fun,)

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None
        self.nondiff_argnums = tuple(sorted(set(
            (nondiff_argnums,) if isinstance(nondiff_argnums, int) else nondiff_argnums)))
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):  # builtins without a signature
            self._signature = None

    def defvjp(self, fwd, bwd):
        if not (callable(fwd) and callable(bwd)):
            raise TypeError(f"tapestry.custom_vjp: {self._name()}.defvjp(fwd, bwd) takes two "
                            "functions.")
        self.fwd, self.bwd = fwd, bwd
        return self

    def _name(self):
        return getattr(self, "__name__", repr(self.fun))

    def _positional(self, args, kwargs):
        """``args`` with keyword arguments (and then defaults) bound to positions."""
        if not kwargs:
            return args
        sig = self._signature
        if sig is None:
            if kwargs:
                raise TypeError(f"tapestry.custom_vjp: {self._name()} has no signature "
                                "to bind keyword arguments to; pass them positionally.")
            return args
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"tapestry.custom_vjp: {self._name()}: {e}") from None
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError(f"tapestry.custom_vjp: {self._name()} takes keyword-only or "
                            f"**kwargs arguments ({sorted(bound.kwargs)}); custom_vjp "
                            "functions need every argument to have a position.")
        return bound.args

    def _arg_name(self, i):
        if self._signature is not None:
            params = list(self._signature.parameters)
            if i < len(params):
                return f"argument {i} ({params[i]!r})"
        return f"argument {i}"

    def __call__(self, *args, **kwargs):
        args = self._positional(args, kwargs)
        nondiff = self.nondiff_argnums
        for i in nondiff:
            if not 0 <= i < len(args):
                raise ValueError(f"tapestry.custom_vjp: {self._name()} has nondiff_argnums="
                                 f"{nondiff} but was called with {len(args)} arguments.")
        diff = [i for i in range(len(args)) if i not in nondiff]
        leaves, td = tree_flatten([args[i] for i in diff])
        top = innermost_tape(leaves if not nondiff else tree_flatten(list(args))[0])
        if top is None:
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError(f"tapestry.custom_vjp: {self._name()} has no rule; "
                            "call .defvjp(fwd, bwd) before differentiating it.")
        self._check_nondiff_constant(args, top)
        return self._record(args, diff, leaves, td, top)

    def _check_nondiff_constant(self, args, top):
        for i in self.nondiff_argnums:
            for x in tree_flatten(args[i])[0]:
                if x.__class__ is Var and x._tape is top:
                    raise TypeError(
                        f"tapestry.custom_vjp: {self._name()}'s {self._arg_name(i)} is in "
                        "nondiff_argnums but is being differentiated; remove it from "
                        "nondiff_argnums (and return its cotangent from bwd).")

    def _record(self, args, diff, leaves, td, top):
        """Run ``fwd`` on the plain values and record one node whose rule is ``bwd``."""
        active = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
        raw = [x._value if x.__class__ is Var and x._tape is top else x for x in leaves]
        full = list(args)
        for i, a in zip(diff, td.unflatten(raw)):
            full[i] = a
        pair = self.fwd(*full)
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(f"tapestry.custom_vjp: the forward rule of {self._name()} must "
                            "return a pair (output, residuals), got "
                            f"{type(pair).__name__}.")
        out, residuals = pair
        out_leaves, out_td = tree_flatten(out)
        n_out = len(out_leaves)
        nondiff_vals = [args[i] for i in self.nondiff_argnums]
        primals = [(i, tree_flatten(full[i])) for i in diff]

        def custom_pullback(g, ans):
            if n_out == 1:
                g = [g]
            g = [np.zeros_like(a) if c is None else c for a, c in zip(ans, g)]
            cts = self.bwd(*nondiff_vals, residuals, out_td.unflatten(g))
            flat = self._check_cotangents(cts, primals)
            return [flat[k] for k in active]

        parents = [leaves[k]._index for k in active]
        ans = tuple(out_leaves)
        if n_out == 1:
            outs = (record(top, ans[0], parents, JointRule(
                lambda g, a: custom_pullback(g, (a,))), (), {}),)
        else:
            outs = record(top, ans, parents, JointRule(custom_pullback), (), {}, n_out)
        return out_td.unflatten(list(outs))

    def _check_cotangents(self, cts, primals):
        """Flat cotangent leaves of the differentiated arguments, checked
        against the primals' structures and shapes."""
        if not isinstance(cts, tuple):  # a list is one cotangent (of a list argument)
            cts = (cts,)
        if len(cts) != len(primals):
            raise ValueError(f"tapestry.custom_vjp: the backward rule of {self._name()} "
                             f"returned {len(cts)} cotangents for {len(primals)} "
                             "differentiable arguments; return a tuple with one "
                             "cotangent (or None) per argument not in nondiff_argnums.")
        flat = []
        for (i, (p_leaves, p_td)), c in zip(primals, cts):
            if c is None:
                flat.extend([None] * len(p_leaves))
                continue
            c_leaves, c_td = tree_flatten(c)
            if len(c_leaves) != len(p_leaves):
                raise ValueError(
                    f"tapestry.custom_vjp: the backward rule of {self._name()} returned "
                    f"a cotangent of structure {c_td} for {self._arg_name(i)}, whose "
                    f"structure is {p_td}.")
            for k, (p, ct) in enumerate(zip(p_leaves, c_leaves)):
                if ct is not None and np.shape(ct) != np.shape(p):
                    where = "" if len(p_leaves) == 1 else f" (leaf {k})"
                    raise ValueError(
                        f"tapestry.custom_vjp: the backward rule of {self._name()} returned "
                        f"a cotangent of shape {np.shape(ct)} for {self._arg_name(i)}"
                        f"{where}, whose shape is {np.shape(p)}.")
            flat.extend(c_leaves)
        return flat


def checkpoint(f):
    """``f`` that stores only its inputs; its backward pass reruns ``f`` on a
    child tape.  Trades one extra forward for the memory of intermediates.
    The rerun sees the random numbers of the first run: NumPy's global
    state and any generator among the arguments are replayed
    (:mod:`tapestry.core.rng`; a generator captured in a closure is not)."""
    from . import rng

    def fwd(*args):
        snapshot = rng.capture(args)  # the recompute must draw the same numbers
        return f(*args), (args, snapshot)

    def bwd(res, g):
        args, snapshot = res
        live = [k for k, a in enumerate(args) if not rng.generators(a)]  # generators: fixed

        def f_live(*xs):
            full = list(args)
            for k, x in zip(live, xs):
                full[k] = x
            return f(*full)
        with rng.replay(snapshot, args):
            _, pullback = vjp(f_live, *[args[k] for k in live])
        cts = pullback(g)
        cts = cts if isinstance(cts, tuple) else (cts,)
        out = [None] * len(args)
        for k, c in zip(live, cts):
            out[k] = c
        return tuple(out)

    c = custom_vjp(f)
    c.defvjp(fwd, bwd)
    return c


class custom_jvp:
    """A function with a user-supplied forward rule (like ``jax.custom_jvp``)::

        @tapestry.custom_jvp
        def f(x, y): ...

        @f.defjvp
        def f_jvp(primals, tangents):        # tuples, one entry per argument
            x, y = primals; tx, ty = tangents
            return f(x, y), tangent_out        # tangent_out linear in the tangents

    Forward mode calls the rule; reverse mode transposes it (the map
    ``tangents -> tangent_out`` is linear, so its VJP is the reverse rule),
    so ``grad``, ``jvp`` and Hessians all use it.  Tangents of arguments
    that are not differentiated are passed as zeros.
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def __call__(self, *args):
        leaves, td = tree_flatten(list(args))
        top = None
        for x in leaves:
            if x.__class__ is Var and (top is None or x._tape.level > top.level):
                top = x._tape
        if top is None:
            return self.fun(*args)
        if self.jvp is None:
            raise TypeError(f"tapestry.custom_jvp: {self.__name__} has no rule; "
                            "define it with @f.defjvp before differentiating it.")
        active = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
        raw = [x._value if k in active else x for k, x in enumerate(leaves)]
        out = self.fun(*td.unflatten(raw))
        out_leaves, out_td = tree_flatten(out)
        tangent_of = _CustomTangent(self, raw, td, active, len(out_leaves))

        def custom_jvp_pullback(g, ans):
            return tangent_of.pullback(g, ans)
        custom_jvp_pullback.custom_jvp = tangent_of  # node_tangent calls the rule itself
        parents = [leaves[k]._index for k in active]
        if len(out_leaves) == 1:
            outs = [record(top, out_leaves[0], parents, JointRule(custom_jvp_pullback), (), {})]
        else:
            outs = list(record(top, tuple(out_leaves), parents, JointRule(custom_jvp_pullback),
                               (), {}, len(out_leaves)))
        return out_td.unflatten(outs)


class _CustomTangent:
    """The rule of one custom_jvp call: its tangent map and the transpose."""

    def __init__(self, cj, raw, td, active, n_out):
        self.cj, self.raw, self.td, self.active, self.n_out = cj, raw, td, active, n_out

    def tangent(self, ts):
        """Output tangent(s) for active-leaf tangents ``ts`` (None: zero)."""
        full = [np.zeros(shape_of(x), dtype_of(x)) for x in self.raw]
        for k, t in zip(self.active, ts):
            if t is not None:
                full[k] = t
        primals = tuple(self.td.unflatten(self.raw))
        _, t_out = self.cj.jvp(primals, tuple(self.td.unflatten(full)))
        leaves = tree_flatten(t_out)[0]
        if len(leaves) != self.n_out:
            raise ValueError(f"tapestry.custom_jvp: the rule of {self.cj.__name__} returned "
                             f"{len(leaves)} tangent leaves for {self.n_out} outputs.")
        return leaves[0] if self.n_out == 1 else list(leaves)

    def pullback(self, g, ans):
        """The VJP: the tangent map is linear, so its own VJP is the reverse rule."""
        zeros = [np.zeros(shape_of(self.raw[k]), dtype_of(self.raw[k])) for k in self.active]
        _, pb = vjp(lambda *ts: self.tangent(ts), *zeros)
        if self.n_out == 1:
            return list(pb(g))
        g = [np.zeros(shape_of(a), dtype_of(a)) if c is None else c for a, c in zip(ans, g)]
        return list(pb(g))
