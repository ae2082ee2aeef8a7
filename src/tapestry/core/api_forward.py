"""The forward-mode API: jvp, linearize, jacfwd.

Each traces ``f`` like the reverse API (:mod:`tapestry.core.tracing`) and
pushes tangents through the tape with :func:`tapestry.core.forward.forward_sweep`
(``jvp`` as each node is appended, so no primal intermediate is kept;
``linearize`` and ``jacfwd`` over a kept tape).  See docs/forward.md.
"""
from __future__ import annotations

import functools

import numpy as np

from .forward import UNDEFINED, ForwardComplexError, TangentRecorder, forward_sweep
from .batched import Batched
from .staged import Staged
from .pytree import leaf_paths, structure_mismatch, tree_flatten
from .tracing import (assemble, jac_setup, lower, own_output, require_complex, returned,
                      split_argnums, tapes_of, trace, unshared)
from .var import MASKED_HELP, Var, unwrap_all


class _Recorder(TangentRecorder):
    """A jvp tape's node list that knows the input tangents."""

    __slots__ = ("primal_tangents", "opname", "labels")

    def seed(self, records):
        for (td, rec), t, label in zip(records, self.primal_tangents, self.labels):
            for (i, x), ti in zip(rec, tangent_leaves(t, td, rec, self.opname, label)):
                self.tangents[i] = ti


def tangent_leaves(t, td, x_leaves, opname, label):
    """The leaves of tangent ``t`` for a primal of structure ``td`` whose
    leaves are ``x_leaves`` (``(tape position, value)`` pairs), each checked
    as JAX checks them: the same tree structure (a list or any array-like
    may stand for an array primal), the same shape, and a float tangent for a
    float primal (complex for complex), cast to the primal's precision.
    ``label`` names the argument in errors ("the tangent of argument 0")."""
    if td.is_leaf():
        leaves = [t]  # an array-like tangent for an array primal
    else:
        leaves, ttd = tree_flatten(t)
        if ttd != td:
            raise ValueError(
                f"tapestry.{opname}: {label} does not have its primal's tree structure "
                "(tangents are matched to primals by key and position, never by order "
                "alone); " + structure_mismatch(td, ttd, "the primal", "the tangent")
                + ". Build tangents with the primal's structure, e.g. "
                "tapestry.tree_map(np.ones_like, primal).")
    return [_as_tangent(ti, x, opname, label, td, j)
            for j, ((_, x), ti) in enumerate(zip(x_leaves, leaves))]


def _as_tangent(t, x, opname, label, td, j):
    """Tangent ``t`` of primal leaf ``x`` (leaf ``j`` of ``td``, named in
    errors): same shape, compatible dtype."""
    want = np.result_type(unwrap_all(x))
    if t.__class__ is Staged and np.result_type(t).kind in "biufc":
        # staged by jit: np.asarray would pin its value in the program; a
        # number becomes an array as below, as a step of the program
        if type(t._value) is not np.ndarray:
            t = t._rec.call(np.asarray, (t,), None)
    elif t.__class__ is not Var and t.__class__ is not Batched:
        if isinstance(t, np.ma.MaskedArray):  # np.asarray would drop its mask
            raise TypeError(f"tapestry.{opname}: {label}{_at(td, j)} {MASKED_HELP}")
        t = np.asarray(t)
    got = np.result_type(unwrap_all(t))
    if got.kind != want.kind or want.kind not in "fc" or np.shape(t) != np.shape(x):
        _refuse_tangent(t, x, got, want, opname, label + _at(td, j))
    if got != want:  # another precision of the same kind
        t = t.astype(want)
    return t


def _at(td, j):
    path = leaf_paths(td)[j]
    return f" at {path}" if path else ""


def _refuse_tangent(t, x, got, want, opname, where):
    if got.kind != want.kind or want.kind not in "fc":
        kind = "a complex" if want.kind == "c" else "a float"
        raise TypeError(
            f"tapestry.{opname}: {where} has dtype {got}, its primal {want}; a tangent "
            f"of a {want} primal must be {kind} array"
            + (" (casting it would drop its imaginary part)"
               if got.kind == "c" else "")
            + f". Pass e.g. np.ones_like(primal) or tangent.astype({want.name!r}).")
    raise ValueError(f"tapestry.{opname}: tangent shape {np.shape(t)} does not match "
                     f"primal shape {np.shape(x)} ({where}); a tangent has its "
                     "primal's shape.")


def _labels(n, what="the tangent of argument {}"):
    return [what.format(k) for k in range(n)]


def _raw(t):
    """The array under a traced, batched or staged value (every item's)."""
    while hasattr(t, "_value"):
        t = t._value
    return t


