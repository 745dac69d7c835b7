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
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import mcp_types as types
from mcp.shared.exceptions import MCPError

from plexor.core.eras import stateless_era
from plexor.features.tasks.methods import TaskMethods
from plexor.features.tasks.store import TaskRow
from plexor.features.tasks.wire import (
    CLIENT_CAPABILITIES,
    SERVER_INFO,
    declares_tasks,
    error_of,
    missing_tasks_capability,
    task_fields,
    task_owner,
)

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

__all__ = ["TaskProtocol"]

# How long a task-capable call may take and still be answered as a plain call (2026-07-28 only).
IMMEDIATE_SECONDS = 0.02


@dataclasses.dataclass
class _Ended:
    """How a detachable call ended: its result, or what it raised."""

    result: HandlerResult = None
    error: BaseException | None = None


class TaskProtocol(TaskMethods):
    """The middleware (``tools/call`` as a task) and the ``tasks/*`` handlers of one server."""

    # -- tools/call and tools/list -------------------------------------------------------------
    async def middleware(self, ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.request_id is not None and isinstance(ctx.params, dict):
            return await self.tools_call(ctx, call_next)
        if ctx.method == "tools/list" and not stateless_era(ctx):
            return self._mark_tools(await call_next(ctx))
        return await call_next(ctx)

    def _mark_tools(self, result: HandlerResult) -> HandlerResult:
        if isinstance(result, dict) and isinstance(result.get("tools"), list):
            for tool in result["tools"]:
                spec = self.kernel.registry.tools.get(str(tool.get("name"))) if isinstance(tool, dict) else None
                support = getattr(spec, "task", "forbidden")
                if spec is not None and support != "forbidden":
                    tool["execution"] = {"taskSupport": support}
        return result

    async def tools_call(self, ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        spec = self.kernel.find_tool(name) if isinstance(name, str) else None  # the kernel's one name resolution
        support = getattr(spec, "task", "forbidden") if spec is not None else "forbidden"
        modern = stateless_era(ctx)
        if modern and support == "forbidden":  # the common case: a plain call, whatever the request declares
            return await call_next(ctx)
        wants = declares_tasks(ctx) if modern else isinstance(params.get("task"), dict)
        if spec is None or support == "forbidden":
            if wants and not modern and spec is not None:
                raise MCPError(types.METHOD_NOT_FOUND, f"tool {spec.name!r} cannot run as a task (its taskSupport is "
                               "forbidden): call it again without the task parameter")
            return await call_next(ctx)
        if not wants:
            if support != "required":
                return await call_next(ctx)
            if modern:
                raise missing_tasks_capability(f"tool {spec.name!r} runs only as a task, so it")
            raise MCPError(types.METHOD_NOT_FOUND, f"tool {spec.name!r} runs only as a task (taskSupport: required): "
                           "send tools/call with a task parameter, e.g. \"task\": {\"ttl\": 60000}")
        from plexor.errors import PlexorError

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
        def create(start: bool = True, store: bool = True) -> Awaitable[TaskRow]:
            return self.tasks.create(
                tool=spec.name, arguments=dict(arguments), era="2026-07-28" if modern else "2025-11-25",
                owner=task_owner(ctx), capabilities=capabilities, ttl_ms=ttl,
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

    async def _immediate_or_task(self, row: TaskRow) -> dict[str, object]:
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
                raise error_of(unstored.error)
            result = unstored.result or {}
            meta = result.get("_meta")
            return {"resultType": "complete", **result,
                    "_meta": {**(meta if isinstance(meta, Mapping) else {}), SERVER_INFO: self.server.server_info_stamp}}
        await tasks.materialize(row.task_id)
        return self._created(row, True)

    def _created(self, row: TaskRow, modern: bool) -> dict[str, object]:
        if modern:
            return {"resultType": "task", **task_fields(row, True), "_meta": {SERVER_INFO: self.server.server_info_stamp}}
        return {"task": task_fields(row, False)}

    async def _detachable(self, ctx: ServerRequestContext[object, object], call_next: CallNext, create: Callable[[], Awaitable[TaskRow]],
                          modern: bool) -> HandlerResult:
        """Run the call as an ordinary request until it finishes (its answer) or calls ``ctx.detach()`` (a task)."""
        from plexor.context import DETACHER
        from plexor.features.tasks.session import Detachable

        tasks = self.tasks
        hook = Detachable(tasks, create)
        finished = asyncio.Event()
        outcome = _Ended()

        async def run() -> None:
            try:
                outcome.result = await call_next(ctx)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits: the request, or the task
                outcome.error = exc
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
        if outcome.error is not None:
            raise outcome.error
        return outcome.result

    async def _settle_detached(self, task_id: str, outcome: _Ended) -> None:
        from plexor.features.tasks.results import tool_error

        tasks = self.tasks
        tasks.running.pop(task_id, None)
        error = outcome.error
        try:
            if error is None:
                result = {k: v for k, v in dict(outcome.result or {}).items() if k != "resultType"}
                summary = "the tool reported an error" if result.get("isError") else "the task completed"
                await tasks.write(tasks.store.settle, task_id, "completed", summary, result=result)
            elif not isinstance(error, asyncio.CancelledError):
                wire = tool_error(error)
                await tasks.write(tasks.store.settle, task_id, "failed", str(wire["message"]).splitlines()[0], error=wire)
        finally:
            tasks.notify(task_id, final=True)
