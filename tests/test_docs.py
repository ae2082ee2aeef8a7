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
