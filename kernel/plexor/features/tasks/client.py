"""The client side of 2026-07-28 tasks, for the SDK's ``Client``: tests, benchmarks and client applications.

``Client(url, mode="2026-07-28", extensions=[TasksClient()])`` declares the
``io.modelcontextprotocol/tasks`` extension; a ``tools/call`` that comes back as
a task (``resultType: "task"``) is then resolved by polling ``tasks/get`` (at
the server's ``pollIntervalMs``, at most ``max_poll``), answering its input
requests through ``tasks/update`` with ``answer(request) -> response``, so
``client.call_tool`` returns the final ``CallToolResult`` as for a plain call.
Every task state seen is kept in ``seen`` (progress shows in ``statusMessage``).

Task status notifications (``notifications/tasks`` on a ``subscriptions/listen`` stream that asked
for ``taskIds``; the SDK's typed ``listen()`` has no such filter) are heard with :func:`listen_tasks`:
the states arrive in ``heard`` (and ``on_status(task)``, if given), as ``tasks/get`` would answer them.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

if TYPE_CHECKING:  # pragma: no cover
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import CallOptions

__all__ = ["CreateTaskResult", "TasksClient", "listen_tasks", "task_request"]



class CreateTaskResult(types.Result):
    """What ``tools/call`` answers when it made a task (the task's fields are kept as extra fields)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]


class TaskNotificationParams(types.NotificationParams):
    """The params of ``notifications/tasks``: a ``DetailedTask`` (kept as extra fields)."""

    model_config = ConfigDict(extra="allow")


class _Reply(types.Result):
    """A request's result, every field kept (as extra fields)."""

    model_config = ConfigDict(extra="allow")


class _Request(types.Request):  # type: ignore[type-arg]
    params: dict[str, object] | None = None  # sent as given (the base model keeps only the fields it knows)


async def task_request(session: ClientSession, method: str, params: dict[str, object]) -> dict[str, object]:
    """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (or any request) on an SDK ``ClientSession``."""
    reply = await session.send_request(_Request(method=method, params=params), _Reply)
    return reply.model_dump(by_alias=True, exclude_unset=True)


class TasksClient(ClientExtension):
    """Resolves task results by polling; see the module's documentation."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, answer: Callable[[dict[str, object]], dict[str, object]] | None = None, *, max_poll: float = 0.05,
                 on_status: Callable[[dict[str, object]], Awaitable[None]] | None = None) -> None:
        self.answer = answer
        self.max_poll = max_poll
        self.on_status = on_status
        self.seen: list[dict[str, object]] = []
        self.heard: list[dict[str, object]] = []  # notifications/tasks params, in arrival order

    def notifications(self) -> list[NotificationBinding[TaskNotificationParams]]:
        return [NotificationBinding(method="notifications/tasks", params_type=TaskNotificationParams, handler=self._heard)]

    async def _heard(self, params: TaskNotificationParams) -> None:
        task = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.heard.append(task)
        if self.on_status is not None:
            await self.on_status(task)

    def claims(self) -> list[ResultClaim[CreateTaskResult]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        task_id = str((created.model_extra or {})["taskId"])
        while True:
            task = await task_request(ctx.session, "tasks/get", {"taskId": task_id})
            self.seen.append(task)
            status = task["status"]
            if status == "completed":
                return types.CallToolResult.model_validate(task["result"])
            if status in ("failed", "cancelled"):
                error = task.get("error")
                error = error if isinstance(error, dict) else {}
                code = error.get("code", types.INTERNAL_ERROR)
                raise MCPError(int(code) if isinstance(code, (int, float, str)) else types.INTERNAL_ERROR,
                               str(error.get("message") or task.get("statusMessage") or f"the task was {status}"),
                               error.get("data"))
            if status == "input_required":
                if self.answer is None:
                    raise MCPError(types.INTERNAL_ERROR, f"task {task_id} asks for input and this client has no answer callback")
                requests = task["inputRequests"]
                answers = {key: self.answer(request) for key, request in requests.items()
                           if isinstance(request, dict)} if isinstance(requests, dict) else {}
                await task_request(ctx.session, "tasks/update", {"taskId": task_id, "inputResponses": answers})
            poll = task.get("pollIntervalMs")
            await anyio.sleep(min(self.max_poll, float(poll if isinstance(poll, (int, float)) else 0) / 1000))


_listen_ids = itertools.count(1)


@asynccontextmanager
async def listen_tasks(session: ClientSession, task_ids: list[str], **notifications: object) -> AsyncIterator[str]:
    """Open a ``subscriptions/listen`` stream for ``task_ids`` (plus other filter keys, wire names, e.g.
    ``toolsListChanged=True``) on an SDK ``ClientSession`` of a ``Client`` with :class:`TasksClient`; yields the
    subscription id. The acknowledgement and the notifications reach the client's usual handlers (the
    ``message_handler``; :attr:`TasksClient.heard`). Leaving the block ends the stream."""
    request_id = f"tasks-listen-{next(_listen_ids)}"
    data: dict[str, object] = {"method": "subscriptions/listen",
                            "params": {"notifications": {"taskIds": list(task_ids), **notifications}}}
    opts: CallOptions = {"request_id": request_id}
    # SDK private (ClientSession._stamp, ._dispatcher): the SDK sends no raw request with the era's stamp publicly
    session._stamp(data, opts)  # the era's _meta, and the tasks extension among the client's capabilities
    failure: list[BaseException] = []

    async def drive() -> None:
        try:
            params = data.get("params")
            await session._dispatcher.send_raw_request("subscriptions/listen", params if isinstance(params, dict) else None,
                                                       opts)
        except MCPError as exc:
            failure.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(drive)
        await anyio.sleep(0)
        if failure:
            raise failure[0]
        try:
            yield request_id
        finally:
            group.cancel_scope.cancel()
    if failure:
        raise failure[0]
