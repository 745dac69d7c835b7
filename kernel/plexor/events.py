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

Every other yielded ``dict`` counts as ``Data``; a yielded ``Result`` ends the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Data", "Guidance", "Log", "Progress", "Result", "audio", "embedded_resource", "image"]

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

    value: Mapping[str, object]


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
    :param content: more content blocks after the text item: :func:`image`, :func:`audio`,
        :func:`embedded_resource`, or MCP content-block dicts.
    """

    # Any, not object: plugins build ``data`` and ``content`` from their own typed dicts, and read them back.
    data: dict[str, Any]
    text: str | None = None
    guidance: list[str] = field(default_factory=list)
    content: list[dict[str, Any]] = field(default_factory=list)


def _b64(data: bytes | str) -> str:
    import base64

    return data if isinstance(data, str) else base64.b64encode(data).decode()


def image(data: bytes | str, mime_type: str = "image/png") -> dict[str, object]:
    """An image content block (``data`` as bytes, or already base64)."""
    return {"type": "image", "data": _b64(data), "mimeType": mime_type}


def audio(data: bytes | str, mime_type: str = "audio/wav") -> dict[str, object]:
    """An audio content block (``data`` as bytes, or already base64)."""
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type}


def embedded_resource(uri: str, *, text: str | None = None, blob: bytes | None = None,
                      mime_type: str | None = None) -> dict[str, object]:
    """An embedded resource block carrying its text (or binary ``blob``)."""
    resource: dict[str, object] = {"uri": uri}
    if mime_type:
        resource["mimeType"] = mime_type
    if blob is not None:
        resource["blob"] = _b64(blob)
    else:
        resource["text"] = text or ""
    return {"type": "resource", "resource": resource}
