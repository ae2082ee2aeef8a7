"""``python -m programs [name ...]`` from tests/: run the battery and print
one line per program (the report in notes/ is written from this output)."""
import sys
import time

from . import load
from . import runner
from .runner import classify


def main(names):
    reg = load()
    counts = {}
    for name, prog in reg.items():
        if names and not any(n in name for n in names):
            continue
        t = time.perf_counter()
        o = classify(prog)
        dt = time.perf_counter() - t
        counts[o.status] = counts.get(o.status, 0) + 1
        extra = f" | {o.reason}" + (f" @ {o.where}" if o.where else "") if o.reason else ""
        warn = f" | warnings: {'; '.join(o.warnings)}" if o.warnings else ""
        print(f"{o.status:12s} {prog.module.split('.')[-1]:12s} {name:32s} {dt:6.2f}s{extra}{warn}")
    print(counts, sum(counts.values()))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--allow-sparse" in argv:
        argv.remove("--allow-sparse")
        runner.ALLOW_SPARSE = True
    main(argv)
