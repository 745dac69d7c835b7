"""The MCP request handlers of one server, built from the kernel's registry, and its guidance middleware.

:func:`plexor.serving.server.build_server` hands them to the SDK's low-level ``Server``. Beside the
handlers: the change notifications (:mod:`plexor.serving.changes`) to 2025-11-25 sessions and, through
the SDK's event bus, to ``subscriptions/listen`` streams (2026-07-28).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, TypedDict

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from plexor.asking import AskError, InputRequired
from plexor.context import connection_of
from plexor.core.eras import stateless_era
from plexor.core.kernel import Kernel
from plexor.errors import PlexorError
from plexor.serving.asked import BAD_STATE, asked, check_input_responses, exchange_of, progress_token
from plexor.serving.boot import Boot
from plexor.serving.changes import LOG_LEVEL, Changes, state, subscriptions
from plexor.serving.errors import SERVER_NOT_READY, protocol_error
from plexor.serving.lists import offset, page, saw
from plexor.serving.session import check_order, explain_params
from plexor.signature import properties, required_names

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from plexor.hints import Cache

    Ctx = ServerRequestContext[object]  # the SDK's request context of a PlexorServer

__all__ = ["ASKING_METHODS", "Handlers", "ListHint"]


class ListHint(TypedDict):
    """A list result's cache fields (``ttlMs``, ``cacheScope``): its items' most cautious hint."""

    ttl_ms: int
    cache_scope: Literal["public", "private"]


# Methods whose result may be an InputRequiredResult (SEP-2322).
ASKING_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


class Handlers:
    """The MCP request handlers of one server, built from the kernel's registry, and its guidance middleware."""

    def __init__(self, kernel: Kernel, size: int, boot: Boot | None) -> None:
        self.kernel = kernel
        self.size = size
        self.boot = boot
        self.changes = Changes(kernel, self.forget_lists)
        from plexor.features.telemetry import Telemetry

        if isinstance(kernel.telemetry, Telemetry):  # counted when metrics are collected, never per request
            kernel.telemetry.sessions = self.changes.sessions
        self._tools: list[types.Tool] | None = None  # tools/list's models, until the tools change
        # The server's handler look-up, set by build_server (the middleware asks it whether a method is known).
        self.known: Callable[[str], object] = lambda method: None
        kernel.on_change(self.on_change)

    def tool_models(self) -> list[types.Tool]:
        if self._tools is None:
            out = []
            for spec in self.kernel.list_tools():
                wire: dict[str, object] = {
                    "name": spec.name,
                    "description": spec.description,
                    "inputSchema": spec.signature.input_schema,
                    "_meta": {**spec.meta, "plexor/provenance": spec.provenance, "plexor/schemaHash": spec.schema_hash},
                }
                if spec.title:
                    wire["title"] = spec.title
                if spec.signature.output_schema:
                    wire["outputSchema"] = spec.signature.output_schema
                if spec.annotations:
                    wire["annotations"] = spec.annotations
                icons = spec.icons or self.plugin_icons(spec.plugin)
                if icons:
                    wire["icons"] = icons
                out.append(types.Tool.model_validate(wire))
            self._tools = out
        return self._tools


    def on_change(self, kind: str) -> None:
        self.forget_lists()

    def forget_lists(self) -> None:
        self._tools = None

    def plugin_icons(self, plugin: str) -> list[dict[str, object]] | None:
        rec = self.kernel.records.get(plugin)
        return rec.icons if rec is not None else None

    def settled(self, *, listers: bool = False) -> bool:
        """Whether no list can change by itself any more: no plugin is still loading or in its startup hook
        (which may fail it), and with ``listers``, none that has resource listers is still warming up."""
        from plexor.core.records import State

        for rec in self.kernel.records.values():
            if rec.state == State.LOADING:
                return False
            if rec.state == State.STARTING and (not rec.started()
                                               or (listers and rec.registry.listers)):
                return False
        return self.boot is None or self.boot.loaded.is_set()

    def hint(self, items: Sequence[Cache | None], *, listers: bool = False) -> ListHint:
        """``ttl_ms``/``cache_scope`` for a list page: its items' most cautious hint, none while unsettled."""
        from plexor.hints import NO_CACHE, most_cautious

        cache = most_cautious(items) if items and self.settled(listers=listers) else NO_CACHE
        return {"ttl_ms": cache.ttl_ms, "cache_scope": cache.scope}

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        from plexor.apps import app_only, client_supports_apps

        models = self.tool_models()
        if not client_supports_apps(ctx.session):  # a tool only an app view calls is not the model's to see
            models = [t for t in models if not app_only(t.meta or {})]
        items, nxt = page(models, params.cursor if params else None, max(self.size, 500))
        specs = self.kernel.registry.tools
        return types.ListToolsResult(tools=items, next_cursor=nxt,
                                     **self.hint([specs[t.name].cache if t.name in specs else None for t in items]))

    async def call_tool(self, ctx: Ctx, params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult:
        exchange = exchange_of(ctx)
        try:
            outcome = await self.kernel.call_tool(
                params.name, params.arguments, session=ctx.session, request_id=ctx.request_id,
                progress_token=progress_token(params.meta),
                close_sse_stream=getattr(ctx, "close_sse_stream", None), exchange=exchange,
            )
        except BaseException as exc:
            return asked(exc, exchange, tool=True)
        return types.CallToolResult.model_validate(outcome.wire())  # shaped as a task's result is (Outcome.wire)

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        from plexor.apps import APP_MIME_TYPE, client_supports_apps
        from plexor.hints import Cache

        found = await self.kernel.list_resources()
        if not client_supports_apps(ctx.session):  # app pages are listed to hosts that can show them
            found = [r for r in found if r.get("mime_type") != APP_MIME_TYPE]
        items, nxt = page(found, params.cursor if params else None, self.size)
        resources = [types.Resource.model_validate({
            "uri": r["uri"], "name": r.get("name") or r["uri"], "description": r.get("description"),
            "mimeType": r.get("mime_type"), "icons": r.get("icons") or self.plugin_icons(str(r.get("plugin", ""))),
            **({"_meta": r["meta"]} if r.get("meta") else {}),
        }) for r in items]
        return types.ListResourcesResult(resources=resources, next_cursor=nxt,
                                         **self.hint([c if isinstance(c := r.get("cache"), Cache) else None
                                                      for r in items], listers=True))

    async def list_templates(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        specs = list(self.kernel.registry.templates.values())
        all_t = [types.ResourceTemplate.model_validate({
            "uriTemplate": t.uri_template, "name": t.name, "description": t.description, "mimeType": t.mime_type,
            "icons": t.icons or self.plugin_icons(t.plugin),
        }) for t in specs]
        items, nxt = page(all_t, params.cursor if params else None, self.size)
        start = offset(params.cursor if params else None)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=nxt,
                                                 **self.hint([t.cache for t in specs[start:start + len(items)]]))

    async def read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult | types.InputRequiredResult:
        exchange = exchange_of(ctx)
        try:
            contents = await self.kernel.read_resource(str(params.uri), session=ctx.session, request_id=ctx.request_id, exchange=exchange)
        except (InputRequired, AskError, BaseExceptionGroup) as exc:
            return asked(exc, exchange)
        except PlexorError as err:
            raise protocol_error(err, "resources/read", modern=stateless_era(ctx), uri=str(params.uri)) from None
        from plexor.hints import NO_CACHE

        cache = self.kernel.resource_cache(str(params.uri)) or NO_CACHE
        fixed = self.kernel.registry.resources.get(str(params.uri))
        meta = {"_meta": fixed.meta} if fixed is not None and fixed.meta else {}  # an MCP App's CSP and permissions
        return types.ReadResourceResult.model_validate({"contents": [
            {"uri": c["uri"], "mimeType": c["mime_type"], **({"blob": c["blob"]} if "blob" in c else {"text": c["text"]}),
             **meta}
            for c in contents
        ], "ttlMs": cache.ttl_ms, "cacheScope": cache.scope})

    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        all_p = []
        for p in self.kernel.registry.prompts.values():
            if p.withdrawn:
                continue
            props, required = properties(p.signature.input_schema), required_names(p.signature.input_schema)
            all_p.append(types.Prompt.model_validate({
                "name": p.name, "description": p.description, "icons": p.icons or self.plugin_icons(p.plugin),
                "arguments": [{"name": n, "description": props[n].get("description"), "required": n in required} for n in props],
            }))
        items, nxt = page(all_p, params.cursor if params else None, self.size)
        return types.ListPromptsResult(prompts=items, next_cursor=nxt)

    async def get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        exchange = exchange_of(ctx)
        try:
            description, messages = await self.kernel.get_prompt(
                params.name, dict(params.arguments or {}), session=ctx.session, request_id=ctx.request_id, exchange=exchange)
        except (InputRequired, AskError, BaseExceptionGroup) as exc:
            return asked(exc, exchange)
        except PlexorError as err:
            raise protocol_error(err, "prompts/get") from None
        return types.GetPromptResult.model_validate({
            "description": description,
            "messages": [{"role": m.get("role", "user"),
                          "content": m["content"] if isinstance(m.get("content"), dict) else {"type": "text", "text": m.get("text", "")}}
                         for m in messages],
        })

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        uri = getattr(ref, "uri", None)
        values: list[str] = []
        more = False
        if uri is not None:
            try:
                chosen = getattr(params.context, "arguments", None) if params.context is not None else None
                values, more = await self.kernel.complete(str(uri), params.argument.name, params.argument.value,
                                                          chosen)
            except Exception as exc:  # noqa: BLE001 - completion is best effort
                self.kernel.log.debug("completion_failed", error=str(exc))
        return types.CompleteResult(completion=types.Completion(values=values, has_more=more))

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        # 2025-11-25 era: notifications/resources/updated for this URI go to this session from now on
        # (published by plugins with PluginHandle.resource_updated). Every URI may be subscribed.
        from plexor.features.tasks.listen import check_uris, hold_uris

        connection = connection_of(ctx.session)
        held = subscriptions(connection, keep=True)
        uri = str(params.uri)
        if uri not in held:
            check_uris([uri], self.kernel.environ, "this session", len(held))
            hold_uris(self.kernel, ctx, connection, [uri])  # the caller's bytes of URIs (docs/security.md#limits)
        held.add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        from plexor.features.tasks.listen import release_uris

        connection = connection_of(ctx.session)
        held = subscriptions(connection)
        if str(params.uri) in held:
            held.discard(str(params.uri))
            release_uris(self.kernel, connection, [str(params.uri)])
        return types.EmptyResult()

    async def set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        # This session's notifications/message below the level are not sent (see Context.log).
        state(connection_of(ctx.session))[LOG_LEVEL] = params.level
        return types.EmptyResult()


    async def guidance_middleware(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        # Cross-cutting: remember sessions (for list-changed), time the request,
        # and make sure no handler's exception reaches the client as a traceback.
        check_order(ctx, self.known)
        if self.boot is not None and not self.boot.loaded.is_set():
            # server/discover does not depend on plugins either: a client probing with it waits only ~1 s.
            if ctx.method in ("initialize", "ping", "server/discover") or ctx.request_id is None:
                try:
                    return await call_next(ctx)
                except ValidationError as exc:
                    raise explain_params(exc, ctx.method) or exc from None
                finally:
                    self.boot.begin()
            self.boot.begin()
            await self.boot.loaded.wait()
            if self.boot.stopping and self.kernel.state.value in ("created", "loading", "stopped"):
                raise MCPError(SERVER_NOT_READY, "the server is shutting down before its plugins finished loading: "
                               "reconnect in a moment; a new server process will answer.")
        self.changes.listen()
        if ctx.session is not None and not stateless_era(ctx):
            # The SDK builds a ServerSession per request; change notifications go to
            # the connection behind it. 2026-07-28 clients get them on subscriptions/listen streams instead.
            connection = connection_of(ctx.session)
            if connection is not None:
                self.changes.sessions.add(connection)
                saw(state(connection), ctx.method)  # tools/list, ...: changes from now on are news to it
        if ctx.method in ASKING_METHODS and ctx.params and "inputResponses" in ctx.params and stateless_era(ctx):
            check_input_responses(ctx.params["inputResponses"])
        started = time.perf_counter()
        try:
            return await call_next(ctx)
        except PlexorError as err:
            raise protocol_error(err, ctx.method, modern=stateless_era(ctx)) from None
        except MCPError as err:
            if isinstance(err.error.data, dict) and err.error.data.get("reason") == "invalid_request_state":
                raise MCPError(err.error.code, err.error.message + ": " + BAD_STATE, err.error.data) from None
            raise
        except ValidationError as exc:  # params that do not fit the method (the SDK's own check)
            raise explain_params(exc, ctx.method) or exc from None
        except Exception as exc:
            explained = self.kernel.explain(exc, {"plugin": None, "uri": ctx.method, "request_id": ctx.request_id})
            raise MCPError(types.INTERNAL_ERROR, explained.render()) from None
        finally:
            if ctx.request_id is not None:
                self.kernel.log.debug("request", method=ctx.method, ms=round((time.perf_counter() - started) * 1000, 2))

