"""The command line: demos and benchmarks run and report."""
import json
import subprocess
import sys
from pathlib import Path

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
