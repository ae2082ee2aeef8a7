"""The Python cost of one cache-hit call of a jitted function.

A replayed call pays for flattening its arguments, building the cache key,
the environment checks, the program and rebuilding the outputs; for small
items (W7) that is most of its time, and it runs under the GIL, so threads
cannot overlap it.  Timed: W7's jitted ``value_and_grad(group_logp)``
(``fuse=False`` and ``fuse=True``), a 0-d ``x * y + 1``, a function of a
dict of 10 arrays, one of keyword arguments, and W5's jitted chains (where
the call is a small part): median microseconds per call.

``python -m benchmarks.jit_call_overhead`` times this checkout;
``--ab OLD_SRC`` times the tapestry under ``OLD_SRC`` (a ``src`` folder of
another checkout) against this one, in two worker processes called in turn
(the order swapped every repeat), medians over ``--repeats`` repeats
(``--only TEXT``: the cases whose name holds it).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CALLS = 2000


def _cases():
    """``{name: call()}``: each a warm jitted function and its arguments."""
    import numpy as np

    import tapestry as tp
    from benchmarks.w7_small_items import group_logp, make_items
    groups, _, u, a, b = make_items()
    cases = {}
    for fuse in (False, True):
        jvg = tp.jit(tp.value_and_grad(group_logp, argnums=(1, 2, 3)), fuse=fuse)
        g = groups[0]
        cases[f"W7 jvg fuse={fuse}"] = (lambda jvg=jvg, g=g: jvg(g, u, a, b))
    f0 = tp.jit(lambda x, y: x * y + 1)
    x, y = np.array(2.0), np.array(3.0)
    cases["0-d x*y+1"] = lambda: f0(x, y)
    fd = tp.jit(lambda d: d["a0"] + d["a1"] * d["a9"])
    d = {f"a{i}": np.full(3, float(i)) for i in range(10)}
    cases["dict of 10 arrays"] = lambda: fd(d)
    fk = tp.jit(lambda x, *, w, b: x * w + b)
    w, bias = np.full(3, 2.0), np.ones(3)
    cases["array + 2 by keyword"] = lambda: fk(x, w=w, b=bias)
    from benchmarks.w5_per_op_overhead import _cases as w5_cases
    from benchmarks.w5_per_op_overhead import chain
    for name, x0 in w5_cases().items():  # whole replays of 2,000 NumPy calls, or fused
        for fuse in (False, True):
            f = tp.jit(tp.value_and_grad(lambda x: np.sum(chain(x))), fuse=fuse)
            cases[f"W5 {name} fuse={fuse}"] = (lambda f=f, x0=x0: f(x0))
    for call in cases.values():  # trace, fuse, compile: all before timing
        for _ in range(30):
            call()
    return cases


def _per_call(call, calls=None):
    """Seconds per call of ``call()`` (``calls`` of them, or enough for ~20 ms)."""
    import gc
    if calls is None:
        t0 = time.perf_counter()
        call()
        calls = max(20, min(CALLS, int(0.02 / max(time.perf_counter() - t0, 1e-9))))
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - t0) / calls
    finally:
        gc.enable()


def worker():
    """Answer ``name`` lines on stdin with the per-call time of that case."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cases = _cases()
    print(json.dumps(list(cases)), flush=True)
    for line in sys.stdin:
        name = line.strip()
        print(json.dumps(_per_call(cases[name])), flush=True)


def _spawn(src):
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(root)]),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-m", "benchmarks.jit_call_overhead", "--worker"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                         cwd=root)
    names = json.loads(p.stdout.readline())
    return p, names


def _ask(p, name):
    p.stdin.write(name + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def ab(old_src, repeats=15, only=""):
    """``{case: (old median us, new median us)}``, the two interleaved
    (``only``: the cases whose name holds it)."""
    new_src = Path(__file__).resolve().parents[1] / "src"
    old, names = _spawn(old_src)
    new, _ = _spawn(new_src)
    names = [n for n in names if only in n]
    times = {n: ([], []) for n in names}
    try:
        for r in range(repeats):
            for n in names:
                order = ((0, old), (1, new)) if r % 2 == 0 else ((1, new), (0, old))
                for k, p in order:
                    times[n][k].append(_ask(p, n) * 1e6)
    finally:
        for p in (old, new):
            p.stdin.close()
            p.wait()
    return {n: (statistics.median(o), statistics.median(w)) for n, (o, w) in times.items()}


def main(argv):
    if "--worker" in argv:
        return worker()
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 15
    if "--ab" in argv:
        only = argv[argv.index("--only") + 1] if "--only" in argv else ""
        res = ab(argv[argv.index("--ab") + 1], repeats, only)
        print(f"{'case':<24} {'old us':>9} {'new us':>9} {'new/old':>8}")
        for n, (o, w) in res.items():
            print(f"{n:<24} {o:9.2f} {w:9.2f} {w / o:8.2f}")
        return
    cases = _cases()
    for n, call in cases.items():
        t = statistics.median(_per_call(call) for _ in range(repeats))
        print(f"{n:<24} {t * 1e6:9.2f} us")


if __name__ == "__main__":
    main(sys.argv[1:])
