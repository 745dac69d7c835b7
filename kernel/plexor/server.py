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
import functools
import json
import os
import secrets
import time
import weakref
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

from plexor import __version__
from plexor.asking import AskError, Exchange, InputRequired, client_capabilities
from plexor.core.kernel import Kernel
from plexor.errors import InvalidArgument, NotFound, NotReady, PlexorError

__all__ = ["RESOURCE_NOT_FOUND", "build_server"]

RESOURCE_NOT_FOUND = -32002
SERVER_NOT_READY = -32000
# Methods whose result may be an InputRequiredResult (SEP-2322).
ASKING_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
# How long a requestState stays valid: long enough for a person to fill in a form.
REQUEST_STATE_TTL = 3600.0


class PlexorServer(Server[Any]):
    """The SDK server, advertising list-changed notifications by default."""

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


def _protocol_error(err: PlexorError) -> MCPError:
    code = RESOURCE_NOT_FOUND if isinstance(err, NotFound) else (
        types.INVALID_PARAMS if isinstance(err, InvalidArgument) else (
            SERVER_NOT_READY if isinstance(err, NotReady) else types.INTERNAL_ERROR))
    return MCPError(code, err.render(), err.payload())


class _Sessions:
    """Connections seen, to send list-changed notifications to."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, session: Any) -> None:
        try:
            self._sessions.add(session)
        except TypeError:  # pragma: no cover - a session type that cannot be weakly referenced
            pass

    def all(self) -> list[Any]:
        return list(self._sessions)


class Boot:
    """Loads and starts the kernel once the first request has been answered (stdio).

    The ``initialize`` result does not depend on plugins, so it goes out at the
    speed of the bare SDK; loading (plugin imports, registration) and starting
    (storage, startup hooks) follow at once, and any request that needs the
    plugins waits for loading to finish.
    """

    def __init__(self, kernel: Kernel, *, on_started: Any = None) -> None:
        import anyio

        self.kernel = kernel
        self.on_started = on_started
        self.loaded = anyio.Event()
        self._tg: Any = None
        self._begun = False

    def attach(self, task_group: Any) -> None:
        self._tg = task_group

    def begin(self) -> None:
        if not self._begun and self._tg is not None:
            self._begun = True
            self._tg.start_soon(self._run)

    async def fallback(self, delay: float) -> None:
        """Begin anyway after ``delay`` seconds, so warm-up is not held back by a silent client."""
        import anyio

        await anyio.sleep(delay)
        self.begin()

    async def _run(self) -> None:
        import anyio

        from plexor.core.kernel import State

        await anyio.sleep(0)  # let the pending response be written first
        try:
            if self.kernel.state == State.CREATED:
                # In a worker thread so the loop keeps writing responses meanwhile.
                await anyio.to_thread.run_sync(self.kernel.load)
        except Exception as exc:  # noqa: BLE001 - e.g. a config file broken since the CLI checked it
            self.kernel.log.error("kernel_load_failed", error=str(exc))
        finally:
            self.loaded.set()
        if self.kernel.state == State.LOADING:
            await self.kernel.start()
            if self.on_started is not None:
                self.on_started()


def build_server(kernel: Kernel, *, page_size: int | None = None, boot: Boot | None = None) -> PlexorServer:
    """Create the SDK server for ``kernel`` (started, starting, or booted lazily by ``boot``)."""
    size = page_size or kernel.page_size
    sessions = _Sessions()
    cache: dict[str, Any] = {}

    def tool_models() -> list[types.Tool]:
        if "tools" not in cache:
            out = []
            for spec in list(kernel.registry.tools.values()):
                try:
                    kernel.prepare_tool(spec)  # derives the schemas if the plugin has not started yet
                except PlexorError as exc:  # one bad tool signature fails its plugin, not the list
                    kernel._fail_plugin(kernel.records[spec.plugin], exc, "loading")
                    continue
                if kernel.records[spec.plugin].state.value == "failed":
                    continue  # an earlier tool of the same plugin just failed it
                wire: dict[str, Any] = {
                    "name": spec.name,
                    "description": spec.description,
                    "inputSchema": spec.signature.input_schema,
                    "_meta": {"plexor/provenance": spec.provenance, "plexor/schemaHash": spec.schema_hash},
                }
                if spec.title:
                    wire["title"] = spec.title
                if spec.signature.output_schema:
                    wire["outputSchema"] = spec.signature.output_schema
                if spec.annotations:
                    wire["annotations"] = spec.annotations
                out.append(types.Tool.model_validate(wire))
            cache["tools"] = out
        return cache["tools"]

    def on_change(kind: str) -> None:
        cache.clear()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for session in sessions.all():
            loop.create_task(_notify_changed(session, kind))

    async def _notify_changed(session: Any, kind: str) -> None:
        try:
            if getattr(session, "has_standalone_channel", True):
                await session.send_tool_list_changed()
                await session.send_resource_list_changed()
        except Exception:  # noqa: BLE001 - a gone client
            kernel.log.debug("list_changed_not_sent", kind=kind)

    kernel.on_change(on_change)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        items, nxt = _page(tool_models(), params.cursor if params else None, max(size, 500))
        return types.ListToolsResult(tools=items, next_cursor=nxt)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        exchange = _exchange(ctx)
        try:
            outcome = await kernel.call_tool(
                params.name, params.arguments, session=ctx.session, request_id=ctx.request_id,
                progress_token=_progress_token(params.meta),
                close_sse_stream=getattr(ctx, "close_sse_stream", None), exchange=exchange,
            )
        except BaseException as exc:
            return _asked(exc, exchange, tool=True)
        if outcome.content:  # image, audio or resource blocks: validated from their wire dicts
            return types.CallToolResult.model_validate({
                "content": [{"type": "text", "text": outcome.text}, *outcome.content],
                "structuredContent": outcome.data,
                "isError": outcome.is_error,
                "_meta": outcome.meta,
            })
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text)],
                                    structured_content=outcome.data, is_error=outcome.is_error, _meta=outcome.meta)

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        found = await kernel.list_resources()
        items, nxt = _page(found, params.cursor if params else None, size)
        resources = [types.Resource.model_validate({
            "uri": r["uri"], "name": r.get("name") or r["uri"], "description": r.get("description"),
            "mimeType": r.get("mime_type"),
        }) for r in items]
        return types.ListResourcesResult(resources=resources, next_cursor=nxt)

    async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        all_t = [types.ResourceTemplate.model_validate({
            "uriTemplate": t.uri_template, "name": t.name, "description": t.description, "mimeType": t.mime_type,
        }) for t in kernel.registry.templates.values()]
        items, nxt = _page(all_t, params.cursor if params else None, size)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=nxt)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        exchange = _exchange(ctx)
        try:
            contents = await kernel.read_resource(str(params.uri), session=ctx.session, request_id=ctx.request_id, exchange=exchange)
        except (InputRequired, AskError, BaseExceptionGroup) as exc:
            return _asked(exc, exchange)
        except NotFound as err:
            if _stateless_era(ctx):  # SEP-2164: -32602 with data.uri from 2026-07-28 on
                raise MCPError(types.INVALID_PARAMS, err.render(), {**(err.payload() or {}), "uri": str(params.uri)}) from None
            raise _protocol_error(err) from None
        except PlexorError as err:
            raise _protocol_error(err) from None
        return types.ReadResourceResult.model_validate({"contents": [
            {"uri": c["uri"], "mimeType": c["mime_type"], **({"blob": c["blob"]} if "blob" in c else {"text": c["text"]})}
            for c in contents
        ]})

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        all_p = []
        for p in kernel.registry.prompts.values():
            props = p.signature.input_schema.get("properties", {})
            required = set(p.signature.input_schema.get("required", []))
            all_p.append(types.Prompt.model_validate({
                "name": p.name, "description": p.description,
                "arguments": [{"name": n, "description": props[n].get("description"), "required": n in required} for n in props],
            }))
        items, nxt = _page(all_p, params.cursor if params else None, size)
        return types.ListPromptsResult(prompts=items, next_cursor=nxt)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        exchange = _exchange(ctx)
        try:
            description, messages = await kernel.get_prompt(
                params.name, dict(params.arguments or {}), session=ctx.session, request_id=ctx.request_id, exchange=exchange)
        except (InputRequired, AskError, BaseExceptionGroup) as exc:
            return _asked(exc, exchange)
        except PlexorError as err:
            if isinstance(err, NotFound):  # an unknown prompt name is invalid params in MCP
                raise MCPError(types.INVALID_PARAMS, err.render(), err.payload()) from None
            raise _protocol_error(err) from None
        return types.GetPromptResult.model_validate({
            "description": description,
            "messages": [{"role": m.get("role", "user"),
                          "content": m["content"] if isinstance(m.get("content"), dict) else {"type": "text", "text": m.get("text", "")}}
                         for m in messages],
        })

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        uri = getattr(ref, "uri", None)
        values: list[str] = []
        more = False
        if uri is not None:
            try:
                values, more = await kernel.complete(str(uri), params.argument.name, params.argument.value)
            except Exception as exc:  # noqa: BLE001 - completion is best effort
                kernel.log.debug("completion_failed", error=str(exc))
        return types.CompleteResult(completion=types.Completion(values=values, has_more=more))

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        # Acknowledged for 2025-era clients; no per-resource updates are sent yet (list-changed is).
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        kernel.log.debug("client_log_level", level=params.level)
        return types.EmptyResult()

    import warnings

    with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, still served to 2025 clients
        warnings.simplefilter("ignore")
        server = PlexorServer(
            "plexor",
            version=__version__,
            title="Plexor",
            description="An MCP server whose tools come from plugins.",
            instructions=(
                "Tools are named <namespace>_<method>. Call plexor_health to see which plugins are loaded and ready. "
                "Every error says what went wrong and what to do next."
            ),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_set_logging_level=set_logging_level,
            get_tool_input_schema=lambda name: (
                kernel.registry.tools[name].signature.input_schema if name in kernel.registry.tools else None
            ),
        )

    async def guidance_middleware(ctx: Any, call_next: Any) -> Any:
        # Cross-cutting: remember sessions (for list-changed), time the request,
        # and make sure no handler's exception reaches the client as a traceback.
        if boot is not None and not boot.loaded.is_set():
            if ctx.method in ("initialize", "ping") or ctx.request_id is None:
                try:
                    return await call_next(ctx)
                finally:
                    boot.begin()
            boot.begin()
            await boot.loaded.wait()
        if ctx.session is not None:
            # The SDK builds a ServerSession per request; list-changed goes to
            # the connection behind it (no public accessor in 2.3).
            connection = getattr(ctx.session, "_connection", None)
            if connection is not None:
                sessions.add(connection)
        if ctx.method in ASKING_METHODS and ctx.params and "inputResponses" in ctx.params and _stateless_era(ctx):
            _check_input_responses(ctx.params["inputResponses"])
        started = time.perf_counter()
        try:
            return await call_next(ctx)
        except PlexorError as err:
            raise _protocol_error(err) from None
        except MCPError as err:
            if isinstance(err.error.data, dict) and err.error.data.get("reason") == "invalid_request_state":
                raise MCPError(err.error.code, err.error.message + ": " + _BAD_STATE, err.error.data) from None
            raise
        except Exception as exc:
            name = type(exc).__name__
            if name in ("ValidationError",):
                raise
            explained = kernel.explain(exc, {"plugin": None, "uri": ctx.method, "request_id": ctx.request_id})
            raise MCPError(types.INTERNAL_ERROR, explained.render()) from None
        finally:
            if ctx.request_id is not None:
                kernel.log.debug("request", method=ctx.method, ms=round((time.perf_counter() - started) * 1000, 2))

    server.middleware.append(guidance_middleware)
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    # Inside the guidance middleware, so a refused requestState gets its advice appended.
    security = RequestStateSecurity(keys=[_state_key(kernel)], ttl=REQUEST_STATE_TTL)
    server.middleware.append(RequestStateBoundary(security, default_audience="plexor"))
    return server


_BAD_STATE = (
    "this requestState was not issued by this server for this exact request (same tool or prompt "
    "name or resource URI, same arguments), was altered, or is more than an hour old. Send the "
    "request again without requestState and inputResponses to start over."
)


def _state_key(kernel: Kernel) -> bytes:
    """The secret that seals requestState, shared by every process using this data directory.

    Kept in ``<data>/request-state.key`` (mode 0600), made on first use; so
    ``--workers`` processes, the daemon and a restarted server all accept each
    other's state. Falls back to a key held in memory when the data directory
    cannot be written (state then dies with the process).
    """
    path = kernel.paths.data_dir / "request-state.key"
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        kernel.log.warning("request_state_key_unreadable", path=str(path), error=str(exc),
                           hint="delete the file to have a new key made; using a per-process key")
        return os.urandom(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)  # atomic, and never replaces a key another process made first
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as exc:
        kernel.log.warning("request_state_key_not_saved", path=str(path), error=str(exc),
                           hint="multi-round requests will not survive a restart or span --workers")
        return os.urandom(32)


def _exchange(ctx: Any) -> Exchange:
    """What ``ctx.ask`` needs for this request: the era, the client's capabilities, the answers so far."""
    modern = _stateless_era(ctx)
    raw = ctx.params or {}
    resumed = None
    if modern and raw.get("requestState") is not None:
        try:  # the boundary has verified and decrypted it: plaintext this server minted
            resumed = json.loads(raw["requestState"])
        except (TypeError, ValueError):
            raise MCPError(types.INVALID_PARAMS, "Invalid or expired requestState: " + _BAD_STATE) from None
    return Exchange(
        modern=modern, capabilities=lambda: client_capabilities(ctx.session),
        responses=raw.get("inputResponses") if modern else None, resumed=resumed,
        session=ctx.session, request_id=ctx.request_id,
    )


