"""A jitted function called inside ``grad`` (``grad(jit(f))``): compiled too.

The arguments are traced values (``Var``) of one tape.  The tape gets one
node for the call.  Its programs come from one trace of ``f``'s pullback
at the point (a ``vjp`` of ``f`` applied to cotangents, traced by jit: the
*joint* program, forward and reverse sweep), cut in two as JAX's partial
evaluation cuts ``vjp(jit(f))`` (:func:`tapestry.jit.program.split`): the
forward program runs every step that reads no cotangent and returns
``f``'s outputs and the residuals, the values the backward reads; the
backward program takes the residuals and the cotangents and runs the rest.
The forward is computed once.

The first call at a signature has no split yet: its forward runs as the
jitted ``f`` and its pullback as the joint program (which computes the
forward again, as ``checkpoint`` does); the joint program's trace is then
split for the next calls.  Whatever makes the split inapplicable takes
that path again: a guard of the forward program failing, the environment
changed since the trace, a cotangent of another type, a guard of the
backward program failing (then the joint program recomputes the forward,
and refuses if what ``f`` reads changed in place since it ran).

Anything else runs ``f`` inline, as if there were no jit: arguments traced
at several levels (``hessian``), batched values (``vmap(jit(f))``), staged
values (a jit inside a jit), or a function that reads a traced value from
its closure.  A cotangent that is itself traced (forward mode pushing
tangents through the node, a derivative of the gradient) gets the pullback
computed uncompiled, on the same point, so every derivative stays exact.
"""
from __future__ import annotations

import threading
import warnings

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
from .env import ReachesTraced, environment, restore_rng_states
from .order import aux_key
from .program import GuardFailed, split

_OTHER_LEVELS = frozenset({Batched, Unbatched, Staged})
#: Per thread, ``last``: ``(jit, random states before its trace, or None)``,
#: set where a call gave up compiling, after ``f`` ran for real (it drew
#: random numbers, wrote into an argument, changed what it reads): see
#: :func:`_ran_for_real`.  ``tracing``: the states before the trace running.
RAN_ONCE = threading.local()
#: What a call of a jit returns where it gave up before running ``f``,
#: called by :func:`call_on_traced` (which runs ``f`` once, on its tape).
DEFERRED = object()
#: Argument leaves that are values, not objects whose attributes f may read.
_PLAIN_LEAVES = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None))


def call_on_traced(jf, args, kwargs):
    """``jf(*args, **kwargs)`` where some leaves are traced values."""
    leaves, td = tree_flatten((args, kwargs))
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
    if tape is None or tape.nodes.__class__ is ClosedNodes or jf._mutates_arguments:
        return jf.fun(*args, **kwargs)
    plain = [x._value if i in pos else x for i, x in enumerate(leaves)]
    got = _split_forward(jf, td, pos, plain) if jf._splits else None
    build = None
    if got is not None:
        sp, out_leaves, residuals = got
        out_td, build = sp.out_td, sp.build
        diff = [k for k, o in enumerate(out_leaves) if _inexact(o)]
        if not diff:
            return build(out_leaves)
        point = (td, tuple(pos), plain, out_td, out_leaves)
        pullback = _split_pullback(jf, sp, residuals, point, diff)
        pullback.custom_jvp = _Tangent(jf, point, diff, sp.env)
    else:
        pargs, pkwargs = td.unflatten(plain)
        if _runs_uncompiled(jf, pargs, pkwargs):
            # (the pullback would run f again: a write into an argument, a
            # counter, a draw, repeated; inline, f runs once, on the tape)
            return jf.fun(*args, **kwargs)
        RAN_ONCE.last = None
        RAN_ONCE.defer = (jf, pargs, pkwargs)  # (a give-up before f runs: f runs here)
        try:
            out = jf(*pargs, **pkwargs)
        finally:
            RAN_ONCE.defer = None
        last, RAN_ONCE.last = RAN_ONCE.last, None
        if out is DEFERRED:
            return jf.fun(*args, **kwargs)
        if last is not None and last[0] is jf:
            return _ran_for_real(jf, args, kwargs, out, *last[1:])
        if _changed_arguments(jf, (args, kwargs), (pargs, pkwargs), td, leaves, plain, pos):
            out = _back_to_traced(out, leaves, plain, pos)
        out_leaves, out_td = tree_flatten(out)
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
        pullback.custom_jvp = _Tangent(jf, point, diff, env)
    parents = [leaves[i]._index for i in pos]
    values = [out_leaves[k] for k in diff]
    if len(diff) == 1:
        traced = [record(tape, values[0], parents, JointRule(pullback), (), {})]
    else:
        traced = list(record(tape, tuple(values), parents, JointRule(pullback), (), {},
                             n_outputs=len(diff)))
    out_leaves = list(out_leaves)
    for k, t in zip(diff, traced):
        out_leaves[k] = t
    return (build or out_td.unflatten)(out_leaves)


