"""Run HIPS autograd's own test suite against ``tapestry.autograd``.

    python tools/run_autograd_suite.py TESTS_DIR [--junit FILE] [-k EXPR] [--notes FILE]
    python tools/run_autograd_suite.py --repo GIT_DIR ...

The tests are not part of this repository; get a copy of autograd first::

    git clone https://github.com/HIPS/autograd
    python tools/run_autograd_suite.py autograd/tests

TESTS_DIR is a copy of autograd's ``tests/`` folder (or ``$AUTOGRAD_TESTS``);
``--repo`` (or ``$AUTOGRAD_REPO``) names a git checkout or bare repository
instead, whose ``tests/`` at HEAD is extracted with ``git archive``.  One of
them is required (``make autograd-suite AUTOGRAD_TESTS=autograd/tests``).
Nothing is downloaded and nothing is installed: a ``conftest.py`` written
next to the copied tests maps every ``autograd.*`` module name onto
``tapestry.autograd.*`` before the tests import them.

Prints pass/fail counts over the applicable tests, the tests excluded (with
the reason) and each failure's first error line.  Exit status 0 if every
applicable test passed, 1 otherwise, 2 if the tests could not be found or run.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: How to get the tests, printed when none are given.
HOW_TO_GET = ("autograd's tests are not part of tapestry; get a copy with\n"
              "    git clone https://github.com/HIPS/autograd\n"
              "and pass its tests/ folder: python tools/run_autograd_suite.py autograd/tests\n"
              "(or AUTOGRAD_TESTS=autograd/tests; or --repo / AUTOGRAD_REPO=autograd to "
              "extract tests/ from a git repository's HEAD; with make: "
              "make autograd-suite AUTOGRAD_TESTS=autograd/tests)")

#: Excluded from the applicable count: (pytest node id or file, reason).
EXCLUDED = [
    ("tests/test_vspaces.py", "autograd-internal: the VSpace registry (vspace(), "
     "standard_basis, covector), which tapestry does not have"),
    ("tests/test_direct.py::test_deriv", "forward mode (deriv)"),
    ("tests/test_direct.py::test_holomorphic_grad", "complex holomorphic derivative "
     "(holomorphic_grad)"),
    ("tests/test_logic.py::test_no_jvp_def", "forward mode (deriv)"),
    ("tests/test_logic.py::test_unimplemented_falseyness", "autograd-internal: edits "
     "autograd.core.primitive_vjps, its rule registry"),
    ("tests/test_wrappers.py::test_make_jvp", "forward mode (make_jvp)"),
    ("tests/test_misc.py::test_const_graph", "autograd-only: counts how often "
     "const_graph reruns Python code (autograd replays a cached graph; tapestry "
     "retraces, with the same results)"),
    ("tests/test_misc.py::test_const_graph_args", "autograd-only: as test_const_graph"),
    ("tests/test_scipy.py::test_convolve_generalization", "autograd-only: "
     "autograd.scipy.signal.convolve's own axes=/dot_axes= extension, not SciPy's API"),
    ("tests/test_scipy.py::test_convolve_ignore", "autograd-only: as "
     "test_convolve_generalization (axes=)"),
    ("tests/test_scipy.py::test_convolve_ignore_dot", "autograd-only: as "
     "test_convolve_generalization (axes=, dot_axes=)"),
]

#: Mapped onto tapestry.autograd before any test module is imported.
CONFTEST = '''
import importlib, sys

_NAMES = ("", ".builtins", ".core", ".differential_operators", ".extend", ".tracer",
          ".wrap_util", ".test_util", ".misc", ".misc.flatten", ".misc.optimizers",
          ".misc.tracers", ".numpy", ".numpy.linalg", ".numpy.fft", ".numpy.random",
          ".util", ".scipy", ".scipy.special", ".scipy.stats", ".scipy.linalg",
          ".scipy.signal", ".scipy.integrate")
for _n in _NAMES:
    try:
        _mod = importlib.import_module("tapestry.autograd" + _n)
    except ImportError:  # SciPy absent: only the tests importing these fail
        if not _n.startswith(".scipy"):
            raise
        continue
    sys.modules["autograd" + _n] = _mod
# autograd-internal rule registry, imported by tests/test_logic.py; the one
# test that uses it is excluded (see EXCLUDED).
sys.modules["autograd.core"].primitive_vjps = {}
for _n in ("norm", "t", "gamma", "beta", "chi2", "poisson", "dirichlet",
           "multivariate_normal"):
    _mod = sys.modules.get("autograd.scipy.stats")
    if _mod is not None and hasattr(_mod, _n):
        sys.modules["autograd.scipy.stats." + _n] = getattr(_mod, _n)
'''


def extract_tests(repo, dest):
    """autograd's tests/ folder from the bare git snapshot ``repo``."""
    data = subprocess.run(["git", "-C", repo, "archive", "HEAD", "tests"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return Path(dest) / "tests"


class NoTests(Exception):
    """Neither a tests folder nor a repository was given, or it is missing."""


def source_of_tests(tests=None, repo=None, environ=os.environ):
    """``("tests", folder)`` or ``("repo", git dir)``: the argument first, then
    ``$AUTOGRAD_TESTS``, then ``$AUTOGRAD_REPO``; ``NoTests`` (saying how to
    get a copy) when none is given or the path does not exist."""
    for kind, path in (("tests", tests), ("repo", repo),
                       ("tests", environ.get("AUTOGRAD_TESTS")),
                       ("repo", environ.get("AUTOGRAD_REPO"))):
        if path:
            if not Path(path).exists():
                raise NoTests(f"{path} does not exist.\n{HOW_TO_GET}")
            return kind, Path(path)
    raise NoTests(f"no autograd tests given.\n{HOW_TO_GET}")


def prepare(source, workdir):
    """Copy of the tests under ``workdir``/tests with the shim conftest;
    ``source`` is what :func:`source_of_tests` returns."""
    kind, path = source
    tests = Path(workdir) / "tests"
    if kind == "repo":
        extract_tests(path, workdir)
    else:
        shutil.copytree(path, tests)
    (Path(workdir) / "conftest.py").write_text(CONFTEST)
    return tests


def run_pytest(workdir, junit, extra):
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--rootdir", str(workdir), "-c", os.devnull, "--junitxml", str(junit),
            "-W", "ignore", "--tb=short", "--continue-on-collection-errors", "tests"]
    for node, _ in EXCLUDED:
        args += ["--ignore" if "::" not in node else "--deselect", node]
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{workdir}")
    return subprocess.run(args + list(extra), cwd=workdir, env=env,
                          capture_output=True, text=True)


def _first_line(case):
    for tag in ("failure", "error"):
        el = case.find(tag)
        if el is not None:
            msg = (el.get("message") or el.text or "").strip().splitlines()
            return tag, (msg[0] if msg else "")[:200]
    return None, None


def summarize(junit):
    """(passed, [(test id, kind, first message line)], skipped) from junit XML."""
    passed, failed, skipped = 0, [], 0
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        kind, msg = _first_line(case)
        if kind:
            failed.append((tid, kind, msg))
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


_CAUSES = [  # (pattern in the first error line, cause); the first match wins
    (r"no gradient rule for the ufunc\.(\w+)", "missing rule: scipy.special.{0}"),
    (r"no gradient rule for ([\w.]*\w)", "missing rule: {0}"),
    (r"(np\.\w+) of a complex traced array", "missing rule: {0} of complex arrays"),
    (r"interleaved form", "missing: np.einsum's interleaved form (einsum(a, [0, 1], b, [1, 2]))"),
    (r"check of .* failed with arg .*\dj", "complex numbers: reverse-mode result differs from "
     "finite differences with complex inputs (autograd's convention)"),
    (r"check of", "wrong gradient (real inputs)"),
    (r"cannot convert a traced array", "core: a traced value converted with np.asarray/np.array "
     "(e.g. np.int64(x), a library that converts its input)"),
]
_BY_TEST = {  # causes the first error line does not show
    "test_custom_where_dtypes": "autograd.numpy deviates from NumPy here (np.where of "
                                "Python scalars returns a Python scalar, of lists a list); "
                                "tapestry.numpy keeps NumPy's behaviour",
    # combinations with complex arrays (the real ones pass); the first error
    # line shows only the real operand
    "test_kron": "complex numbers: reverse-mode result differs from finite differences "
                 "with complex inputs (autograd's convention)",
    "test_einsum_matmult": "complex numbers: reverse-mode result differs from finite "
                           "differences with complex inputs (autograd's convention)",
}


#: One line of advice printed under a cause in the notes (prefix match).
_ADVICE = {
    "complex numbers": "The check is autograd's (cotangents conjugated; JAX uses the same "
                       "convention). Today tapestry mixes conventions: grad(np.abs)(z) gives "
                       "z/|z| (autograd and JAX: conj(z)/|z|) while the VJP of z*z gives "
                       "g*2z (autograd's). Real-input combinations of the same tests pass.",
    "missing rule: scipy.special": "A scipy.special ufunc: a rule in tapestry/ops/special.py "
                       "reaches it through NEP 13 (refused by name today).",
    "missing rule: scipy.": "Not a ufunc: tapestry.autograd.scipy routes traced calls to "
                       "tapestry.core.registry.FUNCTIONS[<the SciPy function object>] "
                       "(e.g. @implements(scipy.linalg.sqrtm)); refused by name today.",
    "missing rule": "Refused by name (NotImplementedError), never silently wrong.",
    "core: a traced value converted": "tests/test_numpy.py::test_cast_to_int does "
                       "np.int64(W[:, -1]) on a traced W; an integer cast has a zero "
                       "derivative, so Var.__array__ could allow integer dtypes.",
}


def cause_of(tid, msg):
    """One line saying why test ``tid`` failed, from its first error line."""
    import re
    for key, cause in _BY_TEST.items():
        if f"::{key}" in tid:
            return cause
    for pattern, cause in _CAUSES:
        m = re.search(pattern, msg)
        if m:
            return cause.format(*m.groups())
    return f"other: {msg[:120]}"


def write_notes(path, passed, failed):
    """The failures grouped by cause, most frequent first (markdown)."""
    import time
    groups = {}
    for tid, kind, msg in failed:
        groups.setdefault(cause_of(tid, msg), []).append(tid)
    total = passed + len(failed)
    families = {}
    for cause, tids in groups.items():
        fam = cause.split(" (")[0].split(":")[0]
        if cause.startswith("missing rule: "):
            name = cause[len("missing rule: "):].split()[0]
            fam = "missing rules: " + ".".join(name.split(".")[:2] if name.startswith(
                ("np.fft", "np.linalg", "scipy.")) else ["np (other)"])
        families[fam] = families.get(fam, 0) + len(tids)
    lines = ["# HIPS autograd's test suite on tapestry.autograd: failures by cause",
             "",
             f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with "
             "`make autograd-suite` (tools/run_autograd_suite.py): "
             f"**{passed} of {total}** applicable tests pass, {len(failed)} fail; "
             f"{len(EXCLUDED)} exclusions (forward mode, complex holomorphic, "
             "autograd-internal or autograd-only API; listed at the end).", "",
             "Reproduce without make: `git clone https://github.com/HIPS/autograd`, then "
             "`PYTHONPATH=src python tools/run_autograd_suite.py autograd/tests --notes FILE`.",
             "",
             "By family: " + "; ".join(f"{k} {v}" for k, v in
                                       sorted(families.items(), key=lambda kv: -kv[1])) + ".",
             ""]
    for cause, tids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"## {cause} ({len(tids)})")
        advice = [a for k, a in _ADVICE.items() if cause.startswith(k)]
        lines += [f"_{advice[0]}_", ""] if advice else []
        lines += [f"- {t}" for t in sorted(tids)] + [""]
    lines.append("## Excluded (not counted)")
    lines += [f"- {node}: {why}" for node, why in EXCLUDED]
    Path(path).write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests", nargs="?", help="a copy of autograd's tests/ folder "
                    "(default: $AUTOGRAD_TESTS); get one with "
                    "`git clone https://github.com/HIPS/autograd`")
    ap.add_argument("--repo", help="instead of TESTS: a git repository of autograd "
                    "whose tests/ at HEAD is used (default: $AUTOGRAD_REPO)")
    ap.add_argument("--junit", help="keep the junit XML report here")
    ap.add_argument("-k", help="pytest -k expression (a subset)")
    ap.add_argument("--notes", help="write the failures grouped by cause (markdown) here")
    opts = ap.parse_args(argv)
    try:
        source = source_of_tests(opts.tests, opts.repo)
    except NoTests as e:
        print(f"run_autograd_suite: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="autograd-suite-") as tmp:
        prepare(source, tmp)
        junit = Path(opts.junit or Path(tmp) / "report.xml").resolve()
        proc = run_pytest(tmp, junit, ["-k", opts.k] if opts.k else [])
        if not junit.exists():
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n")
            return 2
        passed, failed, skipped = summarize(junit)
    for tid, kind, msg in failed:
        print(f"FAIL {tid}  [{kind}] {msg}")
    if opts.notes:
        write_notes(opts.notes, passed, failed)
    print("\nExcluded (not counted):")
    for node, why in EXCLUDED:
        print(f"  {node}: {why}")
    total = passed + len(failed)
    pct = 100.0 * passed / total if total else 0.0
    print(f"\nautograd suite on tapestry.autograd: {passed} of {total} applicable tests "
          f"pass ({pct:.1f}%), {len(failed)} fail, {skipped} skipped, "
          f"{len(EXCLUDED)} exclusions (listed above)")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
