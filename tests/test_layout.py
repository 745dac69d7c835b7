"""The layout keeps its promises: plugins import only ``plexor``, no module imports itself in a circle, and
plugin modules and functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernel"
PLUGIN_SOURCES = sorted((ROOT / "plugins").glob("*/src"))


def _modules(base: Path) -> dict[str, Path]:
    found = {}
    for path in base.rglob("*.py"):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _load_time_imports(path: Path, module: str) -> set[str]:
    """Modules imported when ``module`` loads: top-level statements, not functions or TYPE_CHECKING blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(sub, ast.Import):
                out.update(alias.name for alias in sub.names)
            elif isinstance(sub, ast.ImportFrom):
                if sub.level:
                    base = package.rsplit(".", sub.level - 1)[0] if sub.level > 1 else package
                    name = f"{base}.{sub.module}" if sub.module else base
                else:
                    name = sub.module or ""
                out.add(name)
                out.update(f"{name}.{alias.name}" for alias in sub.names)
    return out


def _graph() -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    modules.update(_modules(KERNEL))
    for src in PLUGIN_SOURCES:
        modules.update(_modules(src))
    return {m: {i for i in _load_time_imports(p, m) if i in modules and i != m} for m, p in modules.items()}


def test_no_import_cycle_in_the_kernel_or_any_plugin():
    graph = _graph()
    assert "plexor.core.kernel" in graph and "plexor_arbor.plugin" in graph
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_shipped_plugins_import_only_the_plexor_package_from_the_kernel():
    offenders = []
    for src in PLUGIN_SOURCES:
        for path in src.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("plexor.")]
    assert offenders == [], "plugins must import from `plexor` only: " + ", ".join(offenders)


def test_the_kernel_core_stays_small():
    core = sorted((KERNEL / "plexor" / "core").glob("*.py"))
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in core}
    assert sum(lines.values()) <= 2500, lines
    assert max(lines.values()) <= 400, lines


# Every plugin of the repository is held to the sizes below (issue 24 item 6), a new one included.
SIZED_PLUGINS = tuple(sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()))
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _function_lengths(tree: ast.Module) -> list[tuple[str, int, int]]:
    """Every function and method as (qualified name, line of its ``def``, lines from ``def`` to the body's end)."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                found.append((name, child.lineno, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def test_plugin_sizes():
    too_long = []
    for plugin in SIZED_PLUGINS:
        src = ROOT / "plugins" / plugin / "src"
        assert src.is_dir(), f"{plugin} has no src folder at {src}"
        for path in sorted(src.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(ROOT)
            lines = len(text.splitlines())
            if lines > MAX_MODULE_LINES:
                too_long.append(f"{where}: {lines} lines (a module has at most {MAX_MODULE_LINES})")
            for name, line, length in _function_lengths(ast.parse(text)):
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{where}:{line} {name}: {length} lines (a function has at most {MAX_FUNCTION_LINES})")
    assert too_long == [], "split these along their seams:\n" + "\n".join(too_long)
