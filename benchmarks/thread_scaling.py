"""Thread scaling of ``parallel_sum`` past two cores: W4 heavy (64 MLPs, hidden
512) under ``jit(value_and_grad(...))`` and eagerly, and W7 item by item under
``jit(f, fuse=True)``, each with 1, 2, 4, ... workers (up to the machine's
cores), timed in turns (medians), BLAS on one thread in every worker.
``REPS=7 python -m benchmarks.thread_scaling``; ``WORKERS=1,2,4`` picks the
counts.  Meant for machines with more than two cores: on the project's 2-core
VM it repeats what ``w4_heavy_threads`` and ``w7_items_threads`` show."""
from __future__ import annotations

import os

import tapestry as tp
from benchmarks._harness import blas_one_thread, interleaved_times
from benchmarks.w4_sum_over_models import make_models, mlp
from benchmarks.w7_small_items import group_logp, make_items


def worker_counts():
    if "WORKERS" in os.environ:
        return [int(n) for n in os.environ["WORKERS"].split(",")]
    cores, counts = os.cpu_count() or 1, [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    return counts


def w4_systems(counts):
    ms, x = make_models(64, 512)
    out = []
    for n in counts:
        def total(items, n=n):
            return tp.parallel_sum(mlp, items, x, executor="threads", n_workers=n)
        jitted, eager = tp.jit(tp.value_and_grad(total)), tp.value_and_grad(total)
        out += [(f"W4 heavy jit {n}", blas_one_thread(lambda j=jitted: j(ms))),
                (f"W4 heavy eager {n}", blas_one_thread(lambda e=eager: e(ms)))]
    return out


def w7_systems(counts):
    groups, _, u, a, b = make_items()
    item = tp.jit(group_logp, fuse=True)
    out = []
    for n in counts:
        vg = tp.value_and_grad(lambda u, a, b, n=n: tp.parallel_sum(
            item, groups, u, a, b, executor="threads", n_workers=n), argnums=(0, 1, 2))
        out.append((f"W7 items jit {n}", blas_one_thread(lambda vg=vg: vg(u, a, b))))
    return out


def main():
    counts = worker_counts()
    systems = w4_systems(counts) + w7_systems(counts)
    for _, s in systems:
        s()
        s()
    t = interleaved_times(systems, repeats=int(os.environ.get("REPS", "7")))
    print(f"cores {os.cpu_count()}, workers {counts}")
    for family in ("W4 heavy jit", "W4 heavy eager", "W7 items jit"):
        one = t[f"{family} {counts[0]}"]
        print(family + ": " + ", ".join(
            f"{n}: {t[f'{family} {n}'] * 1e3:.2f} ms (x{one / t[f'{family} {n}']:.2f})"
            for n in counts), flush=True)


if __name__ == "__main__":
    main()
