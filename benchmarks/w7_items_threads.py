"""W7 under ``jit(f, fuse=True)``: item by item and batched, serial against
threads, timed in turns (medians): ``REPS=9 python -m benchmarks.w7_items_threads``.
Item by item, every chunk runs in one compiled loop over the items stacked
once (one loop per thread with threads)."""
from __future__ import annotations

import os

import tapestry as tp
from benchmarks._harness import interleaved_times
from benchmarks.w7_small_items import group_logp, groups_logp, make_items


def main():
    groups, stacked, u, a, b = make_items()
    jitem, jbatch = tp.jit(group_logp, fuse=True), tp.jit(groups_logp, fuse=True)

    def vg(f, items, ex, batched, cs=None):
        return tp.value_and_grad(lambda u, a, b: tp.parallel_sum(
            f, items, u, a, b, executor=ex, batched=batched, chunk_size=cs), argnums=(0, 1, 2))
    fns = {"item serial": vg(jitem, groups, "serial", False),
           "item threads": vg(jitem, groups, "threads", False),
           "batched serial": vg(jbatch, stacked, "serial", True),
           "batched threads": vg(jbatch, stacked, "threads", True),
           "batched serial 250": vg(jbatch, stacked, "serial", True, 250),
           "batched threads 250": vg(jbatch, stacked, "threads", True, 250)}
    vec = tp.value_and_grad(lambda u, a, b: groups_logp(stacked, u, a, b), argnums=(0, 1, 2))
    systems = [(k, (lambda f=f: f(u, a, b))) for k, f in fns.items()]
    systems += [("vectorized", lambda: vec(u, a, b))]
    for _, s in systems:
        s()
        s()
    t = interleaved_times(systems, repeats=int(os.environ.get("REPS", "9")))
    print({k: round(v * 1e3, 3) for k, v in t.items()})
    print(f"item threads x{t['item serial'] / t['item threads']:.2f}; batched threads "
          f"x{t['batched serial'] / t['batched threads']:.2f} "
          f"({t['batched threads'] / t['vectorized']:.1f}x vectorized), 250: "
          f"x{t['batched serial 250'] / t['batched threads 250']:.2f} "
          f"({t['batched threads 250'] / t['vectorized']:.1f}x)", flush=True)


if __name__ == "__main__":
    main()
