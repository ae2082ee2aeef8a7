"""Command line: tapestry demo [NAME] and tapestry bench [WORKLOAD...].

Also reached as `python -m tapestry`.  The help text is plain text (argparse
prints it as it is), so it holds no reST markup.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from typing import NamedTuple

__all__ = ["main", "DEMOS", "BENCHES"]


class Demo(NamedTuple):
    """A demo: where it lives, one line for the help, and the extra (with the
    modules it brings) it cannot run without."""
    target: str
    summary: str
    extra: str | None = None
    modules: tuple = ()


#: demo name -> Demo; each capability registers its own demo.
DEMOS = {
    "mlp": Demo("tapestry.examples.mlp:main",
                "train a small MLP on two spirals (value_and_grad + optim.Adam)"),
    "optimize": Demo("tapestry.examples.optimize_fit:main",
                     "fit models with SciPy's optimizers, exact gradients and "
                     "Hessian-vector products", "scipy", ("scipy",)),
    "slide": Demo("tapestry.examples.slide:main",
                  "SLIDE: a training step costing O(active neurons) against a dense softmax"),
    "parallel": Demo("tapestry.parallel.demo:main",
                     "gradient of a sum over many models with parallel_sum on the serial, "
                     "thread and process executors", "processes", ("loky", "cloudpickle")),
    "kernels": Demo("tapestry.kernels.demo:main",
                    "index-notation kernels: their plans and a gradient step"),
    "vmap": Demo("tapestry.examples.per_example:main",
                 "per-example gradients with vmap(grad): DP-SGD's clipped, noisy mean"),
    "jit": Demo("tapestry.examples.jit_training:main",
                "a training loop under jit(value_and_grad): traced once, replayed as NumPy"),
    "jit_parallel": Demo("tapestry.examples.jit_parallel:main",
                         "parallel_sum of per-item code under jit: compiled items, one "
                         "numba loop per chunk, chunks on threads at every replay"),
}


class Bench(NamedTuple):
    """A workload of benchmarks/README.md: its module and one line for the help."""
    target: str
    summary: str


#: workload -> Bench, in the order make bench runs them; the modules live in
#: benchmarks/ of a source checkout.
BENCHES = {
    "w1": Bench("benchmarks.w1_sparse_slice:main",
                "sparse slice gradient (SLIDE): sum(W[S] @ x), W with 2^8..2^16 rows"),
    "w3": Bench("benchmarks.w3_unneeded_gradients:main",
                "unneeded gradients: sum(exp(w1 @ x + b1)) w.r.t. (w1, b1) only, then all"),
    "w5": Bench("benchmarks.w5_per_op_overhead:main",
                "per-operation overhead: 1,000 chained elementwise ops, 0-d and 10 elements"),
    "w4": Bench("benchmarks.w4_sum_over_models:main",
                "sum over 64 small MLPs: value+gradient serial, on each executor, batched"),
    "w6": Bench("benchmarks.w6_poisson:main",
                "hierarchical Poisson log-likelihood over group chunks (Stan's reduce_sum)"),
    "w7": Bench("benchmarks.w7_small_items:main",
                "W6's model item by item: parallel_sum over 1,000 one-group items"),
    "w2": Bench("benchmarks.w2_kernels:main",
                "index-notation kernels Linear, Dist, Laplace (784x1024 and 784x256 float32)"),
    "w8": Bench("benchmarks.w8_per_example:main",
                "vmap: per-example gradients (MLP 784-256-10), W7 and W4 written per item"),
}

#: Workloads of benchmarks/README.md without a module yet: named in the help.
PLANNED: dict = {}


def _load(target):
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)


def _listing(title, entries):
    """``title:`` and one entry a line, its text wrapped under itself."""
    width = max(len(n) for n in entries)
    lines = [textwrap.fill(f"  {n.ljust(width)}  {s}", 79, break_on_hyphens=False,
                           subsequent_indent=" " * (width + 4)) for n, s in entries.items()]
    return "\n".join([f"{title}:", *lines])


def _demo_list():
    return _listing("demos", {n: d.summary + (f" (needs the {d.extra} extra)" if d.extra else "")
                              for n, d in DEMOS.items()})


def _bench_list():
    return _listing("workloads (benchmarks/README.md)",
                    {n: BENCHES[n].summary if n in BENCHES else PLANNED[n]
                     for n in sorted({*BENCHES, *PLANNED})})


def _parser():
    from . import __version__
    from .bench_runner import NEEDS_CHECKOUT
    plain = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="tapestry", formatter_class=plain,
        description="tapestry: reverse- and forward-mode automatic differentiation for "
                    "NumPy code.\nRuns the demos and the benchmarks.",
        epilog=f"{_demo_list()}\n\n{_bench_list()}\n\n"
               "tapestry bench needs a source checkout (see tapestry bench --help).")
    p.add_argument("--version", action="version", version=f"tapestry {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="{demo,bench}")
    d = sub.add_parser("demo", help="run an end-to-end example (all of them by default)",
                       formatter_class=plain, epilog=_demo_list())
    d.add_argument("name", nargs="?", default="all", choices=["all", *DEMOS],
                   help="which demo (default: all)")
    d.add_argument("--quick", action="store_true", help="smaller sizes")
    b = sub.add_parser("bench", help="run benchmarks side by side with the peers "
                                     "(needs a source checkout)",
                       formatter_class=plain, description=textwrap.fill(NEEDS_CHECKOUT, 79),
                       epilog=_bench_list())
    b.add_argument("workloads", nargs="*", default=[],
                   help=f"a subset of {', '.join(sorted(BENCHES))} (default: all)")
    b.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    b.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    b.add_argument("--plot", action="store_true",
                   help="save plots under benchmarks/results/ (gitignored); "
                        "the tracked docs/img/*.png are left alone")
    b.add_argument("--publish-plots", action="store_true",
                   help="save plots as --plot does and also overwrite the tracked "
                        "docs/img/*.png that BENCHMARKS.md shows (implies --plot)")
    return p


def missing_extra(demo):
    """The first module of ``demo``'s extra that cannot be imported, or None."""
    for name in demo.modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def run_demos(name, quick=False):
    """Run demo ``name`` (or all); a demo whose extra is missing is skipped
    with one line naming the extra.  0 if every requested demo ran, else 1
    for a single named demo (``all`` skips and goes on, 0)."""
    names = list(DEMOS) if name == "all" else [name]
    skipped = 0
    for n in names:
        demo = DEMOS[n]
        missing = missing_extra(demo)
        if missing:
            print(f"tapestry demo {n}: skipped, it needs {missing} "
                  f"(pip install \"tapestry[{demo.extra}]\")", flush=True)
            skipped += 1
            continue
        _load(demo.target)(quick=quick)
    return 1 if skipped and name != "all" else 0


def main(argv=None):
    p = _parser()
    args = p.parse_args(argv)
    if args.cmd is None:
        p.print_help()
        return 0
    if args.cmd == "demo":
        return run_demos(args.name, args.quick)
    planned = [w for w in args.workloads if w in PLANNED]
    if planned:
        print(f"tapestry bench: {', '.join(planned)}: {PLANNED[planned[0]]} "
              "(see benchmarks/README.md)")
        return 2
    from .bench_runner import PUBLISH, run_benches
    plot = PUBLISH if args.publish_plots else args.plot
    return run_benches(args.workloads or list(BENCHES),
                       {n: b.target for n, b in BENCHES.items()}, _load,
                       quick=args.quick, json_path=args.json, plot=plot)


if __name__ == "__main__":
    sys.exit(main())
