"""Structure-aware chunking with line ranges.

Text is cut into chunks of about ``size`` characters. Cuts prefer structural
boundaries (a heading, a top-level code definition, a blank line between
paragraphs) found in the latter part of the growing chunk; a chunk that ends
inside a section repeats its last lines (up to ``overlap`` characters) at the
start of the next one, so that a sentence cut in two is still found whole.
Every chunk is an exact slice of the text, which lets the document be
reassembled from its chunks and keeps line ranges truthful.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_text", "language_of"]

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")
_CODE_DEF = re.compile(
    r"^(?:async\s+def|def|class|function|func|fn|pub\s+fn|impl|struct|enum|interface|trait|module|"
    r"export\s+(?:default\s+)?(?:async\s+)?(?:function|class|const)|const\s+\w+\s*=\s*\(|"
    r"(?:public|private|protected|static)\s|type\s+\w+\s|package\s|@)"
)

STRONG, MEDIUM, WEAK = 3, 2, 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its text (an exact slice of the document) and where it lies."""

    seq: int
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    start_char: int
    end_char: int
    heading: str  # the heading trail at the chunk's start ("Install > Linux")


def language_of(kind: str) -> str:
    """Map a document kind to the chunking style: markdown, rst, code or text."""
    if kind in ("markdown", "docx", "pptx", "xlsx", "html", "pdf"):
        return "markdown"  # converted documents are rendered with Markdown headings
    if kind == "rst":
        return "rst"
    if kind == "code":
        return "code"
    return "text"


def _line_info(lines: list[str], style: str) -> tuple[list[int], list[tuple[int, str] | None]]:
    """Per line: the break strength before it, and a heading (level, title) it opens."""
    n = len(lines)
    strength = [0] * n
    heading: list[tuple[int, str] | None] = [None] * n
    in_fence = False
    rst_levels: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        prev_blank = i == 0 or not lines[i - 1].strip()
        if style == "markdown":
            if stripped.startswith("```") or stripped.startswith("~~~"):
                in_fence = not in_fence
                if in_fence:
                    strength[i] = MEDIUM if prev_blank else WEAK
                continue
            if in_fence:
                continue
            m = _MD_HEADING.match(line)
            if m:
                strength[i] = STRONG
                heading[i] = (len(m.group(1)), m.group(2).strip())
                continue
        elif style == "rst":
            nxt = lines[i + 1] if i + 1 < n else ""
            if stripped and _RST_UNDERLINE.match(nxt) and len(nxt.strip()) >= len(stripped) * 0.6 and not _RST_UNDERLINE.match(line):
                ch = nxt.strip()[0]
                if ch not in rst_levels:
                    rst_levels.append(ch)
                strength[i] = STRONG
                heading[i] = (rst_levels.index(ch) + 1, stripped)
                continue
        elif style == "code":
            if line and not line[0].isspace() and _CODE_DEF.match(line):
                strength[i] = STRONG if prev_blank else MEDIUM
                continue
            if line[:4] == "    " and _CODE_DEF.match(line[4:]) and prev_blank:
                strength[i] = MEDIUM
                continue
        if stripped and prev_blank:
            strength[i] = MEDIUM
        elif stripped:
            strength[i] = WEAK
    return strength, heading


def _pieces(text: str, size: int, hard: int) -> tuple[list[str], list[int]]:
    """The text's lines, an overlong one split so that every piece fits in a chunk, with each piece's line number."""
    lines: list[str] = []
    line_no: list[int] = []
    for no, line in enumerate(text.splitlines(keepends=True), start=1):
        if len(line) <= hard:
            lines.append(line)
            line_no.append(no)
        else:
            for k in range(0, len(line), size):
                lines.append(line[k : k + size])
                line_no.append(no)
    return lines, line_no


def _trails(heading: list[tuple[int, str] | None]) -> list[str]:
    """Per line, the heading trail it lies under ("Install > Linux")."""
    trail: list[tuple[int, str]] = []
    trail_at: list[str] = []
    for opened in heading:
        if opened is not None:
            level, title = opened
            trail = [t for t in trail if t[0] < level] + [(level, title)]
        trail_at.append(" > ".join(t for _, t in trail))
    return trail_at


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each piece starts, how strong a break falls before it, and the heading it opens."""

    offsets: list[int]
    strength: list[int]
    heading: list[tuple[int, str] | None]
    size: int

    def end(self, start: int, fresh: int) -> int:
        """Where the chunk that starts at piece ``start`` ends (exclusive): at a heading, else the best break."""
        offsets, strength, heading, size = self.offsets, self.strength, self.heading, self.size
        n = len(strength)
        end = start
        best_cut, best_strength = -1, 0
        while end < n and offsets[end + 1] - offsets[start] <= size:
            end += 1
            if end < n and end > start:
                s = strength[end]
                filled = offsets[end] - offsets[start]
                # A heading ends the chunk right there, unless the chunk holds little beyond the overlap.
                if s == STRONG and heading[end] is not None and offsets[end] - offsets[max(start, fresh)] >= size * 0.1:
                    break
                if s >= best_strength and filled >= size * 0.5:
                    best_cut, best_strength = end, s
        if end == start:  # a single piece longer than size (cannot happen after splitting, kept for safety)
            end = start + 1
        elif end < n and best_cut > start and best_strength >= MEDIUM and not (heading[end] is not None and strength[end] == STRONG):
            end = best_cut
        return end

    def next_start(self, start: int, end: int, overlap: int) -> int:
        """Where the next chunk starts: a few lines back (the overlap) when the cut fell inside a section."""
        offsets = self.offsets
        nxt = end
        if overlap and self.strength[end] < STRONG:
            back = end
            while back - 1 > start and offsets[end] - offsets[back - 1] <= overlap:
                back -= 1
            if back < end and offsets[end] - offsets[back] > 0:
                nxt = back
        return nxt if nxt > start else end


def chunk_text(text: str, style: str = "text", size: int = 1100, overlap: int = 150) -> list[Chunk]:
    """Cut ``text`` into chunks of about ``size`` characters following its structure.

    :param style: ``markdown``, ``rst``, ``code`` or ``text`` (see :func:`language_of`).
    :param size: target chunk length in characters; a chunk exceeds it only when a
        single line is longer (such lines are cut at ``size * 1.1``).
    :param overlap: characters of trailing lines repeated at the start of the next
        chunk when a cut falls inside a section.
    """
    if not text.strip():
        return []
    size = max(200, size)
    overlap = max(0, min(overlap, size // 3))
    lines, line_no = _pieces(text, size, int(size * 1.1))
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    strength, heading = _line_info([ln.rstrip("\r\n") for ln in lines], style)
    layout = _Layout(offsets, strength, heading, size)
    trail_at = _trails(heading)

    chunks: list[Chunk] = []
    n = len(lines)
    start = 0
    fresh = 0  # first line not repeated from the previous chunk
    while start < n:
        # Skip leading blank lines so chunks start on content.
        while start < n and not lines[start].strip():
            start += 1
        if start >= n:
            break
        end = layout.end(start, fresh)
        piece_start, piece_end = offsets[start], offsets[end]
        body = text[piece_start:piece_end]
        # Trailing blank lines do not belong to the chunk's line range.
        last = end - 1
        while last > start and not lines[last].strip():
            last -= 1
        chunks.append(
            Chunk(len(chunks), body, line_no[start], line_no[last], piece_start, piece_end, trail_at[start])
        )
        if end >= n:
            break
        fresh = end
        start = layout.next_start(start, end, overlap)
    return chunks