def _out_tangent(v, value, tape, tangents, batch=None, opname="jvp", allowed=(),
                 undefined_since=None):
    t = tangents[v._index] if v.__class__ is Var and v._tape is tape else None
    if t.__class__ is Var:
        returned(t, tape, opname, allowed)
    if undefined_since is not None and UNDEFINED[0] != undefined_since and t is not None \
            and not np.all(np.isfinite(_raw(t))):
        raise ValueError(f"{UNDEFINED[1]} (tapestry.{opname}: forward mode reached the "
                         "result through that derivative)")
    if t is None:
        lead = () if batch is None else (batch,)
        return np.zeros(lead + np.shape(value), np.result_type(unwrap_all(value)))
    if type(t) is np.ndarray and not t.flags.writeable:
        t = np.array(t)  # a broadcast view: give the caller its own array
    return t


def jvp(f, primals, tangents, has_aux=False):
    """Forward mode: ``(f(*primals), J v)`` for tangents ``v`` (JAX's jvp).

    ``primals`` and ``tangents`` are tuples of pytrees of the same structure
    (checked: the same keys, shapes, and float tangents for float primals);
    the output tangent has the output's.  The tangent of each operation is
    computed as it runs, so no intermediate is kept.
    """
    return forward_jvp(f, primals, tangents, has_aux, "jvp")


def forward_jvp(f, primals, tangents, has_aux, opname, labels=None):
    """:func:`jvp` for the transform called ``opname`` (errors name it);
    ``labels`` name each tangent in errors."""
    primals = _as_tuple(primals, "primals", opname)
    tangents = _as_tuple(tangents, "tangents", opname)
    if len(primals) != len(tangents):
        raise ValueError(f"tapestry.{opname}: {len(primals)} primals but {len(tangents)} "
                         "tangents; give one tangent per primal.")
    nodes = _Recorder()
    nodes.primal_tangents, nodes.opname = tangents, opname
    nodes.labels = labels or _labels(len(primals))
    since = UNDEFINED[0]
    tape, _, out_leaves, out_td, aux = trace(f, primals, opname, has_aux, nodes)
    values = [lower(v, tape, opname) for v in out_leaves]
    allowed = tapes_of(tree_flatten(list(tangents))[0])
    touts = [_out_tangent(v, x, tape, nodes.tangents, None, opname, allowed, since)
             for v, x in zip(out_leaves, values)]
    touts = unshared(touts, {}, tree_flatten(list(tangents))[0])  # no result aliases another
    y, ty = out_td.unflatten(values), out_td.unflatten(touts)
    return (y, ty, aux) if has_aux else (y, ty)


def _as_tuple(xs, what, opname):
    if not isinstance(xs, (tuple, list)):
        raise TypeError(f"tapestry.{opname}: {what} must be a tuple (or list) with one entry "
                        f"per argument of the function, got {type(xs).__name__}.")
    return tuple(xs)


class _Linearized:
    """``f_jvp`` of :func:`linearize`: pushes tangents through a kept tape."""

    def __init__(self, tape, records, out_leaves, out_td, opname="linearize"):
        self.tape, self.records = tape, records
        self.out_leaves, self.out_td = out_leaves, out_td
        self.opname = opname
        self.values = [lower(v, tape, opname) for v in out_leaves]

    def push_leaves(self, seeds, batch=None):
        """Output tangent leaves for ``{tape position: tangent}`` (tangents
        with a leading axis of length ``batch``, if given)."""
        tangents = [None] * len(self.tape.nodes)
        for i, t in seeds.items():
            tangents[i] = t
        since = UNDEFINED[0]
        forward_sweep(self.tape.nodes, tangents, batch=batch)
        allowed = tapes_of(seeds.values())  # traced tangents: f_jvp is differentiated
        return [_out_tangent(v, x, self.tape, tangents, batch, self.opname, allowed, since)
                for v, x in zip(self.out_leaves, self.values)]

    def largest(self):
        """The most elements of any value on the tape (sizes the batches)."""
        n = 1
        for node in self.tape.nodes:
            if node is not None:
                for a in (node[2] if node[2].__class__ is tuple else (node[2],)):
                    n = max(n, int(np.prod(getattr(a, "shape", ()), dtype=np.int64)))
        return n

    def __call__(self, *tangents):
        if len(tangents) != len(self.records):
            raise ValueError(f"tapestry.linearize: f_jvp takes {len(self.records)} "
                             f"tangents, got {len(tangents)}.")
        seeds = {}
        for k, ((td, rec), t) in enumerate(zip(self.records, tangents)):
            label = f"the tangent of argument {k} (given to f_jvp)"
            for (i, _), ti in zip(rec, tangent_leaves(t, td, rec, "linearize", label)):
                seeds[i] = ti
        given = tree_flatten(list(tangents))[0]
        return self.out_td.unflatten(unshared(self.push_leaves(seeds), {}, given))