def _runs_uncompiled(jf, pargs, pkwargs):
    """Whether ``jf`` gave up compiling for the signature of these plain
    arguments (it runs ``f`` as it is)."""
    key = jf._key(pargs, pkwargs)
    entry = None if key is None else jf._cache.get(key)
    return entry is not None and entry.eager is not None


def _ran_for_real(jf, args, kwargs, out, states, env, rec):
    """``jf(*args, **kwargs)`` on the caller's tape, where its call on the
    plain values just now gave up compiling after ``f`` ran for real: it
    drew random numbers (``states``: the generators' states before the
    trace), wrote into an argument, changed what it reads.  The node's pullback
    would compute the forward again -- other random numbers (another
    dropout mask), a counter read once more -- and differentiate another
    function than the one whose value ``out`` is.  So ``f`` runs again,
    inline, from the state it started at: the random states, what it
    reads (``env``, the trace's walk: a counter, a closed-over array, an
    attribute, put back) and the argument arrays' bits (``rec.pristine``:
    the trace's recorder copies them where it stops recording, before the
    function writes into them on the concrete values), so
    its effects happen once and the gradient is the first run's -- a
    value check alone would pass a run whose gradient differs (a
    straight-through mask chosen by a counter).  Where something cannot
    be put back, or the value still differs from ``out`` (a generator
    that cannot be rewound, an iterator), the call is refused."""
    why = None if env is None else env.restore()
    for a, bits in getattr(rec, "pristine", ()):
        if a.tobytes() != bits.tobytes():  # (any dtype; the first call only)
            if a.flags.writeable:
                np.copyto(a, bits)
            else:
                why = why or "an argument array it wrote into"
    if why is not None:
        raise RuntimeError(
            f"tapestry.jit({jf.__qualname__}): differentiating its first call needs a second "
            f"run of the function from the state the first one started at, but it changed "
            f"{why}, which cannot be put back. Pass that state as an argument, or call the "
            "function without jit (later calls run it uncompiled).")
    if states is not None:
        restore_rng_states(states)
    again = jf.fun(*args, **kwargs)
    a, b = tree_flatten(again)[0], tree_flatten(out)[0]
    if len(a) != len(b) or not all(_same_value(x, y) for x, y in zip(a, b)):
        raise RuntimeError(
            f"tapestry.jit({jf.__qualname__}): differentiating its first call needs a second "
            "run of the function, which gave another result: it changes what it reads while "
            "it runs (a counter, a list, a generator that cannot be rewound) and its result "
            "depends on it. Pass that state as an argument, or call the function without "
            "jit (later calls run it uncompiled).")
    return again


