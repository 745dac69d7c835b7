"""Tasks spoken as MCP, in both eras: the ``tasks`` built-in plugin (:mod:`plexor.features.tasks.plugin`) serves them.

* **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension): a client
  that lists the extension in a request's capabilities may get a
  ``CreateTaskResult`` (``resultType: "task"``) from ``tools/call``; it polls
  ``tasks/get`` (the result, error or input requests inlined), answers with
  ``tasks/update`` and stops with ``tasks/cancel``.
* **2025-11-25** (tasks in the core protocol): the server advertises
  ``capabilities.tasks``; a ``tools/call`` with a ``task`` parameter answers
  ``{"task": {...}}``; ``tasks/get``, ``tasks/result`` (waits, and carries the
  task's questions to the client), ``tasks/cancel`` and ``tasks/list``;
  ``notifications/tasks/status`` on the creating connection.

Which tools run as tasks is each tool's ``task=`` registration
("forbidden", the default; "optional"; "required").
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from plexor.core.eras import is_stateless, stateless_era
from plexor.features.tasks.runner import Tasks, tasks_of
from plexor.features.tasks.store import TaskRow, iso

if TYPE_CHECKING:  # pragma: no cover
    from plexor.core.kernel import Kernel

__all__ = ["TASKS_EXTENSION", "TaskParams", "TaskProtocol", "advertise"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
MISSING_CAPABILITY = -32021
HEADER_MISMATCH = -32020
LEGACY_ONLY = frozenset({"tasks/result", "tasks/list"})
# How long a task-capable call may take and still be answered as a plain call (2026-07-28 only).
IMMEDIATE_SECONDS = 0.02


class TaskParams(types.RequestParams):
    """The params of every ``tasks/*`` request (each method checks what it needs)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: Any = Field(default=None, alias="taskId")
    input_responses: Any = Field(default=None, alias="inputResponses")
    cursor: str | None = None


def _declares_tasks(ctx: Any) -> bool:
    meta = (ctx.params or {}).get("_meta") if isinstance(ctx.params, dict) else None
    caps = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _missing_capability(what: str) -> MCPError:
    return MCPError(MISSING_CAPABILITY, f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension. "
                    f"Declare it in the request's _meta {CLIENT_CAPABILITIES} (extensions: {{\"{TASKS_EXTENSION}\": {{}}}}).",
                    {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


def _owner(ctx: Any) -> str:
    """Whose task: the caller's principal, set by ``plexor.features.auth``'s guard from the verified token (issuer, subject
    and client; a token without a subject owns only its own tasks); another caller cannot see it. Without OAuth
    (stdio, no token, a static token such as the daemon's) there is one principal, the local user (""): any
    caller that may call the server may follow its tasks by id. No token can name the local user."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    access = scope.get("plexor.access") if isinstance(scope, dict) else None  # set by plexor.features.auth's guard
    principal = getattr(access, "principal", "")
    return principal if isinstance(principal, str) else ""


def task_fields(row: TaskRow, modern: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"taskId": row.task_id, "status": row.status, "createdAt": iso(row.created_at),
                           "lastUpdatedAt": iso(row.updated_at)}
    if row.status_message:
        out["statusMessage"] = row.status_message
    if modern:
        out["ttlMs"] = row.ttl_ms
        out["pollIntervalMs"] = row.poll_ms
    else:
        out["ttl"] = row.ttl_ms
        out["pollInterval"] = row.poll_ms
    return out


def detailed(row: TaskRow) -> dict[str, Any]:
    """The 2026-07-28 ``DetailedTask``: the task with its input requests, result or error inlined."""
    out = task_fields(row, True)
    if row.status == "input_required":
        out["inputRequests"] = row.input_requests
    elif row.status == "completed" and row.result is not None:
        out["result"] = row.result
    elif row.status == "failed":
        out["error"] = row.error or {"code": types.INTERNAL_ERROR, "message": row.status_message or "the task failed"}
    return out


class TaskProtocol:
    """The handlers and the middleware of one server."""

    def __init__(self, server: Any, kernel: Kernel) -> None:
        self.server = server
        self.kernel = kernel
        self._tasks: Tasks | None = None

    @property
    def tasks(self) -> Tasks:
        if self._tasks is None:  # the database is opened on the first task, not at start
            self._tasks = tasks_of(self.kernel)
            self._tasks.notifier = self._send_status
            self._tasks.path = getattr(self.server, "path", None)  # a task's run crosses the layers after `tasks`
        return self._tasks

    # -- tools/call and tools/list -------------------------------------------------------------
    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call" and ctx.request_id is not None and isinstance(ctx.params, dict):
            return await self.tools_call(ctx, call_next)
        if ctx.method == "tools/list" and not stateless_era(ctx):
            return self._mark_tools(await call_next(ctx))
        return await call_next(ctx)

    def _mark_tools(self, result: Any) -> Any:
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                spec = self.kernel.registry.tools.get(str(tool.get("name"))) if isinstance(tool, dict) else None
                support = getattr(spec, "task", "forbidden")
                if spec is not None and support != "forbidden":
                    tool["execution"] = {"taskSupport": support}
        return result

    async def tools_call(self, ctx: Any, call_next: Any) -> Any:
        from plexor.errors import PlexorError

        params: dict[str, Any] = ctx.params
        name = params.get("name")
        spec = self.kernel.find_tool(name) if isinstance(name, str) else None  # the kernel's one name resolution
        support = getattr(spec, "task", "forbidden") if spec is not None else "forbidden"
        modern = stateless_era(ctx)
        wants = _declares_tasks(ctx) if modern else isinstance(params.get("task"), dict)
        if spec is None or support == "forbidden":
            if wants and not modern and spec is not None:
                raise MCPError(types.METHOD_NOT_FOUND, f"tool {spec.name!r} cannot run as a task (its taskSupport is "
                               "forbidden): call it again without the task parameter")
            return await call_next(ctx)
        if not wants:
            if support != "required":
                return await call_next(ctx)
            if modern:
                raise _missing_capability(f"tool {spec.name!r} runs only as a task, so it")
            raise MCPError(types.METHOD_NOT_FOUND, f"tool {spec.name!r} runs only as a task (taskSupport: required): "
                           "send tools/call with a task parameter, e.g. \"task\": {\"ttl\": 60000}")
        arguments = params.get("arguments")
        arguments = {} if arguments is None else arguments
        try:  # bad arguments are answered now, as a plain error result, not as a task that fails
            if not isinstance(arguments, dict):
                raise TypeError
            spec.signature.validate(dict(arguments))
        except (PlexorError, TypeError):
            return await call_next(ctx)
        if modern:
            meta = params.get("_meta") or {}
            caps = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
            capabilities = dict(caps) if isinstance(caps, dict) else {}
            ttl = None
        else:
            from plexor.exchange import client_capabilities

            capabilities = client_capabilities(ctx.session)
            raw_ttl = params["task"].get("ttl")
            ttl = raw_ttl if isinstance(raw_ttl, int) and not isinstance(raw_ttl, bool) and raw_ttl > 0 else None
        def create(start: bool = True, store: bool = True) -> Any:
            return self.tasks.create(
                tool=spec.name, arguments=dict(arguments), era="2026-07-28" if modern else "2025-11-25",
                owner=_owner(ctx), capabilities=capabilities, ttl_ms=ttl,
                idempotent=bool(spec.annotations.get("idempotentHint")), session=None if modern else ctx.session,
                start=start, store=store)

        if getattr(spec, "detach", "start") == "manual":
            return await self._detachable(ctx, call_next, lambda: create(start=False), modern)
        if not modern:
            return self._created(await create(), modern)
        # 2026-07-28: a call that ends at once is answered as a plain call (SEP-2663 allows it), and its task is
        # never stored; one still running after IMMEDIATE_SECONDS, or reporting progress, or asking, is stored
        # and answered with the task.
        row = await create(store=False)
        return await self._immediate_or_task(row)

    async def _immediate_or_task(self, row: TaskRow) -> dict[str, Any]:
        tasks = self.tasks
        unstored = tasks.unstored[row.task_id]
        waiters = [asyncio.ensure_future(unstored.finished.wait()), asyncio.ensure_future(unstored.stored.wait())]
        try:
            await asyncio.wait(waiters, timeout=IMMEDIATE_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if unstored.finished.is_set() and not unstored.storing:
            tasks.unstored.pop(row.task_id, None)
            if unstored.error is not None:  # as the plain call would have failed
                error = unstored.error
                raise MCPError(int(error.get("code", types.INTERNAL_ERROR)), str(error.get("message")), error.get("data"))
            result = unstored.result
            return {"resultType": "complete", **result,
                    "_meta": {**(result.get("_meta") or {}), SERVER_INFO: self.server.server_info_stamp}}
        await tasks.materialize(row.task_id)
        return self._created(row, True)

    def _created(self, row: TaskRow, modern: bool) -> dict[str, Any]:
        if modern:
            return {"resultType": "task", **task_fields(row, True), "_meta": {SERVER_INFO: self.server.server_info_stamp}}
        return {"task": task_fields(row, False)}

    async def _detachable(self, ctx: Any, call_next: Any, create: Any, modern: bool) -> Any:
        """Run the call as an ordinary request until it finishes (its answer) or calls ``ctx.detach()`` (a task)."""
        from plexor.context import DETACHER
        from plexor.features.tasks.runner import Detachable

        tasks = self.tasks
        hook = Detachable(tasks, create)
        finished = asyncio.Event()
        outcome: dict[str, Any] = {}

        async def run() -> None:
            try:
                outcome["result"] = await call_next(ctx)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits: the request, or the task
                outcome["error"] = exc
            finally:
                finished.set()
                if hook.row is not None:
                    await self._settle_detached(hook.row.task_id, outcome)

        token = DETACHER.set(hook)
        try:
            runner = asyncio.get_running_loop().create_task(run())  # the context (and the hook) is copied
        finally:
            DETACHER.reset(token)
        waiters = [asyncio.ensure_future(finished.wait()), asyncio.ensure_future(hook.detached.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            runner.cancel()
            raise
        finally:
            for waiter in waiters:
                waiter.cancel()
        if hook.row is not None:
            tasks.ensure_loop()
            return self._created(hook.row, modern)
        error = outcome.get("error")
        if error is not None:
            raise error
        return outcome["result"]

    async def _settle_detached(self, task_id: str, outcome: dict[str, Any]) -> None:
        from plexor.features.tasks.runner import tool_error

        tasks = self.tasks
        tasks.running.pop(task_id, None)
        error = outcome.get("error")
        try:
            if error is None:
                result = {k: v for k, v in dict(outcome["result"]).items() if k != "resultType"}
                summary = "the tool reported an error" if result.get("isError") else "the task completed"
                await tasks.write(tasks.store.settle, task_id, "completed", summary, result=result)
            elif not isinstance(error, asyncio.CancelledError):
                wire = tool_error(error)
                await tasks.write(tasks.store.settle, task_id, "failed", str(wire["message"]).splitlines()[0], error=wire)
        finally:
            tasks.notify(task_id, final=True)

    # -- tasks/* ------------------------------------------------------------------------------
    async def _find(self, ctx: Any, params: TaskParams, method: str) -> TaskRow:
        modern = stateless_era(ctx)
        if modern and method in LEGACY_ONLY:
            raise MCPError(types.METHOD_NOT_FOUND, f"Method not found: {method} was removed in 2026-07-28 "
                           "(tasks/get inlines the result); use tasks/get.", method)
        if not modern and method == "tasks/update":
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found: tasks/update is 2026-07-28's; a 2025-11-25 "
                           "client answers a task's questions through tasks/result.", method)
        if modern and not _declares_tasks(ctx):
            raise _missing_capability(method)
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
        if row is None or row.owner != _owner(ctx):
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: Task not found ({task_id!r}). Task ids "
                           "come from the CreateTaskResult of tools/call; a task is deleted when its ttl has passed.",
                           {"taskId": task_id})
        if row.expired():
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: Task has expired ({task_id!r}, ttl "
                           f"{row.ttl_ms} ms). Call the tool again.", {"taskId": task_id})
        found: TaskRow = row
        return found

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        row = await self._find(ctx, params, "tasks/get")
        return detailed(row) if stateless_era(ctx) else task_fields(row, False)

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
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

    async def update(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
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

    async def list(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
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
        rows = await self.tasks.db(self.tasks.store.page, _owner(ctx), offset, size + 1)
        out: dict[str, Any] = {"tasks": [task_fields(r, False) for r in rows[:size]]}
        if len(rows) > size:
            out["nextCursor"] = base64.urlsafe_b64encode(f"t:{offset + size}".encode()).decode()
        return out

    async def result(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        """2025-11-25 ``tasks/result``: wait for the end; meanwhile carry the task's questions to this client."""
        from plexor.asking import question_from_wire
        from plexor.exchange import Exchange

        row = await self._find(ctx, params, "tasks/result")
        tasks = self.tasks
        delay = 0.05
        while not row.terminal:
            if row.status == "input_required" and row.input_requests:
                answers = {}
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
            result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": row.task_id}}
            return result
        error = row.error or {"code": types.INTERNAL_ERROR, "message": row.status_message or f"the task was {row.status}"}
        if row.status == "cancelled":
            error = {"code": types.INTERNAL_ERROR, "message": f"task {row.task_id!r} was cancelled; it has no result"}
        raise MCPError(int(error.get("code", types.INTERNAL_ERROR)), str(error.get("message")),
                       {**(error.get("data") or {}), RELATED_TASK: {"taskId": row.task_id}})

    async def _send_status(self, session: Any, row: TaskRow) -> None:
        params = types.TaskStatusNotificationParams.model_validate(task_fields(row, False))
        await session.send_notification(types.TaskStatusNotification(params=params))


def _stale(row: TaskRow, tasks: Tasks) -> bool:
    import time

    from plexor.features.tasks.store import _alive

    return row.lease_until < time.time() or (row.host == tasks.host and not _alive(row.pid))


def advertise(capabilities: types.ServerCapabilities, protocol_version: str | None) -> None:
    """The tasks capability of the handshake era (2026-07-28 clients learn of tasks from the extension)."""
    if not is_stateless(protocol_version):
        capabilities.tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(), cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())))
