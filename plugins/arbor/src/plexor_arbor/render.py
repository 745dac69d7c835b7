"""Drawing a tree as text: box drawing, roles, escaping, truncation that never splits a character, pages.

Pure functions over rows; no database. The rules:

* children under ``├── `` / ``└── ``, deeper levels indented with ``│   `` or
  four spaces;
* a long chain (each node the only child of the one before, the usual shape
  of a conversation) is indented for its first :data:`CHAIN_INDENT` levels;
  after that each only child is drawn under its parent as ``↳ text``, without
  indenting further, so a chain of 10,000 messages stays as wide as one of
  four. Indentation never exceeds :data:`MAX_INDENT` levels: deeper lines are
  drawn at that width with their depth, ``⟨depth 130⟩``;
* a node's role (``metadata.role``) as a prefix: ``User: Hello``;
* newlines shown as ``↵``; every other control character, line or paragraph
  separator and bidirectional override shown escaped (``\\x1b``, ``\\u2028``),
  so no text can start a line of its own or draw over another;
* text longer than 60 characters cut to its first 57 characters plus ``...``,
  where a character is what a reader sees as one (a grapheme: an emoji with
  its modifiers, a flag, a letter with its accents), so the cut never splits
  one;
* external nodes as ``[source:identifier]``.

A drawing is produced a page at a time (:func:`draw_page`): the layout walks
the tree's shape only, and the text of a line is asked for only when the line
is on the page, so a page costs memory in proportion to what it shows.
"""

from __future__ import annotations

import json
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plexor_arbor.rows import SubtreeRow

__all__ = ["CHAIN_INDENT", "FETCH", "LIMIT", "MAX_INDENT", "Page", "clip", "draw", "draw_page", "escape", "label"]

LIMIT = 60
KEEP = 57
NEWLINE = "↵"
FETCH = 1024  # characters of a text read to draw its line (enough for 60 characters of any real text)
CHAIN_INDENT = 3
MAX_INDENT = 24
FLAT = "↳ "

_patterns: dict[int, Any] = {}
# C0 and C1 controls (NEL, VT, ESC, ...), DEL, the line and paragraph separators, the bidirectional
# marks, embeddings, overrides and isolates, and the byte-order mark.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\t":
        return "\\t"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every character that could break or fake a line of the drawing escaped."""
    if text.isprintable():  # no control, separator or format character at all: the usual case
        return text
    return _UNSAFE.sub(_escaped, text)


def _clusters(count: int) -> Any:
    """A compiled pattern matching exactly ``count`` grapheme clusters (user-perceived characters)."""
    pattern = _patterns.get(count)
    if pattern is None:
        import regex

        pattern = _patterns[count] = regex.compile(rf"\X{{{count}}}")
    return pattern


def clip(text: str, limit: int = LIMIT, keep: int = KEEP, *, more: bool = False) -> str:
    """Newlines as ``↵``; longer than ``limit`` characters: the first ``keep`` plus ``...``.

    ``more`` says ``text`` is only the start of a longer text (so it is cut in any case).
    """
    if "\n" in text or "\r" in text:
        text = text.replace("\r\n", NEWLINE).replace("\n", NEWLINE).replace("\r", NEWLINE)
    if len(text) <= limit and not more:
        # At most ``limit`` code points is at most ``limit`` graphemes.
        return text
    if text.isascii():
        return text[:keep] + "..."
    # Match the first ``keep`` characters, then check that more than ``limit - keep``
    # follow; neither step reads further into a long text than it must.
    head = _clusters(keep).match(text)
    if head is None or (more and head.end() == len(text)):
        if not more:
            return text
        import regex

        # Fewer than ``keep`` whole characters in the part read: drop the last, which may be cut.
        return "".join(regex.findall(r"\X", text)[:-1][:keep]) + "..."
    end = head.end()
    if not more and _clusters(limit - keep + 1).match(text, end) is None:
        return text
    return text[:end] + "..."


def label(kind: str, role: str | None, content: str | None, handle: str | dict[str, Any] | None,
          *, more: bool = False) -> str:
    """One node's line: ``Role: text`` or ``Role: [source:identifier]``, escaped."""
    if kind == "external":
        try:
            h = json.loads(handle) if isinstance(handle, str) else (handle or {})
        except ValueError:  # a handle too long to read whole for a drawing
            h = {}
        body = f"[{_part(h.get('source'))}:{_part(h.get('identifier'))}]"
    else:
        body = escape(clip(content or "", more=more))
    if role:
        shown = escape(clip(role, 64, 61))  # a role is at most 64 characters: never cut, only escaped
        return f"{shown[:1].upper()}{shown[1:]}: {body}"
    return body


def _part(value: Any) -> str:
    return escape(clip(value)) if isinstance(value, str) else "?"


class Shape(Protocol):
    """What the layout needs of a node: its key, its parent's, its place among siblings and its depth."""

    @property
    def seq(self) -> int: ...
    @property
    def parent_seq(self) -> int | None: ...
    @property
    def position(self) -> int: ...
    @property
    def depth(self) -> int: ...


@dataclass
class Slot:
    """One line of the drawing before its text is known: the node (``None`` for a summary line) and what
    goes in front of its text (or, for a summary line, the whole line)."""

    seq: int | None
    lead: str


