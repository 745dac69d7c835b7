"""The kernel's size and shape figures that issue 24 sets targets for, measured from the source tree.

    python bench/kernel_size.py [--json]

Reports: lines of the kernel proper (``kernel/plexor`` without ``plexor/features``, the built-in feature
plugins and their machinery: all its lines, and those that hold code), modules over 400 lines and functions over 60 lines (kernel and shipped plugins),
``Any`` in the kernel (every ``Any`` name in annotations and code), and the kernel's import cycles
counting every import (module level, inside functions and under ``TYPE_CHECKING``), as strongly
connected components of the import graph. ``tests/test_layout.py`` uses the same graph (it imports
:func:`modules`, :func:`import_edges` and :func:`cycles` from here) to hold the kernel to its layers.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernel" / "plexor"
FEATURES = ("features",)  # issue 24: the built-in feature plugins (plexor/features/*), not the kernel proper
MODULE_LINES, FUNCTION_LINES = 400, 60


def modules(base: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted(base.rglob("*.py")):
        parts = [package, *path.relative_to(base).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_edges(path: Path, module: str, known: set[str] | dict[str, Path]) -> list[tuple[str, int]]:
    """The modules of ``known`` that ``module`` imports, wherever the import statement is (module level,
    inside functions, under ``TYPE_CHECKING``), each with the line of its statement.

    ``from package import submodule`` is an import of the submodule (the package's ``__init__`` runs for
    every import of one of its modules, and is not counted for ``import package.module`` either);
    ``from package import name`` of anything else is an import of the package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            name = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            submodules = [f"{name}.{alias.name}" for alias in node.names if f"{name}.{alias.name}" in known]
            out.extend((sub, node.lineno) for sub in submodules)
            if name in known and len(submodules) < len(node.names):
                out.append((name, node.lineno))
    return [(target, line) for target, line in out if target != module]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
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
                    out.append(sorted(component))
    return out


def _long_functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > FUNCTION_LINES]


def _any_count(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "Any") + sum(
        1 for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "Any")


def code_lines(path: Path) -> int:
    """Lines that hold code, as cloc counts them: not blank, not a comment, not part of a docstring."""
    text = path.read_text(encoding="utf-8")
    docs: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docs.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return sum(1 for number, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and number not in docs)


def measure() -> dict[str, object]:
    kernel = modules(KERNEL, "plexor")
    proper = {m: p for m, p in kernel.items() if m.split(".")[1:2] == [] or m.split(".")[1] not in FEATURES}
    plugins = {str(p.relative_to(ROOT)): p for p in sorted((ROOT / "plugins").glob("*/src/**/*.py"))}
    lines = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in [*kernel.values(), *plugins.values()]}
    graph = {m: {target for target, _ in import_edges(p, m, kernel)} for m, p in kernel.items()}
    found = cycles(graph)
    return {
        "kernel_lines": sum(lines[str(p.relative_to(ROOT))] for p in kernel.values()),
        "kernel_modules": len(kernel),
        "kernel_proper_lines": sum(lines[str(p.relative_to(ROOT))] for p in proper.values()),
        "kernel_proper_code_lines": sum(code_lines(p) for p in proper.values()),
        "modules_over_400": sorted((f, n) for f, n in lines.items() if n > MODULE_LINES),
        "functions_over_60": sorted(fn for p in [*kernel.values(), *plugins.values()] for fn in _long_functions(p)),
        "kernel_any": sum(_any_count(p) for p in kernel.values()),
        "kernel_cycles": found,
        "kernel_modules_in_cycles": sum(len(c) for c in found),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps(figures, indent=2))
        return
    print(f"kernel: {figures['kernel_lines']} lines in {figures['kernel_modules']} modules; "
          f"kernel proper (without {', '.join(FEATURES)}): {figures['kernel_proper_lines']} lines, "
          f"{figures['kernel_proper_code_lines']} of them code (not blank, comment or docstring)")
    print(f"Any in the kernel: {figures['kernel_any']}")
    print(f"kernel modules in import cycles (every import kind): {figures['kernel_modules_in_cycles']}")
    for cycle in figures["kernel_cycles"]:  # type: ignore[attr-defined]
        print("  cycle: " + " ".join(cycle))
    print(f"modules over {MODULE_LINES} lines:")
    for name, n in figures["modules_over_400"]:  # type: ignore[attr-defined]
        print(f"  {n:5d} {name}")
    print(f"functions over {FUNCTION_LINES} lines:")
    for name, n in figures["functions_over_60"]:  # type: ignore[attr-defined]
        print(f"  {n:5d} {name}")


if __name__ == "__main__":
    main()
