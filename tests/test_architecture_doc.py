"""docs/architecture.md's module list is the source tree: every module and
package under src/tapestry is listed (one line each, with what it holds),
and nothing listed is missing from the tree.

The list is the fenced block that starts with ``src/tapestry/``: two spaces
of indentation per level, a name (``name/`` for a package, ``name.py`` for
a module), then its description.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tapestry"
DOC = ROOT / "docs" / "architecture.md"


def listed():
    """{path relative to src/tapestry (``core/``, ``core/tape.py``): description}."""
    block = re.search(r"```\n(src/tapestry/\n.*?)```", DOC.read_text(), re.S)
    assert block, "docs/architecture.md: no fenced block starting with src/tapestry/"
    entries, parents = {}, []
    for line in block.group(1).splitlines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0 and indent // 2 <= len(parents) + 1, f"bad indent: {line!r}"
        depth = indent // 2 - 1
        name, _, description = line.strip().partition(" ")
        assert name.endswith(("/", ".py")), f"not a module or package: {line!r}"
        assert description.strip(), f"no description: {line!r}"
        parents[depth:] = [name] if name.endswith("/") else []
        path = "".join(parents[:depth]) + name
        assert path not in entries, f"listed twice: {path}"
        entries[path] = description.strip()
    return entries


def existing():
    """Every package (``name/``) and module other than ``__init__.py``."""
    out = set()
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC)
        if "__pycache__" in rel.parts:
            continue
        if f.name != "__init__.py" or rel.parent == Path("."):
            out.add(rel.as_posix())
        out.update(p.as_posix() + "/" for p in rel.parents if p != Path("."))
    return out


def test_every_module_and_package_is_listed():
    missing = sorted(existing() - set(listed()))
    assert not missing, f"in src/tapestry but not in docs/architecture.md: {missing}"


def test_nothing_listed_is_missing_from_the_tree():
    stale = sorted(set(listed()) - existing())
    assert not stale, f"in docs/architecture.md but not in src/tapestry: {stale}"
