"""Runs benchmark modules and prints their rows side by side (a rich table
when installed, else plain aligned columns), with each system's time as a
ratio to tapestry's."""
from __future__ import annotations

import importlib.util
import json
import platform
import sys
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The peer libraries timed beside tapestry (pyproject's ``peers`` extra).
PEERS = ("torch", "jax", "autograd")
INSTALL_PEERS = ("`make bench` installs them (the `peers` extra), or run "
                 "`pip install -e '.[peers]'` in the source checkout")
#: Why ``tapestry bench`` from an installed wheel cannot run.
NEEDS_CHECKOUT = ("tapestry bench runs the modules in benchmarks/ of a source checkout "
                  "(they are not installed with the package): run it from the "
                  "checkout's root, for example with make bench, which also installs "
                  "the peers (PyTorch, JAX, HIPS autograd).")
#: ``plot`` value that also copies figures over the tracked docs/img/*.png
#: (``--publish-plots``); benchmarks/_harness.py's save_figure reads it.
PUBLISH = "publish"


def peer_installed(name):
    """Whether peer ``name`` is installed (found, not imported: importing
    torch or JAX here, before tapestry's own rows are timed, would load
    their thread pools into every measurement)."""
    return importlib.util.find_spec(name) is not None


def report_missing_peers(peers=PEERS):
    """Print, once, which peers the tables will lack and how to install
    them (the benchmarks skip an absent peer without a word); return them."""
    missing = [p for p in peers if not peer_installed(p)]
    if missing:
        print(f"tapestry bench: peers not installed: {', '.join(missing)}; their rows will "
              f"not appear. {INSTALL_PEERS}.")
    return missing


def _fmt_time(t):
    if t is None:
        return "-"
    return f"{t * 1e6:.1f} us" if t < 1e-3 else (f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.2f} s")


def _fmt_mem(b):
    return "-" if b is None else f"{b / 2**20:.1f} MiB"


def _ratios(rows):
    base = {}
    for r in rows:
        if r["system"].startswith("tapestry") and r["time_s"]:
            base.setdefault((r["workload"], r["case"]), r["time_s"])
    for r in rows:
        b = base.get((r["workload"], r["case"]))
        r["ratio_to_tapestry"] = (r["time_s"] / b) if (b and r["time_s"]) else None
    return rows


def run_benches(names, registry, load, quick=False, json_path=None, plot=False):
    """Run the workloads ``names`` and print their rows; ``plot`` is False,
    True (figures under benchmarks/results/) or PUBLISH (also docs/img/)."""
    if (REPO / "benchmarks").is_dir() and str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # a source checkout (not an installed wheel)
    unknown = [n for n in names if n not in registry]
    if unknown:
        print(f"tapestry bench: unknown workload(s) {unknown}; choose from {sorted(registry)}")
        return 2
    mains = []
    for n in names:  # every module first: a missing one stops before any timing
        try:
            mains.append(load(registry[n]))
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] == "benchmarks":
                print(f"tapestry bench: no benchmarks/ folder here. {NEEDS_CHECKOUT}")
            else:
                print(f"tapestry bench: {n} needs {e.name!r}; run from a source checkout "
                      "with `make bench` (installs the peers extra).")
            return 2
    report_missing_peers()
    rows = []
    for fn in mains:
        rows.extend(fn(quick=quick, plot=plot))
    rows = _ratios(rows)
    _print(rows)
    if json_path:
        meta = {"date": date.today().isoformat(), "machine": platform.platform(),
                "python": platform.python_version(), "cpus": _cpus()}
        Path(json_path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


def _cpus():
    import os
    return os.cpu_count()


def _print(rows):
    """The rows as one table (rich's, or plain aligned columns without rich)."""
    from .console import print_table
    cells = []
    for r in rows:
        ratio = r.get("ratio_to_tapestry")
        cells.append([r["workload"], str(r["case"]), r["system"], _fmt_time(r["time_s"]),
                      "-" if ratio is None else f"{ratio:.2f}", _fmt_mem(r["peak_bytes"]),
                      r.get("note", "")])
    print_table("tapestry bench (medians; ratio = time / tapestry's)",
                ("workload", "case", "system", "time", "x tapestry", "peak mem", "note"),
                cells)
