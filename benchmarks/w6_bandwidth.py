"""W6 at 100,000 groups under ``jit(value_and_grad(f), fuse=True)``: the fused
loop on 1 and 2 threads, the NumPy replay (``fuse=False``), and the floor the
memory sets: a compiled loop that only reads the three (G, 20) arrays the
call must read (x, y, c: 48 MB), on 1 and 2 threads.  Timed in turns
(medians): ``REPS=15 python -m benchmarks.w6_bandwidth``.

Where the fused loop on 2 threads takes about the floor's time, the call is
memory-bound and more cores on the same memory would not make it faster."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import tapestry as tp
from benchmarks._harness import interleaved_times
from benchmarks.w6_poisson import make_data, partial_loglik


def _read_floor():
    """``read(x, y, c, lo, hi)``: the sum of rows ``[lo, hi)`` of the three
    arrays (each element read once, nothing written; ``nogil``)."""
    from numba import njit

    @njit(nogil=True, cache=True)
    def read(x, y, c, lo, hi):
        acc = 0.0
        for i in range(lo, hi):
            for j in range(x.shape[1]):
                acc += x[i, j] + y[i, j] + c[i, j]
        return acc
    return read


def main(G=100_000):
    from tapestry.jit import fuse as fuse_mod
    data, u, a, b = make_data(G)
    vg = tp.value_and_grad(lambda u, a, b, d: partial_loglik(dict(d, u=u), a, b),
                           argnums=(0, 1, 2))
    fused, replay = tp.jit(vg, fuse=True), tp.jit(vg, fuse=False)
    fused(u, a, b, data)  # compiled with the default threads, as W6's bench does
    replay(u, a, b, data)
    read = _read_floor()
    x, y, c = data["x"], data["y"], data["c"]
    pool = ThreadPoolExecutor(1)

    def with_threads(n):
        def call():
            fuse_mod.THREADS = n
            return fused(u, a, b, data)
        return call

    def floor(n):
        if n == 1:
            return lambda: read(x, y, c, 0, G)
        return lambda: (pool.submit(read, x, y, c, 0, G // 2), read(x, y, c, G // 2, G))
    threads = fuse_mod.THREADS
    try:
        reps = int(os.environ.get("REPS", "15"))
        # (the floor in turns of its own: its pool's thread, in turns with the
        # fused loop's, took the loop on 2 threads from x1.74 to x1.27)
        t = interleaved_times([("fused 1 thread", with_threads(1)),
                               ("fused 2 threads", with_threads(2)),
                               ("replay", lambda: replay(u, a, b, data))], repeats=reps)
        t.update(interleaved_times([("read floor 1 thread", floor(1)),
                                    ("read floor 2 threads", floor(2))], repeats=reps))
    finally:
        fuse_mod.THREADS = threads
        pool.shutdown()
    print({k: round(v * 1e3, 2) for k, v in t.items()})
    mb = 3 * x.nbytes / 2 ** 20
    print(f"fused 2 threads x{t['fused 1 thread'] / t['fused 2 threads']:.2f} over 1 thread, "
          f"x{t['replay'] / t['fused 2 threads']:.2f} over the replay; the read floor "
          f"x{t['read floor 1 thread'] / t['read floor 2 threads']:.2f} over 1 thread "
          f"({mb / 1024 / t['read floor 2 threads']:.1f} GiB/s on 2 threads); fused 2 threads "
          f"= {t['fused 2 threads'] / t['read floor 2 threads']:.2f}x the floor", flush=True)
    assert np.isfinite(fused(u, a, b, data)[0])


if __name__ == "__main__":
    main()
