"""Command line: ``tapestry demo [NAME]`` and ``tapestry bench [WORKLOAD...]``."""
from __future__ import annotations

import argparse
import importlib
import sys

#: demo name -> "module:function"; each capability registers its own demo.
DEMOS = {
    "mlp": "tapestry.examples.mlp:main",
    "optimize": "tapestry.examples.optimize_fit:main",
    "slide": "tapestry.examples.slide:main",
    "parallel": "tapestry.parallel.demo:main",
    "kernels": "tapestry.kernels.demo:main",
}

#: workload -> "module:function" in benchmarks/ (run from a source checkout).
BENCHES = {
    "w1": "benchmarks.w1_sparse_slice:main",
    "w3": "benchmarks.w3_unneeded_gradients:main",
    "w5": "benchmarks.w5_per_op_overhead:main",
    "w4": "benchmarks.w4_sum_over_models:main",
    "w6": "benchmarks.w6_poisson:main",
    "w7": "benchmarks.w7_small_items:main",
    "w2": "benchmarks.w2_kernels:main",
}


def _load(target):
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)


def main(argv=None):
    p = argparse.ArgumentParser(prog="tapestry", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run an end-to-end example")
    d.add_argument("name", nargs="?", default="all", choices=["all", *DEMOS])
    d.add_argument("--quick", action="store_true", help="smaller sizes")
    b = sub.add_parser("bench", help="run benchmarks side by side with the peers")
    b.add_argument("workloads", nargs="*", default=[], help=f"subset of {sorted(BENCHES)}")
    b.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    b.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    b.add_argument("--plot", action="store_true",
                   help="save plots under benchmarks/results/ (gitignored); "
                        "the tracked docs/img/*.png are left alone")
    b.add_argument("--publish-plots", action="store_true",
                   help="save plots as --plot does and also overwrite the tracked "
                        "docs/img/*.png that BENCHMARKS.md shows (implies --plot)")
    args = p.parse_args(argv)
    if args.cmd == "demo":
        names = list(DEMOS) if args.name == "all" else [args.name]
        for n in names:
            _load(DEMOS[n])(quick=args.quick)
        return 0
    from .bench_runner import PUBLISH, run_benches
    plot = PUBLISH if args.publish_plots else args.plot
    return run_benches(args.workloads or list(BENCHES), BENCHES, _load,
                       quick=args.quick, json_path=args.json, plot=plot)


if __name__ == "__main__":
    sys.exit(main())
