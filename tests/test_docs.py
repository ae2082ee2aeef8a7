"""The guides' code runs: every ```python block of README.md and docs/*.md,
blocks of one file in order in one namespace (a guide is read top to bottom)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


@pytest.mark.parametrize("path", [f for f in FILES if _blocks(f)], ids=lambda p: p.name)
def test_guide_code_runs(path):
    namespace = {"__name__": f"doc_{path.stem}"}
    for i, block in enumerate(_blocks(path)):
        code = compile(block, f"{path.name}[block {i}]", "exec")
        exec(code, namespace)  # noqa: S102  (our own documentation)


def test_one_line_descriptions_name_both_modes():
    """README, pyproject and the package docstring describe the same project
    (forward mode joined reverse mode; none of them may lag behind)."""
    import tomllib

    import tapestry
    readme = ROOT.joinpath("README.md").read_text()
    assert readme.splitlines()[3].startswith("make demo")
    assert readme.splitlines()[4].startswith("make test")
    first_para = readme.split("```\n\n", 1)[1].split("\n\n", 1)[0]
    meta = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["project"]
    for where, text in [("README.md", first_para), ("pyproject", meta["description"]),
                        ("tapestry.__doc__", tapestry.__doc__.splitlines()[0])]:
        assert "reverse- and forward-mode" in " ".join(text.lower().split()), where


def test_every_workload_is_described_in_the_repository():
    """benchmarks/README.md defines the workloads `tapestry bench` runs (each
    with its module and command), and nothing points to a file outside the
    repository instead."""
    from tapestry import cli
    text = ROOT.joinpath("benchmarks", "README.md").read_text()
    for name, bench in {**cli.BENCHES, **dict.fromkeys(cli.PLANNED)}.items():
        title = f"### {name.upper()}:"
        assert title in text, f"benchmarks/README.md has no section {title}"
        section = text.split(title, 1)[1].split("\n### ", 1)[0]
        assert f"`tapestry bench {name}`" in section
        if bench is not None:
            module = bench.target.split(":")[0].split(".")[-1]
            assert f"`{module}.py`" in section and (ROOT / "benchmarks" / f"{module}.py").exists()
    # src/tapestry/core/ is left out: its one mention is a comment, not docs.
    paths = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *ROOT.glob("docs/*.md"),
             *ROOT.glob("benchmarks/*.py"), *(p for p in ROOT.glob("src/tapestry/**/*.py")
                                             if "core" not in p.relative_to(ROOT).parts)]
    stale = [str(p.relative_to(ROOT)) for p in paths if "WORKLOADS.md" in p.read_text()]
    assert not stale, f"refer to benchmarks/README.md instead of WORKLOADS.md: {stale}"
