"""The rule registries: read-only after import, safe lazy loading, and an
acyclic import graph for the engine (issue: registries that really are
read-only, an acyclic core)."""
import ast
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapestry as tp
from tapestry.core.primitive import Primitive, implements
from tapestry.core.registry import RegistryFrozen

SRC = pathlib.Path(tp.__file__).parent


def test_registries_are_frozen_after_import():
    with pytest.raises(RegistryFrozen, match="custom_vjp"):
        implements(np.sin)(Primitive(np.sin, vjps=(lambda g, ans, x: g,)))


def test_lazy_rules_load_once_under_concurrent_first_use():
    """16 threads meet scipy.special.expit at once while its rules load
    slowly: none may miss them (the loader is done only after it ran)."""
    pytest.importorskip("scipy")
    code = textwrap.dedent("""
        import threading, time
        import numpy as np, scipy.special as sp
        import tapestry as tp
        from tapestry.core import registry
        real = registry._pending[0]
        def slow():
            time.sleep(0.2)
            real()
        registry._pending[0] = slow
        start, errors = threading.Barrier(16), []
        def worker():
            start.wait()
            try:
                g = tp.grad(lambda x: np.sum(sp.expit(x)))(np.zeros(3))
                assert np.allclose(g, 0.25)
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker) for _ in range(16)]
        [t.start() for t in threads]; [t.join() for t in threads]
        print(len(errors), errors[:1])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0 "), out.stdout


def _module_imports(path):
    """tapestry modules imported by ``path`` (AST, relative and absolute
    forms), as dotted names: at module level and inside functions alike (a
    function-level import is a dependency too, only a later one)."""
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        package = parts
    else:
        package = parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("tapestry"):
                names = [f"{mod}.{a.name}" for a in node.names]
                found.update(n if _exists(n) else mod for n in names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tapestry"))
    return {m for m in found if m != ".".join(parts)}


def _exists(dotted):
    p = SRC.parent.joinpath(*dotted.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _graph():
    graph = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts)
        graph[name] = _module_imports(path)
    return graph


def test_import_graph_is_acyclic():
    """No module-level import cycle anywhere in the package (a package's
    ``__init__`` importing its own submodules is not a cycle)."""
    graph = _graph()
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if d not in graph or d.startswith(m + "."):
                continue  # a package importing its own submodules
            if state.get(d) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack + [m, d]))
            if d not in state:
                visit(d, stack + [m])
        state[m] = "done"
    for m in graph:
        if m not in state:
            visit(m, [])


def test_core_imports_no_capability():
    """The engine (tapestry.core) imports only itself: rules, sparse,
    kernels and parallel plug into it, never the other way round."""
    for m, deps in _graph().items():
        if m.startswith("tapestry.core"):
            bad = [d for d in deps if not d.startswith("tapestry.core")]
            assert not bad, f"{m} imports {bad}"


def test_every_module_imports_on_its_own():
    """Each module imports in a fresh interpreter (sorted order, one
    process: tapestry's modules are purged before each import)."""
    names = sorted(_graph())
    code = textwrap.dedent(f"""
        import importlib, sys
        for name in {names!r}:
            for m in [m for m in sys.modules if m == "tapestry" or m.startswith("tapestry.")]:
                del sys.modules[m]
            importlib.import_module(name)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_a_rule_is_declared_once(monkeypatch):
    """Declaring a second rule for the same function raises instead of
    silently replacing the first (checked here on a private registry)."""
    from tapestry.core import registry
    monkeypatch.setattr(registry, "_frozen", False)
    table = {}
    registry.register(table, np.sin, "first")
    with pytest.raises(ValueError, match="declared twice"):
        registry.register(table, np.sin, "second")


def _layers():
    """module prefix -> layer number, from docs/architecture.md's ``layers`` block."""
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    block = re.search(r"```layers\n(.*?)```", doc, re.S)
    assert block, "docs/architecture.md: no ```layers block"
    layers = {}
    for line in block.group(1).splitlines():
        m = re.match(r"(\d+) .+?\s{2,}(tapestry.*)$", line)
        assert m, f"bad layer line: {line!r}"
        for prefix in m.group(2).split():
            layers[prefix] = int(m.group(1))
    return layers


def _layer_of(module, layers):
    """The layer of the longest listed prefix of ``module``."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in layers:
            return layers[".".join(parts[:n])]
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_imports_follow_the_documented_layers():
    """Every import (function-level ones included) goes to the importer's
    own layer or a lower one (docs/architecture.md, "Layers")."""
    layers = _layers()
    upward = [f"{m} (layer {_layer_of(m, layers)}) imports {d} (layer {_layer_of(d, layers)})"
              for m, deps in _graph().items() for d in deps
              if _layer_of(d, layers) > _layer_of(m, layers)]
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_two_primitives_share_a_name():
    """The search for duplicate rules: every Primitive defined at module
    level anywhere in tapestry, and every one in the registries, has a
    name of its own (two objects with one name are one function
    differentiated twice)."""
    from tapestry.coverage.table import primitives

    found = primitives()
    sites = {}
    for p in found:
        sites.setdefault(p.name, set()).add(f"{p.module}:{p.line}")
    twice = {n: s for n, s in sites.items() if len(s) > 1}
    assert len(found) > 300 and not twice, twice
