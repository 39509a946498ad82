"""The engine's structure: no module imports another in a circle, model files stay on the backend op set.

Imports are read from the source (``ast``), at module level and inside functions alike; imports under
``if TYPE_CHECKING:`` are left out, since they never run (they only name types for the checker).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """Engine modules ``path`` imports when it runs (relative imports resolved; ``from pkg import mod`` is an
    import of ``pkg.mod`` alone, as every import of a submodule runs its packages' ``__init__`` anyway)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names} & modules
            found.update(submodules)
            if len(submodules) < len(node.names):  # names defined in ``target`` itself
                found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    paths = sorted(ENGINE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): runtime_imports(p, modules) for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_no_engine_module_imports_another_in_a_circle():
    graph = import_graph()
    assert "engine.models.moonshine.live" in graph["engine.models.moonshine.model"]  # the graph sees imports
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_model_files_use_only_the_backend_op_set():
    """Under engine/models/ nothing imports MLX, reaches into a backend's array module or asks which backend
    it runs on: the backend owns those decisions."""
    bad = re.compile(r"import mlx|from mlx|\bB\.xp\b|\.xp\.|\bB\.name\s*[!=]=|backend\.name\s*[!=]=")
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted((ENGINE / "models").rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert hits == []
