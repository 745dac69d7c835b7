"""Tasks on the wire, in both eras: the names, the params of ``tasks/*``, a task as each era shows it, whose task
it is, and the capability the handshake era advertises (:mod:`plexor.features.tasks.protocol` serves them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from plexor.core.eras import is_stateless
from plexor.features.tasks.store import TaskRow, iso

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.context import ServerRequestContext

__all__ = ["TASKS_EXTENSION", "TaskParams", "advertise", "declares_tasks", "detailed", "missing_tasks_capability",
           "task_fields", "task_owner"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
MISSING_CAPABILITY = -32021
HEADER_MISMATCH = -32020


class TaskParams(types.RequestParams):
    """The params of every ``tasks/*`` request (each method checks what it needs, and says what is wrong)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: object = Field(default=None, alias="taskId")
    input_responses: object = Field(default=None, alias="inputResponses")
    cursor: str | None = None


def declares_tasks(ctx: ServerRequestContext[object, object]) -> bool:
    """Whether a 2026-07-28 request lists the tasks extension among its client capabilities."""
    meta = (ctx.params or {}).get("_meta") if isinstance(ctx.params, dict) else None
    caps = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def missing_tasks_capability(what: str) -> MCPError:
    return MCPError(MISSING_CAPABILITY, f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension. "
                    f"Declare it in the request's _meta {CLIENT_CAPABILITIES} (extensions: {{\"{TASKS_EXTENSION}\": {{}}}}).",
                    {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


def task_owner(ctx: ServerRequestContext[object, object]) -> str:
    """Whose task: the caller's principal, set by ``plexor.features.auth``'s guard from the verified token (issuer, subject
    and client; a token without a subject owns only its own tasks); another caller cannot see it. Without OAuth
    (stdio, no token, a static token such as the daemon's) there is one principal, the local user (""): any
    caller that may call the server may follow its tasks by id. No token can name the local user."""
    request = ctx.request
    scope = getattr(request, "scope", None)  # a Starlette request over HTTP; None under stdio
    access = scope.get("plexor.access") if isinstance(scope, dict) else None  # set by plexor.features.auth's guard
    principal = getattr(access, "principal", "")
    return principal if isinstance(principal, str) else ""


def task_fields(row: TaskRow, modern: bool) -> dict[str, object]:
    out: dict[str, object] = {"taskId": row.task_id, "status": row.status, "createdAt": iso(row.created_at),
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


def detailed(row: TaskRow) -> dict[str, object]:
    """The 2026-07-28 ``DetailedTask``: the task with its input requests, result or error inlined."""
    out = task_fields(row, True)
    if row.status == "input_required":
        out["inputRequests"] = row.input_requests
    elif row.status == "completed" and row.result is not None:
        out["result"] = row.result
    elif row.status == "failed":
        out["error"] = row.error or {"code": types.INTERNAL_ERROR, "message": row.status_message or "the task failed"}
    return out


def error_of(error: Mapping[str, object], related: Mapping[str, object] | None = None) -> MCPError:
    """A task's stored JSON-RPC error raised again (with ``related`` added to its data)."""
    code = error.get("code", types.INTERNAL_ERROR)
    data = error.get("data")
    if related is not None:
        data = {**(data if isinstance(data, Mapping) else {}), **related}
    return MCPError(int(code) if isinstance(code, (int, float, str)) else types.INTERNAL_ERROR, str(error.get("message")),
                    data)


def advertise(capabilities: types.ServerCapabilities, protocol_version: str | None) -> None:
    """The tasks capability of the handshake era (2026-07-28 clients learn of tasks from the extension)."""
    if not is_stateless(protocol_version):
        capabilities.tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(), cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())))
