"""The import graph of some Python files, and its cycles (standard library only).

    python scripts/import_graph.py tests/fakes stages/cluster/ray_executor.py ...

Every ``import``/``from … import`` statement counts, also those inside functions (a lazy import
still makes the two modules depend on each other); only edges between the files given are kept.
Module names come from the path relative to the current directory (run it from the repository
root). Prints one ``module -> imported, …`` line per module, then each cycle (a strongly
connected component of more than one module, or a module that imports itself); exits 1 when
there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(paths: list[str]) -> dict[str, Path]:
    """module name → file, for every .py file under the given files and folders."""
    out: dict[str, Path] = {}
    for p in map(Path, paths):
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            out[module_name(f)] = f
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules that ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for t in targets:
            while t and t not in known:  # `import a.b.c` of a known a.b
                t = t.rpartition(".")[0]
            if t:
                out.add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
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
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph(paths: list[str]) -> dict[str, set[str]]:
    files = python_files(paths)
    return {m: imports_of(m, f, set(files)) for m, f in files.items()}


def main(argv: list[str]) -> int:
    graph = import_graph(argv)
    for m in sorted(graph):
        print(f"{m} -> {', '.join(sorted(graph[m])) or '(nothing here)'}")
    found = cycles(graph)
    for c in found:
        print(f"CYCLE: {' <-> '.join(c)}")
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
