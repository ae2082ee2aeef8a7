"""A core-only install (`pip install tapestry`, no extras), simulated by
making the extras' modules unimportable (``sys.modules[name] = None``): the
demos skip what they cannot run and say which extra to install, tables are
plain text without rich, and the warning without threadpoolctl fits the call."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

def _record_demos(monkeypatch):
    from tapestry import cli
    ran = []
    monkeypatch.setattr(cli, "_load", lambda target: lambda quick: ran.append(target))
    return cli, ran


@pytest.mark.parametrize("demo, module, extra", [("optimize", "scipy", "scipy"),
                                                 ("parallel", "cloudpickle", "processes"),
                                                 ("parallel", "loky", "processes")])
def test_demo_without_its_extra_is_skipped_with_one_line(monkeypatch, capsys, demo, module,
                                                         extra):
    cli, ran = _record_demos(monkeypatch)
    for other in {m for d in cli.DEMOS.values() for m in d.modules}:
        pytest.importorskip(other)   # (every other extra installed, as `make test` does)
    monkeypatch.setitem(sys.modules, module, None)   # import fails as if not installed
    assert cli.main(["demo", "all", "--quick"]) == 0
    out = capsys.readouterr().out
    skipped = [l for l in out.splitlines() if "skipped" in l]
    assert skipped == [f'tapestry demo {demo}: skipped, it needs {module} '
                       f'(pip install "tapestry[{extra}]")']
    assert cli.DEMOS[demo].target not in ran and len(ran) == len(cli.DEMOS) - 1
    assert cli.main(["demo", demo]) == 1            # asked for by name: not a success


def test_demo_extras_are_pyproject_extras():
    import tomllib

    from tapestry import cli
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for name, demo in cli.DEMOS.items():
        if demo.extra:
            deps = " ".join(extras[demo.extra]).lower()
            assert all(m in deps for m in demo.modules), name


def _hide_rich(monkeypatch):
    for name in ("rich", "rich.console", "rich.table"):
        monkeypatch.setitem(sys.modules, name, None)


def test_bench_table_without_rich_is_plain_and_aligned(monkeypatch, capsys):
    from tapestry import bench_runner
    _hide_rich(monkeypatch)
    rows = [{"workload": "W5", "case": "0-d", "system": "tapestry", "time_s": 2e-6,
             "peak_bytes": None, "note": ""},
            {"workload": "W5", "case": "10 elements", "system": "torch", "time_s": 3e-5,
             "peak_bytes": 2 ** 21, "note": "eager", "ratio_to_tapestry": 15.0}]
    bench_runner._print(rows)
    lines = capsys.readouterr().out.splitlines()
    assert "{" not in "".join(lines)
    header = lines[1]
    assert header.split() == ["workload", "case", "system", "time", "x", "tapestry",
                              "peak", "mem", "note"]
    body = lines[3:]
    assert len(body) == 2 and "15.00" in body[1] and "2.0 MiB" in body[1]
    col = header.index("system")
    assert [l[col:].split()[0] for l in body] == ["tapestry", "torch"]


def test_slide_report_without_rich_is_a_table(monkeypatch, capsys):
    from tapestry.examples import slide
    _hide_rich(monkeypatch)
    slide._report([{"n_classes": 1000, "slide_step_s": 1e-3, "slide_step_mean_s": 2e-3,
                    "slide_train_s": 1.5, "slide_p1": 0.5, "densify": {},
                    "dense_step_s": 4e-3, "dense_train_s": 6.0, "dense_p1": 0.6}])
    out = capsys.readouterr().out
    assert "{'" not in out and "1,000" in out and "0.500 / 0.600" in out
    assert out.splitlines()[1].split()[:3] == ["classes", "SLIDE", "step"]


def test_no_threadpoolctl_warning_names_the_executor_that_ran(monkeypatch):
    import warnings

    import numpy as np

    import tapestry as tp
    from tapestry.parallel import executors
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    for ex in ("serial", "threads"):
        monkeypatch.setitem(executors._blas, "controller", None)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            tp.parallel_sum(np.sum, np.ones((4, 2)), executor=ex)
        msgs = [str(w.message) for w in rec if "threadpoolctl" in str(w.message)]
        assert len(msgs) == 1 and f"this {ex} call runs BLAS" in msgs[0]
        assert "process" not in msgs[0]
    monkeypatch.setitem(executors._blas, "controller", None)


def test_no_threadpoolctl_warning_for_worker_processes_says_where_blas_is_unlimited(monkeypatch):
    import warnings

    from tapestry.parallel import executors
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        executors._warn_no_threadpoolctl("dask", in_this_process=False)
    (msg,) = [str(w.message) for w in rec]
    assert "any dask worker started without OPENBLAS_NUM_THREADS=1" in msg