def linearize(f, *primals, has_aux=False):
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP at
    ``primals``; the trace is kept, so each call costs one tangent sweep.
    ``f_jvp`` keeps the point it was built at: the caller's arrays (inputs
    and closed-over ones) are copied into the trace, so updating them in
    place later (an optimizer step) does not move it."""
    tape, records, out_leaves, out_td, aux = trace(f, primals, "linearize", has_aux,
                                                   keep=True)
    lin = _Linearized(tape, records, out_leaves, out_td)
    y = out_td.unflatten([own_output(v) for v in lin.values])
    return (y, lin, aux) if has_aux else (y, lin)


#: How many elements a batch of tangents may hold per value (jacfwd pushes
#: up to this many / the largest value's size basis vectors at once).
_BATCH_ELEMENTS = 1 << 22


def _columns(lin, i, x, chunk):
    """Per output leaf, the JVPs of every basis vector of input leaf ``x``
    (tape position ``i``), stacked on a leading axis; ``chunk`` at a time."""
    xs, dt = np.shape(x), np.result_type(x)
    n = int(np.prod(xs, dtype=np.int64))
    parts = []
    for s in range(0, n, chunk):
        b = min(chunk, n - s)
        seed = np.zeros((b, n), dt)
        seed[np.arange(b), s + np.arange(b)] = 1
        parts.append(lin.push_leaves({i: seed.reshape((b,) + xs)}, batch=b))
    cols = []
    for k, y in enumerate(lin.values):
        lead = np.zeros((0,) + np.shape(y), np.result_type(unwrap_all(y)))
        ps = [p[k] for p in parts]
        cols.append(lead if not ps else ps[0] if len(ps) == 1 else np.concatenate(ps))
    return cols


def jacfwd(f, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian by forward mode: one tangent sweep per input element, so
    it is the cheaper one when inputs are fewer than outputs (JAX's jacfwd).

    Pytrees in and out: the result has the output's structure, each leaf
    holding the input's structure (a tuple of them for tuple ``argnums``)
    with blocks of shape ``out_leaf.shape + in_leaf.shape``.
    ``holomorphic=True`` (JAX's flag) takes complex inputs (and requires
    them, and complex outputs): for a holomorphic ``f`` a real unit
    tangent's derivative is ``f'(z)``, the whole Jacobian.
    """
    return forward_jacobian(f, argnums, has_aux, "jacfwd", holomorphic)


def _refuse_complex_inputs(records, opname):
    """A Jacobian by forward mode pushes one real unit tangent per input
    element: for a complex input that is the derivative along the real axis
    only, the whole derivative of a holomorphic function but half of any
    other's (|z|², conj).  Refused, as JAX's jacfwd does without
    ``holomorphic=True``."""
    for _, rec in records:
        for _, x in rec:
            if np.result_type(unwrap_all(x)).kind == "c":
                raise ForwardComplexError(
                    f"tapestry.{opname}: complex inputs are not supported: forward mode "
                    "pushes real unit tangents, which see the real axis only. Use "
                    "tapestry.jacrev (tapestry.jacobian), tapestry.jvp with complex "
                    "directions, or split the input into real and imaginary parts.")


def forward_jacobian(f, argnums, has_aux, opname, holomorphic=False):
    """:func:`jacfwd` for the transform called ``opname`` (errors name it)."""
    split_argnums(argnums, opname)  # a bad argnums is refused here, not at the call

    @functools.wraps(f)
    def jacfwd_f(*args, **kwargs):
        single, nums, uniq, g, sel = jac_setup(f, argnums, args, kwargs, opname)
        if holomorphic:
            require_complex([args[a] for a in nums], opname, "inputs")
        tape, records, out_leaves, out_td, aux = trace(g, sel, opname, has_aux)
        if holomorphic:
            require_complex([lower(v, tape, opname) for v in out_leaves], opname, "outputs")
        else:
            _refuse_complex_inputs(records, opname)
        lin = _Linearized(tape, records, out_leaves, out_td, opname)
        blocks = [dict() for _ in out_leaves]
        chunk = max(1, _BATCH_ELEMENTS // lin.largest())
        for u, (td, rec) in enumerate(records):
            for j, (i, x) in enumerate(rec):
                xs = np.shape(x)
                for k, block in enumerate(_columns(lin, i, x, chunk)):
                    ys = np.shape(lin.values[k])
                    blocks[k][(u, j)] = np.reshape(np.moveaxis(block, 0, -1), ys + xs)
        kept = {}  # (x, x) gives both outputs one tangent sweep: no block aliases another
        for b in blocks:
            b.update(zip(b, unshared(list(b.values()), kept)))
        jac = assemble(nums, uniq, records, out_td, blocks, single)
        return (jac, aux) if has_aux else jac
    return jacfwd_f
