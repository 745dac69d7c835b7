"""The kernel, spoken as MCP: the SDK's low-level ``Server`` with handlers built from the registry.

The SDK owns the wire: JSON-RPC framing, the 2025-11-25 ``initialize``
handshake and the 2026-07-28 stateless era with ``server/discover``. This
module only maps registrations to handlers and adds two middlewares: one
keeps every failure a guidance message and never a traceback, the other (the
SDK's ``RequestStateBoundary``) encrypts and verifies the ``requestState`` of
multi-round requests (SEP-2322, see :mod:`plexor.asking`).
"""

from __future__ import annotations

import asyncio
import base64
import time
import weakref
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from plexor.asking import AskError, InputRequired, stateless_era
from plexor.core.kernel import Kernel
from plexor.errors import InvalidArgument, NotFound, NotReady, PlexorError
from plexor.serving.asked import (
    BAD_STATE,
    asked,
    check_input_responses,
    exchange_of,
    progress_token,
    state_keys,
)
from plexor.serving.boot import Boot
from plexor.serving.lists import saw, unseen_change
from plexor.serving.session import check_order, explain_params
from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.extending import ServerSetup

__all__ = ["RESOURCE_NOT_FOUND", "Boot", "build_server"]

# The server's own icon (a hexagon with a P), embedded: clients fetch nothing.
SERVER_ICON = ("data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAy"
               "NCAyNCI+PHBhdGggZD0iTTEyIDEuNWw5LjUgNS4yNXYxMC41TDEyIDIyLjVsLTkuNS01LjI1VjYuNzV6IiBmaWxsPSIjM2I0Y2NhIi8+"
               "PHBhdGggZD0iTTkgNi41aDQuMmEzLjMgMy4zIDAgMDEwIDYuNkgxMXY0LjRIOXoiIGZpbGw9IiNmZmYiLz48L3N2Zz4=")
RESOURCE_NOT_FOUND = -32002
SERVER_NOT_READY = -32000
# Methods whose result may be an InputRequiredResult (SEP-2322).
ASKING_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
# How long a requestState stays valid: long enough for a person to fill in a form.
REQUEST_STATE_TTL = 3600.0


