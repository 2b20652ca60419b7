"""The import graph of ``streameval`` has no cycle.

Every module of the package is parsed with :mod:`ast`; every ``import`` and ``from ...
import`` statement, at module level or inside a function, class or ``try`` block, is an
edge to the streameval module it names (relative imports resolved against the
importing module's package; ``from package import name`` is an edge to the submodule
``package.name`` when there is one, else to the package). The implicit import of a
parent package's ``__init__`` when a submodule is imported is not an edge: the
package's ``__init__`` modules import their submodules lazily or not at all, and the
layering is between modules. A cycle is reported with its modules in order.

The oracle is a brute force: a depth-first search for a back edge, checked on small
hand-made graphs with and without cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streameval

ROOT = Path(streameval.__file__).resolve().parent


def modules(root=ROOT):
    """``{module name: (path, is_package)}`` of every module under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _resolve(name, known):
    """The innermost known module that ``name`` (a dotted name) is, or is inside."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name, path, is_pkg, known):
    """``[(line, target module, inside a function)]`` for the streameval imports of a
    module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if is_pkg else name.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                           for a in child.names]
            for t in targets:
                if t == "streameval" or t.startswith("streameval."):
                    target = _resolve(t, known)
                    if target is not None and target != name:
                        found.append((child.lineno, target, inner))
            visit(child, inner)

    visit(tree, False)
    return found


def graph(root=ROOT):
    """``{module: {imported module: first line}}`` of the whole package."""
    known = modules(root)
    g = {}
    for name, (path, is_pkg) in known.items():
        edges = g.setdefault(name, {})
        for line, target, _ in imports_of(name, path, is_pkg, known):
            edges.setdefault(target, line)
    return g


def find_cycle(g):
    """One cycle of the directed graph ``g`` as ``[a, b, ..., a]``, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {v: WHITE for v in g}
    stack = []

    def dfs(v):
        color[v] = GREY
        stack.append(v)
        for w in sorted(g.get(v, ())):
            if color.get(w, WHITE) == GREY:
                return stack[stack.index(w):] + [w]
            if color.get(w, WHITE) == WHITE:
                found = dfs(w)
                if found:
                    return found
        stack.pop()
        color[v] = BLACK
        return None

    for v in sorted(g):
        if color[v] == WHITE:
            found = dfs(v)
            if found:
                return found
    return None


def test_find_cycle_on_hand_made_graphs():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None
    assert find_cycle({"x": {"y"}, "y": {"y"}}) == ["y", "y"]


def test_the_graph_sees_relative_and_in_function_imports(tmp_path):
    pkg = tmp_path / "streameval"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from streameval.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nfrom . import c\n")
    (pkg / "sub" / "c.py").write_text("import streameval.a\n")
    g = graph(pkg)
    assert g["streameval.a"] == {"streameval.sub.b": 2}
    assert g["streameval.sub.b"] == {"streameval.a": 1, "streameval.sub.c": 2}
    assert find_cycle(g) == ["streameval.a", "streameval.sub.b", "streameval.a"]


def test_streameval_has_no_import_cycle():
    g = graph()
    assert "streameval.cli" in g and "streameval.spark.replay" in g
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {g[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_library_and_the_spark_engine_never_import_the_cli():
    g = graph()
    for name, edges in g.items():
        if name != "streameval.__main__":
            assert "streameval.cli" not in edges, name
