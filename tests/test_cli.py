"""The command line: demos and benchmarks run and report."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "tapestry.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_demo_mlp_quick_prints_decreasing_loss():
    r = _run("demo", "mlp", "--quick")
    assert r.returncode == 0, r.stderr
    assert "loss" in r.stdout and "->" in r.stdout


def test_bench_w5_quick_writes_json_with_tapestry_rows(tmp_path):
    out = tmp_path / "w5.json"
    r = _run("bench", "w5", "--quick", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["cpus"] >= 1
    mine = [row for row in data["rows"] if row["system"] == "tapestry"]
    assert {row["case"] for row in mine} == {"0-d", "10 elements"}
    assert all(row["time_s"] > 0 for row in mine)


def test_bench_unknown_workload_is_a_clear_error():
    r = _run("bench", "w9")
    assert r.returncode == 2
    assert "unknown workload" in r.stdout and "w1" in r.stdout


def test_bench_help_says_where_plots_go():
    r = _run("bench", "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "benchmarks/results/" in text and "--publish-plots" in text
    assert "docs/img" in text


def _fake_bench(calls):
    def load(target):
        def main(quick=False, plot=False):
            calls.append((target, quick, plot))
            return [{"workload": "WX", "case": "c", "system": "tapestry", "time_s": 1e-3,
                     "peak_bytes": None, "note": ""}]
        return main
    return load


def test_bench_names_missing_peers_once_with_the_install_command(monkeypatch, capsys):
    from tapestry import bench_runner
    monkeypatch.setattr(bench_runner, "peer_installed", lambda name: name == "torch")
    calls = []
    registry = {"wa": "a", "wb": "b"}
    assert bench_runner.run_benches(["wa", "wb"], registry, _fake_bench(calls)) == 0
    out = capsys.readouterr().out
    assert [c[0] for c in calls] == ["a", "b"]
    assert out.count("peers not installed") == 1
    first = out.splitlines()[0]
    assert "peers not installed: jax, autograd;" in first
    assert "make bench" in first and "pip install -e '.[peers]'" in first


def test_bench_says_nothing_about_peers_when_all_are_installed(monkeypatch, capsys):
    from tapestry import bench_runner
    monkeypatch.setattr(bench_runner, "peer_installed", lambda name: True)
    assert bench_runner.run_benches(["wa"], {"wa": "a"}, _fake_bench([])) == 0
    assert "peers" not in capsys.readouterr().out


def test_peer_probe_tells_installed_from_absent_without_importing():
    from tapestry.bench_runner import peer_installed
    assert "tabnanny" not in sys.modules  # a stdlib module nothing here imports
    assert peer_installed("tabnanny") and "tabnanny" not in sys.modules
    assert not peer_installed("tapestry_no_such_peer_xyz")


def test_plot_flags_reach_the_benchmarks(monkeypatch):
    from tapestry import bench_runner, cli
    seen = []

    def run_benches(names, registry, load, **kw):
        seen.append(kw["plot"])
        return 0
    monkeypatch.setattr(bench_runner, "run_benches", run_benches)
    for flags in ([], ["--plot"], ["--publish-plots"]):
        assert cli.main(["bench", "w1", *flags]) == 0
    assert seen == [False, True, bench_runner.PUBLISH]


def test_plots_go_to_results_and_reach_docs_img_only_when_published(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    if str(ROOT) not in sys.path:
        monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import _harness
    from tapestry.bench_runner import PUBLISH
    results, img = tmp_path / "results", tmp_path / "img"
    monkeypatch.setattr(_harness, "RESULTS_DIR", results)
    monkeypatch.setattr(_harness, "DOCS_IMG", img)
    fig, ax = _harness.pyplot().subplots()
    ax.plot([0, 1], [1, 0])
    assert _harness.save_figure(fig, "a.png", True) == results / "a.png"
    assert (results / "a.png").stat().st_size > 0 and not img.exists()
    fig, _ = _harness.pyplot().subplots()
    _harness.save_figure(fig, "b.png", PUBLISH)
    assert (img / "b.png").read_bytes() == (results / "b.png").read_bytes()


def test_no_benchmark_writes_a_figure_but_through_the_harness():
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name == "_harness.py":
            continue
        text = path.read_text()
        assert "savefig" not in text and '"img"' not in text, path.name


def _python_m(*args):
    return subprocess.run([sys.executable, "-m", "tapestry", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_python_m_tapestry_version():
    import tapestry
    r = _python_m("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tapestry {tapestry.__version__}"


def test_bare_command_prints_help_not_an_error(capsys):
    from tapestry import cli
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: tapestry") and "demo" in out and "bench" in out
    assert "error" not in err + out


@pytest.mark.parametrize("argv", [[], ["demo"], ["bench"]])
def test_help_is_plain_text_and_describes_every_demo_and_workload(argv, capsys):
    from tapestry import cli
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and "`" not in out and ":func:" not in out
    lines = out.splitlines()
    names = ({} if argv == ["bench"] else cli.DEMOS).keys() | \
        ({} if argv == ["demo"] else {**cli.BENCHES, **cli.PLANNED}).keys()
    for name in names:
        line = next((l for l in lines if l.split()[:1] == [name]), None)
        assert line is not None and len(line.split()) > 3, f"{name} has no description"
    if argv != ["demo"]:
        assert "source checkout" in " ".join(out.split())
    assert {f"w{k}" for k in range(1, 9)} <= names or argv == ["demo"]


def test_bench_from_an_installed_wheel_says_it_needs_a_source_checkout(monkeypatch, capsys,
                                                                         tmp_path):
    from tapestry import bench_runner
    monkeypatch.setattr(bench_runner, "REPO", tmp_path)  # site-packages: no benchmarks/

    def load(target):
        raise ModuleNotFoundError("No module named 'benchmarks'", name="benchmarks")
    monkeypatch.setattr(bench_runner, "peer_installed", lambda name: False)
    assert bench_runner.run_benches(["wa"], {"wa": "benchmarks.x:main"}, load) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "source checkout" in out and "not installed with the package" in out
    assert "peers not installed" not in out  # beside the point without the modules
    assert str(tmp_path) not in sys.path


def test_planned_workload_is_named_not_unknown(capsys, monkeypatch):
    from tapestry import cli
    monkeypatch.setitem(cli.PLANNED, "w9", "a planned workload: not implemented yet")
    assert cli.main(["bench", "w9"]) == 2
    assert "not implemented yet" in capsys.readouterr().out

