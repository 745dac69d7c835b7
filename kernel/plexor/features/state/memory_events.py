"""Stateful Streamable HTTP's resumable event store, in this process's memory, bounded in events and bytes.

Enough for a client to resume a dropped SSE stream with ``Last-Event-ID`` (and for the server to
send the priming event and ``retry`` hint). Each event is bound to its session
(``plexor.features.state.events.SESSION``): stream ids are request ids, the same numbers in every session, so
without it one session's replay could carry another's events.

Events are kept as the UTF-8 JSON the client would receive, and bounded three ways: ``limit`` events
of all sessions, ``PLEXOR_EVENT_STORE_SESSION_BYTES`` per session, ``PLEXOR_EVENT_STORE_BYTES`` in
total, counted in bytes (not characters: an answer of non-ASCII text takes up to four times its
length); the oldest go first. What a session kept is dropped at once when it ends, deleted, expired
or closed to make room (:meth:`MemoryEventStore.forget`, called by
:class:`plexor.features.state.events.EndingSessions`). A resumption from an event no longer kept is refused
(the SDK then tells the client), never served with a gap.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp.server.streamable_http import EventStore

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.streamable_http import EventCallback
    from mcp_types import JSONRPCMessage

__all__ = ["MemoryEventStore"]

OVERHEAD = 128  # bytes an event costs besides its text (ids, tuple, dict slot)
SWEEP_EVERY = 1.0  # seconds between looks for sessions that have expired


class MemoryEventStore(EventStore):
    """The SDK's ``EventStore`` in memory (see the module's documentation)."""

    def __init__(self, limit: int, session_bytes: int, total_bytes: int,
                 holds: Callable[[str], bool] | None = None) -> None:
        self._events: collections.OrderedDict[str, tuple[str, str, bytes | None, int]] = collections.OrderedDict()
        self._order: dict[str, collections.deque[str]] = {}  # per session, its event ids, oldest first
        self._bytes: collections.Counter[str] = collections.Counter()
        self.total = 0
        self._limit = max(16, limit)
        self.session_bytes, self.total_bytes = session_bytes, total_bytes
        self.holds = holds  # whether the server still holds a session (set once the app is built)
        self._swept = time.monotonic()
        self._ids = itertools.count(1)

    def held(self, session: str) -> int:
        """Bytes kept for ``session``."""
        return self._bytes.get(session, 0)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        from plexor.features.state.events import current_session
        from plexor.limits import REFUSALS

        session = current_session()
        self._sweep()
        body = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        size = len(body or b"") + OVERHEAD
        if size > self.session_bytes:  # cannot be kept: nor can what came before it (a replay would skip it)
            REFUSALS["event_store_session_bytes"] += 1
            self.forget(session)
            return f"{next(self._ids)}"
        event_id = f"{next(self._ids)}"
        self._events[event_id] = (session, stream_id, body, size)
        self._order.setdefault(session, collections.deque()).append(event_id)
        self._bytes[session] += size
        self.total += size
        while self._bytes[session] > self.session_bytes:
            REFUSALS["event_store_session_bytes"] += 1
            self._drop(self._order[session].popleft())
        while self.total > self.total_bytes or len(self._events) > self._limit:
            if self.total > self.total_bytes:
                REFUSALS["event_store_bytes"] += 1
            self._drop(next(iter(self._events)))
        return event_id

    def _drop(self, event_id: str) -> None:
        found = self._events.pop(event_id, None)
        if found is None:
            return
        session, _stream, _body, size = found
        self._bytes[session] -= size
        self.total -= size
        order = self._order.get(session)
        if order and order[0] == event_id:
            order.popleft()
        if self._bytes[session] <= 0:
            del self._bytes[session]
            self._order.pop(session, None)

    def forget(self, session: str) -> None:
        """Drop every event kept for ``session`` (deleted or expired)."""
        for event_id in list(self._order.pop(session, ())):
            self._drop(event_id)
        self._bytes.pop(session, None)

    async def release(self, session: str) -> None:
        """Drop what a deleted session kept."""
        self.forget(session)

    def _sweep(self) -> None:
        if self.holds is None or time.monotonic() - self._swept < SWEEP_EVERY:
            return
        self._swept = time.monotonic()
        for session in [s for s in self._bytes if s and not self.holds(s)]:
            self.forget(session)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        import mcp_types as types
        from mcp.server.streamable_http import EventMessage

        from plexor.features.state.events import current_session

        found = self._events.get(last_event_id)
        if found is None or found[0] != current_session():
            return None
        session, stream_id = found[:2]
        for event_id in list(self._order.get(session, ())):
            owner, sid, body, _size = self._events.get(event_id, ("", "", None, 0))
            if int(event_id) > int(last_event_id) and sid == stream_id and body is not None:
                await send_callback(EventMessage(types.jsonrpc_message_adapter.validate_json(body), event_id))
        return stream_id
