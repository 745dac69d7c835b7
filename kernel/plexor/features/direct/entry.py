"""A stateless POST to ``/mcp`` answered in the request's own task, with the SDK's own rules.

The SDK's entry for the 2026-07-28 era runs each request's handler as a second task in a task group,
beside a third that waits for the client to go away, and hands notifications over a memory stream;
an answer goes through pydantic models and a Starlette response. In ``--stateless`` mode a 2025-11-25
request costs it a whole transport, dispatcher and server task. All of that is paid by every call,
though almost every call sends no notification and outlives no client. :class:`McpEntry` serves the
common case in the ASGI task itself: it reads the body once, and when the body is one plain request
that the SDK's rules accept (for 2026-07-28 its classifier: routing headers, ``_meta`` envelope,
protocol version; and its ``Mcp-Param-*`` check), it runs the SDK's ``serve_one`` (the middleware
path, the handlers, the result's serialization) and writes the JSON-RPC answer itself. In 2026-07-28 a
notification from the handler turns the answer into an SSE stream at that moment, as does a handler
silent for the ping interval (then pinged); a stateless 2025-11-25 answer streams from the start, as
the SDK's does. A client that goes away cancels the handler. Anything else (a 2025-11-25 session, a
GET, ``initialize``, a notification, ``subscriptions/listen``, a body the checks refuse or cannot
read) goes to the SDK's app with the body replayed, so every refusal is the SDK's own, word for word.
``docs/transports.md`` and ``bench/README.md`` (issue 24) say what it changes and what it costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

# Imported when the Streamable HTTP app is built (the plugin's hook), never by the CLI's other commands,
# so the SDK's names are taken once here rather than on every request.
import anyio
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    validate_mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCNotification, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request

if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Mapping

    from mcp.server.lowlevel import Server
    from mcp.shared.message import MessageMetadata
    from mcp_types import ProgressToken
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from plexor.extending import Clock

__all__ = ["McpEntry"]

_PLAIN_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_ROUTING = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
_JSON_HEADERS = [(b"content-type", b"application/json")]


def _accepts(value: bytes) -> tuple[bool, bool]:
    """(JSON, SSE) acceptable by an ``Accept`` value, wildcards included (as the SDK reads it)."""
    types = {part.split(b";")[0].strip().lower() for part in value.split(b",")}
    anything = b"*/*" in types
    return (anything or b"application/json" in types or b"application/*" in types,
            anything or b"text/event-stream" in types or b"text/*" in types)


def _plain(decoded: object) -> bool:
    """One JSON-RPC request object of the plainest form (anything else is the SDK's to judge)."""
    if type(decoded) is not dict or not decoded.keys() <= _PLAIN_KEYS or decoded.get("jsonrpc") != "2.0":
        return False
    rid, method, params = decoded.get("id"), decoded.get("method"), decoded.get("params")
    return (type(rid) is str or type(rid) is int) and type(method) is str and method != "subscriptions/listen" \
        and (params is None or type(params) is dict)


class McpEntry:
    """ASGI, innermost around the SDK's app: stateless POSTs to ``path`` served here (module docstring)."""

    def __init__(self, app: ASGIApp, server: Server[object], deadlines: Clock, *, path: str = "/mcp",
                 max_body: int, json_response: bool, stateless: bool, ping_seconds: float = 15.0) -> None:
        self.app = app
        self.server = server
        self.deadlines = deadlines  # the request time limit's clock also ends the silence before a ping
        self.path = path
        self.max_body = max_body
        self.json_response = json_response
        self.ping_seconds = ping_seconds  # as the SDK's entry (15 s): a silent answer turns SSE and is pinged
        self.handshake = {v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS}  # the 2025 eras: the SDK's sessions,
        self.stateless = stateless  # or with --stateless one request per POST, served here as well
        self._marked: dict[str, tuple[object, bool]] = {}  # tool -> (its schema, whether it names Mcp-Param headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        version = content_type = None
        accept = b""
        routing: set[bytes] = set()
        twice = False  # a routing header sent twice: the SDK's refusal
        for k, v in headers:
            if k.startswith(b"mcp-"):  # their values trimmed already (plexor.serving.http_apps.Endpoint)
                if k in _ROUTING:
                    twice = twice or k in routing
                    routing.add(k)
                    if k == b"mcp-protocol-version":
                        version = v
            elif k == b"content-type":
                content_type = v
            elif k == b"accept":
                accept = v
        legacy = version in self.handshake
        if (scope["method"] != "POST" or scope["path"] != self.path or scope.get("root_path") or version is None
                or (legacy and not self.stateless) or twice or content_type is None
                or not content_type.lower().startswith(b"application/json")):
            return await self.app(scope, receive, send)
        wants_json, wants_sse = _accepts(accept)
        if not wants_json or not (wants_sse or self.json_response):
            return await self.app(scope, receive, send)
        await self._exchange(scope, receive, send, version.decode() if legacy else None)

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, legacy: str | None) -> None:
        read: list[Message] = []
        size = 0
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                return  # gone before its body arrived: nobody to answer
            size += len(message.get("body", b""))
            if size > self.max_body:  # the SDK's 413, with the body so far
                return await self.app(scope, _replay(read, receive), send)
            if not message.get("more_body"):
                break
        body = read[0].get("body", b"") if len(read) == 1 else b"".join(m.get("body", b"") for m in read)
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            decoded = None
        if legacy is not None:
            served = _plain(decoded) and decoded["method"] != "initialize" and \
                await self._serve_legacy(scope, receive, send, decoded, legacy)
        else:
            served = _plain(decoded) and await self._serve(scope, receive, send, decoded)
        if not served:
            await self.app(scope, _replay(read, receive), send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, decoded: dict[str, Any]) -> bool:
        """Answer ``decoded`` (False: the SDK's classifier or header check refuses it, the SDK answers)."""
        headers = Headers(scope=scope)
        verdict = classify_inbound_request(decoded, headers=dict(headers))
        if isinstance(verdict, InboundLadderRejection) or self._param_headers_refused(decoded, headers):
            return False
        connection = Connection.from_envelope(verdict.protocol_version, verdict.client_info,
                                              verdict.client_capabilities)
        transport = TransportContext(kind="streamable-http", can_send_request=False, headers=headers)
        return await self._answer(scope, receive, send, decoded, connection, transport, legacy=False)

    async def _serve_legacy(self, scope: Scope, receive: Receive, send: Send, decoded: dict[str, Any],
                            version: str) -> bool:
        """Answer ``decoded``, a 2025-era request to a stateless server, as the SDK's stateless mode does: a
        connection born ready at the header's version, an SSE stream from the start (JSON with --json-response)."""
        transport = TransportContext(kind="streamable-http", can_send_request=False)
        return await self._answer(scope, receive, send, decoded, Connection.from_envelope(version, None, None),
                                  transport, legacy=True)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, decoded: dict[str, Any],
                      connection: Connection, transport: TransportContext, *, legacy: bool) -> bool:
        """Run ``decoded`` through the SDK's ``serve_one`` and write its answer (False: the SDK's session manager is
        not running yet, and its app says so)."""
        manager = self.server.session_manager
        if manager._task_group is None:  # SDK private: no public "is it running"
            return False
        reply = _Reply(send, decoded["id"], self.json_response, self.ping_seconds, legacy=legacy)
        reply.transport = transport
        reply.message_metadata = ServerMessageMetadata(request_context=Request(scope, receive))
        reply.progress_token = progress_token_from_params(decoded.get("params"))
        # SDK private (the session manager's lifespan state): the SDK passes it to every request and offers no
        # public way to read it; plexor's server keeps the SDK's default (nothing reads it).
        await reply.run(self.server, decoded, connection, manager._lifespan_state, receive, self.deadlines)
        return True

    def _param_headers_refused(self, decoded: dict[str, Any], headers: Mapping[str, str]) -> bool:
        """Whether a ``tools/call``'s ``Mcp-Param-*`` headers disagree with its arguments (the SDK's check,
        skipped for a tool whose schema names no such header: then no header can disagree)."""
        if decoded["method"] != "tools/call":
            return False
        params = decoded.get("params") or {}
        name, arguments = params.get("name"), params.get("arguments")
        if type(name) is not str or (arguments is not None and not isinstance(arguments, dict)):
            return False
        lookup = self.server.get_tool_input_schema
        try:
            schema = lookup(name) if lookup is not None else None
        except Exception:  # noqa: BLE001 - the SDK's rule: the header check never breaks a call
            return False
        if schema is None:
            return False
        marked = self._marked.get(name)
        if marked is None or marked[0] is not schema:
            marked = self._marked[name] = (schema, bool(x_mcp_header_map(schema)))
        return marked[1] and validate_mcp_param_headers(schema, arguments or {}, headers) is not None


