"""``plexor connect``: MCP on stdin/stdout, relayed to the shared daemon (see :mod:`plexor.features.daemon.process`).

A stdio MCP server (the SDK's low-level ``Server``) whose every handler passes its request upstream through
:class:`plexor.features.daemon.upstream.Upstream`, which starts the daemon when none answers, reconnects, and
restarts it when it died. Questions of a call are passed on (:mod:`plexor.features.daemon.asking`); tasks go
through as the daemon serves them (:mod:`plexor.features.daemon.tasks`), so the relay offers what the daemon's
server offers, and the daemon's authorization (``--profile``) decides every request, tasks included. The
daemon's change notifications are passed on too: list changes and subscribed resources' updates to a 2025-11-25
end client (:mod:`plexor.features.daemon.changes`), a 2026-07-28 end client's ``subscriptions/listen`` streams
(:mod:`plexor.features.daemon.listening`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Awaitable, Callable

import anyio
import mcp_types as types
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server

from plexor.core.eras import stateless_era
from plexor.features.daemon.asking import asking_caps, relay_call, relay_read
from plexor.features.daemon.changes import Downstream, pass_on_changes
from plexor.features.daemon.listening import relay_listen
from plexor.features.daemon.tasks import LEGACY, TASKS, TASKS_EXTENSION, declares_tasks, legacy_tasks, task_methods
from plexor.features.daemon.upstream import Upstream
from plexor.version import __version__

__all__ = ["run_connect"]

Ctx = ServerRequestContext


async def run_connect(environ: dict[str, str] | None = None, *, profile: str | None = None) -> None:
    """Serve MCP on stdin/stdout, relaying every request to the shared daemon (as tool ``profile``, if given)."""
    from plexor.log import get_logger
    from plexor.serving.stdio import stdio_streams

    env = dict(os.environ if environ is None else environ)
    log = get_logger("plexor.connect")
    async with anyio.create_task_group() as tg:
        up = Upstream(env, log, tg, profile)
        # start (or find) the daemon before answering the handshake, and learn what it offers
        discovered = await up.request(lambda c: c.session.send_discover("2026-07-28"))
        offered = types.DiscoverResult.model_validate(discovered).capabilities
        down = Downstream(up)
        server = _relay_server(up, down, offered)
        # listChanged for what the daemon's listen stream carries, passed on by plexor.features.daemon.changes
        opts = server.create_initialization_options(NotificationOptions(
            tools_changed=bool(offered.tools and offered.tools.list_changed),
            prompts_changed=bool(offered.prompts and offered.prompts.list_changed),
            resources_changed=bool(offered.resources and offered.resources.list_changed)))
        tg.start_soon(pass_on_changes, up, down)
        if TASKS_EXTENSION in (offered.extensions or {}):
            server.extensions[TASKS_EXTENSION] = {}
            opts.capabilities.extensions = {**(opts.capabilities.extensions or {}), TASKS_EXTENSION: {}}
            opts.capabilities.tasks = types.ServerTasksCapability(  # as the daemon's tasks feature advertises them
                list=types.TasksListCapability(), cancel=types.TasksCancelCapability(),
                requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())))
        async with stdio_streams(log) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, opts)
        up.close()
        tg.cancel_scope.cancel()


def _relay_server(up: Upstream, down: Downstream, offered: types.ServerCapabilities) -> Server:
    """The relay's stdio server: each handler passes its request upstream."""

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        # a 2025-11-25 end client's tools carry their taskSupport, which the daemon lists in that era
        era = frozenset() if stateless_era(ctx) else LEGACY
        return await up.request(lambda c: c.list_tools(cursor=params.cursor if params else None), era)

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return await up.request(lambda c: c.list_resources(cursor=params.cursor if params else None))

    async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return await up.request(lambda c: c.list_resource_templates(cursor=params.cursor if params else None))

    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await up.request(lambda c: c.list_prompts(cursor=params.cursor if params else None))

    async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await up.request(lambda c: c.complete(params.ref, argument))

    server: Server = Server(
        "plexor", version=__version__, title="Plexor (shared daemon)",
        instructions="Relays to the shared Plexor daemon. Call plexor_health to see which process answers.",
        on_list_tools=list_tools, on_list_resources=list_resources, on_list_resource_templates=list_templates,
        on_read_resource=_read_resource(up), on_list_prompts=list_prompts, on_get_prompt=_get_prompt(up),
        on_completion=complete,
    )
    # tools/call may answer with a task (a CreateTaskResult), which on_call_tool's type leaves out
    server.add_request_handler("tools/call", types.CallToolRequestParams, _call_tool(up))
    server.middleware.append(down.middleware())
    server.middleware.append(legacy_tasks(up))
    if offered.resources and offered.resources.subscribe:  # resources.subscribe is advertised with the handlers
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe(down.subscribe))
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _subscribe(down.unsubscribe))
    if offered.tools and offered.tools.list_changed:  # the daemon serves subscriptions/listen (2026-07-28)
        server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams,
                                   functools.partial(relay_listen, up))
    for method, params_type, handler in task_methods(up):
        server.add_request_handler(method, params_type, handler)
    return server


def _subscribe(op: Callable[[str], Awaitable[None]]) -> Callable[[Ctx, types.SubscribeRequestParams | types.UnsubscribeRequestParams],
                                                                 Awaitable[types.EmptyResult]]:
    async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams | types.UnsubscribeRequestParams) -> types.EmptyResult:
        await op(str(params.uri))
        return types.EmptyResult()

    return subscribe


def _call_tool(up: Upstream) -> Callable[[Ctx, types.CallToolRequestParams], Awaitable[HandlerResult]]:
    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> HandlerResult:
        modern = stateless_era(ctx)  # a 2025-11-25 task never comes here (legacy_tasks answers it)
        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(Exception):
                await ctx.session.report_progress(progress, total, message)

        caps = asking_caps(ctx) | (TASKS if modern and declares_tasks(ctx) else frozenset())

        async def send(responses: types.InputResponses | None, state: str | None) -> types.Result:
            return await up.request(lambda c: c.session.call_tool(
                params.name, params.arguments, progress_callback=relay_progress, input_responses=responses,
                request_state=state, allow_input_required=True, allow_claimed="tasks" in caps), caps, tool=params.name)

        return await relay_call(ctx, params, send)

    return call_tool


def _read_resource(up: Upstream) -> Callable[[Ctx, types.ReadResourceRequestParams],
                                               Awaitable[types.ReadResourceResult | types.InputRequiredResult]]:
    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult | types.InputRequiredResult:
        async def send(responses: types.InputResponses | None, state: str | None) -> types.ReadResourceResult | types.InputRequiredResult:
            return await up.request(lambda c: c.session.read_resource(
                str(params.uri), input_responses=responses, request_state=state, allow_input_required=True),
                asking_caps(ctx))

        return await relay_read(ctx, params, send)

    return read_resource


def _get_prompt(up: Upstream) -> Callable[[Ctx, types.GetPromptRequestParams],
                                           Awaitable[types.GetPromptResult | types.InputRequiredResult]]:
    async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult | types.InputRequiredResult:
        async def send(responses: types.InputResponses | None, state: str | None) -> types.GetPromptResult | types.InputRequiredResult:
            return await up.request(lambda c: c.session.get_prompt(
                params.name, dict(params.arguments or {}), input_responses=responses, request_state=state,
                allow_input_required=True), asking_caps(ctx))

        return await relay_read(ctx, params, send)

    return get_prompt
