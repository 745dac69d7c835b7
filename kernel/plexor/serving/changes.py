"""Change notifications of one server: the 2025-11-25 connections to tell that a list or a subscribed
resource changed, and the SDK's event bus for the 2026-07-28 ``subscriptions/listen`` streams.

:class:`Changes` subscribes to the kernel's notifier (:mod:`plexor.notify`) once, from the serving loop,
and delivers each event on the loop's next turn, deduplicated: to the bus, and to each 2025-era
connection that subscribed to the URI or fetched the list before it changed (:mod:`plexor.serving.lists`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING

from plexor.serving.lists import unseen_change

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.connection import Connection
    from mcp.shared.subscriptions import ServerEvent

    from plexor.core.kernel import Kernel
    from plexor.features.tasks.listen import TaskChanged
    from plexor.notify import Event

__all__ = ["LOG_LEVEL", "SUBSCRIPTIONS", "Bus", "Changes", "Sessions", "state", "subscriptions"]

SUBSCRIPTIONS = "plexor/subscriptions"  # connection.state key: the URIs a 2025-era session subscribed to
LOG_LEVEL = "plexor/logLevel"  # connection.state key: the level set by logging/setLevel


class Sessions:
    """2025-11-25-era connections seen, to send change notifications to (2026-07-28 clients listen instead)."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Connection] = weakref.WeakSet()

    def add(self, session: Connection) -> None:
        try:
            self._sessions.add(session)
        except TypeError:  # pragma: no cover - a session type that cannot be weakly referenced
            pass

    def all(self) -> list[Connection]:
        return list(self._sessions)


class Bus:
    """The SDK's ``SubscriptionBus`` for ``subscriptions/listen`` streams, fed by the kernel's notifier (and carrying
    the tasks extension's :class:`~plexor.features.tasks.listen.TaskChanged` too)."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[ServerEvent | TaskChanged], None]] = {}

    async def publish(self, event: ServerEvent | TaskChanged) -> None:  # the SDK's interface; Plexor publishes via plexor.notify
        self.fan_out(event)

    def fan_out(self, event: ServerEvent | TaskChanged) -> None:
        for listener in list(self._listeners.values()):
            listener(event)  # the SDK's listeners only enqueue, and never raise

    def subscribe(self, listener: Callable[[ServerEvent | TaskChanged], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


class Changes:
    """The kernel's change events, delivered to the bus and to the 2025-era connections in ``sessions``."""

    def __init__(self, kernel: Kernel, lists_changed: Callable[[], None]) -> None:
        self.kernel = kernel
        self.lists_changed = lists_changed  # a plugin offered or withdrew a tool or prompt: cached lists go
        self.sessions = Sessions()
        self.bus = Bus()
        self._listening: Callable[[], None] | None = None  # the notifier's unsubscribe, once subscribed
        self._pending: dict[tuple[str, str], Event] = {}  # events coalesced until the loop's next turn
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False  # set when the kernel drains: no more change notifications to anyone
        self.task_events: Callable[[Event], None] = lambda event: None  # tasks/status, to features.tasks.listen

    def listen(self) -> None:
        """Subscribe to the kernel's notifier from the serving loop (once, on the first request)."""
        if self._listening is None:
            self._listening = self.kernel.notifier.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        """A change published through :mod:`plexor.notify`: delivered on the loop's next turn, deduplicated."""
        if event.kind == "tasks/status":  # to the listen streams that asked for that task (plexor.features.tasks.listen)
            self.task_events(event)
            return
        key = (event.kind, str(event.payload.get("uri", "")))
        if event.kind in ("tools/list_changed", "prompts/list_changed"):
            self.lists_changed()  # a plugin offered or withdrew one (PluginHandle.offer)
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending[key] = event

    def _flush(self) -> None:
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

        pending, self._pending = list(self._pending.values()), {}
        for event in pending:
            uri = event.payload.get("uri")
            sdk_events: dict[str, ServerEvent] = {"tools/list_changed": ToolsListChanged(),
                                                  "prompts/list_changed": PromptsListChanged(),
                                                  "resources/list_changed": ResourcesListChanged()}
            sdk_event = sdk_events.get(event.kind)
            self.bus.fan_out(sdk_event if sdk_event is not None else ResourceUpdated(uri=str(uri)))
            for session in self.sessions.all():
                if self.closing or not getattr(session, "has_standalone_channel", True):
                    continue
                if event.kind == "resources/updated" and uri not in subscriptions(session):
                    continue
                if sdk_event is not None and not unseen_change(state(session), event.kind):
                    continue
                task = asyncio.get_running_loop().create_task(self._send(session, event.kind, uri))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _send(self, session: Connection, kind: str, uri: object) -> None:
        try:
            if kind == "tools/list_changed":
                await session.send_tool_list_changed()
            elif kind == "prompts/list_changed":
                await session.send_prompt_list_changed()
            elif kind == "resources/list_changed":
                await session.send_resource_list_changed()
            else:
                await session.send_resource_updated(str(uri))
        except Exception:  # noqa: BLE001 - a gone client
            self.kernel.log.debug("notification_not_sent", kind=kind)


def state(connection: Connection | None) -> MutableMapping[str, object]:
    """The SDK connection's per-connection scratch dict (a throwaway one when there is none)."""
    scratch = getattr(connection, "state", None)
    return scratch if isinstance(scratch, dict) else {}


def subscriptions(connection: Connection | None, *, keep: bool = False) -> set[str]:
    """The URIs a 2025-era connection subscribed to (a throwaway empty set for none; with ``keep``, an empty
    set is kept in its state to add to)."""
    scratch = state(connection)
    held = scratch.setdefault(SUBSCRIPTIONS, set()) if keep else scratch.get(SUBSCRIPTIONS, set())
    return held if isinstance(held, set) else set()