class _Reply:
    """One request's dispatch context (the SDK's ``DispatchContext``, no back channel) and its answer:
    JSON, or an SSE stream from the first notification (or the first ping) on."""

    can_send_request = False
    transport: TransportContext
    message_metadata: MessageMetadata
    progress_token: ProgressToken | None = None

    def __init__(self, send: Send, request_id: str | int, json_only: bool, ping_seconds: float,
                 legacy: bool = False) -> None:
        self.send = send
        self.ping_seconds = ping_seconds
        self.legacy = legacy  # 2025 era: SSE from the start, errors as its dispatcher writes them
        self.request_id = request_id
        self.json_only = json_only  # --json-response: notifications are dropped, the answer is JSON
        self.streaming = False
        self.ended = False
        self._cancel: anyio.Event | None = None
        self._pinger: asyncio.Task[None] | None = None

    @property
    def cancel_requested(self) -> anyio.Event:  # nothing sets it here (a client cancels by going away)
        if self._cancel is None:
            self._cancel = anyio.Event()
        return self._cancel

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: object = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: object = None) -> None:
        if self.json_only or self.ended:
            return
        note = JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params) if params is not None else None)
        await self._event(_sse(note.model_dump(mode="json", by_alias=True, exclude_none=True), self.legacy))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def _event(self, data: bytes) -> None:
        if not self.streaming:
            self.streaming = True
            await self.send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    def cancel(self) -> None:
        """The silence window ended (called by the deadlines' timer): stream, and ping until the answer."""
        if not self.ended and not self.json_only and self._pinger is None:
            self._pinger = asyncio.get_running_loop().create_task(self._ping())

    async def _ping(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):  # the connection is gone: the watcher ends the call
            while not self.ended:
                await self._event(b": ping\r\n\r\n")
                await asyncio.sleep(self.ping_seconds)

    async def run(self, server: Server[object], decoded: dict[str, Any], connection: object, state: object,
                  receive: Receive, deadlines: Clock) -> None:
        scope = anyio.CancelScope()
        watcher = asyncio.get_running_loop().create_task(_watch(receive, scope))
        deadlines.add(self, self.ping_seconds)
        status, answer = 200, None
        try:
            if self.legacy and not self.json_only:  # the SDK's stateless 2025 mode streams from the start
                self.streaming = True
                await self.send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            with scope:
                try:
                    result = await serve_one(server, self, decoded["method"], decoded.get("params"),
                                             connection=connection, lifespan_state=state)  # type: ignore[arg-type]
                    answer = {"jsonrpc": "2.0", "id": self.request_id, "result": result}
                except Exception as exc:  # the SDK's mapping: its errors as they are, anything else generic
                    error = _legacy_error(exc) if self.legacy else modern_error_data(exc)
                    status = 200 if self.legacy else ERROR_CODE_HTTP_STATUS.get(error.code, 200)
                    answer = {"jsonrpc": "2.0", "id": self.request_id,
                              "error": error.model_dump(mode="json", by_alias=True, exclude_none=True)}
        finally:
            self.ended = True
            deadlines.discard(self)
            watcher.cancel()
            if self._pinger is not None:
                self._pinger.cancel()
        if answer is None:  # the client went away: nobody to answer
            if self.streaming:
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if self.streaming:
            await self.send({"type": "http.response.body", "body": _sse(answer, self.legacy), "more_body": False})
            return
        body = _json(answer, self.legacy)
        await self.send({"type": "http.response.start", "status": status,
                         "headers": [(b"content-length", str(len(body)).encode()), *_JSON_HEADERS]})
        await self.send({"type": "http.response.body", "body": body})