class PlexorServer(Server[Any]):
    """The SDK server, advertising list-changed notifications by default; its layers in ``path``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from plexor.serving.layers import RequestPath

        self.path = RequestPath(self.middleware)  # every module adds its layer by name (plexor.serving.layers)
        self.setup: ServerSetup | None = None  # what the server-extension hooks see (build_server sets it)
        self._extended: set[str] = set()  # the plugins whose server-extension hooks have been applied

    def extend(self) -> None:
        """Apply the server-extension hooks (:mod:`plexor.extending`) of plugins not applied yet: their
        request layers and protocol methods. Called when the server is built and again once plugins
        have loaded (under stdio the server is built first)."""
        setup = self.setup
        if setup is None:
            return
        hook = setup.kernel.pm.hook
        fresh = [impl.plugin_name for impl in hook.plexor_request_layers.get_hookimpls()
                 + hook.plexor_protocol_methods.get_hookimpls() if impl.plugin_name not in self._extended]
        if not fresh:
            return
        only = set(fresh)
        self._extended |= only
        # pluggy calls the implementations last-registered (and tryfirst) first: the same order here
        for impl in reversed(hook.plexor_request_layers.get_hookimpls()):
            if impl.plugin_name in only:
                for layer in impl.function(setup) or ():
                    self.path.add(layer.position, layer.middleware, layer.name or impl.plugin_name)
        for impl in reversed(hook.plexor_protocol_methods.get_hookimpls()):
            if impl.plugin_name in only:
                for method in impl.function(setup) or ():
                    self.add_request_handler(method.method, method.params_type, method.handler)

    def get_capabilities(self, *args: Any, **kwargs: Any) -> Any:
        caps = super().get_capabilities(*args, **kwargs)
        if self.setup is not None:
            self.setup.kernel.pm.hook.plexor_capabilities(capabilities=caps, protocol_version=kwargs.get("protocol_version"),
                                                          setup=self.setup)
        return caps

    @property
    def server_info_stamp(self) -> dict[str, Any]:
        # The serverInfo stamped into every 2026-07-28 result's _meta: identity without the icon
        # (a few hundred bytes on each response); initialize and server/discover carry the icon.
        return {k: v for k, v in self._server_info_stamp_source.items() if k != "icons"}

    async def _handle_discover(self, ctx: Any, params: Any) -> Any:
        import copy

        from mcp_types import SERVER_INFO_META_KEY

        result = await super()._handle_discover(ctx, params)  # the stamp leaves a handler's serverInfo alone
        return result.model_copy(update={"meta": {SERVER_INFO_META_KEY: copy.deepcopy(self._server_info_stamp_source)}})

    def create_initialization_options(self, notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True),
            *args,
            **kwargs,
        )


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor.encode()).decode()
        if raw.startswith("o:"):
            value = int(raw[2:])
            if value >= 0:
                return value
    except (ValueError, UnicodeDecodeError):
        pass
    raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}: pass back the nextCursor of the previous page, unchanged")


def _page(items: list[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    start = _offset(cursor)
    end = start + size
    return items[start:end], (_cursor(end) if end < len(items) else None)


def protocol_error(err: PlexorError, method: str = "", *, modern: bool = False, uri: str | None = None) -> MCPError:
    """The one place a :class:`PlexorError` outside a tool result becomes a JSON-RPC error.

    The code follows the error's class, except where the spec says otherwise for a method: an
    unknown prompt is invalid params, and so is an unknown resource from 2026-07-28 on (SEP-2164,
    with ``data.uri``). Tool failures never come here: they are results with ``isError``.
    """
    data = err.payload()
    if isinstance(err, NotFound) and (method == "prompts/get" or (method == "resources/read" and modern)):
        code = types.INVALID_PARAMS
        if uri is not None:
            data = {**data, "uri": uri}
    elif isinstance(err, NotFound):
        code = RESOURCE_NOT_FOUND
    elif isinstance(err, InvalidArgument):
        code = types.INVALID_PARAMS
    else:
        code = SERVER_NOT_READY if isinstance(err, NotReady) else types.INTERNAL_ERROR
    return MCPError(code, err.render(), data)


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
        if kernel.telemetry is not None:  # counted when metrics are collected, never per request
            kernel.telemetry.sessions = self.sessions
        self.cache: dict[str, Any] = {}
        self.server: Any = None  # the PlexorServer, set by build_server (the middleware asks it for handlers)
        self.bus = _Bus()
        self._listening: Any = None  # the notifier's unsubscribe, once subscribed from the serving loop
        self._pending: dict[tuple[str, str], Any] = {}  # events coalesced until the loop's next turn
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False  # set when the kernel drains: no more change notifications to anyone
        self.task_events: Any = lambda event: None  # tasks/status events, to plexor.tasks.listen (build_server)
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
        if event.kind == "tasks/status":  # to the listen streams that asked for that task (plexor.tasks.listen)
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
        items, nxt = _page(models, params.cursor if params else None, max(self.size, 500))
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
        items, nxt = _page(found, params.cursor if params else None, self.size)
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
        items, nxt = _page(all_t, params.cursor if params else None, self.size)
        start = _offset(params.cursor if params else None)
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
            props = p.signature.input_schema.get("properties", {})
            required = set(p.signature.input_schema.get("required", []))
            all_p.append(types.Prompt.model_validate({
                "name": p.name, "description": p.description, "icons": p.icons or self.plugin_icons(p.plugin),
                "arguments": [{"name": n, "description": props[n].get("description"), "required": n in required} for n in props],
            }))
        items, nxt = _page(all_p, params.cursor if params else None, self.size)
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
        from plexor.tasks.listen import check_uris

        held = _state(getattr(ctx.session, "_connection", None)).setdefault(SUBSCRIPTIONS, set())
        uri = str(params.uri)
        if uri not in held:
            check_uris([uri], self.kernel.environ, "this session", len(held))
        held.add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        _state(getattr(ctx.session, "_connection", None)).get(SUBSCRIPTIONS, set()).discard(str(params.uri))
        return types.EmptyResult()

    async def set_logging_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        # This session's notifications/message below the level are not sent (see Context.log).
        _state(getattr(ctx.session, "_connection", None))[LOG_LEVEL] = params.level
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
            # the connection behind it (no public accessor in 2.3). 2026-07-28 clients
            # get them on subscriptions/listen streams instead.
            connection = getattr(ctx.session, "_connection", None)
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


def _instructions(kernel: Kernel) -> str:
    """The initialize instructions, with each misspelt PLEXOR_PLUGINS/PLEXOR_DISABLE name (under stdio the
    kernel loads after the handshake, so those are read from the environment and the installed names)."""
    from plexor.core.loader import plugin_name_problems

    text = ("Tools are named <namespace>_<method>. Call plexor_health to see which plugins are loaded and ready. "
            "Every error says what went wrong and what to do next.")
    loaded = kernel.state.value != "created"
    problems = getattr(kernel, "unknown_plugins", []) if loaded else plugin_name_problems(kernel.environ)
    if problems:
        text += (" Warning: " + "; ".join(problems) + ". The server started with the plugins that are installed; "
                 "fix the variable in this server's configuration to load the one meant.")
    return text


def build_server(kernel: Kernel, *, page_size: int | None = None, boot: Boot | None = None, transport: str = "stdio",
                 options: Any = None, profile: Any = None) -> PlexorServer:
    """Create the SDK server for ``kernel`` (started, starting, or booted lazily by ``boot``), served over
    ``transport`` with the HTTP ``options`` (``None`` under stdio), for a stdio client limited to ``profile``."""
    import warnings

    from plexor.tasks.listen import Listen

    if kernel.telemetry is None:  # PLEXOR_OTEL: the kernel's pipeline observes through it from now on
        from plexor.telemetry import for_kernel

        kernel.telemetry = for_kernel(kernel)
    h = Handlers(kernel, page_size or kernel.page_size, boot)
    listen = Listen(h.bus, kernel)  # the SDK's listen contract, plus the tasks extension's taskIds
    h.task_events = listen.on_task_event
    kernel.on_drain(listen.close)  # open listen streams end (gracefully) when the server drains
    kernel.on_drain(lambda: setattr(h, "closing", True))  # a closing session is told nothing more

    with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, still served to 2025 clients
        warnings.simplefilter("ignore")
        server = PlexorServer(
            "plexor",
            version=__version__,
            title="Plexor",
            description="An MCP server whose tools come from plugins.",
            icons=[types.Icon(src=SERVER_ICON, mime_type="image/svg+xml", sizes=["any"])],
            instructions=_instructions(kernel),
            on_list_tools=h.list_tools,
            on_call_tool=h.call_tool,
            on_list_resources=h.list_resources,
            on_list_resource_templates=h.list_templates,
            on_read_resource=h.read_resource,
            on_list_prompts=h.list_prompts,
            on_get_prompt=h.get_prompt,
            on_completion=h.complete,
            on_subscribe_resource=h.subscribe,
            on_unsubscribe_resource=h.unsubscribe,
            on_set_logging_level=h.set_logging_level,
            on_subscriptions_listen=listen,
            get_tool_input_schema=lambda name: (
                kernel.registry.tools[name].signature.input_schema if name in kernel.registry.tools else None
            ),
        )
    h.server = server
    server.path.add("session", h.guidance_middleware)
    from plexor.limits import value
    from plexor.serving.bounds import echo_middleware

    server.path.add("limits", echo_middleware(int(value("echoed_length", kernel.environ))))
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    # Inside the guidance middleware, so a refused requestState gets its advice appended.
    security = RequestStateSecurity(keys=state_keys(kernel), ttl=REQUEST_STATE_TTL)
    server.path.add("request-state", RequestStateBoundary(security, default_audience="plexor"))
    # The built-in features (tasks, auth, telemetry, bus) and every loaded plugin extend the server
    # through the hooks of plexor.extending: request layers, protocol methods, capabilities.
    from plexor.extending import ServerSetup

    if profile is not None:
        from plexor.serving.features import refuse_unguarded

        refuse_unguarded(kernel, getattr(profile, "name", "(stdio)"))  # a profile with auth off: no server
    kernel.register_features()
    server.setup = ServerSetup(kernel, server, transport, options, profile)
    server.extend()
    if boot is not None:
        boot.after_load = server.extend  # plugins loaded after the handshake extend it then
    return server


