"""The one seam every outbound change notification goes through.

Whatever tells clients that something changed (a list, a resource) is published here, and only
here: the kernel publishes ``*/list_changed`` when a plugin becomes ready, fails or changes what
it offers; :meth:`plexor.PluginHandle.resource_updated` publishes ``resources/updated``. The
server subscribes once and delivers each event to the clients that want it (2025-11-25 sessions,
2026-07-28 ``subscriptions/listen`` streams, ``resources/subscribe`` subscribers).

The interface, kept small on purpose::

    notifier = Notifier()                        # in-process backend by default
    notifier.publish("resources/updated", {"uri": "arbor://tree/7"})   # any thread, never blocks
    stop = notifier.subscribe(callback)          # callback(Event) runs on the subscriber's loop
    await notifier.start(); await notifier.close()   # the backend's lifecycle (servers call them)

Kinds (:data:`KINDS`): ``tools/list_changed``, ``resources/list_changed``,
``prompts/list_changed`` (payload ``{}``), ``resources/updated`` (payload ``{"uri": str}``) and
``tasks/status`` (payload ``{"taskId": str}``: a task's status changed; :mod:`plexor.features.tasks.listen`
sends it to the listen streams that asked for that task).
Payloads are JSON objects, so a backend may carry them between processes.

A :class:`Backend` moves events between publishers and this process's subscribers:

- ``publish(event)`` is called from any thread, once per :meth:`Notifier.publish`; it must not
  block for long (queue the work; network I/O belongs on its own task or thread).
- ``attach(deliver)`` is called once, before ``start``: the backend calls ``deliver(event)`` for
  every event that reaches this process, its own publishes included (a backend that shares
  events between processes delivers local ones once, not twice). ``deliver`` is thread-safe.
- ``start()`` / ``close()`` open and release what the backend needs (a connection, a thread);
  the in-process backend needs nothing.

:class:`InProcess` (the default) hands each event straight to ``deliver``. A backend for several
processes (PostgreSQL ``LISTEN/NOTIFY``, a shared SQLite table) publishes to the shared medium
and calls ``deliver`` for what it hears from it. Delivery is at most once and level-triggered
("this changed: fetch again if you care"), exactly what MCP's notifications mean.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["KINDS", "Backend", "Event", "InProcess", "Notifier"]

KINDS = frozenset({"tools/list_changed", "resources/list_changed", "prompts/list_changed", "resources/updated",
                   "tasks/status"})


@dataclass(frozen=True)
class Event:
    """One change: its ``kind`` (one of :data:`KINDS`) and a JSON-able ``payload``."""

    kind: str
    payload: Mapping[str, object] = field(default_factory=dict)


class Backend(Protocol):
    """Carries events from :meth:`Notifier.publish` to every process's ``deliver`` (see the module docstring)."""

    def publish(self, event: Event) -> None: ...

    def attach(self, deliver: Callable[[Event], None]) -> None: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class InProcess:
    """The default backend: events stay in this process and are delivered at once."""

    def __init__(self) -> None:
        self._deliver: Callable[[Event], None] | None = None

    def attach(self, deliver: Callable[[Event], None]) -> None:
        self._deliver = deliver

    def publish(self, event: Event) -> None:
        if self._deliver is not None:
            self._deliver(event)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Notifier:
    """Publishes change events through a :class:`Backend` and delivers them to local subscribers."""

    def __init__(self, backend: Backend | None = None) -> None:
        self.backend: Backend = backend if backend is not None else InProcess()
        self._lock = threading.Lock()
        self._subscribers: dict[object, tuple[Callable[[Event], None], asyncio.AbstractEventLoop | None]] = {}
        self.backend.attach(self.deliver)

    def publish(self, kind: str, payload: Mapping[str, object] | None = None) -> None:
        """Publish one event; callable from any thread (a sync tool's worker thread too), never blocks."""
        if kind not in KINDS:
            raise ValueError(f"unknown notification kind {kind!r}; use one of {sorted(KINDS)}")
        self.backend.publish(Event(kind, dict(payload or {})))

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event reaching this process; returns an unsubscribe.

        Subscribed from a running event loop, the callback runs on that loop (events published on
        other threads are handed over with ``call_soon_threadsafe``); otherwise it runs in the
        publishing thread. It must not raise, and must not block.
        """
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        token = object()
        with self._lock:
            self._subscribers[token] = (callback, loop)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(token, None)

        return unsubscribe

    def deliver(self, event: Event) -> None:
        """Hand ``event`` to every local subscriber (the backend calls this; thread-safe)."""
        with self._lock:
            targets = list(self._subscribers.values())
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for callback, loop in targets:
            if loop is None or loop is here:
                _safe(callback, event)
            elif not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(_safe, callback, event)
                except RuntimeError:  # the loop closed meanwhile: nobody left to tell
                    pass

    async def start(self) -> None:
        await self.backend.start()

    async def close(self) -> None:
        await self.backend.close()


def _safe(callback: Callable[[Event], None], event: Event) -> None:
    try:
        callback(event)
    except Exception:  # noqa: BLE001 - one subscriber must not stop the others
        from plexor.log import get_logger

        get_logger("plexor").debug("notification_subscriber_failed", kind=event.kind)
