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
