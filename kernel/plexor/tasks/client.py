"""The client side of 2026-07-28 tasks, for the SDK's ``Client``: tests, benchmarks and client applications.

``Client(url, mode="2026-07-28", extensions=[TasksClient()])`` declares the
``io.modelcontextprotocol/tasks`` extension; a ``tools/call`` that comes back as
a task (``resultType: "task"``) is then resolved by polling ``tasks/get`` (at
the server's ``pollIntervalMs``, at most ``max_poll``), answering its input
requests through ``tasks/update`` with ``answer(request) -> response``, so
``client.call_tool`` returns the final ``CallToolResult`` as for a plain call.
Every task state seen is kept in ``seen`` (progress shows in ``statusMessage``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

__all__ = ["CreateTaskResult", "TasksClient", "task_request"]

_ANY: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class CreateTaskResult(types.Result):
    """What ``tools/call`` answers when it made a task (the task's fields are kept as extra fields)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]


class _Request(types.Request):  # type: ignore[type-arg]
    params: dict[str, Any] | None = None  # sent as given (the base model keeps only the fields it knows)


async def task_request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` (or any request) on an SDK ``ClientSession``."""
    result: dict[str, Any] = await session.send_request(_Request(method=method, params=params), _ANY)
    return result


class TasksClient(ClientExtension):
    """Resolves task results by polling; see the module's documentation."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None, *, max_poll: float = 0.05) -> None:
        self.answer = answer
        self.max_poll = max_poll
        self.seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
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
                error = task.get("error") or {}
                raise MCPError(int(error.get("code", types.INTERNAL_ERROR)),
                               str(error.get("message") or task.get("statusMessage") or f"the task was {status}"),
                               error.get("data"))
            if status == "input_required":
                if self.answer is None:
                    raise MCPError(types.INTERNAL_ERROR, f"task {task_id} asks for input and this client has no answer callback")
                answers = {key: self.answer(request) for key, request in task["inputRequests"].items()}
                await task_request(ctx.session, "tasks/update", {"taskId": task_id, "inputResponses": answers})
            await anyio.sleep(min(self.max_poll, float(task.get("pollIntervalMs") or 0) / 1000))
