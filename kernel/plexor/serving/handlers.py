"""The MCP request handlers of one server, built from the kernel's registry, and its guidance middleware.

:func:`plexor.serving.server.build_server` hands them to the SDK's low-level ``Server``. Beside the
handlers: the connections to tell of list changes (2025-11-25 sessions) and the SDK's event bus
for ``subscriptions/listen`` (2026-07-28).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

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
from plexor.serving.errors import SERVER_NOT_READY, protocol_error
from plexor.serving.lists import offset, page, saw, unseen_change
from plexor.serving.session import check_order, explain_params
from plexor.signature import properties, required_names

__all__ = ["ASKING_METHODS", "Handlers"]

# Methods whose result may be an InputRequiredResult (SEP-2322).
ASKING_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


class _Sessions:
    """2025-11-25-era connections seen, to send change notifications to (2026-07-28 clients listen instead)."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, session: Any) -> None:
        try:
            self._sessions.add(session)
        except TypeError:  # pragma: no cover - a session type that cannot be weakly referenced
            pass

    def all(self) -> list[Any]:
        return list(self._sessions)


class _Bus:
    """The SDK's ``SubscriptionBus`` for ``subscriptions/listen`` streams, fed by the kernel's notifier."""

    def __init__(self) -> None:
        self._listeners: dict[object, Any] = {}

    async def publish(self, event: Any) -> None:  # the SDK's interface; Plexor publishes via plexor.notify
        self.fan_out(event)

    def fan_out(self, event: Any) -> None:
        for listener in list(self._listeners.values()):
            listener(event)  # the SDK's listeners only enqueue, and never raise

    def subscribe(self, listener: Any) -> Any:
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None)


SUBSCRIPTIONS = "plexor/subscriptions"  # connection.state key: the URIs a 2025-era session subscribed to
LOG_LEVEL = "plexor/logLevel"  # connection.state key: the level set by logging/setLevel


