"""Stateful Streamable HTTP sessions capped per caller and in total; the oldest idle one makes room.

Without a cap only the 30-minute idle timeout bounded them (6,000 sessions never closed took the
server from 70 to 321 MiB), and the SDK's own cap refuses every new client once it is reached. Here a
new session past ``PLEXOR_MAX_SESSIONS_PER_CALLER`` (that caller's) or ``PLEXOR_MAX_SESSIONS`` (anyone's)
first closes the session that has been idle longest, and that session's client is told so, naming the
limit, at its next request (404, as for any ended session, so it opens a new one).
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SessionLimits", "limit_sessions"]

REMEMBERED = 4096  # closed sessions whose clients are still owed the reason
PEEK_BYTES = 4 * 1024 * 1024  # a POST larger than this is not read to see whether it is an initialize


class SessionLimits:
    """ASGI middleware in front of the SDK's session manager (``sessions``: its id -> transport mapping)."""

    def __init__(self, app: ASGIApp, sessions: MutableMapping[str, object], *, per_caller: int, total: int) -> None:
        self.app, self.sessions = app, sessions
        self.per_caller, self.total = per_caller, total
        self.owner: dict[str, str] = {}
        self.seen: dict[str, float] = {}
        self.busy: collections.Counter[str] = collections.Counter()
        self.pending: collections.Counter[str] = collections.Counter()  # caller -> initializes not answered yet
        self.closed: collections.OrderedDict[str, str] = collections.OrderedDict()  # session -> why

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        sid = next((v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"mcp-session-id"), None)
        if sid is not None:
            why = self.closed.pop(sid, None)
            if why is not None and sid not in self.sessions:
                await _ended(send, why)
                return
            if sid in self.sessions:
                await self._serve(sid, scope, receive, send)
            else:  # unknown here (ended, another process's, or junk): the SDK answers, nothing is recorded
                await self.app(scope, receive, send)
            return
        from plexor.limits import principal

        who, held = principal(scope), False
        if scope.get("method") == "POST":
            receive, opening = await _peek(receive)
            if opening:  # only an initialize makes a session: nothing else may close one
                if not await self._make_room(who, send):
                    return
                held = True

        made: str | None = None

        async def learn(message: Message) -> None:
            nonlocal held, made
            if message.get("type") == "http.response.start":
                new = next((v.decode("latin-1") for k, v in message.get("headers") or () if k == b"mcp-session-id"), None)
                if new is not None and new not in self.owner:
                    self.owner[new], self.seen[new] = who, time.monotonic()
                    made = new  # busy until its initialize is answered whole: never closed mid-answer
                    self.busy[new] += 1
                if held:  # the place held for it is now the session (or nothing, when it was refused)
                    held = False
                    self._release(who)
            await send(message)

        try:
            await self.app(scope, receive, learn)
        finally:
            if held:
                self._release(who)
            if made is not None:
                self._done(made)

    def _release(self, who: str) -> None:
        self.pending[who] -= 1
        if self.pending[who] <= 0:
            del self.pending[who]

    async def _serve(self, sid: str, scope: Scope, receive: Receive, send: Send) -> None:
        self.busy[sid] += 1
        self.seen[sid] = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self._done(sid)

    def _done(self, sid: str) -> None:
        self.busy[sid] -= 1
        if self.busy[sid] <= 0:
            del self.busy[sid]
        self.seen[sid] = time.monotonic()

    async def _make_room(self, who: str, send: Send) -> bool:
        """Close the oldest idle session of this caller, or of anyone, when a new one would pass a limit, and hold
        a place for the new one (``pending``: the next initialize counts it) before anything is awaited."""
        from mcp.server.streamable_http import StreamableHTTPServerTransport

        from plexor.limits import refuse

        for sid in [s for s in self.owner if s not in self.sessions]:  # ended by themselves (DELETE, idle timeout)
            self.owner.pop(sid, None)
            self.seen.pop(sid, None)
        closing: list[object] = []
        for limit, most, among, held in (
                ("sessions_per_caller", self.per_caller, [s for s, o in self.owner.items() if o == who], self.pending[who]),
                ("sessions", self.total, list(self.sessions), sum(self.pending.values()))):
            if len(among) + held < most:
                continue
            # idle: answered whole at least once; a session the SDK holds but this has not seen answered is
            # still being initialized (closing it, as the "oldest", cut its initialize answer off mid-stream)
            idle = [s for s in among if not self.busy.get(s) and s in self.seen]
            if not idle:
                text = refuse(limit, most, "every session is busy", "retry in a moment")
                await _answer(send, 429, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}})
                return False
            oldest = min(idle, key=lambda s: self.seen.get(s, 0.0))
            self.closed[oldest] = refuse(limit, most, "this session was closed to make room for a newer one",
                                         "open a new session (initialize again)")
            while len(self.closed) > REMEMBERED:
                self.closed.popitem(last=False)
            closing.append(self._detach(oldest))
        self.pending[who] += 1
        for transport in closing:
            if isinstance(transport, StreamableHTTPServerTransport) and not transport.is_terminated:
                await transport.terminate()
        return True

    def _detach(self, sid: str) -> object:
        """Forget a session now (so the next count is right); its transport, to terminate."""
        self.owner.pop(sid, None)
        self.seen.pop(sid, None)
        return self.sessions.pop(sid, None)


def limit_sessions(app: ASGIApp, sessions: MutableMapping[str, object], environ: Mapping[str, str]) -> SessionLimits:
    """``app`` behind the session limits as set in ``environ``."""
    from plexor.limits import value

    return SessionLimits(app, sessions, per_caller=int(value("sessions_per_caller", environ)),
                         total=int(value("sessions", environ)))


async def _peek(receive: Receive) -> tuple[Receive, bool]:
    """Read a POST's body; a receive that replays it, and whether it is an ``initialize`` (which makes a session).

    ``NestingLimit`` in front hands over a body that fits ``--max-body`` whole; a larger one (which the SDK
    refuses, making no session) is not judged, nor read past ``PEEK_BYTES``.
    """
    replay: list[Message] = []
    size, more = 0, True
    while more and size <= PEEK_BYTES:
        message = await receive()
        replay.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        more = bool(message.get("more_body"))
    opening = False
    if not more and replay[-1]["type"] == "http.request":
        try:
            parsed = json.loads(b"".join(m.get("body", b"") for m in replay))
        except (ValueError, RecursionError):
            parsed = None
        messages = parsed if isinstance(parsed, list) else [parsed]
        opening = any(isinstance(m, dict) and m.get("method") == "initialize" for m in messages)

    async def replayed() -> Message:
        return replay.pop(0) if replay else await receive()

    return replayed, opening


async def _ended(send: Send, why: str) -> None:
    await _answer(send, 404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Session not found: {why}"}})


async def _answer(send: Send, status: int, body: Mapping[str, object]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
