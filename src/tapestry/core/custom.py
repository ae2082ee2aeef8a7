"""User-defined derivative rules (``custom_vjp``) and ``checkpoint``."""
from __future__ import annotations

import functools

import numpy as np

from .api import vjp
from .backward import JointRule
from .primitive import record
from .pytree import tree_flatten
from .var import Var


class custom_vjp:
    """A function with a user-supplied reverse rule (like ``jax.custom_vjp``).

    ::

        @tapestry.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, y_bar): return (x_bar, y_bar_of_y)   # one per argument
        f.defvjp(f_fwd, f_bwd)

    Arguments and outputs may be pytrees; ``bwd`` returns one cotangent
    pytree (or ``None`` for zero) per positional argument.  The rule is only
    run for arguments that are being differentiated.
    """

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        leaves, td = tree_flatten(list(args))
        top = None
        for x in leaves:
            if x.__class__ is Var and (top is None or x._tape.level > top.level):
                top = x._tape
        if top is None:
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError(f"tapestry.custom_vjp: {self.__name__} has no rule; "
                            "call .defvjp(fwd, bwd) before differentiating it.")
        active = [k for k, x in enumerate(leaves) if x.__class__ is Var and x._tape is top]
        raw = [x._value if k in active else x for k, x in enumerate(leaves)]
        out, residuals = self.fwd(*td.unflatten(raw))
        out_leaves, out_td = tree_flatten(out)
        bwd, n_out = self.bwd, len(out_leaves)

        def custom_pullback(g, ans):
            if n_out == 1:
                g = [g]
            g = [np.zeros_like(a) if c is None else c for a, c in zip(ans, g)]
            cts = bwd(residuals, out_td.unflatten(g))
            if not isinstance(cts, tuple):
                cts = (cts,)
            if len(cts) != len(args):
                raise ValueError(f"tapestry.custom_vjp: the backward rule of "
                                 f"{self.__name__} returned {len(cts)} cotangents for "
                                 f"{len(args)} arguments.")
            flat = []
            for a, c in zip(args, cts):
                n = len(tree_flatten(a)[0])
                cl = [None] * n if c is None else tree_flatten(c)[0]
                flat.extend(cl)
            return [flat[k] for k in active]

        parents = [leaves[k]._index for k in active]
        ans = tuple(out_leaves)
        if n_out == 1:
            outs = (record(top, ans[0], parents, JointRule(
                lambda g, a: custom_pullback(g, (a,))), (), {}),)
        else:
            outs = record(top, ans, parents, JointRule(custom_pullback), (), {}, n_out)
        return out_td.unflatten(list(outs))


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
