"""The package's import graph: no circle anywhere, no module over 700 lines (the layers themselves are
import-linter contracts in pyproject.toml, run by .ci/run)."""

from __future__ import annotations

from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 700


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_anywhere_in_the_package() -> None:
    graph = grimp.build_graph("gitledger", exclude_type_checking_imports=True)
    # a package's __init__ is not an edge of its own: 'gitledger.github' importing its submodules lazily
    # (the public face) and those submodules being inside it is containment, not a circle
    assert _cycles(graph) == []


def test_no_module_over_700_lines() -> None:
    files = (ROOT / "gitledger").rglob("*.py")
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in files}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
