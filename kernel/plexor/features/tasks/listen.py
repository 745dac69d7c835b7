"""``subscriptions/listen`` (2026-07-28, SEP-2575) with the tasks extension's task status notifications.

The SDK's ``ListenHandler`` knows four events (the three ``list_changed`` and ``resources/updated``)
and no way to add one, so Plexor serves listen streams with :class:`Listen`: the same contract
(acknowledge first, stamp every frame with the subscription id, send only what was asked for, end
gracefully on :meth:`Listen.close`) plus ``notifications.taskIds`` (SEP-2663):

* a client that declares the ``io.modelcontextprotocol/tasks`` extension on the listen request may
  ask for ``taskIds``; without the extension that is ``-32021`` with the capability to declare;
* the acknowledgement's ``taskIds`` are the requested tasks the caller may see (its own, unexpired);
* right after the acknowledgement each of them is sent as it is now (so a task that changed between
  its ``CreateTaskResult`` and the listen is not missed), then once for every status change
  (``working``, ``input_required``, ``completed``, ``failed``, ``cancelled``) until it ends;
* each ``notifications/tasks`` carries the ``DetailedTask`` that ``tasks/get`` would answer then.

Status changes are published through the kernel's notifier (:mod:`plexor.notify`, kind
``tasks/status``, payload ``{"taskId": ...}``), so they cross processes like the other change
events; the process serving a stream reads the task from the shared database and sends it. A
stream hears only tasks of its own caller (the OAuth user, where there is one).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ServerEvent, event_matches, event_to_notification
from pydantic import BaseModel

from plexor.features.tasks.wire import declares_tasks, detailed, missing_tasks_capability, task_owner

if TYPE_CHECKING:  # pragma: no cover
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.server.context import ServerRequestContext
    from mcp_types import RequestId

    from plexor.core.kernel import Kernel
    from plexor.features.tasks.runner import Tasks
    from plexor.notify import Event

__all__ = ["MAX_TASK_IDS", "TASK_STATUS", "Listen", "TaskChanged"]

TASK_STATUS = "tasks/status"  # the notifier's kind for a task's status change
MAX_TASK_IDS = 1000  # task ids one listen request may name
TERMINAL = frozenset({"completed", "failed", "cancelled"})
logger = logging.getLogger("plexor")


@dataclass(frozen=True, eq=False)
class TaskChanged:
    """A task as it is now, on the way to the listen streams that asked for it."""

    task_id: str
    owner: str
    updated_at: float
    task: Mapping[str, object] = field(default_factory=dict)


class EventBus(Protocol):
    """The server's subscription bus (the SDK's ``SubscriptionBus``, carrying :class:`TaskChanged` too)."""

    async def publish(self, event: ServerEvent | TaskChanged) -> None: ...

    def subscribe(self, listener: Callable[[ServerEvent | TaskChanged], None]) -> Callable[[], object]: ...


class _TaskNotification(BaseModel):
    """``notifications/tasks``: the SDK's typed notifications lack it (it is the extension's)."""

    method: str = "notifications/tasks"
    params: dict[str, object]


def _honored(requested: types.SubscriptionFilter, task_ids: list[str] | None) -> types.SubscriptionFilter:
    extra: dict[str, object] = {"taskIds": task_ids} if task_ids else {}
    return types.SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions) if requested.resource_subscriptions else None,
        **extra,
    )


def _requested_task_ids(ctx: ServerRequestContext[object, object], params: types.SubscriptionsListenRequestParams) -> list[str] | None:
    raw = (params.notifications.model_extra or {}).get("taskIds")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
        raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of task ids (strings): the taskId "
                       "of each CreateTaskResult whose status changes this stream should carry",
                       {"field": "notifications.taskIds"})
    if len(raw) > MAX_TASK_IDS:
        raise MCPError(types.INVALID_PARAMS, f"notifications.taskIds names {len(raw)} tasks; at most {MAX_TASK_IDS} "
                       "per listen request: open another stream for the rest", {"field": "notifications.taskIds"})
    meta = params.meta or {}
    caps = meta.get("io.modelcontextprotocol/clientCapabilities") if isinstance(meta, Mapping) else None
    extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
    if not declares_tasks(ctx) and not (isinstance(extensions, Mapping) and "io.modelcontextprotocol/tasks" in extensions):
        raise missing_tasks_capability("subscriptions/listen with notifications.taskIds")
    return list(dict.fromkeys(raw))


def check_uris(uris: list[str], environ: Mapping[str, str], where: str, held: int = 0) -> None:
    """Refuse more than ``PLEXOR_MAX_SUBSCRIPTIONS`` URIs (``held`` already) or one longer than ``PLEXOR_MAX_URI_LENGTH``."""
    from plexor.limits import refuse, value

    most, longest = int(value("subscriptions", environ)), int(value("uri_length", environ))
    for uri in uris:
        if len(uri) > longest:
            raise MCPError(types.INVALID_PARAMS, refuse("uri_length", longest, f"a URI of {len(uri)} characters",
                                                        "subscribe to a shorter URI"))
    if held + len(uris) > most:
        raise MCPError(types.INVALID_PARAMS, refuse("subscriptions", most, f"{where} would hold {held + len(uris)} URIs",
                                                    "unsubscribe from some first"))


class UriBytes:
    """The bytes of subscribed URIs each caller holds, over its sessions' subscriptions and its listen streams,
    refused past ``PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER``. A holder (a session's connection, a stream) is held
    weakly: what an ended session held is given back with it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: weakref.WeakKeyDictionary[object, tuple[str, int]] = weakref.WeakKeyDictionary()

    def of(self, who: str) -> int:
        return sum(size for owner, size in list(self._held.values()) if owner == who)

    def take(self, who: str, holder: object, uris: list[str]) -> None:
        from plexor.limits import refuse

        more = sum(len(uri.encode()) for uri in uris)
        total = self.of(who) + more
        if total > self.limit:
            raise MCPError(types.INVALID_PARAMS, refuse(
                "subscription_bytes_per_caller", self.limit, f"this caller's subscribed URIs would take {total} bytes",
                "unsubscribe from some first, or close a listen stream"))
        owner, size = self._held.get(holder, (who, 0))
        self._held[holder] = (owner, size + more)

    def give_back(self, holder: object, uris: list[str] | None = None) -> None:
        """Give back what ``holder`` held for ``uris`` (all of it when None)."""
        owner, size = self._held.get(holder, ("", 0))
        left = 0 if uris is None else size - sum(len(uri.encode()) for uri in uris)
        if left > 0:
            self._held[holder] = (owner, left)
        else:
            self._held.pop(holder, None)


class _Holder:
    """What a listen stream holds its URIs by (weakly referable)."""


def uri_budget(kernel: Kernel) -> UriBytes:
    """The kernel's :class:`UriBytes`, as ``PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER`` sets it (kept on the kernel)."""
    from plexor.limits import value

    return kernel.keep(UriBytes, lambda: UriBytes(int(value("subscription_bytes_per_caller", kernel.environ))))


def hold_uris(kernel: Kernel, ctx: ServerRequestContext[object, object], holder: object | None, uris: list[str]) -> None:
    """Count ``uris`` as held by ``holder`` (a session's connection) for the caller of ``ctx``; refused past its budget."""
    from plexor.limits import principal

    if holder is not None:
        uri_budget(kernel).take(principal(getattr(getattr(ctx, "request", None), "scope", None)), holder, uris)


def release_uris(kernel: Kernel, holder: object | None, uris: list[str]) -> None:
    """``holder`` no longer holds ``uris`` (unsubscribed)."""
    if holder is not None:
        uri_budget(kernel).give_back(holder, uris)


class Listen:
    """Serves ``subscriptions/listen``: one call is one stream (see the module's documentation).

    ``bus`` is the server's ``SubscriptionBus`` (the SDK's events and :class:`TaskChanged` ride it);
    :meth:`on_task_event` takes the notifier's ``tasks/status`` events.
    """

    def __init__(self, bus: EventBus, kernel: Kernel, *, max_subscriptions: int | None = None, max_buffered_events: int = 1024) -> None:
        from plexor.limits import PerCaller, value

        self._bus = bus
        self._kernel = kernel
        self._max_subscriptions = max_subscriptions or int(value("listen_streams", kernel.environ))
        self._per_caller = PerCaller(int(value("listen_per_caller", kernel.environ)))
        self._max_buffered_events = max_buffered_events
        self._streams: set[MemoryObjectSendStream[ServerEvent | TaskChanged]] = set()
        self._watched: Counter[str] = Counter()  # task id -> open streams that asked for it
        self._reads: set[asyncio.Task[None]] = set()

    def _tasks(self) -> Tasks:
        from plexor.features.tasks.runner import tasks_of

        return tasks_of(self._kernel)

    # -- status changes, from the notifier (any process) ---------------------------------------
    def on_task_event(self, event: Event) -> None:
        """A task's status changed (here or in another process): read it and hand it to the streams that watch it."""
        task_id = event.payload.get("taskId")
        if not isinstance(task_id, str) or not self._watched.get(task_id):
            return
        read = asyncio.get_running_loop().create_task(self._publish(task_id))
        self._reads.add(read)
        read.add_done_callback(self._reads.discard)

    async def _publish(self, task_id: str) -> None:
        try:
            row = await self._tasks().read(task_id)
        except Exception as exc:  # noqa: BLE001 - the database may be briefly unavailable; clients may still poll
            self._kernel.log.debug("task_status_not_read", task=task_id, error=str(exc))
            return
        if row is not None:
            await self._bus.publish(TaskChanged(row.task_id, row.owner, row.updated_at, detailed(row)))

    # -- one stream -----------------------------------------------------------------------------
    async def __call__(self, ctx: ServerRequestContext[object, object], params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        from plexor.limits import principal, refuse

        if len(self._streams) >= self._max_subscriptions:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached: " + refuse(
                "listen_streams", self._max_subscriptions, f"{len(self._streams)} listen streams are open",
                "close one, or retry later"))
        uris = list(params.notifications.resource_subscriptions or ())
        check_uris(uris, self._kernel.environ, "this listen stream")
        who = principal(getattr(getattr(ctx, "request", None), "scope", None))
        if not self._per_caller.take(who):
            raise MCPError(types.INVALID_REQUEST, refuse(
                "listen_per_caller", self._per_caller.limit, "this caller already has that many listen streams open",
                "close one of them first (or name more URIs in one stream)"))
        holder, budget = _Holder(), uri_budget(self._kernel)
        try:
            budget.take(who, holder, uris)
            return await self._stream(ctx, params, subscription_id)
        finally:
            budget.give_back(holder)
            self._per_caller.give_back(who)

    async def _stream(self, ctx: ServerRequestContext[object, object], params: types.SubscriptionsListenRequestParams,
                      subscription_id: RequestId) -> types.SubscriptionsListenResult:
        requested_ids = _requested_task_ids(ctx, params)
        owner = task_owner(ctx) if requested_ids is not None else ""
        asked = frozenset(requested_ids or ())
        sdk_filter = _honored(params.notifications, None)
        uris = frozenset(sdk_filter.resource_subscriptions or ())
        meta: dict[str, object] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ServerEvent | TaskChanged](self._max_buffered_events)

        def deliver(event: ServerEvent | TaskChanged) -> None:
            if isinstance(event, TaskChanged):
                if event.task_id not in asked or event.owner != owner:
                    return
            elif not event_matches(sdk_filter, uris, event):
                return
            try:
                send.send_nowait(event)
            except anyio.ClosedResourceError:
                pass
            except anyio.WouldBlock:
                logger.warning("listen stream %r backlog full; ending the stream", subscription_id)
                self._streams.discard(send)
                send.close()

        # Subscribed before the tasks are read and the ack is sent: nothing that changes meanwhile is lost.
        unsubscribe = self._bus.subscribe(deliver)
        self._streams.add(send)
        self._watched.update(asked)
        sent: dict[str, tuple[float, str, str]] = {}
        try:
            snapshots = await self._snapshots(requested_ids or [], owner)
            honored = _honored(params.notifications, [s.task_id for s in snapshots] or None)
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
                related_request_id=subscription_id)
            for snapshot in snapshots:
                await self._send_task(ctx, snapshot, meta, sent)
            honored_ids = {s.task_id for s in snapshots}
            async for event in recv:
                if isinstance(event, TaskChanged):
                    if event.task_id in honored_ids:
                        await self._send_task(ctx, event, meta, sent)
                    continue
                await ctx.session.send_notification(event_to_notification(event, meta), related_request_id=subscription_id)
        finally:
            try:
                unsubscribe()
            except Exception:  # noqa: BLE001 - the stream's own cleanup must go on
                logger.exception("bus unsubscribe raised; continuing stream cleanup")
            self._unwatch(asked)
            self._streams.discard(send)
            send.close()
            recv.close()
        return types.SubscriptionsListenResult(_meta=meta)

    async def _snapshots(self, requested_ids: list[str], owner: str) -> list[TaskChanged]:
        """The requested tasks as they are now: those of ``owner`` that exist and have not expired."""
        snapshots: list[TaskChanged] = []
        if requested_ids:
            tasks = self._tasks()
            for task_id in requested_ids:
                row = await tasks.read(task_id)
                if row is not None and row.owner == owner and not row.expired():
                    snapshots.append(TaskChanged(row.task_id, row.owner, row.updated_at, detailed(row)))
        return snapshots

    def _unwatch(self, asked: frozenset[str]) -> None:
        """A stream that asked for ``asked`` has ended: tasks no other stream watches are watched no more."""
        self._watched.subtract(asked)
        for task_id in asked:
            if self._watched.get(task_id, 0) <= 0:
                self._watched.pop(task_id, None)

    @staticmethod
    async def _send_task(ctx: ServerRequestContext[object, object], changed: TaskChanged, meta: dict[str, object], sent: dict[str, tuple[float, str, str]]) -> None:
        """Send a task's state unless this stream already sent it (or a newer one, or its end)."""
        status = str(changed.task.get("status"))
        key = (changed.updated_at, status, str(changed.task.get("statusMessage", "")))
        last = sent.get(changed.task_id)
        if last is not None and (last[1] in TERMINAL or key == last or changed.updated_at < last[0]):
            return
        sent[changed.task_id] = key
        params = {**changed.task, "_meta": meta}
        await ctx.session.send_notification(_TaskNotification(params=params),  # type: ignore[arg-type]
                                            related_request_id=ctx.request_id)

    def close(self) -> None:
        """End every open listen stream gracefully (each sends its result as the last frame)."""
        for stream in list(self._streams):
            stream.close()
