"""A jitted function called inside ``grad`` (``grad(jit(f))``): compiled too.

The arguments are traced values (``Var``) of one tape.  The forward runs as
the jitted function on their plain values (its cached program), and the
tape gets one node for the call, whose rule replays a second compiled
program: ``f``'s pullback at the same point (a ``vjp`` of ``f`` traced by
jit, which computes the forward again, as ``checkpoint`` does, instead of
keeping every intermediate).  Both programs are guarded and cached like any
jitted function's.

Anything else runs ``f`` inline, as if there were no jit: arguments traced
at several levels (``hessian``), batched values (``vmap(jit(f))``), staged
values (a jit inside a jit), or a function that reads a traced value from
its closure.  A cotangent that is itself traced (forward mode pushing
tangents through the node, a derivative of the gradient) gets the pullback
computed uncompiled, on the same point, so every derivative stays exact.
"""
from __future__ import annotations

import numpy as np

from ..core.api import vjp
from ..core.backward import JointRule
from ..core.batched import Batched, Unbatched
from ..core.primitive import record
from ..core.pytree import tree_flatten
from ..core.staged import Staged, Unstageable
from ..core.tape import ClosedNodes
from ..core.tracing import of_leaves
from ..core.var import Var
from .env import ReachesTraced, environment
from .order import OrderedTree

_OTHER_LEVELS = frozenset({Batched, Unbatched, Staged})
#: Argument leaves that are values, not objects whose attributes f may read.
_PLAIN_LEAVES = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None))


def call_on_traced(jf, args, kwargs):
    """``jf(*args, **kwargs)`` where some leaves are traced values."""
    leaves, td = tree_flatten((args, kwargs))
    td = OrderedTree.of(td, (args, kwargs))  # f sees its dicts in the caller's order
    tape, pos = None, []
    for i, x in enumerate(leaves):
        c = x.__class__
        if c is Var:
            v = x._value
            if not (v.__class__ is np.ndarray or isinstance(v, np.generic)) or \
                    (tape is not None and x._tape is not tape):
                return jf.fun(*args, **kwargs)  # several levels: inline
            tape = x._tape
            pos.append(i)
        elif c in _OTHER_LEVELS:
            return jf.fun(*args, **kwargs)
    if tape is None or tape.nodes.__class__ is ClosedNodes:
        return jf.fun(*args, **kwargs)
    plain = [x._value if i in pos else x for i, x in enumerate(leaves)]
    pargs, pkwargs = td.unflatten(plain)
    out = jf(*pargs, **pkwargs)
    out_leaves, out_td = tree_flatten(out)
    out_td = OrderedTree.of(out_td, out)
    if any(o.__class__ is Var or o.__class__ in _OTHER_LEVELS for o in out_leaves):
        # f read a traced value from its closure: the uncompiled call sees it
        return jf.fun(*args, **kwargs)
    diff = [k for k, o in enumerate(out_leaves) if _inexact(o)]
    if not diff:
        return out
    env = _environment_now(jf, plain)
    if env is None:
        return jf.fun(*args, **kwargs)
    point = (td, tuple(pos), plain, out_td, list(out_leaves))  # plain: kept as is
    pullback = _pullback(jf, point, diff, env)
    parents = [leaves[i]._index for i in pos]
    values = [out_leaves[k] for k in diff]
    if len(diff) == 1:
        traced = [record(tape, values[0], parents, JointRule(pullback), (), {})]
    else:
        traced = list(record(tape, tuple(values), parents, JointRule(pullback), (), {},
                             n_outputs=len(diff)))
    for k, t in zip(diff, traced):
        out_leaves[k] = t
    return out_td.unflatten(out_leaves)


def _inexact(o):
    """Whether an output leaf is a float or complex number or array (the
    outputs that carry a derivative)."""
    if isinstance(o, (np.ndarray, np.generic)):
        return o.dtype.kind in "fc"
    return isinstance(o, (float, complex)) and not isinstance(o, bool)


def _environment_now(jf, plain):
    """What ``jf.fun`` reads besides its traced arguments (closures,
    globals, the objects among its arguments), with copies of the arrays,
    as at the forward; ``None`` if it cannot be guarded (then ``f`` runs
    inline).  The pullback recomputes the forward: it must see these same
    values, or it would differentiate another function than the one the
    forward ran.  The last walk is kept and reused while nothing in it
    changed (its copies are then the values now)."""
    objects = [x for x in plain if not isinstance(x, _PLAIN_LEAVES)]
    last = jf._reverse_env
    if last is not None and len(last[0]) == len(objects) and \
            all(a is b for a, b in zip(last[0], objects)) and last[1].changed() is None:
        return last[1]
    try:
        env = environment(jf.fun, objects)
    except (Unstageable, ReachesTraced):
        return None
    jf._reverse_env = (objects, env)
    return env


def _pullback(jf, point, diff, env):
    td, pos, plain, out_td, out_leaves = point

    def jit_pullback(g, ans):
        why = env.changed() if len(env) else None
        if why is not None:
            raise RuntimeError(
                f"tapestry.jit({jf.__qualname__}): {why} between the forward and the "
                "pullback; the pullback recomputes the forward, which would now differ "
                "from the one that ran. Copy the value before changing it (or rebind "
                "the name to a new array), or call the function without jit.")
        gs = [g] if len(diff) == 1 else list(g)
        cts = [np.zeros_like(np.asarray(o)) for o in out_leaves]
        traced = False
        for k, c in zip(diff, gs):
            if c is not None:
                cts[k] = c
                traced = traced or c.__class__ is Var or c.__class__ in _OTHER_LEVELS
        if traced:  # a derivative of the pullback itself: computed uncompiled
            return list(_vjp_at(jf.fun, td, pos, plain, out_td, cts))
        return list(_backward(jf)(plain, cts, td, pos, out_td))
    return jit_pullback


def _vjp_at(fun, td, pos, plain, out_td, cts):
    """The pullback of ``fun`` at ``plain`` applied to ``cts`` (one cotangent
    per output leaf), as a tuple with one cotangent per traced leaf."""
    _, pb = vjp(of_leaves(fun, td, plain, pos), *[plain[i] for i in pos])
    return pb(out_td.unflatten(list(cts)))


def _backward(jf):
    """The jitted pullback program of ``jf`` (made once per jitted function;
    its closure holds ``jf.fun``, so the function's state is guarded)."""
    bwd = jf._reverse
    if bwd is None:
        jit = type(jf)  # (tapestry.jit: this module is imported by it)
        fun = jf.fun

        def pullback_at(plain, cts, td, pos, out_td):
            return _vjp_at(fun, td, pos, plain, out_td, cts)
        bwd = jf._reverse = jit(pullback_at, static_argnums=(2, 3, 4),
                                max_traces=jf.max_traces, strict=jf.strict, fuse=jf._fuse,
                                fuse_after=jf.fuse_after)
    return bwd
