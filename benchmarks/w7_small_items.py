"""W7 -- many small items: W6's Poisson model at G = 1,000 groups written
item by item, as a new user first writes Stan's reduce_sum.

Each item is one group's data (20 observations ``x``, ``y``, the constant
``c = lgamma(y + 1)`` and ``j``, the index of its ``u``); ``group_logp``
is that group's log density plus its prior term.  Value+gradient w.r.t.
``(u, alpha, beta)``: a plain loop of ``value_and_grad`` calls over groups,
each executor item by item, each executor ``batched=True`` (groups stacked,
each chunk vectorized), and the vectorized single call.  Also the same work
written by hand in NumPy (no AD), item by item, in a loop and on two
threads: the engine's overhead per item is (tapestry serial - by hand) / G,
and the 2-thread ratio of the hand-written loop is this machine's ceiling
for this work.

Under ``tp.jit``: a loop of calls to one jitted ``value_and_grad`` of
``group_logp`` (every group has the same signature: one trace, then
replays), and the same loop split over two threads (each thread calls
the jitted function on half the groups); ``parallel_sum`` of the jitted
``group_logp`` (``grad(jit(f))`` per item: each item's forward and pullback
are replays), serial and on threads; and ``jit`` of the whole
``value_and_grad(parallel_sum(...))`` (the chunks traced into one program).
"""
from __future__ import annotations

import sys

import numpy as np

from benchmarks._harness import (blas_one_thread, compile_rows, interleaved_times, jit_compiled,
                                 jit_note, median_time, row)
from benchmarks.w6_poisson import make_data

G = 1000


def group_logp(g, u, alpha, beta):
    """One group's log density (its 20 observations) plus its prior term."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * uj * uj


def groups_logp(g, u, alpha, beta):
    """The same for a slice of groups stacked along axis 0 (batched)."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj[:, None]
    return np.sum(g["y"] * eta - np.exp(eta) - g["c"]) - 0.5 * np.sum(uj * uj)


def group_value_and_grad_by_hand(g, u, alpha, beta, gu):
    """``group_logp`` and its gradient in NumPy, ``u``'s part added into ``gu``."""
    uj = u[g["j"]]
    eta = alpha + beta * g["x"] + uj
    mu = np.exp(eta)
    r = g["y"] - mu
    gu[g["j"]] += np.sum(r) - uj
    return np.sum(g["y"] * eta - mu - g["c"]) - 0.5 * uj * uj, np.sum(r), np.sum(r * g["x"])


def by_hand(groups, u, alpha, beta):
    gu, v, ga, gb = np.zeros_like(u), 0.0, 0.0, 0.0
    for g in groups:
        dv, da, db = group_value_and_grad_by_hand(g, u, alpha, beta, gu)
        v, ga, gb = v + dv, ga + da, gb + db
    return v, (gu, ga, gb)


def make_items(n_groups=G, seed=0):
    data, u, a, b = make_data(n_groups, seed)
    stacked = dict(data, j=np.arange(n_groups))
    groups = [{"x": data["x"][i], "y": data["y"][i], "c": data["c"][i], "j": i}
              for i in range(n_groups)]
    return groups, stacked, u, a, b