def _asked(exc: BaseException, exchange: Exchange, *, tool: bool = False) -> Any:
    """Answer a call that asked the client something (or could not); re-raise anything else."""
    inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 else exc
    if isinstance(inner, InputRequired):
        try:
            state = exchange.carry()
        except PlexorError as err:  # ctx.state held something that is not JSON
            if tool:
                return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())],
                                            structured_content={"error": err.payload()}, is_error=True)
            raise MCPError(types.INTERNAL_ERROR, err.render(), err.payload()) from None
        return types.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": inner.requests, "requestState": state})
    if isinstance(inner, AskError):
        raise MCPError(inner.rpc_code, inner.render(), {**inner.data, "guidance": inner.guidance}) from None
    raise exc


def _check_input_responses(value: Any) -> None:
    """Refuse malformed ``inputResponses`` with advice, before the SDK's terse params error."""
    if not isinstance(value, dict):
        raise MCPError(types.INVALID_PARAMS, (
            f"inputResponses must be an object mapping each input request key to its answer, not {json.dumps(value)[:40]}: "
            "leave it out on a first request, and on a retry send the answers under the keys of the inputRequests you were given."),
            {"field": "inputResponses"})
    from pydantic import ValidationError

    for key, answer in value.items():
        try:
            if not isinstance(answer, dict):
                raise ValueError(f"not an object but {json.dumps(answer)[:40]}")
            _response_adapter().validate_python(answer)
        except (ValueError, ValidationError) as exc:
            why = str(exc).splitlines()[0] if not isinstance(exc, ValidationError) else "it matches none of the answer shapes"
            raise MCPError(types.INVALID_PARAMS, (
                f"inputResponses[{key!r}] is not a valid answer ({why}): expected an ElicitResult "
                '{"action": "accept" | "decline" | "cancel", "content": {...}}, a CreateMessageResult or a ListRootsResult. '
                "Answer under the same key as the input request, with the result its method defines."),
                {"field": "inputResponses", "key": key}) from None


@functools.cache
def _response_adapter() -> Any:
    """Validates one answer against the union of answer shapes (built once, on first use)."""
    from pydantic import TypeAdapter

    return TypeAdapter(types.InputResponse)


def _stateless_era(ctx: Any) -> bool:
    version = getattr(ctx, "protocol_version", None) or ""
    return version >= "2026-07-28"


def _progress_token(meta: Any) -> Any:
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get("progressToken", meta.get("progress_token"))
    return getattr(meta, "progress_token", None)
