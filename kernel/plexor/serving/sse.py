"""Legacy SSE: every message posted with a readable id gets its one answer on the event stream.

The SDK's ``SseServerTransport`` answers a body it cannot parse with a plain-text 400 ("Could not
parse message") and hands the error to the session, which cannot tell whom to answer; an SSE
client reads its answers from the event stream, so it waits for one until its timeout. Here such
a body is diagnosed (:func:`plexor.serving.wire.diagnose`): the JSON-RPC error naming what was
wrong goes on the session's stream, with the request's id, and is also the 400's JSON body. A body
that parses is passed to the SDK untouched (replayed, not read twice).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.sse import SseServerTransport
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage
    from starlette.types import Message, Receive, Scope, Send

__all__ = ["AnsweringSse"]


class AnsweringSse:
    """Wraps the SDK's ``SseServerTransport``: ``connect`` (for GET /sse) and ``post`` (for /messages/)."""

    def __init__(self, sse: SseServerTransport, max_body: int) -> None:
        self.sse = sse
        self.max_body = max_body
        self._outbound: dict[UUID, WriteStream[SessionMessage]] = {}  # session UUID -> the stream the server writes answers to

    @contextlib.asynccontextmanager
    async def connect(self, scope: Scope, receive: Receive, send: Send
                      ) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
        # SDK private (SseServerTransport._read_stream_writers): the SDK names no new session id publicly.
        before = set(self.sse._read_stream_writers)
        async with self.sse.connect_sse(scope, receive, send) as streams:
            new = [sid for sid in set(self.sse._read_stream_writers) - before if sid not in self._outbound]
            sid = new[0] if len(new) == 1 else None  # two connects interleaved: leave both to the SDK alone
            if sid is not None:
                self._outbound[sid] = streams[1]
            try:
                yield streams
            finally:
                if sid is not None:
                    self._outbound.pop(sid, None)

    async def post(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await self.sse.handle_post_message(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_body:
                break
        body = b"".join(chunks)
        if size <= self.max_body and not more:
            outbound = self._session_stream(scope)
            if outbound is not None and await self._answered(body, outbound, send):
                return
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()

        await self.sse.handle_post_message(scope, replayed, send)

    def _session_stream(self, scope: Scope) -> WriteStream[SessionMessage] | None:
        """The answer stream of the session named in the query, if the poster may use that session."""
        from urllib.parse import parse_qs

        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

        raw = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id", [""])[0]
        try:
            sid = UUID(hex=raw)
        except ValueError:
            return None
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        # SDK private (_session_owners): the SDK's own owner check, which it offers no public way to ask
        if requestor != self.sse._session_owners.get(sid):  # as the SDK: only the session's own credential
            return None
        return self._outbound.get(sid)

    async def _answered(self, body: bytes, outbound: WriteStream[SessionMessage], send: Send) -> bool:
        """Answer ``body`` here if the SDK cannot parse it; False to let the SDK take it."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage
        from pydantic import ValidationError

        from plexor.serving.wire import diagnose

        try:
            types.jsonrpc_message_adapter.validate_json(body, by_name=False)
            return False
        except ValidationError:
            pass
        replies = diagnose(body)
        for reply in replies:
            if reply.id is not None:
                error = types.JSONRPCError.model_validate(reply.wire())
                with contextlib.suppress(Exception):  # the stream closed meanwhile: nobody left to tell
                    await outbound.send(SessionMessage(error))
        wire = [r.wire() for r in replies]
        payload = json.dumps(wire[0] if len(wire) == 1 else wire).encode() if wire else b""
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
        return True
