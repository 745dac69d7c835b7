"""The resumable SSE event store of stateful Streamable HTTP, in the kernel's database.

A 2025-11-25 client whose SSE stream drops reconnects with ``GET /mcp``, its ``Mcp-Session-Id`` and
``Last-Event-ID``, and the server sends what it missed. With the events in memory only the process
that wrote them can do that; behind a balancer the reconnection may reach another process. Here
the events live in ``plexor_sse_events`` of the kernel's database (the data directory's SQLite, or
PostgreSQL), so:

- the process that holds the session replays from the shared table and carries on live, as the
  SDK does with any event store;
- another process (:func:`replay_elsewhere`) replays what is stored for that session's stream
  and follows the table until the stream's request is answered, then ends the stream. A tool
  call whose POST stream dropped is thus finished through any process, as long as the process
  that runs it is alive to write its result.

Each event is bound to its session: a replay is refused unless the ``Mcp-Session-Id`` of the
request that asks for it is the one the event was written for (the SDK's stream ids are request
ids, the same numbers in every session). The session is known through :data:`SESSION`, set per
request by :class:`SessionBinding` (an ASGI middleware). Events are kept ``keep_seconds``
(10 minutes by default).

Chosen by ``PLEXOR_EVENT_STORE``: ``shared`` (this store), ``memory`` (one process's memory), or
unset: shared when the kernel's database is PostgreSQL (other processes may serve the same
clients), memory otherwise.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

if TYPE_CHECKING:  # pragma: no cover
    from mcp_types import JSONRPCMessage
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from plexor.features.state.db import StateDB

__all__ = ["SESSION", "EndingSessions", "ForgetOnDelete", "ResumeAnywhere", "SessionBinding", "SharedEventStore", "current_session", "replay_elsewhere",
           "wants_shared_store", "watch_sessions"]

KEEP_SECONDS = 600.0


@dataclass
class _Cell:
    """The session of a request; filled in from the response headers when the request opened it."""

    value: str | None = None


#: The session of the request being served (a cell, so the session's own tasks, started by its
#: opening request before the id was minted, see the id once it is).
SESSION: contextvars.ContextVar[_Cell | None] = contextvars.ContextVar("plexor_sse_session", default=None)


def current_session() -> str:
    """The session of the request being served ("" outside one)."""
    cell = SESSION.get()
    return (cell.value or "") if cell is not None else ""


def _header(scope: Scope | Message, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


@runtime_checkable
class Releasing(Protocol):
    """An event store that drops what it kept for a session that ended (both of the kernel's do)."""

    async def release(self, session: str) -> None: ...


@runtime_checkable
class Forgets(Protocol):
    """An event store that drops a session's events at once (the in-memory one)."""

    def forget(self, session: str) -> None: ...


class ForgetOnDelete:
    """ASGI middleware: once a ``DELETE`` of a session is answered with success, the store drops its events."""

    def __init__(self, app: ASGIApp, store: EventStore) -> None:
        self.app, self.store = app, store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = _header(scope, b"mcp-session-id") if scope.get("type") == "http" else None
        if session is None or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        async def watch(message: Message) -> None:
            if message.get("type") == "http.response.start" and 200 <= int(message["status"]) < 300:
                if isinstance(self.store, Releasing):  # a store without release keeps them until they expire
                    await self.store.release(session)  # before the client hears the session is gone
            await send(message)

        await self.app(scope, receive, watch)


class EndingSessions(dict[str, object]):
    """The SDK session manager's map of open sessions (id -> transport), telling ``store`` when one ends.

    However a session ends (a ``DELETE``, the idle timeout, a crash, or closed to make room for a newer
    one), the manager or :class:`plexor.serving.sessions.SessionLimits` pops it from this map; what the
    store kept for it is dropped then, at once (in memory), or by a task started then (in the shared
    table). Emptied at shutdown, it drops nothing: another process may still resume those streams."""

    def __init__(self, store: EventStore, sessions: Mapping[str, object]) -> None:
        super().__init__(sessions)
        self.store = store
        self._releasing: set[asyncio.Task[None]] = set()

    def pop(self, key: str, *default: object) -> object:
        held = key in self
        value = super().pop(key, *default)
        if held:
            self._ended(key)
        return value

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._ended(key)

    def _ended(self, session: object) -> None:
        if isinstance(self.store, Forgets):  # in memory: at once
            self.store.forget(str(session))
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - only the event loop ends sessions
            return
        if not isinstance(self.store, Releasing):  # a store without release keeps them until they expire
            return
        task = loop.create_task(self.store.release(str(session)))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)