def _same_value(x, y):
    """Whether traced or plain ``x`` has the bits of plain ``y``."""
    while x.__class__ is Var:
        x = x._value
    if x.__class__ in _OTHER_LEVELS or y.__class__ in _OTHER_LEVELS:
        return True  # (not a value here: nothing to compare)
    try:
        xa, ya = np.asarray(x), np.asarray(y)
        return xa.shape == ya.shape and xa.dtype == ya.dtype and \
            np.array_equal(xa, ya, equal_nan=xa.dtype.kind in "fc")
    except Exception:  # (objects that do not compare: their runs are not checked)
        return True


def _changed_arguments(jf, orig, rebuilt, td, leaves, plain, pos):
    """Whether ``f`` changed the argument containers it was given (a list
    appended to, a dict item set): ``f`` ran on ``rebuilt``, containers made
    from the plain leaves, so what it did to them is done to the caller's
    ``orig`` (with the caller's traced leaves where their values went), as
    the plain call does it, and ``jf`` runs inline on traced arguments from
    now on (a compiled forward would skip it, the next call must see it)."""
    from .containers import _containers_changed, _copied_containers, _mirror
    if not _containers_changed(rebuilt, td, plain):
        return False
    back = {id(plain[i]): (plain[i], leaves[i]) for i in pos}
    _mirror(_copied_containers(orig, rebuilt, {}), back)
    jf._mutates_arguments = True
    return True


def _back_to_traced(out, leaves, plain, pos):
    """``out`` with the caller's traced leaves where it holds their values
    as such (``f`` returned an argument container it changed, or an
    argument): the traced values, as the plain call returns them."""
    back = {id(plain[i]): leaves[i] for i in pos}
    out_leaves, out_td = tree_flatten(out)
    if not any(id(v) in back for v in out_leaves):
        return out
    return out_td.unflatten([back.get(id(v), v) for v in out_leaves])


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
    """The node's rule where the forward ran as ``jf``: the joint program
    (the forward again, then the reverse sweep), whose trace is then split
    for the next calls at this signature."""
    td, pos, plain, out_td, out_leaves = point

    def jit_pullback(g, ans):
        _refuse_changed(jf, env)
        cts, traced = _cotangents(g, diff, out_leaves)
        if traced:  # a derivative of the pullback itself: computed uncompiled
            return list(_vjp_at(jf.fun, td, pos, plain, out_td, cts))
        bwd = _backward(jf)
        joint_args = (plain, cts, td, pos, out_td)
        got = list(bwd(*joint_args)[1])
        _register(jf, bwd, joint_args)
        return got
    return jit_pullback


