"""The small JSONPath subset tools declare: ``$``, ``.key``, ``['key']``, ``[0]``, ``[*]``, ``.*`` and filters
``[?(@.a.b == '{argument}' && @.c != 'x')]`` (a filter on an optional argument that was not given is skipped)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CompiledPath", "PathError", "compile_path", "compiled"]


class PathError(ValueError):
    """A path outside the supported subset, or a reply without the shape a parser expects."""



_STEP = re.compile(
    r"""\.(?P<key>[A-Za-z_][\w-]*)
      |\.\*(?P<dotstar>)
      |\[\s*(?P<q>'[^']*'|"[^"]*")\s*\]
      |\[\s*(?P<idx>-?\d+)\s*\]
      |\[\s*\*\s*\](?P<star>)
      |\[\?\((?P<filter>.*?)\)\]""",
    re.X,
)
_COND = re.compile(r"^\s*@((?:\.[A-Za-z_][\w-]*|\['[^']*'\])+)\s*(==|!=)\s*('(?:[^']*)'|\"[^\"]*\"|-?\d+(?:\.\d+)?|true|false|null)\s*$")
_ARG = re.compile(r"\{([A-Za-z_]\w*)\}")


@dataclass(frozen=True)
class _Cond:
    path: tuple[str, ...]
    op: str
    literal: Any  # str (may hold {argument} placeholders), number, bool or None

    def arguments(self) -> list[str]:
        return _ARG.findall(self.literal) if isinstance(self.literal, str) else []


@dataclass(frozen=True)
class CompiledPath:
    text: str
    steps: tuple[tuple[str, Any], ...]

    def arguments(self) -> list[str]:
        out: list[str] = []
        for kind, value in self.steps:
            if kind == "filter":
                for cond in value:
                    out.extend(cond.arguments())
        return out

    def evaluate(self, doc: Any, args: Mapping[str, Any]) -> list[Any]:
        nodes = [doc]
        for kind, value in self.steps:
            nxt: list[Any] = []
            for node in nodes:
                if kind == "key":
                    if isinstance(node, dict) and value in node:
                        nxt.append(node[value])
                elif kind == "index":
                    if isinstance(node, list) and -len(node) <= value < len(node):
                        nxt.append(node[value])
                elif kind == "star":
                    nxt.extend(_children(node))
                elif kind == "filter":
                    conds = [c for c in value if all(args.get(a) is not None for a in c.arguments())]
                    nxt.extend(child for child in _children(node) if all(_holds(c, child, args) for c in conds))
            nodes = nxt
        return nodes


def _children(node: Any) -> list[Any]:
    if isinstance(node, list):
        return list(node)
    if isinstance(node, dict):
        return list(node.values())
    return []


def _holds(cond: _Cond, item: Any, args: Mapping[str, Any]) -> bool:
    value: Any = item
    for key in cond.path:
        if not isinstance(value, dict) or key not in value:
            return cond.op == "!="
        value = value[key]
    literal = cond.literal
    if isinstance(literal, str):
        literal = _ARG.sub(lambda m: str(args.get(m.group(1))), literal)
        equal = _as_text(value) == literal
    else:
        equal = value == literal
    return equal if cond.op == "==" else not equal


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def compile_path(text: str) -> CompiledPath:
    """Compile a JSONPath of the supported subset; raises :class:`PathError` naming the bad part."""
    if not isinstance(text, str) or not text.startswith("$"):
        raise PathError(f"path {text!r} must start with '$'")
    steps: list[tuple[str, Any]] = []
    pos = 1
    while pos < len(text):
        m = _STEP.match(text, pos)
        if not m:
            raise PathError(f"path {text!r}: cannot read {text[pos:]!r} (position {pos}); "
                             "supported: .key, ['key'], [0], [*], .*, [?(@.key == 'value')]")
        if m.group("key") is not None:
            steps.append(("key", m.group("key")))
        elif m.group("q") is not None:
            steps.append(("key", m.group("q")[1:-1]))
        elif m.group("idx") is not None:
            steps.append(("index", int(m.group("idx"))))
        elif m.group("star") is not None or m.group("dotstar") is not None:
            steps.append(("star", None))
        else:
            conds = []
            for part in m.group("filter").split("&&"):
                cm = _COND.match(part)
                if not cm:
                    raise PathError(f"path {text!r}: the filter condition {part.strip()!r} is not "
                                     "@.key == 'value' or @.key != 'value' (join several with &&)")
                keys = tuple(re.findall(r"\.([A-Za-z_][\w-]*)|\['([^']*)'\]", cm.group(1)))
                path = tuple(a or b for a, b in keys)
                lit_text = cm.group(3)
                literal: Any = lit_text[1:-1] if lit_text[0] in "'\"" else json.loads(lit_text)
                conds.append(_Cond(path, cm.group(2), literal))
            steps.append(("filter", tuple(conds)))
        pos = m.end()
    return CompiledPath(text, tuple(steps))


@functools.lru_cache(maxsize=512)
def compiled(text: str) -> CompiledPath:
    """A tool's path, compiled once (tools' paths are fixed; the file was validated at start)."""
    return compile_path(text)