def watch_sessions(manager: object, store: EventStore) -> dict[str, object]:
    """Make the session manager's map of open sessions an :class:`EndingSessions` over ``store``; that map."""
    if manager is None or not hasattr(manager, "_server_instances"):
        return {}
    watched = EndingSessions(store, manager._server_instances)
    manager._server_instances = watched
    return watched


class SessionBinding:
    """ASGI middleware: puts the request's ``Mcp-Session-Id`` (or, for the request that opens a session,
    the one the response names) in :data:`SESSION`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        cell = _Cell(_header(scope, b"mcp-session-id"))
        token = SESSION.set(cell)
        try:
            if cell.value is not None:
                await self.app(scope, receive, send)
                return

            async def learn(message: Message) -> None:
                if message.get("type") == "http.response.start" and cell.value is None:
                    cell.value = _header(message, b"mcp-session-id")
                await send(message)

            await self.app(scope, receive, learn)
        finally:
            SESSION.reset(token)


def _create_events(state: StateDB) -> None:
    state.execute(f"CREATE TABLE IF NOT EXISTS plexor_sse_events (id {state.autoincrement}, "
                  "session VARCHAR(128) NOT NULL, stream VARCHAR(200) NOT NULL, body TEXT, "
                  "at DOUBLE PRECISION NOT NULL)")
    state.execute("CREATE INDEX IF NOT EXISTS plexor_sse_events_stream ON plexor_sse_events (session, stream, id)")
    state.execute("CREATE INDEX IF NOT EXISTS plexor_sse_events_at ON plexor_sse_events (at)")


class SharedEventStore(EventStore):
    """The SDK's ``EventStore`` over ``plexor_sse_events`` (see the module docstring)."""

    def __init__(self, state: StateDB, *, keep_seconds: float = KEEP_SECONDS, session_bytes: int = 64 * 2**20,
                 total_bytes: int = 256 * 2**20) -> None:
        self.state = state
        self.keep_seconds = keep_seconds
        self.session_bytes, self.total_bytes = session_bytes, total_bytes
        self._writes = 0
        self._since: dict[str, int] = {}  # bytes this process wrote per session since it last measured it
        self._since_total = 0
        state.migrate("sse_events", {1: _create_events})

    def _insert(self, session: str, stream: str, body: str | None) -> int:
        now = time.time()
        self._writes += 1
        if self._writes % 256 == 1:
            self.state.execute("DELETE FROM plexor_sse_events WHERE at < ?", (now - self.keep_seconds,))
        size = len(body.encode()) if body else 0  # bytes, as the limits count, not characters
        if size > self.session_bytes:  # cannot be kept, nor what came before it (a replay would skip it)
            from plexor.limits import REFUSALS

            REFUSALS["event_store_session_bytes"] += 1
            self.forget_now(session)
            body = None
        rows = self.state.query("INSERT INTO plexor_sse_events (session, stream, body, at) VALUES (?, ?, ?, ?) "
                                "RETURNING id", (session, stream, body, now))
        self._bound(session, size if body is not None else 0)
        return int(rows[0][0])

    def _bound(self, session: str, size: int) -> None:
        """Keep the session's and the table's bytes under their limits, measured once every eighth of a limit
        written by this process (other processes measure what they write)."""
        self._since[session] = self._since.get(session, 0) + size
        self._since_total += size
        if self._since[session] * 8 > self.session_bytes:
            self._since[session] = 0
            self._trim("WHERE session = ?", (session,), self.session_bytes, "event_store_session_bytes")
        if self._since_total * 8 > self.total_bytes:
            self._since_total = 0
            self._trim("", (), self.total_bytes, "event_store_bytes")
        if len(self._since) > 4096:
            self._since.clear()

    def _trim(self, where: str, args: tuple[object, ...], most: int, limit: str) -> None:
        """Delete the oldest events (of ``where``) beyond ``most`` bytes."""
        kept = 0
        size_of = "LENGTH(CAST(body AS BLOB))" if self.state.dialect == "sqlite" else "OCTET_LENGTH(body)"  # bytes
        for event_id, size in self.state.query(f"SELECT id, {size_of} FROM plexor_sse_events {where} "
                                               "ORDER BY id DESC", args):
            kept += int(size or 0)
            if kept > most:
                from plexor.limits import REFUSALS

                REFUSALS[limit] += 1
                joiner = "AND" if where else "WHERE"
                self.state.execute(f"DELETE FROM plexor_sse_events {where} {joiner} id <= ?", (*args, event_id))
                return

    def forget_now(self, session: str) -> None:
        """Delete every event kept for ``session``."""
        self.state.execute("DELETE FROM plexor_sse_events WHERE session = ?", (session,))
        self._since.pop(session, None)

    async def release(self, session: str) -> None:
        """Drop what a deleted session kept."""
        await self.state.run(self.forget_now, session)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        body = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        return str(await self.state.run(self._insert, current_session(), str(stream_id), body))

    def stream_of(self, session: str, event_id: str) -> str | None:
        """The stream of event ``event_id`` when it was written for ``session``; None otherwise."""
        try:
            number = int(event_id)
        except ValueError:
            return None
        rows = self.state.query("SELECT stream FROM plexor_sse_events WHERE id = ? AND session = ?", (number, session))
        return str(rows[0][0]) if rows else None

    def after(self, session: str, stream: str, event_id: int) -> list[tuple[int, str | None]]:
        return [(int(i), b) for i, b in self.state.query(
            "SELECT id, body FROM plexor_sse_events WHERE session = ? AND stream = ? AND id > ? ORDER BY id",
            (session, stream, event_id))]

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        import mcp_types as types

        session = current_session()
        stream = await self.state.run(self.stream_of, session, last_event_id)
        if stream is None:
            return None
        for event_id, body in await self.state.run(self.after, session, stream, int(last_event_id)):
            if body is not None:
                await send_callback(EventMessage(types.jsonrpc_message_adapter.validate_json(body), str(event_id)))
        return stream


