"""Drawing a tree as text: box drawing, roles, and truncation that never splits a character.

Pure functions over rows; no database. The rules:

* children under ``├── `` / ``└── ``, deeper levels indented with ``│   `` or
  four spaces;
* a node's role (``metadata.role``) as a prefix: ``User: Hello``;
* newlines shown as ``↵``;
* text longer than 60 characters cut to its first 57 characters plus ``...``,
  where a character is what a reader sees as one (a grapheme: an emoji with
  its modifiers, a flag, a letter with its accents), so the cut never splits
  one;
* external nodes as ``[source:identifier]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["LIMIT", "clip", "draw", "label"]

LIMIT = 60
KEEP = 57
NEWLINE = "↵"

_patterns: dict[int, Any] = {}


def _clusters(count: int) -> Any:
    """A compiled pattern matching exactly ``count`` grapheme clusters (user-perceived characters)."""
    pattern = _patterns.get(count)
    if pattern is None:
        import regex

        pattern = _patterns[count] = regex.compile(rf"\X{{{count}}}")
    return pattern


def clip(text: str, limit: int = LIMIT, keep: int = KEEP) -> str:
    """Newlines as ``↵``; longer than ``limit`` characters: the first ``keep`` plus ``...``."""
    if "\n" in text or "\r" in text:
        text = text.replace("\r\n", NEWLINE).replace("\n", NEWLINE).replace("\r", NEWLINE)
    if len(text) <= limit:
        # At most ``limit`` code points is at most ``limit`` graphemes.
        return text
    if text.isascii():
        return text[:keep] + "..."
    # Match the first ``keep`` characters, then check that more than ``limit - keep``
    # follow; neither step reads further into a long text than it must.
    head = _clusters(keep).match(text)
    if head is None:
        return text
    end = head.end()
    if _clusters(limit - keep + 1).match(text, end) is None:
        return text
    return text[:end] + "..."


def label(kind: str, role: str | None, content: str | None, handle: str | dict[str, Any] | None) -> str:
    """One node's line: ``Role: text`` or ``Role: [source:identifier]``."""
    if kind == "external":
        h = json.loads(handle) if isinstance(handle, str) else (handle or {})
        body = f"[{h.get('source', '?')}:{h.get('identifier', '?')}]"
    else:
        body = clip(content or "")
    if role:
        return f"{role[:1].upper()}{role[1:]}: {body}"
    return body


def draw(rows: Iterable[Any], start_seq: int, max_depth: int | None = None, root_seq: int | None = None) -> tuple[str, int]:
    """Draw the subtree under ``start_seq``; returns ``(text, nodes_drawn)``.

    ``rows`` are ``(seq, parent_seq, id, position, kind, role, content, handle, depth)``
    as :meth:`plexor_arbor.store.Store.subtree` returns them. Nodes deeper
    than ``max_depth`` are summarised under their parent (``… 3 more``).
    Iterative, so a conversation 10,000 messages deep draws as easily as a
    shallow one.
    """
    by_seq: dict[int, Any] = {}
    kids: dict[int, list[Any]] = {}
    for r in rows:
        by_seq[r[0]] = r
        if r[0] != start_seq and r[1] is not None:
            kids.setdefault(r[1], []).append(r)
    for siblings in kids.values():
        if len(siblings) > 1:
            siblings.sort(key=lambda r: r[3])
    start = by_seq.get(start_seq)
    if start is None:
        return "", 0
    lines: list[str] = []
    if start_seq == root_seq and start[4] == "text" and not start[6] and not start[5]:
        lines.append("(root)")
    else:
        lines.append(label(start[4], start[5], start[6], start[7]))
    drawn = 1
    # Stack of (prefix, children list, index); walks depth-first in sibling order.
    stack: list[tuple[str, list[Any], int]] = [("", kids.get(start_seq, []), 0)]
    append = lines.append
    while stack:
        prefix, siblings, i = stack[-1]
        if i >= len(siblings):
            stack.pop()
            continue
        stack[-1] = (prefix, siblings, i + 1)
        node = siblings[i]
        last = i == len(siblings) - 1
        depth = node[8]
        if max_depth is not None and depth > max_depth:
            # One summary line for the hidden level, then skip the rest of the siblings.
            hidden = len(siblings) - i
            append(f"{prefix}└── … {hidden} more {'children' if hidden != 1 else 'child'} below max_depth")
            stack[-1] = (prefix, siblings, len(siblings))
            continue
        append(f"{prefix}{'└── ' if last else '├── '}{label(node[4], node[5], node[6], node[7])}")
        drawn += 1
        children = kids.get(node[0])
        if children:
            stack.append((prefix + ("    " if last else "│   "), children, 0))
    return "\n".join(lines), drawn
