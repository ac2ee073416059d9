"""No import circles: a module never imports, however indirectly, a module that imports it.

The graph is grimp's (import-linter's engine) of the whole ``arena`` package, and it counts every
import a module makes: at the top, inside functions (the lazy ones) and under ``TYPE_CHECKING``.
A circle that passes through a module of :data:`SCOPES` fails the test, naming its imports.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")

#: The packages that must stay free of circles (any module of a circle that touches them counts): all of them.
SCOPES = ("arena",)


def circles(graph, package: str = "arena") -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index or not root.startswith(package):
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _describe(graph, comp: list[str]) -> str:
    arrows = []
    for a in comp:
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            if b in comp:
                lines = sorted(d["line_number"] for d in graph.get_import_details(importer=a, imported=b))
                arrows.append(f"  {a} -> {b} (line {', '.join(map(str, lines))})")
    return "\n".join(arrows)


def test_no_module_of_arena_is_in_an_import_circle():
    graph = grimp.build_graph("arena", cache_dir=None)
    bad = [c for c in circles(graph) if any(m == s or m.startswith(s + ".") for m in c for s in SCOPES)]
    assert not bad, "import circles:\n" + "\n\n".join(_describe(graph, c) for c in bad)


def test_circles_finds_a_lazy_import_back(tmp_path, monkeypatch):
    # a -> b at the top, b -> a inside a function (and c, imported by both, in no circle)
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import circ.b\nimport circ.c\n")
    (pkg / "b.py").write_text("import circ.c\n\n\ndef f():\n    from circ import a\n    return a\n")
    (pkg / "c.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circ", cache_dir=None)
    assert circles(graph, "circ") == [["circ.a", "circ.b"]]
    assert "circ.b -> circ.a (line 5)" in _describe(graph, ["circ.a", "circ.b"])
