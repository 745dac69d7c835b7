"""The ``tasks/*`` methods, in both eras: ``tasks/get``, ``tasks/cancel``, ``tasks/update`` (2026-07-28),
``tasks/result`` and ``tasks/list`` (2025-11-25), each answering only the task's owner.

:class:`plexor.features.tasks.protocol.TaskProtocol` adds the ``tools/call`` side (a call becoming a task).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import mcp_types as types
from mcp.shared.exceptions import MCPError

from plexor.core.eras import stateless_era
from plexor.features.tasks.runner import Tasks, tasks_of
from plexor.features.tasks.session import Layers
from plexor.features.tasks.store import TaskRow
from plexor.features.tasks.wire import (
    HEADER_MISMATCH,
    RELATED_TASK,
    TaskParams,
    declares_tasks,
    detailed,
    error_of,
    missing_tasks_capability,
    task_fields,
    task_owner,
)

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from plexor.core.kernel import Kernel

__all__ = ["Served", "TaskMethods"]

LEGACY_ONLY = frozenset({"tasks/result", "tasks/list"})


@runtime_checkable
class Served(Protocol):
    """The SDK server (:class:`plexor.serving.server.PlexorServer`) as its tasks use it."""

    @property
    def server_info_stamp(self) -> Mapping[str, object]: ...

    @property
    def path(self) -> Layers: ...


class TaskMethods:
    """The ``tasks/*`` handlers of one server, over this process's :class:`~plexor.features.tasks.runner.Tasks`."""

    def __init__(self, server: Served, kernel: Kernel) -> None:
        self.server = server
        self.kernel = kernel
        self._tasks: Tasks | None = None

    @property
    def tasks(self) -> Tasks:
        if self._tasks is None:  # the database is opened on the first task, not at start
            self._tasks = tasks_of(self.kernel)
            self._tasks.notifier = self._send_status
            self._tasks.path = self.server.path  # a task's run crosses the layers after `tasks`
        return self._tasks

    # -- tasks/* ------------------------------------------------------------------------------
    async def _find(self, ctx: ServerRequestContext[object, object], params: TaskParams, method: str) -> TaskRow:
        modern = stateless_era(ctx)
        if modern and method in LEGACY_ONLY:
            raise MCPError(types.METHOD_NOT_FOUND, f"Method not found: {method} was removed in 2026-07-28 "
                           "(tasks/get inlines the result); use tasks/get.", method)
        if not modern and method == "tasks/update":
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found: tasks/update is 2026-07-28's; a 2025-11-25 "
                           "client answers a task's questions through tasks/result.", method)
        if modern and not declares_tasks(ctx):
            raise missing_tasks_capability(method)
        task_id = params.task_id
        if not isinstance(task_id, str) or not task_id:
            raise MCPError(types.INVALID_PARAMS, f"{method} needs params.taskId: the taskId of the CreateTaskResult "
                           "that tools/call returned", {"field": "taskId"})
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        if headers is not None and headers.get("mcp-name") is not None:
            from mcp.shared.inbound import decode_header_value

            if decode_header_value(headers.get("mcp-name")) != task_id:
                raise MCPError(HEADER_MISMATCH, "mcp-name header does not match the request body's 'taskId' parameter: "
                               "send Mcp-Name equal to params.taskId")
        tasks = self.tasks
        row = await tasks.read(task_id)
        if row is not None and not row.terminal and row.worker != tasks.worker and _stale(row, tasks):
            await tasks.reap(only=task_id)
            row = await tasks.read(task_id)
        if row is None or row.owner != task_owner(ctx):
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: Task not found ({task_id!r}). Task ids "
                           "come from the CreateTaskResult of tools/call; a task is deleted when its ttl has passed.",
                           {"taskId": task_id})
        if row.expired():
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: Task has expired ({task_id!r}, ttl "
                           f"{row.ttl_ms} ms). Call the tool again.", {"taskId": task_id})
        return row

    async def get(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        row = await self._find(ctx, params, "tasks/get")
        return detailed(row) if stateless_era(ctx) else task_fields(row, False)

    async def cancel(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        row = await self._find(ctx, params, "tasks/cancel")
        if stateless_era(ctx):
            if not row.terminal:
                await self.tasks.cancel(row.task_id)
            return {}
        if row.terminal:
            raise MCPError(types.INVALID_PARAMS, f"cannot cancel task {row.task_id!r}: it already ended ({row.status})",
                           {"taskId": row.task_id, "status": row.status})
        await self.tasks.cancel(row.task_id)
        fresh = await self.tasks.db(self.tasks.store.get, row.task_id)
        return task_fields(fresh or row, False)

    async def update(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        from plexor.asking import AskError, question_from_wire
        from plexor.exchange import check_answer

        row = await self._find(ctx, params, "tasks/update")
        responses = params.input_responses
        if not isinstance(responses, dict):
            raise MCPError(types.INVALID_PARAMS, "tasks/update needs params.inputResponses: an object mapping each key "
                           "of the task's inputRequests to its answer", {"field": "inputResponses"})
        taken = {}
        for key, answer in responses.items():
            request = row.input_requests.get(key)
            if request is None:
                continue  # not outstanding (never asked, or answered already): ignored, as the spec says
            try:
                check_answer(key, question_from_wire(request), answer)
            except AskError as exc:
                raise MCPError(exc.rpc_code, exc.render(), {**exc.data, "guidance": exc.guidance}) from None
            taken[key] = answer
        if taken:
            await self.tasks.write(self.tasks.store.answer, row.task_id, taken)
            self.tasks.answered(row.task_id)
        return {}

    async def list(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        if stateless_era(ctx):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found: tasks/list was removed in 2026-07-28", "tasks/list")
        offset = 0
        if params.cursor:
            try:
                offset = int(base64.urlsafe_b64decode(params.cursor.encode()).decode().removeprefix("t:"))
            except ValueError:
                raise MCPError(types.INVALID_PARAMS, f"invalid cursor {params.cursor!r}: pass back the nextCursor of "
                               "the previous page, unchanged") from None
        size = self.kernel.page_size
        rows = await self.tasks.db(self.tasks.store.page, task_owner(ctx), offset, size + 1)
        out: dict[str, object] = {"tasks": [task_fields(r, False) for r in rows[:size]]}
        if len(rows) > size:
            out["nextCursor"] = base64.urlsafe_b64encode(f"t:{offset + size}".encode()).decode()
        return out

    async def result(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        """2025-11-25 ``tasks/result``: wait for the end; meanwhile carry the task's questions to this client."""
        from plexor.asking import question_from_wire
        from plexor.exchange import Exchange

        row = await self._find(ctx, params, "tasks/result")
        tasks = self.tasks
        delay = 0.05
        while not row.terminal:
            if row.status == "input_required" and row.input_requests:
                answers: dict[str, object] = {}
                asker = Exchange(session=ctx.session, request_id=ctx.request_id)
                for key, request in row.input_requests.items():
                    try:
                        reply = await asker.request(ctx.session, question_from_wire(request))
                    except Exception as exc:  # noqa: BLE001 - the client could not answer
                        detail = getattr(getattr(exc, "error", None), "message", None) or str(exc) or type(exc).__name__
                        raise MCPError(types.INTERNAL_ERROR, f"task {row.task_id!r} needs an answer to {key!r} "
                                       f"({request.get('method')}) and the client did not give it: {detail}. Call "
                                       "tasks/result again on a connection that can answer it.") from None
                    answers[key] = reply.model_dump(by_alias=True, mode="json", exclude_none=True)
                await tasks.write(tasks.store.answer, row.task_id, answers)
                tasks.answered(row.task_id)
                delay = 0.05
            else:
                ended = tasks.ended(row.task_id)  # runs here: woken when it ends; elsewhere: polled
                try:
                    await asyncio.wait_for(ended.wait() if ended is not None else asyncio.sleep(delay), delay)
                except TimeoutError:
                    pass
                delay = min(delay * 1.5, 0.5)
            row = await self._find(ctx, params, "tasks/result")
        if row.status == "completed" and row.result is not None:
            result = dict(row.result)
            meta = result.get("_meta")
            result["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), RELATED_TASK: {"taskId": row.task_id}}
            return result
        error: dict[str, object] = row.error or {"code": types.INTERNAL_ERROR,
                                                 "message": row.status_message or f"the task was {row.status}"}
        if row.status == "cancelled":
            error = {"code": types.INTERNAL_ERROR, "message": f"task {row.task_id!r} was cancelled; it has no result"}
        raise error_of(error, {RELATED_TASK: {"taskId": row.task_id}})

    async def _send_status(self, session: ServerSession, row: TaskRow) -> None:
        params = types.TaskStatusNotificationParams.model_validate(task_fields(row, False))
        # the SDK's ServerNotification union lacks its own TaskStatusNotification (a stub gap of mcp 2.3)
        await session.send_notification(types.TaskStatusNotification(params=params))  # type: ignore[arg-type]




def _stale(row: TaskRow, tasks: Tasks) -> bool:
    import time

    from plexor.features.tasks.store import _alive

    return row.lease_until < time.time() or (row.host == tasks.host and not _alive(row.pid))
