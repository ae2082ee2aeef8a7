"""Plan (d), without numba: blocked NumPy evaluation under a memory budget.

The index space (output indices, then reduction indices) is cut into blocks
small enough that every temporary of the body -- evaluated by broadcasting
over one block -- stays under ``budget`` bytes; block results are reduced
and accumulated into the output.  Guards become masks.  Same results as the
numba plan up to float rounding; slower, but never the (i, j, k) temporary.
"""
from __future__ import annotations

import itertools
import os

import numpy as np

from .parse import refs
from .render import affine_src, render

#: bytes per temporary; override with TAPESTRY_KERNEL_BUDGET (bytes)
DEFAULT_BUDGET = 16 * 2**20

_HELPERS = {
    "np": np,
    "_sigmoid": lambda u: 1 / (1 + np.exp(-u)),
    "_relu": lambda u: np.maximum(u, 0 * u),
    "_square": lambda u: u * u,
}


def _dt_helpers(dt):
    one, half, zero = dt.type(1), dt.type(0.5), dt.type(0)
    return {
        "_step": lambda u: np.where(u > 0, one, zero),
        "_tie": lambda a, b: np.where(a > b, one, np.where(a == b, half, zero)),
        "_eq": lambda a, b: np.where(a == b, one, zero),
        "DT": dt.type,
    }


def budget():
    return int(os.environ.get("TAPESTRY_KERNEL_BUDGET", DEFAULT_BUDGET))


def block_sizes(sizes, itemsize, budget_bytes):
    """Halve the largest block until one block's temporary fits the budget."""
    blocks = list(sizes)
    limit = max(1, budget_bytes // itemsize)
    while int(np.prod(blocks, dtype=np.int64)) > limit and max(blocks) > 1:
        k = int(np.argmax(blocks))
        blocks[k] = (blocks[k] + 1) // 2
    return blocks


def _compile_body(ir, dtype):
    """A function ``body(R)`` of the list of rendered input blocks."""
    order = refs(ir.body)
    pos = {r: n for n, r in enumerate(order)}
    src = render(ir.body, lambda r: f"R[{pos[r]}]")
    env = dict(_HELPERS)
    env.update(_dt_helpers(np.dtype(dtype)))
    fn = eval(f"lambda R: {src}", env)  # source built from a parsed tree, not user text
    return fn, order


def _gather(a, origin, r, axis_of, starts, stops, nvars):
    """Input occurrence ``r`` over one block, broadcast to the block's axes."""
    idx = r[2]
    plain = all(len(t) == 1 and t[0][1] == 1 and c == 0 for t, c in idx)
    vs = [t[0][0] for t, _ in idx] if plain else None
    if plain and len(set(vs)) == len(vs):
        sl = tuple(slice(starts[v] - o, stops[v] - o) for v, o in zip(vs, origin))
        block = a[sl]
        order = sorted(range(len(vs)), key=lambda d: axis_of[vs[d]])
        block = np.transpose(block, order)
        shape = [1] * nvars
        for d in order:
            shape[axis_of[vs[d]]] = block.shape[order.index(d)]
        return block.reshape(shape), None
    grids = {}
    for v, ax in axis_of.items():
        shape = [1] * nvars
        shape[ax] = stops[v] - starts[v]
        grids[v] = np.arange(starts[v], stops[v]).reshape(shape)
    ix, ok = [], None
    for d, aff in enumerate(idx):
        e = eval(affine_src(aff, lambda v: f"G[{v!r}]"), {"G": grids}) - origin[d]
        inside = (e >= 0) & (e < a.shape[d])
        ok = inside if ok is None else ok & inside
        ix.append(np.clip(e, 0, max(a.shape[d] - 1, 0)))
    return a[tuple(ix)], ok


def run(ir, arrays, origins, ranges, dtype):
    """Evaluate ``ir`` block by block: returns ``(out, count)``."""
    dtype = np.dtype(dtype)
    body, order = _compile_body(ir, dtype)
    loop = list(ir.out_vars) + list(ir.red_vars)
    axis_of = {v: n for n, v in enumerate(loop)}
    sizes = [ranges[v][1] - ranges[v][0] + 1 for v in loop]
    shape = tuple(sizes[:len(ir.out_vars)])
    init = {"sum": 0.0, "max": -np.inf, "min": np.inf}[ir.reduce]
    out = np.full(shape, init, dtype=dtype)
    cnt = np.zeros(shape, dtype=np.int64)
    if any(s <= 0 for s in sizes):
        return out, cnt
    blocks = block_sizes(sizes, dtype.itemsize, budget())
    red_axes = tuple(range(len(ir.out_vars), len(loop)))
    arrays = {k: (a.astype(dtype) if a.dtype != dtype else a) for k, a in arrays.items()}
    starts_per_var = [range(ranges[v][0], ranges[v][1] + 1, b) for v, b in zip(loop, blocks)]
    for combo in itertools.product(*starts_per_var):
        starts = dict(zip(loop, combo))
        stops = {v: min(s + b, ranges[v][1] + 1) for (v, s), b in zip(starts.items(), blocks)}
        R, mask = [], None
        for r in order:
            name = r[1]
            a = arrays[name]
            g, ok = _gather(a, origins.get(name, (0,) * a.ndim), r, axis_of, starts,
                            stops, len(loop))
            R.append(g)
            if ok is not None:
                mask = ok if mask is None else mask & ok
        for aff, gv in ir.guards:
            grids = {}
            for v, ax in axis_of.items():
                sh = [1] * len(loop)
                sh[ax] = stops[v] - starts[v]
                grids[v] = np.arange(starts[v], stops[v]).reshape(sh)
            e = eval(affine_src(aff, lambda v: f"G[{v!r}]"), {"G": grids})
            ok = (e >= ranges[gv][0]) & (e <= ranges[gv][1])
            mask = ok if mask is None else mask & ok
        bshape = tuple(stops[v] - starts[v] for v in loop)
        val = np.broadcast_to(np.asarray(body(R), dtype=dtype), bshape)
        if mask is not None:
            val = np.where(mask, val, dtype.type(init))
        osl = tuple(slice(starts[v] - ranges[v][0], stops[v] - ranges[v][0])
                    for v in ir.out_vars)
        if ir.reduce == "sum":
            out[osl] += val.sum(axis=red_axes) if red_axes else val
            continue
        m = (val.max if ir.reduce == "max" else val.min)(axis=red_axes) if red_axes else val
        c = (val == m.reshape(m.shape + (1,) * len(red_axes)))
        if mask is not None:
            c = c & np.broadcast_to(mask, bshape)
        c = c.sum(axis=red_axes) if red_axes else c.astype(np.int64)
        old = out[osl]
        better = (m > old) if ir.reduce == "max" else (m < old)
        same = m == old
        cnt[osl] = np.where(better, c, np.where(same, cnt[osl] + c, cnt[osl]))
        out[osl] = np.where(better, m, old)
    return out, cnt
