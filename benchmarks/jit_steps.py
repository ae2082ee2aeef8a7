"""Where a ``tp.jit`` replay spends its time: each statement of the lowered
program timed on its own (medians over repeated calls).

    python -m benchmarks.jit_steps            # W4 at M=64, fuse=False
    python -m benchmarks.jit_steps --fuse     # the same with fused loops

The program is the one ``explain`` prints, recompiled with a clock read
around every statement; the timed calls go through the jit as usual (its
guards and environment checks run), so "whole call" includes them.  The
sum of the steps is a little above the whole call (the clock's own cost).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np


def step_times(jitted, *args, repeats=30, warmup=5):
    """``[(median seconds, statement)]`` for the program ``jitted`` replays
    for ``args``, and the median time of the whole call."""
    jitted(*args)
    jitted(*args)
    comp = next(iter(jitted._cache.values())).programs[0]
    prog = comp.program
    ns = dict(prog.run.__globals__)
    src = prog.source.splitlines()
    out, stmts = [src[0]], []
    for line in src[1:]:
        s = line.strip()
        if line.startswith("        ") or s.startswith(("del ", "if ", "return", "with ")):
            out.append(line)  # (a with-block's body is timed with the block)
            continue
        k = len(stmts)
        stmts.append(s)
        out += ["    _t = _pc()", line, f"    _T[{k}].append(_pc() - _t)"]
    ns["_pc"] = time.perf_counter
    ns["_T"] = [[] for _ in stmts]
    exec("\n".join(out), ns)
    name = src[0].split()[1].split("(")[0]
    run = prog.run
    prog.run = ns[name]
    try:
        for _ in range(warmup + repeats):
            jitted(*args)
    finally:
        prog.run = run
    steps = [(statistics.median(ts[warmup:]), s) for s, ts in zip(stmts, ns["_T"])]
    whole = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jitted(*args)
        whole.append(time.perf_counter() - t0)
    return steps, statistics.median(whole)


def main(fuse=False, M=64, hidden=64):
    import tapestry as tp
    from benchmarks.w4_sum_over_models import make_models, mlp
    ms, x = make_models(M, hidden)
    stacked = {k: np.stack([m[k] for m in ms]) for k in ms[0]}

    def total(p, x):
        return np.sum(tp.vmap(mlp, in_axes=(0, None))(p, x))
    steps, whole = step_times(tp.jit(tp.value_and_grad(total), fuse=fuse), stacked, x)
    for t, s in steps:
        print(f"{t * 1e3:8.3f} ms  {s[:120]}")
    print(f"{sum(t for t, _ in steps) * 1e3:8.3f} ms  sum of the steps")
    print(f"{whole * 1e3:8.3f} ms  whole call")


if __name__ == "__main__":
    main(fuse="--fuse" in sys.argv)
