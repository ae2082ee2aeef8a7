"""tools/run_autograd_suite.py on a small stand-in for autograd's tests/
folder (no network, no snapshot): autograd resolves to tapestry.autograd,
passes and failures are counted, and failures are grouped by cause."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_TEST = '''
import autograd
import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.test_util import check_grads
import tapestry.autograd, tapestry.numpy


def test_autograd_is_tapestry():
    assert autograd is tapestry.autograd and np is tapestry.numpy


def test_grad_passes():
    check_grads(lambda x: np.sum(np.sin(x) ** 2))(npr.randn(3))


def test_missing_rule_fails():
    from autograd.extend import primitive
    no_rule = primitive(lambda x: 2.0 * x)
    grad(no_rule)(1.0)
'''


def _runner():
    spec = importlib.util.spec_from_file_location("run_autograd_suite",
                                                  ROOT / "tools" / "run_autograd_suite.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runner_counts_and_groups(tmp_path, capsys):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_fake.py").write_text(FAKE_TEST)
    notes = tmp_path / "notes.md"
    rc = _runner().main([str(tests), "--notes", str(notes)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "2 of 3 applicable tests pass" in out
    text = notes.read_text()
    assert "is not differentiable in argument 0" in text
    assert "tests/test_fake.py::test_missing_rule_fails" in text


def test_without_tests_it_stops_and_says_how_to_get_them(monkeypatch, capsys):
    monkeypatch.delenv("AUTOGRAD_TESTS", raising=False)
    monkeypatch.delenv("AUTOGRAD_REPO", raising=False)
    assert _runner().main([]) == 2
    err = capsys.readouterr().err
    assert "git clone https://github.com/HIPS/autograd" in err
    assert "AUTOGRAD_TESTS" in err and "make autograd-suite" in err


def test_no_machine_specific_default_path():
    text = (ROOT / "tools" / "run_autograd_suite.py").read_text()
    assert "/work/" not in text and ".mirror" not in text


def test_a_missing_folder_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("AUTOGRAD_TESTS", raising=False)
    assert _runner().main([str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_argument_then_environment(tmp_path, monkeypatch):
    source_of_tests = _runner().source_of_tests
    env = {"AUTOGRAD_TESTS": str(tmp_path), "AUTOGRAD_REPO": str(ROOT)}
    assert source_of_tests(None, None, env) == ("tests", tmp_path)
    assert source_of_tests(None, None, {"AUTOGRAD_REPO": str(ROOT)}) == ("repo", ROOT)
    assert source_of_tests(str(ROOT / "tests"), None, env) == ("tests", ROOT / "tests")
    assert source_of_tests(None, str(ROOT), env) == ("repo", ROOT)


def test_tests_come_from_a_repository_head(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "autograd"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_fake.py").write_text(FAKE_TEST)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "tests"], check=True)
    subprocess.run(git + ["commit", "-qm", "tests"], check=True)
    work = tmp_path / "work"
    work.mkdir()
    tests = _runner().prepare(("repo", repo), work)
    assert (tests / "test_fake.py").read_text() == FAKE_TEST
    assert (work / "conftest.py").exists()