class Shapes:
    """A subtree's shape in three flat arrays sorted by (parent, position): a few dozen bytes a node, and no
    Python object per node, so even a tree of a million nodes is laid out in little memory."""

    def __init__(self, rows: Iterable[Shape], start_seq: int, *, ordered: bool = False) -> None:
        self.parents, self.seqs, self.depths = array("q"), array("q"), array("q")
        self.found = False
        if not ordered:
            rows = sorted(rows, key=lambda r: (-1 if r.parent_seq is None else r.parent_seq, r.position))
        for r in rows:
            if r.seq == start_seq:
                self.found = True
            elif r.parent_seq is not None:
                self.parents.append(r.parent_seq)
                self.seqs.append(r.seq)
                self.depths.append(r.depth)

    def children(self, seq: int) -> tuple[int, int]:
        """The index range of ``seq``'s children, in sibling order."""
        lo = bisect_left(self.parents, seq)
        return lo, bisect_right(self.parents, seq, lo)


@dataclass(slots=True)
class _Frame:
    prefix: str
    index: int
    hi: int
    count: int
    run: int  # how many only children in a row end at the siblings' parent
    capped: bool


def layout(rows: Iterable[Shape], start_seq: int, max_depth: int | None = None, *,
           ordered: bool = False) -> Iterator[Slot]:
    """The lines of the drawing of the subtree under ``start_seq``, in order (depth first, siblings by position).

    ``ordered`` says the rows already come sorted by parent and position. Iterative, and a chain takes one
    frame of the walk however long it is, so a conversation of a million messages is laid out as easily as
    a short one. Nodes deeper than ``max_depth`` are summarised under their parent (``… 3 more``).
    """
    shapes = Shapes(rows, start_seq, ordered=ordered)
    if not shapes.found:
        return
    seqs, depths = shapes.seqs, shapes.depths
    yield Slot(start_seq, "")
    lo, hi = shapes.children(start_seq)
    stack = [_Frame("", lo, hi, hi - lo, 0, False)]
    widest = 4 * MAX_INDENT
    while stack:
        frame = stack[-1]
        i = frame.index
        if i >= frame.hi:
            stack.pop()
            continue
        frame.index = i + 1
        prefix, depth = frame.prefix, depths[i]
        if max_depth is not None and depth > max_depth:
            # One summary line for the hidden level, then skip the rest of the siblings.
            hidden = frame.hi - i
            yield Slot(None, f"{prefix}└── … {hidden} more {'children' if hidden != 1 else 'child'} below max_depth")
            frame.index = frame.hi
            continue
        only = frame.count == 1
        last = i == frame.hi - 1
        run = frame.run + 1 if only else 0
        if only and frame.run >= CHAIN_INDENT:
            lead, below = prefix + FLAT, prefix
        else:
            lead = prefix + ("└── " if last else "├── ")
            below = prefix + ("    " if last else "│   ")
        capped = frame.capped or len(below) > widest
        if capped:
            lead += f"⟨depth {depth}⟩ "
            below = prefix
        yield Slot(seqs[i], lead)
        lo, hi = shapes.children(seqs[i])
        if lo < hi:
            if last:  # nothing left at this level: the children take its place on the stack
                stack.pop()
            stack.append(_Frame(below, lo, hi, hi - lo, run, capped))


@dataclass
class Page:
    """A page of a drawing: its ``text``, the nodes it drew, and where the next page starts (``None``: done)."""

    text: str
    drawn: int
    lines: int
    next_offset: int | None
    total_lines: int


def draw_page(slots: Iterator[Slot], labels: Callable[[list[int]], dict[int, str]], *, offset: int = 0,
              limit: int | None = None, max_chars: int | None = None) -> Page:
    """Lines ``offset`` to ``offset + limit`` of a layout, with their texts from ``labels(seqs)``.

    A page also ends before a line that would take it past ``max_chars`` characters (it always has at least
    one line). The rest of the layout is only counted, never drawn.
    """
    total = 0
    chosen: list[Slot] = []
    for slot in slots:
        if total >= offset and (limit is None or len(chosen) < limit):
            chosen.append(slot)
        total += 1
    texts = labels([s.seq for s in chosen if s.seq is not None])
    lines: list[str] = []
    size = drawn = 0
    for slot in chosen:
        # A node missing from ``texts`` was purged between the layout's read and the texts' read.
        line = slot.lead if slot.seq is None else slot.lead + texts.get(slot.seq, "(deleted)")
        if lines and max_chars is not None and size + len(line) + 1 > max_chars:
            break
        lines.append(line)
        size += len(line) + 1
        drawn += slot.seq is not None
    shown = offset + len(lines)
    return Page("\n".join(lines), drawn, len(lines), shown if shown < total else None, total)


def row_labels(rows: Iterable[SubtreeRow], root_seq: int | None) -> dict[int, str]:
    """Line texts from full subtree rows (what :meth:`plexor_arbor.store.Store.subtree` returns)."""
    return {r.seq: root_label(r.seq == root_seq, r.kind, r.role, r.content) or label(r.kind, r.role, r.content, r.handle)
            for r in rows}


def root_label(is_root: bool, kind: str, role: str | None, content: str | None) -> str | None:
    """``(root)`` for the tree's empty root node; ``None`` otherwise."""
    return "(root)" if is_root and kind == "text" and not content and not role else None


def draw(rows: Iterable[Sequence[Any]], start_seq: int, max_depth: int | None = None,
         root_seq: int | None = None) -> tuple[str, int]:
    """Draw the whole subtree under ``start_seq``; returns ``(text, nodes_drawn)``.

    ``rows`` are ``(seq, parent_seq, id, position, kind, role, content, handle, depth)``
    as :meth:`plexor_arbor.store.Store.subtree` returns them.
    """
    named = [r if isinstance(r, SubtreeRow) else SubtreeRow(*r) for r in rows]
    texts = row_labels(named, root_seq)
    page = draw_page(layout(named, start_seq, max_depth), lambda seqs: texts)
    return page.text, page.drawn
