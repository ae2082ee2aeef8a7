"""tools/run_autograd_suite.py on a small stand-in for autograd's tests/
folder (no network, no snapshot): autograd resolves to tapestry.autograd,
passes and failures are counted, and failures are grouped by cause."""
import importlib.util
from pathlib import Path

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