class _Tangent:
    """The node's forward-mode rule (``jvp(jit(f))``, ``jacfwd(jit(f))``):
    the tangents pushed through ``f``'s own operations at the point, traced
    again uncompiled, as the plain call's tangent sweep pushes them.
    Transposing the pullback (the default for a joint rule) gives the same
    values with other rounding (the last bits of a Jacobian's entries)."""

    batched = True  # node_tangent hands it jacfwd's batches whole

    def __init__(self, jf, point, diff, env):
        self.jf, self.point, self.diff, self.env = jf, point, diff, env

    def tangent(self, ts, batch=None):
        from ..core.api_forward import _BATCH_ELEMENTS, _Linearized
        from ..core.tracing import trace
        jf, diff = self.jf, self.diff
        td, pos, plain, out_td, out_leaves = self.point
        _refuse_changed(jf, self.env)
        tape, records, outs, o_td, _ = trace(of_leaves(jf.fun, td, plain, pos),
                                             [plain[i] for i in pos], "jvp", False)
        seeds = {rec[0][0]: t for (_, rec), t in zip(records, ts) if t is not None}
        lin = _Linearized(tape, records, outs, o_td, "jvp")
        chunk = batch and max(1, _BATCH_ELEMENTS // lin.largest())
        if not batch or batch <= chunk:
            got = lin.push_leaves(seeds, batch)
        else:  # (as jacfwd would push them through f's values: memory stays bounded)
            parts = [lin.push_leaves({i: t[s:s + chunk] for i, t in seeds.items()},
                                     min(chunk, batch - s)) for s in range(0, batch, chunk)]
            got = [None if any(p[k] is None for p in parts) else
                   np.concatenate([p[k] for p in parts]) for k in range(len(outs))]
        got = [got[k] for k in diff]
        return got[0] if len(diff) == 1 else got


def _split_pullback(jf, sp, residuals, point, diff):
    """The node's rule where the forward ran as the split's forward
    program: the backward program on the residuals, or, where it does not
    apply (a cotangent of another type, a failed guard, a traced
    cotangent), the pullback recomputed as :func:`_pullback` does."""
    td, pos, plain, out_td, out_leaves = point

    def split_pullback(g, ans):
        cts, traced = _cotangents(g, diff, out_leaves)
        if not traced and _ct_key(cts) == sp.ct_key:
            for a, snap, same, label in sp.env_reads:  # read by the backward itself
                if not same(a, snap):
                    _refuse(jf, f"{label} was modified in place")
            try:
                got = sp.split.backward.run(*residuals, *[c for c in cts if c is not None])
            except GuardFailed:
                got = None
            except Exception:  # the joint program says what it is (or raises it)
                got = None
            if got is not None:
                if sp.fuse_pending:
                    _count_for_fusion(jf, sp, [plain[i] for i in sp.plain_runtime],
                                      list(residuals) + [c for c in cts if c is not None])
                return list(sp.ct_td.unflatten(list(got)))
        return _pullback(jf, point, diff, sp.env)(g, ans)
    return split_pullback


def _count_for_fusion(jf, sp, fwd_inputs, bwd_inputs):
    """Once a split has run ``fuse_after`` times (``fuse="auto"`` or
    ``True``), lower both halves again with fused loops, and compile each
    whole where it can be (:mod:`tapestry.jit.whole`), each kept where it
    replays faster on the inputs at hand (replays are pure), as jit does
    for a program."""
    sp.replays += 1
    if sp.replays < jf.fuse_after:
        return
    sp.fuse_pending = False
    try:
        fwd, bwd = sp.split.lower_again(fuse=True)
        timing = jf._timing_contest
        if fwd.n_runs and timing(fwd.run, sp.split.forward.run, fwd_inputs):
            sp.split.forward = fwd
        if bwd.n_runs and timing(bwd.run, sp.split.backward.run, bwd_inputs):
            sp.split.backward = bwd
    except Exception as e:  # numba could not compile a loop: the replay stays
        jf._warn_fuse(e)
    from .whole import compile_whole
    for k, which, inputs in ((0, "forward", fwd_inputs), (1, "backward", bwd_inputs)):
        try:  # each half compiled whole where it can be (tapestry.jit.whole)
            cur = getattr(sp.split, which)
            w = compile_whole(sp.split.halves[k], cur)
            if w.__class__ is not str and jf._timing_contest(w.run, cur.run, inputs):
                setattr(sp.split, which, w)
        except Exception as e:  # numba could not compile it: the program stays
            warnings.warn(f"tapestry.jit({jf.__qualname__}): compiling the pullback's {which} "
                          f"into one function failed ({type(e).__name__}: {e}); it runs as it "
                          "is", type(jf).warning_class, stacklevel=2)


def _cotangents(g, diff, out_leaves):
    """One cotangent per output leaf (``None`` where none came: the pullback
    sweeps from the others only, as the plain sweep does), and whether any
    is traced by an enclosing transformation."""
    gs = [g] if len(diff) == 1 else list(g)
    cts = [None] * len(out_leaves)
    traced = False
    for k, c in zip(diff, gs):
        if c is not None:
            if np.iscomplexobj(c) and not np.iscomplexobj(out_leaves[k]) \
                    and (c.__class__ is np.ndarray or isinstance(c, (complex, np.generic))):
                # (a real output times a complex number downstream: its cotangent
                # arrives complex; only its real part reaches real inputs, as the
                # plain sweep casts it at them -- vjp refuses the complex one)
                c = np.real(c)
            cts[k] = c
            traced = traced or c.__class__ is Var or c.__class__ in _OTHER_LEVELS
    return cts, traced


def _refuse_changed(jf, env):
    why = env.changed() if len(env) else None
    if why is not None:
        _refuse(jf, why)


def _refuse(jf, why):
    raise RuntimeError(
        f"tapestry.jit({jf.__qualname__}): {why} between the forward and the "
        "pullback; the pullback reads it (or recomputes the forward, which would now "
        "differ from the one that ran). Copy the value before changing it (or rebind "
        "the name to a new array), or call the function without jit.")


# --- the split programs -------------------------------------------------------------
class _SplitEntry:
    """A joint program's split, with what calling it needs: the
    environment of its trace (checked before the forward), the
    environment's arrays the backward reads (checked before it), the
    positions of the runtime arguments, the output structures, and the
    type of cotangents it was traced with."""

    __slots__ = ("split", "env", "env_reads", "plain_runtime", "n_y", "out_td", "ct_td",
                 "ct_key", "replays", "fuse_pending", "build")

    def __init__(self, split, env, env_reads, plain_runtime, n_y, out_td, ct_td, ct_key,
                 fuse_pending):
        self.split, self.env, self.env_reads = split, env, env_reads
        self.plain_runtime, self.n_y, self.out_td = plain_runtime, n_y, out_td
        self.ct_td, self.ct_key = ct_td, ct_key
        self.replays = 0  # calls of the backward, counted towards fused loops
        self.fuse_pending = fuse_pending
        #: f's outputs from their leaves (aux data the function makes: new
        #: every call, :func:`~tapestry.jit.api.fresh_aux_builder`)
        from .containers import fresh_aux_builder
        self.build = fresh_aux_builder(out_td, env, None) or out_td.unflatten


#: Forward keys kept per jitted function (the oldest dropped past it).
_MAX_SPLIT_KEYS = 64


def _forward_key(jf, td, pos, plain):
    """The key of a forward: the arguments' structure (with its typed aux
    data and dict key orders, :func:`aux_key`), which leaves are traced,
    and the signature of the values (as jit's own), plus the
    objects among them (held, so their ids stay unique); ``None`` where
    a leaf is traced at another level."""
    sig = jf._signature_of(plain)
    if sig is None:
        return None, ()
    return (td, pos, sig[0], aux_key(td)), sig[2]


def _split_forward(jf, td, pos, plain):
    """``(split entry, f's output leaves, residuals)`` from the first split
    program of this signature whose environment and guards hold, or
    ``None`` (then the forward runs as ``jf``)."""
    key, _ = _forward_key(jf, td, tuple(pos), plain)
    got = jf._splits.get(key) if key is not None else None
    if got is None:
        return None
    for sp in got[0]:
        if len(sp.env) and sp.env.changed() is not None:
            continue  # the joint program traces again when it next runs
        try:
            outs = sp.split.forward.run(*[plain[i] for i in sp.plain_runtime])
        except GuardFailed:
            continue
        except Exception:  # the jitted f says what it is (or raises it)
            continue
        return sp, list(outs[:sp.n_y]), outs[sp.n_y:]
    return None


def _register(jf, bwd, joint_args):
    """After the joint program ran on these arguments: split its programs
    for this signature (once each) and keep them for the next forwards."""
    plain, cts, td, pos, out_td = joint_args
    ct_key = _ct_key(cts)
    if ct_key is None:
        return
    key, objects = _forward_key(jf, td, pos, plain)
    if key is None:
        return
    entries = []
    for comp in bwd._compiled_for(joint_args, {}):
        if comp.split is None:
            comp.split = _make_split(jf, comp, len(plain), ct_key) or False
            comp.traced = None  # (the trace is needed only to split it)
        if comp.split:
            entries.append(comp.split)
    if not entries:
        return
    splits = jf._splits
    old = splits.get(key)
    if old is not None and old[0] == entries:
        return
    splits[key] = (entries, objects)
    if len(splits) > _MAX_SPLIT_KEYS:
        try:
            del splits[next(iter(splits))]
        except (KeyError, StopIteration, RuntimeError):  # another thread was first
            pass


def _make_split(jf, comp, n_plain, ct_key):
    """The :class:`_SplitEntry` of one joint program, or ``None`` where its
    trace cannot be split (it writes into memory across the cut), with
    fused loops at once where ``jf`` fuses at its first call."""
    if comp.traced is None:
        return None
    (rec, input_slots, outputs, env_arrays, name), runtime = comp.traced
    known = [s for s, i in zip(input_slots, runtime) if i < n_plain]
    unknown = [s for s, i in zip(input_slots, runtime) if i >= n_plain]
    if len(unknown) != sum(k is not None for k in ct_key):
        return None
    ys, ct_tree = comp.out_td.unflatten(list(range(len(outputs))))
    y_leaves, out_td = tree_flatten(ys)
    ct_leaves, ct_td = tree_flatten(ct_tree)
    n_y = len(y_leaves)
    if y_leaves != list(range(n_y)) or ct_leaves != list(range(n_y, len(outputs))):
        return None
    halves = (rec, known, unknown, outputs[:n_y], outputs[n_y:], env_arrays, name)
    try:
        sp = split(*halves, fuse=jf._fuse is True)
    except Exception as e:  # numba could not compile a loop: lower without
        if jf._fuse is not True:
            return None  # (the lowering's own failure: the joint program stays)
        jf._warn_fuse(e)
        sp = split(*halves)
    if isinstance(sp, str):
        return None
    env_reads = [e for e in comp.env.arrays if id(e[0]) in sp.env_reads]
    plain_runtime = [i for i in runtime if i < n_plain]
    return _SplitEntry(sp, comp.env, env_reads, plain_runtime, n_y, out_td, ct_td, ct_key,
                       bool(jf._fuse))  # (fused already with fuse=True: compiled whole then)


def _ct_key(cts):
    """The signature of the cotangents (as jit's: shapes, dtypes, types;
    ``None`` for an output that got none), or ``None`` for one that is not
    an array or a number (a sparse one)."""
    key = []
    for c in cts:
        k = c.__class__
        if c is None:
            key.append(None)
        elif k is np.ndarray:
            key.append((c.shape, c.dtype))
        elif k is float or k is int or k is complex:
            key.append(k)
        elif isinstance(c, np.generic):
            key.append((k, c.dtype))
        else:
            return None
    return tuple(key)


def _vjp_at(fun, td, pos, plain, out_td, cts):
    """The pullback of ``fun`` at ``plain`` applied to ``cts`` (one cotangent
    per output leaf, ``None`` where it got none), as a tuple with one
    cotangent per traced leaf."""
    _, pb = vjp(of_leaves(fun, td, plain, pos), *[plain[i] for i in pos])
    return pb.given(list(cts))


def _backward(jf):
    """The jitted pullback program of ``jf`` (made once per jitted function;
    its closure holds ``jf.fun``, so the function's state is guarded)."""
    bwd = jf._reverse
    if bwd is None:
        jit = type(jf)  # (tapestry.jit: this module is imported by it)
        fun = jf.fun

        def pullback_at(plain, cts, td, pos, out_td):
            y, pb = vjp(of_leaves(fun, td, plain, pos), *[plain[i] for i in pos])
            return y, pb.given(list(cts))
        bwd = jit(pullback_at, static_argnums=(2, 3, 4),
                  max_traces=jf.max_traces, strict=jf.strict, fuse=jf._fuse,
                  fuse_after=jf.fuse_after)
        bwd._keep_trace = True  # split by _register
        jf._reverse = bwd
    return bwd
