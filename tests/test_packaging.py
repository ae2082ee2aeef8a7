"""What `pip install tapestry` ships: the license, py.typed, metadata that
builds without deprecation banners."""
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_expression_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"                       # not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "the tapestry authors" in text
    # setuptools refuses License :: classifiers beside an SPDX expression
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    build = " ".join(PYPROJECT["build-system"]["requires"])
    assert "setuptools>=77" in build  # the first to read the SPDX form


def test_classifiers_match_the_project():
    project = PYPROJECT["project"]
    classifiers = set(project["classifiers"])
    low = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {low}" in classifiers
    assert ("Typing :: Typed" in classifiers) == (ROOT / "src/tapestry/py.typed").exists()


def test_py_typed_is_package_data():
    assert (ROOT / "src" / "tapestry" / "py.typed").exists()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["tapestry"]


def _setuptools_reads_spdx():
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


@pytest.mark.skipif(not _setuptools_reads_spdx(), reason="needs setuptools>=77 installed")
def test_wheel_builds_quietly_with_license_and_py_typed(tmp_path):
    """Built offline (no build isolation) from a copy, so the checkout gets
    no build/ or egg-info."""
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "deprecated" not in (r.stdout + r.stderr).lower(), r.stderr
    (wheel,) = out.glob("tapestry-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tapestry/py.typed" in names and "tapestry/__main__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA")))
    assert b"License-Expression: MIT" in meta
