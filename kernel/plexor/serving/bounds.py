"""Per-request and per-caller bounds in front of the SDK (``docs/security.md#limits``).

- :class:`NestingLimit`: a POST to ``/mcp`` nested deeper than ``PLEXOR_MAX_NESTING`` (200 levels, the parser's) is
  answered -32600 (HTTP 400) with the request's id, in both protocol eras. The SDK refuses such a
  body only in the 2025-11-25 era (its pydantic parser); the 2026-07-28 era parses it with
  ``json.loads``, which took ~900 levels and ran the request. A body with few brackets is never
  scanned, so the well-formed path costs two ``bytes.count`` calls.
- :func:`echo_middleware`: a request id or progress token longer than ``PLEXOR_MAX_ECHOED_LENGTH``
  is refused before it runs, since the server sends it back with every answer and progress
  notification (a 3 MiB progress token made a 120 MiB answer).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["NestingLimit", "echo_middleware", "too_deep"]

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(rb"[\[\]{}]")


def too_deep(body: bytes, limit: int) -> bool:
    """Whether the JSON text ``body`` nests arrays and objects more than ``limit`` levels below the message itself.

    Counted as the SDK's pydantic parser counts (it takes 200 levels inside the outermost object, not 201).
    """
    if body.count(b"[") + body.count(b"{") <= limit + 1:
        return False
    depth = 0
    for found in _BRACKET.finditer(_STRING.sub(b"", body)):
        if found.group() in (b"[", b"{"):
            depth += 1
            if depth > limit + 1:
                return True
        else:
            depth -= 1
    return False


class NestingLimit:
    """ASGI: a POST body nested deeper than ``PLEXOR_MAX_NESTING`` (200) gets -32600 (400), naming the limit."""

    def __init__(self, app: ASGIApp, max_body: int, limit: int | None = None) -> None:
        from plexor.serving.wire import max_depth

        self.app = app
        self.max_body = max_body
        self.limit = max_depth() if limit is None else limit  # PLEXOR_MAX_NESTING

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        tail: Message | None = None
        while more and size <= self.max_body:  # a larger body is the SDK's to refuse (413)
            message = await receive()
            if message["type"] != "http.request":
                tail = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        if not more and tail is None and await self._refused(body, send):
            return
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": more or tail is not None}]
        if tail is not None:
            replay.append(tail)

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()

        await self.app(scope, replayed, send)

    async def _refused(self, body: bytes, send: Send) -> bool:
        if not too_deep(body, self.limit):  # the common case: no import, two bytes.count calls
            return False
        from plexor.serving.wire import INVALID_REQUEST, Reply, _lexical_id, _too_deep

        found = _lexical_id(body.decode("utf-8", "replace"))
        payload = json.dumps(Reply(found, INVALID_REQUEST, _too_deep(self.limit)).wire()).encode()
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
        return True


def echo_middleware(limit: int) -> ServerMiddleware[object]:
    """SDK middleware: refuse a request whose id or progress token is longer than ``limit`` characters."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.limits import refuse

    async def middleware(ctx: ServerRequestContext[object], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        for what, echoed in (("request id", ctx.request_id), ("progress token", token)):
            if isinstance(echoed, str) and len(echoed) > limit:
                raise MCPError(types.INVALID_REQUEST, refuse(
                    "echoed_length", limit, f"the {what} is {len(echoed)} characters long",
                    f"send a shorter {what} (a counter or a UUID)"))
        return await call_next(ctx)

    return middleware