def systems(tp, groups, stacked, u, a, b, jvg):
    """``[(name, fn)]``: every way of computing value+gradient compared here
    (``jvg``: the jitted ``value_and_grad`` of ``group_logp``, compiled)."""
    from concurrent.futures import ThreadPoolExecutor
    argnums = (0, 1, 2)

    def per_item():
        vg = tp.value_and_grad(group_logp, argnums=(1, 2, 3))
        v, gu, ga, gb = 0.0, np.zeros_like(u), 0.0, 0.0
        for g in groups:
            dv, (du, da, db) = vg(g, u, a, b)
            v, gu, ga, gb = v + dv, gu + du, ga + da, gb + db
        return v, (gu, ga, gb)

    def psum(ex, batched, chunk_size=None, f=None):
        items = stacked if batched else groups
        if f is None:
            f = groups_logp if batched else group_logp
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            f, items, u, a, b, executor=ex, batched=batched, chunk_size=chunk_size),
            argnums=argnums)

    vec = tp.value_and_grad(lambda u, a, b: groups_logp(stacked, u, a, b), argnums=argnums)
    pool = ThreadPoolExecutor(2)
    halves = [groups[0::2], groups[1::2]]

    def jit_loop(gs=groups):
        v, gu, ga, gb = 0.0, np.zeros_like(u), 0.0, 0.0
        for g in gs:
            dv, (du, da, db) = jvg(g, u, a, b)
            v, gu, ga, gb = v + dv, gu + du, ga + da, gb + db
        return v, (gu, ga, gb)

    def jit_threads():
        (v1, (gu1, ga1, gb1)), (v2, (gu2, ga2, gb2)) = pool.map(jit_loop, halves)
        return v1 + v2, (gu1 + gu2, ga1 + ga2, gb1 + gb2)
    out = [("plain loop of value_and_grad", per_item)]
    for batched in (False, True):
        for ex in ("serial", "threads", "processes"):
            fn = psum(ex, batched)
            out.append((f"tapestry {ex}{', batched' if batched else ''}",
                        lambda fn=fn: fn(u, a, b)))
    for ex in ("serial", "threads"):  # 4 chunks: a quarter of the engine's per-chunk cost
        fn = psum(ex, True, G // 4)
        out.append((f"tapestry {ex}, batched, chunk_size={G // 4}", lambda fn=fn: fn(u, a, b)))
    out += [("tapestry vectorized (one call)", lambda: vec(u, a, b)),
            ("numpy by hand (no AD), loop", lambda: by_hand(groups, u, a, b)),
            ("numpy by hand (no AD), 2 threads",
             lambda: list(pool.map(lambda gs: by_hand(gs, u, a, b), halves))),
            ("tapestry jit: loop of jitted value_and_grad", jit_loop),
            ("tapestry jit: 2 threads, each a loop of jitted calls", jit_threads)]
    # parallel_sum of a jitted item function: per chunk, one jitted value_and_grad per
    # item (NumPy replay), or with fuse=True one numba loop over the chunk's items
    from benchmarks._harness import optional
    fuses = (False, True) if optional("numba") is not None else (False,)
    for fuse in fuses:
        jitem = tp.jit(group_logp, fuse=fuse)
        for ex in ("serial", "threads"):
            fn = tp.value_and_grad(lambda u, a, b, ex=ex, j=jitem: tp.parallel_sum(
                j, groups, u, a, b, executor=ex), argnums=argnums)
            out.append((f"tapestry {ex}, f jitted{', fuse=True' if fuse else ''}",
                        lambda fn=fn: fn(u, a, b)))
    # batched chunks of a jitted f: one jitted value_and_grad call per chunk (with
    # fuse=True one whole-program kernel each), default chunks and chunks of G / 4
    for fuse in fuses:
        jbatch = tp.jit(groups_logp, fuse=fuse)
        for cs in (None, G // 4):
            for ex in ("serial", "threads"):
                fn = psum(ex, True, cs, jbatch)
                out.append((f"tapestry {ex}, batched{f', chunk_size={cs}' if cs else ''}, "
                            f"f jitted{', fuse=True' if fuse else ''}", lambda fn=fn: fn(u, a, b)))
    for ex in ("serial", "threads"):  # serial: traced inline; threads: one step of chunks
        whole = tp.jit(psum(ex, False), fuse=False)
        out.append((f"tapestry jit of value_and_grad(parallel_sum), {ex}",
                    lambda w=whole: w(u, a, b)))
    return [(name, blas_one_thread(fn)) for name, fn in out]


def main(quick=False, plot=False):
    import cloudpickle

    import tapestry as tp
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for worker processes
    groups, stacked, u, a, b = make_items()
    jvg = tp.jit(tp.value_and_grad(group_logp, argnums=(1, 2, 3)), fuse=False)
    info = jit_compiled(jvg, tp.value_and_grad(group_logp, argnums=(1, 2, 3)), groups[0], u, a, b)
    t = interleaved_times(systems(tp, groups, stacked, u, a, b, jvg), repeats=3 if quick else 7)
    case = f"G={G:,}"
    serial, batched = t["tapestry serial"], t["tapestry serial, batched"]
    hand, hand2 = t["numpy by hand (no AD), loop"], t["numpy by hand (no AD), 2 threads"]
    vec = t["tapestry vectorized (one call)"]
    rows = []
    for name, s in t.items():
        note = ""
        if name == "tapestry jit: loop of jitted value_and_grad":
            note = (f"x{t['plain loop of value_and_grad'] / s:.2f} vs the plain loop; "
                    f"{(s - hand) / G * 1e6:.1f} us per item over by hand; "
                    + jit_note(jvg))
        elif name == "tapestry jit: 2 threads, each a loop of jitted calls":
            note = f"x{t['tapestry jit: loop of jitted value_and_grad'] / s:.2f} vs its serial loop"
        elif name.startswith("tapestry") and "batched" in name and "f jitted" in name:
            base = t[name.replace("threads", "serial")]
            note = f"x{base / s:.2f} vs its serial, {s / vec:.1f}x the vectorized call"
        elif name.startswith("tapestry threads, f jitted"):
            base = t[name.replace("threads", "serial")]
            note = f"x{base / s:.2f} vs its serial, x{serial / s:.2f} vs tapestry serial"
        elif name == "tapestry jit of value_and_grad(parallel_sum), threads":
            base = t["tapestry jit of value_and_grad(parallel_sum), serial"]
            note = f"x{base / s:.2f} vs its serial"
        elif name == "tapestry serial":
            note = f"engine overhead {(serial - hand) / G * 1e6:.1f} us per item"
        elif name.startswith("tapestry") and "chunk_size" in name:
            base = t[f"tapestry serial, batched, chunk_size={G // 4}"]
            note = f"x{base / s:.2f} vs its serial, {s / vec:.1f}x the vectorized call"
        elif name.startswith("tapestry") and "batched" in name:
            note = f"x{batched / s:.2f} vs batched serial, {s / vec:.1f}x the vectorized call"
        elif name.startswith("tapestry") and name != "tapestry vectorized (one call)":
            note = f"x{serial / s:.2f} vs serial"
        elif name == "numpy by hand (no AD), 2 threads":
            note = f"x{hand / hand2:.2f} vs its loop: the 2-thread ceiling here"
        elif name == "plain loop of value_and_grad":
            note = f"tapestry serial is {serial / s:.3f}x this"

        rows.append(row("W7", case, name, s, note=note))
    best = min(t["tapestry threads"], t["tapestry processes"], serial)
    rows.append(row("W7", case, "engine overhead per item (serial - by hand) / G",
                    (serial - hand) / G))
    rows.append(row("W7", case, "best executor item by item vs 2-thread ceiling", None,
                    note=f"tapestry x{serial / best:.2f} vs serial; NumPy by hand "
                         f"x{hand / hand2:.2f} on 2 threads; ratio "
                         f"{(serial / best) / (hand / hand2):.2f}"))
    return rows + compile_rows("W7", case + " one group", info, one_group(jvg, groups[0], u, a, b))


def one_group(jvg, g, u, a, b):
    """Median time of one jitted call (one group), for the compile rows."""
    return median_time(blas_one_thread(lambda: jvg(g, u, a, b)), repeats=7)


if __name__ == "__main__":
    for r in main(quick="--quick" in sys.argv):
        ms = "" if r["time_s"] is None else f"{r['time_s'] * 1e3:9.3f} ms"
        print(f"{r['system']:<48} {ms:>12}  {r['note']}")