_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
                (b"connection", b"keep-alive"), (b"x-accel-buffering", b"no")]


def _legacy_error(exc: Exception) -> ErrorData:
    """A 2025-era handler's exception as the SDK's dispatcher writes it (its errors as they are, else code 0)."""
    error: ErrorData | None = handler_exception_to_error_data(exc)
    if error is None:
        logging.getLogger("mcp.shared.jsonrpc_dispatcher").exception("handler raised")
        error = ErrorData(code=0, message=str(exc))
    return error


def _json(message: dict[str, Any], legacy: bool = False) -> bytes:
    """As the SDK writes it: compact; in the 2025 era (pydantic's writer) with non-ASCII text as UTF-8."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=not legacy).encode()
    except TypeError:  # a handler's dict holding what JSON has no form for: as the SDK's model writes it
        dumped = JSONRPCResponse.model_validate(message).model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(dumped, separators=(",", ":"), ensure_ascii=not legacy).encode()


def _sse(message: dict[str, Any], legacy: bool = False) -> bytes:
    return b"event: message\r\ndata: " + _json(message, legacy) + b"\r\n\r\n"


async def _watch(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel the handler when the client goes away (its answer's stream closed: the era's cancellation)."""
    with contextlib.suppress(Exception):  # a receive that fails is a client gone as well
        while (await receive())["type"] != "http.disconnect":
            pass
    scope.cancel()


def _replay(read: list[Message], receive: Receive) -> Receive:
    """``receive``, first giving back the messages already read."""
    pending = list(read)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed

