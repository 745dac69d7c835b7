"""Tasks through ``plexor connect``: the relay passes them to the daemon in the end client's era.

* **2025-11-25**: a ``tools/call`` with a ``task`` parameter, ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and
  ``tasks/list`` go up on a 2025-11-25 connection to the daemon (the era whose tasks they are; the tool list too,
  for its ``execution.taskSupport``). A task's questions reach the end client through ``tasks/result``: the
  daemon asks them on that connection, and the relay asks them of the end client.
* **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension): when the end client declares the extension,
  the relay declares it upstream too, so the daemon may answer ``tools/call`` with a task, which the relay
  returns unresolved; ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` follow it.

Every request still crosses the daemon's whole request path: its authorization (the relay's ``--profile``)
decides a task's tool as it decides a plain call, and its answers, refusals included, come back unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from pydantic import ConfigDict

from plexor.core.eras import stateless_era
from plexor.features.daemon.upstream import Caps, Upstream

__all__ = ["LEGACY", "METHODS", "TASKS", "TASKS_EXTENSION", "TaskRequestParams", "declares_tasks", "legacy_tasks",
           "task_methods"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update")
LEGACY: Caps = frozenset({"legacy"})  # a 2025-11-25 connection upstream
TASKS: Caps = frozenset({"tasks"})  # the tasks extension declared upstream

Handler = Callable[[ServerRequestContext, "TaskRequestParams"], Awaitable[dict[str, object]]]


class TaskRequestParams(types.RequestParams):
    """The params of a ``tasks/*`` request, kept whole: the daemon checks them."""

    model_config = ConfigDict(extra="allow")


def declares_tasks(ctx: ServerRequestContext) -> bool:
    """Whether a 2026-07-28 end client's request declares the tasks extension (in its ``_meta``, as the daemon reads it)."""
    meta = ctx.params.get("_meta") if ctx.params is not None else None
    caps = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = caps.get("extensions") if isinstance(caps, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def task_caps(ctx: ServerRequestContext) -> Caps:
    """What the relay declares upstream for a request about tasks: the 2025-11-25 era itself, or the extension."""
    if not stateless_era(ctx):
        return LEGACY
    return TASKS if declares_tasks(ctx) else frozenset()


async def _send(up: Upstream, caps: Caps, method: str, params: Mapping[str, object],
                tool: str | None = None) -> dict[str, object]:
    """``method`` sent upstream as is; its answer as the daemon gave it. ``tool``: the tool a ``tools/call`` calls
    (sent again after the daemon died only when that is safe, :meth:`Upstream.request`)."""
    from plexor.features.tasks.client import task_request

    if "legacy" not in caps:  # stamped with the era's _meta: the tasks extension among the client's capabilities
        return dict(await up.request(lambda c: task_request(c.session, method, dict(params)), caps, tool=tool))
    # SDK private (ClientSession._dispatcher): the typed 2025-11-25 session takes a tools/call answer for a
    # CallToolResult, never a CreateTaskResult, and offers no public raw request
    return dict(await up.request(lambda c: c.session._dispatcher.send_raw_request(method, dict(params), {}), caps,
                                 tool=tool))


def _legacy_asking(up: Upstream, ctx: ServerRequestContext) -> Caps:
    """A 2025-11-25 connection declaring what the end client can be asked: a task keeps the capabilities of the
    call that made it, and the daemon asks its questions on the connection of ``tasks/result``, which the relay
    passes on to the end client (:class:`plexor.features.daemon.upstream.EndClient`)."""
    from plexor.features.daemon.asking import asking_caps

    up.end.session = ctx.session
    return LEGACY | asking_caps(ctx)


def legacy_tasks(up: Upstream) -> ServerMiddleware[dict[str, object]]:
    """Middleware: a 2025-11-25 ``tools/call`` with a ``task`` parameter, sent up as such, its ``CreateTaskResult``
    answered as the daemon gave it (a handler's answer to ``tools/call`` must be a ``CallToolResult``)."""

    async def middleware(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or stateless_era(ctx) or params is None or not isinstance(params.get("task"), Mapping):
            return await call_next(ctx)
        from plexor.features.daemon.asking import error_result
        from plexor.features.daemon.repeat import Interrupted

        name = params.get("name")
        try:  # a task is created as the call runs: sent again only as the call would be
            return await _send(up, _legacy_asking(up, ctx), "tools/call", {k: v for k, v in params.items() if k != "_meta"},
                               tool=name if isinstance(name, str) else "")
        except Interrupted as err:  # answered as the daemon answers a call that makes no task: a tool error result
            return error_result(err).model_dump(by_alias=True, mode="json", exclude_none=True)

    return middleware


def task_methods(up: Upstream) -> list[tuple[str, type[TaskRequestParams], Handler]]:
    """The ``tasks/*`` methods, each relayed in the end client's era (the daemon answers what that era has)."""

    def relay(method: str) -> Handler:
        async def handler(ctx: ServerRequestContext, params: TaskRequestParams) -> dict[str, object]:
            body = params.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})
            caps = task_caps(ctx)
            if caps == LEGACY and method == "tasks/result":  # the daemon asks the task's questions meanwhile
                caps = _legacy_asking(up, ctx)
            return await _send(up, caps, method, body)

        return handler

    return [(method, TaskRequestParams, relay(method)) for method in METHODS]
