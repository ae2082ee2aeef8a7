"""W4 heavy (64 MLPs, hidden 512): ``jit(value_and_grad(parallel_sum))`` serial
(BLAS on one thread) against threads, beside NumPy by hand in a loop and on two
threads, timed in turns (medians).  Run it under different allocator settings
(``MALLOC_ARENA_MAX``, ``TAPESTRY_TUNE_MALLOC=0``) or pinned to two cores
(``taskset``) to see what limits the thread speedup:
``REPS=9 python -m benchmarks.w4_heavy_threads``."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import tapestry as tp
from benchmarks._harness import blas_one_thread, interleaved_times
from benchmarks.w4_sum_over_models import make_models, mlp, mlp_value_and_grad_by_hand


def main():
    ms, x = make_models(64, 512)
    fns = {}
    for ex in ("serial", "threads"):
        def total(items, ex=ex):
            return tp.parallel_sum(mlp, items, x, executor=ex)
        j = tp.jit(tp.value_and_grad(total))
        j(ms)
        j(ms)
        fns[ex] = j
    pool = ThreadPoolExecutor(2)
    half = len(ms) // 2

    def hand(part=ms):
        return [mlp_value_and_grad_by_hand(m, x) for m in part]
    t = interleaved_times(
        [("jit serial", blas_one_thread(lambda: fns["serial"](ms))),
         ("jit threads", lambda: fns["threads"](ms)),
         ("hand loop", blas_one_thread(hand)),
         ("hand 2 threads", blas_one_thread(lambda: list(pool.map(hand, [ms[:half], ms[half:]]))))],
        repeats=int(os.environ.get("REPS", "9")))
    pool.shutdown()
    print({k: round(v * 1e3, 2) for k, v in t.items()},
          f"jit x{t['jit serial'] / t['jit threads']:.2f}",
          f"hand x{t['hand loop'] / t['hand 2 threads']:.2f}", flush=True)


if __name__ == "__main__":
    main()