def _answers(body: str | None, stream: str) -> bool:
    """Whether this stored message is the response that ends the request stream ``stream``."""
    if body is None:
        return False
    try:
        raw = json.loads(body)
    except ValueError:
        return False
    return isinstance(raw, dict) and ("result" in raw or "error" in raw) and str(raw.get("id")) == stream


async def replay_elsewhere(store: SharedEventStore, session: str, last_event_id: str, send: Send,
                           *, retry_ms: int, follow_seconds: float = 30.0, poll: float = 0.1) -> bool:
    """Serve a resumption for a session this process does not hold; False when there is nothing to resume.

    Sends an SSE response: the stored events after ``last_event_id`` of that stream, then new ones
    as they are written, until the stream's request is answered or ``follow_seconds`` pass (the
    client then reconnects with its new ``Last-Event-ID``, after ``retry_ms``).
    """
    import anyio

    stream = await store.state.run(store.stream_of, session, last_event_id)
    if stream is None:
        return False
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
        (b"mcp-session-id", session.encode("latin-1")), (b"x-accel-buffering", b"no")]})
    await send({"type": "http.response.body", "body": f"retry: {retry_ms}\n\n".encode(), "more_body": True})
    last = int(last_event_id)
    deadline = time.monotonic() + follow_seconds
    while time.monotonic() < deadline:
        rows = await store.state.run(store.after, session, stream, last)
        for event_id, body in rows:
            last = event_id
            if body is None:
                continue
            await send({"type": "http.response.body", "more_body": True,
                        "body": f"id: {event_id}\nevent: message\ndata: {body}\n\n".encode()})
            if _answers(body, stream):
                deadline = 0.0
        if deadline:
            await anyio.sleep(poll)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return True


class ResumeAnywhere:
    """ASGI middleware: ``GET`` with ``Last-Event-ID`` for a session this process does not hold is resumed
    from the shared store (:func:`replay_elsewhere`); everything else goes to ``app``."""

    def __init__(self, app: ASGIApp, store: SharedEventStore, holds: Callable[[str], bool], *, retry_ms: int) -> None:
        self.app, self.store, self.holds, self.retry_ms = app, store, holds, retry_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("method") == "GET":
            session, last = _header(scope, b"mcp-session-id"), _header(scope, b"last-event-id")
            if session and last and not self.holds(session) and await replay_elsewhere(
                    self.store, session, last, send, retry_ms=self.retry_ms):
                return
        await self.app(scope, receive, send)


def wants_shared_store(environ: Mapping[str, str], database_url: str | None) -> bool:
    """``PLEXOR_EVENT_STORE``: ``shared`` or ``memory``; unset, shared when the kernel's database is PostgreSQL."""
    from plexor.errors import ConfigError

    choice = (environ.get("PLEXOR_EVENT_STORE") or "").strip().lower()
    if choice in ("", "auto"):
        return bool(database_url)
    if choice not in ("shared", "memory"):
        raise ConfigError(f"PLEXOR_EVENT_STORE={choice!r} is not a known event store",
                          "Use 'shared' (the kernel's database: any process can resume a stream) or 'memory' "
                          "(this process only), or leave it unset.")
    return choice == "shared"
