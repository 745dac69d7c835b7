"""What every document reader shares: the result, the errors, and the limits it works within."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from plexor_folder_search.defaults import DEFAULTS

__all__ = ["Bounded", "Clock", "ExtractError", "Extracted", "Limits", "Unsupported", "md_outline"]


class ExtractError(Exception):
    """The file could not be read or parsed (corrupt, encrypted, unreadable)."""


class Bounded(ExtractError):
    """The document goes past a limit (unpacked size, archive members, time); ``reason`` names which."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """Bounds on extracting one document (settings ``max_unpacked_size`` and ``extract_timeout``)."""

    max_unpacked_size: int = DEFAULTS["max_unpacked_size"]
    timeout: float = DEFAULTS["extract_timeout"]
    max_members: int = 10_000

    def deadline(self) -> float:
        return time.monotonic() + self.timeout


class Clock:
    """Checked in the readers' loops, so a document that takes too long is given up, not waited for."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.end = limits.deadline()

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise Bounded("took too long to extract",
                          f"more than {self.limits.timeout:g} s; the limit is extract_timeout = {self.limits.timeout:g}")


class Unsupported(Exception):
    """The file is not something we index (binary content, unknown format)."""


@dataclass
class Extracted:
    """A document's indexable text and what we know of its structure."""

    text: str
    kind: str
    title: str | None = None
    outline: list[dict[str, object]] = field(default_factory=list)


def md_outline(text: str, style: str) -> list[dict[str, object]]:
    from plexor_folder_search.chunking import _line_info

    lines = text.splitlines()
    _, headings = _line_info(lines, style)
    return [{"level": h[0], "title": h[1], "line": i + 1} for i, h in enumerate(headings) if h is not None][:500]


