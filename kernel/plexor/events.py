"""Events an async-generator tool may yield, and the result wrapper.

A tool written as ``async def tool(...) -> AsyncIterator[Event]`` yields these
while it works. The kernel maps them onto the protocol:

============  ==========================================
event          mapped to
============  ==========================================
``Progress``   ``notifications/progress`` (when the client sent a progress token)
``Log``        ``notifications/message``
``Data``       merged into the final ``structuredContent``
``Guidance``   appended to the result text as advice
============  ==========================================

Any other yielded ``dict`` counts as ``Data``; a yielded ``Result`` ends the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Data", "Guidance", "Log", "Progress", "Result"]

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@dataclass(frozen=True, slots=True)
class Progress:
    """Progress of a long call: ``current`` out of ``total`` (``None`` when unknown)."""

    current: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Log:
    """A log line for the client (MCP logging notification)."""

    level: LogLevel
    message: str


@dataclass(frozen=True, slots=True)
class Data:
    """Partial result data; dict items are merged into the result, lists under a key are extended."""

    value: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Guidance:
    """Advice for the model, appended to the result text (e.g. "narrow the query")."""

    text: str


@dataclass(slots=True)
class Result:
    """A tool result with an explicit human rendering.

    Return this instead of a plain dict when the text item should be something
    other than the JSON of ``data`` (a tree drawing, a table).

    :param data: the JSON object placed in ``structuredContent``.
    :param text: the text content item; defaults to the JSON of ``data``.
    :param guidance: advice lines appended to the text.
    """

    data: dict[str, Any]
    text: str | None = None
    guidance: list[str] = field(default_factory=list)
