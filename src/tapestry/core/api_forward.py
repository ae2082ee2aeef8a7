"""The forward-mode API: jvp, linearize, jacfwd.

Each traces ``f`` like the reverse API (:mod:`tapestry.core.tracing`) and
pushes tangents through the tape with :func:`tapestry.core.forward.forward_sweep`
(``jvp`` as each node is appended, so no primal intermediate is kept;
``linearize`` and ``jacfwd`` over a kept tape).  See docs/forward.md.
"""
from __future__ import annotations

import functools

import numpy as np

from .forward import TangentRecorder, forward_sweep
from .pytree import tree_flatten
from .tracing import assemble, jac_setup, lower, returned, tapes_of, trace
from .var import Var, unwrap_all


class _Recorder(TangentRecorder):
    """A jvp tape's node list that knows the input tangents."""

    __slots__ = ("primal_tangents",)

    def seed(self, records):
        for (td, rec), t in zip(records, self.primal_tangents):
            for (i, x), ti in zip(rec, _tangent_leaves(t, td, x_leaves=rec)):
                self.tangents[i] = ti


def _tangent_leaves(t, td, x_leaves):
    leaves, ttd = tree_flatten(t)
    if len(leaves) != len(x_leaves) and len(x_leaves) == 1:
        leaves = [t]  # an array-like tangent for an array primal
    if len(leaves) != len(x_leaves):
        raise ValueError(f"tapestry.jvp: the tangent has {len(leaves)} leaves, the "
                         f"primal {len(x_leaves)}; give tangents the primals' structure.")
    out = []
    for (i, x), ti in zip(x_leaves, leaves):
        if ti.__class__ is not Var:
            ti = np.asarray(ti)
            if ti.dtype != np.result_type(x):
                ti = ti.astype(np.result_type(x))
        if np.shape(ti) != np.shape(x):
            raise ValueError(f"tapestry.jvp: tangent shape {np.shape(ti)} does not match "
                             f"primal shape {np.shape(x)}.")
        out.append(ti)
    return out


def _out_tangent(v, value, tape, tangents, batch=None, opname="jvp", allowed=()):
    t = tangents[v._index] if v.__class__ is Var and v._tape is tape else None
    if t.__class__ is Var:
        returned(t, tape, opname, allowed)
    if t is None:
        lead = () if batch is None else (batch,)
        return np.zeros(lead + np.shape(value), np.result_type(unwrap_all(value)))
    if type(t) is np.ndarray and not t.flags.writeable:
        t = np.array(t)  # a broadcast view: give the caller its own array
    return t


def jvp(f, primals, tangents, has_aux=False):
    """Forward mode: ``(f(*primals), J v)`` for tangents ``v`` (JAX's jvp).

    ``primals`` and ``tangents`` are tuples of pytrees of the same structure;
    the output tangent has the output's.  The tangent of each operation is
    computed as it runs, so no intermediate is kept.
    """
    primals, tangents = _as_tuple(primals, "primals"), _as_tuple(tangents, "tangents")
    if len(primals) != len(tangents):
        raise ValueError(f"tapestry.jvp: {len(primals)} primals but {len(tangents)} "
                         "tangents; give one tangent per primal.")
    nodes = _Recorder()
    nodes.primal_tangents = tangents
    tape, _, out_leaves, out_td, aux = trace(f, primals, "jvp", has_aux, nodes)
    values = [lower(v, tape, "jvp") for v in out_leaves]
    allowed = tapes_of(tree_flatten(list(tangents))[0])
    touts = [_out_tangent(v, x, tape, nodes.tangents, None, "jvp", allowed)
             for v, x in zip(out_leaves, values)]
    y, ty = out_td.unflatten(values), out_td.unflatten(touts)
    return (y, ty, aux) if has_aux else (y, ty)


def _as_tuple(xs, what):
    if not isinstance(xs, (tuple, list)):
        raise TypeError(f"tapestry.jvp: {what} must be a tuple (or list) with one entry "
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
        forward_sweep(self.tape.nodes, tangents, batch=batch)
        allowed = tapes_of(seeds.values())  # traced tangents: f_jvp is differentiated
        return [_out_tangent(v, x, self.tape, tangents, batch, self.opname, allowed)
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
        for (td, rec), t in zip(self.records, tangents):
            for (i, _), ti in zip(rec, _tangent_leaves(t, td, rec)):
                seeds[i] = ti
        return self.out_td.unflatten(self.push_leaves(seeds))


def linearize(f, *primals, has_aux=False):
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP at
    ``primals``; the trace is kept, so each call costs one tangent sweep."""
    tape, records, out_leaves, out_td, aux = trace(f, primals, "linearize", has_aux)
    lin = _Linearized(tape, records, out_leaves, out_td)
    y = out_td.unflatten(lin.values)
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


def jacfwd(f, argnums=0, has_aux=False):
    """The Jacobian by forward mode: one tangent sweep per input element, so
    it is the cheaper one when inputs are fewer than outputs (JAX's jacfwd).

    Pytrees in and out: the result has the output's structure, each leaf
    holding the input's structure (a tuple of them for tuple ``argnums``)
    with blocks of shape ``out_leaf.shape + in_leaf.shape``.
    """
    @functools.wraps(f)
    def jacfwd_f(*args, **kwargs):
        single, nums, uniq, g, sel = jac_setup(f, argnums, args, kwargs, "jacfwd")
        tape, records, out_leaves, out_td, aux = trace(g, sel, "jacfwd", has_aux)
        lin = _Linearized(tape, records, out_leaves, out_td, "jacfwd")
        blocks = [dict() for _ in out_leaves]
        chunk = max(1, _BATCH_ELEMENTS // lin.largest())
        for u, (td, rec) in enumerate(records):
            for j, (i, x) in enumerate(rec):
                xs = np.shape(x)
                for k, block in enumerate(_columns(lin, i, x, chunk)):
                    ys = np.shape(lin.values[k])
                    blocks[k][(u, j)] = np.reshape(np.moveaxis(block, 0, -1), ys + xs)
        jac = assemble(nums, uniq, records, out_td, blocks, single)
        return (jac, aux) if has_aux else jac
    return jacfwd_f