class Handlers:
    """The MCP request handlers of one server, built from the kernel's registry, and its guidance middleware."""

    def __init__(self, kernel: Kernel, size: int, boot: Boot | None) -> None:
        self.kernel = kernel
        self.size = size
        self.boot = boot
        self.sessions = _Sessions()
        from plexor.features.telemetry import Telemetry

        if isinstance(kernel.telemetry, Telemetry):  # counted when metrics are collected, never per request
            kernel.telemetry.sessions = self.sessions
        self.cache: dict[str, Any] = {}
        self.server: Any = None  # the PlexorServer, set by build_server (the middleware asks it for handlers)
        self.bus = _Bus()
        self._listening: Any = None  # the notifier's unsubscribe, once subscribed from the serving loop
        self._pending: dict[tuple[str, str], Any] = {}  # events coalesced until the loop's next turn
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False  # set when the kernel drains: no more change notifications to anyone
        self.task_events: Any = lambda event: None  # tasks/status events, to plexor.features.tasks.listen (build_server)
        kernel.on_change(self.on_change)

    def tool_models(self) -> list[types.Tool]:
        if "tools" not in self.cache:
            out = []
            for spec in self.kernel.list_tools():
                wire: dict[str, Any] = {
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
            self.cache["tools"] = out
        tools: list[types.Tool] = self.cache["tools"]
        return tools


    def on_change(self, kind: str) -> None:
        self.cache.clear()

    def plugin_icons(self, plugin: str) -> list[dict[str, Any]] | None:
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

    def hint(self, items: list[Any], *, listers: bool = False) -> dict[str, Any]:
        """``ttl_ms``/``cache_scope`` for a list page: its items' most cautious hint, none while unsettled."""
        from plexor.hints import NO_CACHE, most_cautious

        cache = most_cautious(items) if items and self.settled(listers=listers) else NO_CACHE
        return {"ttl_ms": cache.ttl_ms, "cache_scope": cache.scope}

    def listen(self) -> None:
        """Subscribe to the kernel's notifier from the serving loop (once, on the first request)."""
        if self._listening is None:
            self._listening = self.kernel.notifier.subscribe(self.on_event)

    def on_event(self, event: Any) -> None:
        """A change published through :mod:`plexor.notify`: delivered on the loop's next turn, deduplicated."""
        if event.kind == "tasks/status":  # to the listen streams that asked for that task (plexor.features.tasks.listen)
            self.task_events(event)
            return
        key = (event.kind, str(event.payload.get("uri", "")))
        if event.kind in ("tools/list_changed", "prompts/list_changed"):
            self.cache.clear()  # a plugin offered or withdrew one (PluginHandle.offer)
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending[key] = event

    def _flush(self) -> None:
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

        pending, self._pending = list(self._pending.values()), {}
        for event in pending:
            uri = event.payload.get("uri")
            sdk_event = {"tools/list_changed": ToolsListChanged(), "prompts/list_changed": PromptsListChanged(),
                         "resources/list_changed": ResourcesListChanged()}.get(event.kind)
            self.bus.fan_out(sdk_event if sdk_event is not None else ResourceUpdated(uri=str(uri)))
            for session in self.sessions.all():
                if self.closing or not getattr(session, "has_standalone_channel", True):
                    continue
                if event.kind == "resources/updated" and uri not in _state(session).get(SUBSCRIPTIONS, ()):
                    continue
                if sdk_event is not None and not unseen_change(_state(session), event.kind):
                    continue
                task = asyncio.get_running_loop().create_task(self._send(session, event.kind, uri))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _send(self, session: Any, kind: str, uri: Any) -> None:
        try:
            if kind == "tools/list_changed":
                await session.send_tool_list_changed()
            elif kind == "prompts/list_changed":
                await session.send_prompt_list_changed()
            elif kind == "resources/list_changed":
                await session.send_resource_list_changed()
            else:
                await session.send_resource_updated(str(uri))
        except Exception:  # noqa: BLE001 - a gone client
            self.kernel.log.debug("notification_not_sent", kind=kind)


    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        from plexor.apps import app_only, client_supports_apps

        models = self.tool_models()
        if not client_supports_apps(ctx.session):  # a tool only an app view calls is not the model's to see
            models = [t for t in models if not app_only(t.meta or {})]
        items, nxt = page(models, params.cursor if params else None, max(self.size, 500))
        specs = self.kernel.registry.tools
        return types.ListToolsResult(tools=items, next_cursor=nxt,
                                     **self.hint([specs[t.name].cache if t.name in specs else None for t in items]))

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        exchange = exchange_of(ctx)
        try:
            outcome = await self.kernel.call_tool(
                params.name, params.arguments, session=ctx.session, request_id=ctx.request_id,
                progress_token=progress_token(params.meta),
                close_sse_stream=getattr(ctx, "close_sse_stream", None), exchange=exchange,
            )
        except BaseException as exc:
            return asked(exc, exchange, tool=True)
        if outcome.content:  # image, audio or resource blocks: validated from their wire dicts
            return types.CallToolResult.model_validate({
                "content": [{"type": "text", "text": outcome.text}, *outcome.content],
                "structuredContent": outcome.data,
                "isError": outcome.is_error,
                "_meta": outcome.meta,
            })
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text)],
                                    structured_content=outcome.data, is_error=outcome.is_error, _meta=outcome.meta)

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        from plexor.apps import APP_MIME_TYPE, client_supports_apps

        found = await self.kernel.list_resources()
        if not client_supports_apps(ctx.session):  # app pages are listed to hosts that can show them
            found = [r for r in found if r.get("mime_type") != APP_MIME_TYPE]
        items, nxt = page(found, params.cursor if params else None, self.size)
        resources = [types.Resource.model_validate({
            "uri": r["uri"], "name": r.get("name") or r["uri"], "description": r.get("description"),
            "mimeType": r.get("mime_type"), "icons": r.get("icons") or self.plugin_icons(r.get("plugin", "")),
            **({"_meta": r["meta"]} if r.get("meta") else {}),
        }) for r in items]
        return types.ListResourcesResult(resources=resources, next_cursor=nxt,
                                         **self.hint([r.get("cache") for r in items], listers=True))

    async def list_templates(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        specs = list(self.kernel.registry.templates.values())
        all_t = [types.ResourceTemplate.model_validate({
            "uriTemplate": t.uri_template, "name": t.name, "description": t.description, "mimeType": t.mime_type,
            "icons": t.icons or self.plugin_icons(t.plugin),
        }) for t in specs]
        items, nxt = page(all_t, params.cursor if params else None, self.size)
        start = offset(params.cursor if params else None)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=nxt,
                                                 **self.hint([t.cache for t in specs[start:start + len(items)]]))

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
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

    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
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

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
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

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
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

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        # 2025-11-25 era: notifications/resources/updated for this URI go to this session from now on
        # (published by plugins with PluginHandle.resource_updated). Any URI may be subscribed.
        from plexor.features.tasks.listen import check_uris, hold_uris

        connection = connection_of(ctx.session)
        held = _state(connection).setdefault(SUBSCRIPTIONS, set())
        uri = str(params.uri)
        if uri not in held:
            check_uris([uri], self.kernel.environ, "this session", len(held))
            hold_uris(self.kernel, ctx, connection, [uri])  # the caller's bytes of URIs (docs/security.md#limits)
        held.add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        from plexor.features.tasks.listen import release_uris

        connection = connection_of(ctx.session)
        held = _state(connection).get(SUBSCRIPTIONS, set())
        if str(params.uri) in held:
            held.discard(str(params.uri))
            release_uris(self.kernel, connection, [str(params.uri)])
        return types.EmptyResult()

    async def set_logging_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        # This session's notifications/message below the level are not sent (see Context.log).
        _state(connection_of(ctx.session))[LOG_LEVEL] = params.level
        return types.EmptyResult()


    async def guidance_middleware(self, ctx: Any, call_next: Any) -> Any:
        # Cross-cutting: remember sessions (for list-changed), time the request,
        # and make sure no handler's exception reaches the client as a traceback.
        check_order(ctx, self.server.get_request_handler)
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
        self.listen()
        if ctx.session is not None and not stateless_era(ctx):
            # The SDK builds a ServerSession per request; change notifications go to
            # the connection behind it. 2026-07-28 clients get them on subscriptions/listen streams instead.
            connection = connection_of(ctx.session)
            if connection is not None:
                self.sessions.add(connection)
                saw(_state(connection), ctx.method)  # tools/list, ...: changes from now on are news to it
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


def _state(connection: Any) -> dict[str, Any]:
    """The SDK connection's per-connection scratch dict (a throwaway one when there is none)."""
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else {}
