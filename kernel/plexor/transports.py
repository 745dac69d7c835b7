"""Running the server: stdio, Streamable HTTP and legacy SSE, all through the SDK.

Security defaults for HTTP: bind 127.0.0.1; the SDK's Host/Origin checks on
(DNS-rebinding protection) with an allowlist that can be extended; an optional
bearer token (``--token`` or ``PLEXOR_TOKEN``); a request body limit (413)
and a per-request time limit. A non-loopback bind without a token is refused
unless explicitly allowed. Stateless Streamable HTTP can run in several worker
processes (``--workers``), each with its own kernel over the same storage.
Streamable HTTP keeps a bounded in-memory event store, so a client whose SSE
stream drops can resume it with ``Last-Event-ID``. ``docs/transports.md``
describes all of it.
"""

from __future__ import annotations

import collections
import dataclasses
import hmac
import ipaddress
import itertools
import json
import os
import signal
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http import EventStore  # already loaded by mcp.server.lowlevel

from plexor.core.kernel import Kernel, State

__all__ = ["HttpOptions", "build_http_app", "is_loopback", "serve_http", "serve_stdio", "worker_app"]

OPTIONS_ENV = "PLEXOR_HTTP_OPTIONS"  # how `--workers` hands the options to each worker process


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class HttpOptions:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    stateless: bool = False
    transport: str = "http"  # "http" (Streamable HTTP) or "sse"
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 300.0  # one MCP request (e.g. a tool call) may run this long
    grace: float = 30.0  # on SIGTERM, in-flight calls get this long to finish
    json_response: bool = False
    workers: int = 1
    sse_retry_ms: int = 1000  # the reconnect delay suggested to clients on resumable SSE streams
    event_history: int = 2000  # events kept for Last-Event-ID resumption (all streams together)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> HttpOptions:
        return cls(**json.loads(raw))


async def _run_until_signal(kernel: Kernel, scope: Any, grace: float) -> None:
    """On SIGTERM/SIGINT: stop taking calls, let in-flight ones finish, then end serving."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            kernel.log.info("signal", signal=signal.Signals(signum).name)
            await kernel.drain(grace)
            await anyio.sleep(0.2)  # let the answers of the calls that just finished reach the client
            scope.cancel()
            return


class _StdinLines:
    """Lines of stdin for the SDK's ``stdio_server``, read without a blocking thread.

    ``anyio.wrap_file`` reads in a worker thread that cancellation must wait
    for, so a SIGTERM would hang until the client closed stdin. A pipe is read
    through the event loop instead (cancellable at once); anything else (a
    regular file) falls back to a thread. A line longer than ``limit`` is
    skipped whole and handed on as an invalid message.
    """

    def __init__(self, limit: int = 64 * 1024 * 1024) -> None:
        import sys

        self._fd = os.dup(sys.stdin.fileno())
        self._limit = limit
        self._reader: Any = None
        self._file: Any = None

    def __aiter__(self) -> _StdinLines:
        return self

    async def _open(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=self._limit)
        pipe = os.fdopen(self._fd, "rb", buffering=0)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
            self._reader = reader
        except (ValueError, OSError):  # not a pipe, socket or tty
            import io

            self._file = io.TextIOWrapper(pipe, encoding="utf-8", errors="replace")

    async def __anext__(self) -> str:
        import asyncio

        import anyio

        if self._reader is None and self._file is None:
            await self._open()
        if self._file is not None:
            line = await anyio.to_thread.run_sync(self._file.readline, abandon_on_cancel=True)
        else:
            try:
                raw = await self._reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                await self._skip_rest()
                return "{oversized line skipped}\n"
            line = raw.decode("utf-8", "replace")
        if not line:
            raise StopAsyncIteration
        return line

    async def _skip_rest(self) -> None:
        import asyncio

        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


def _freeze_heap() -> None:
    """Move what exists after start-up out of the garbage collector's sight (``gc.freeze``).

    The kernel, the plugins, their schemas and the SDK's models live as long as the process; a
    full collection walked all of them on every request burst (about 30 us a call under load,
    bench/http_profile.py). Only serving processes do this, never a kernel made in a test.
    """
    import gc

    gc.freeze()


async def serve_stdio(kernel: Kernel, *, grace: float = 30.0) -> None:
    """Serve one client over stdin/stdout until EOF or a signal; then drain and stop the kernel."""
    import anyio
    from mcp.server.stdio import stdio_server

    from plexor.server import Boot, build_server

    boot = Boot(kernel, on_started=_freeze_heap)
    server = build_server(kernel, boot=boot)
    try:
        async with anyio.create_task_group() as tg:
            # The handshake is answered first; plugins load and start right after
            # it, and requests that need them wait for loading (and a plugin still
            # starting is waited for, bounded) instead of failing.
            boot.attach(tg)
            tg.start_soon(boot.fallback, 0.5)
            tg.start_soon(_run_until_signal, kernel, tg.cancel_scope, grace)
            async with stdio_server(stdin=_StdinLines()) as (read_stream, write_stream):  # type: ignore[arg-type]
                await server.run(read_stream, write_stream, server.create_initialization_options())
            kernel.log.info("stdin_closed")
            await kernel.drain(grace)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await kernel.stop(grace)


class _MemoryEventStore(EventStore):
    """The SDK's ``EventStore`` kept in memory: the last ``limit`` events of all streams.

    Enough for a client to resume a dropped SSE stream with ``Last-Event-ID``
    (and for the server to send the priming event and ``retry`` hint).
    """

    def __init__(self, limit: int) -> None:
        self._events: collections.OrderedDict[str, tuple[str, Any]] = collections.OrderedDict()
        self._limit = max(16, limit)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"{next(self._ids)}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self._limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        from mcp.server.streamable_http import EventMessage

        if last_event_id not in self._events:
            return None
        stream_id = self._events[last_event_id][0]
        found = False
        for event_id, (sid, message) in list(self._events.items()):
            if found and sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            if event_id == last_event_id:
                found = True
        return stream_id


def _timeout_middleware(seconds: float) -> Callable[..., Any]:
    """SDK middleware: a request running longer than ``seconds`` is cancelled and answered with guidance."""

    import anyio
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is None:  # notifications are not timed
            return await call_next(ctx)
        with anyio.move_on_after(seconds) as scope:
            return await call_next(ctx)
        if not scope.cancelled_caught:  # pragma: no cover - the body returned
            return None
        message = (f"{ctx.method} took longer than the server's limit of {seconds:g} s and was cancelled. "
                   "Narrow the request, or start the server with a larger --request-timeout.")
        if ctx.method == "tools/call":
            return types.CallToolResult.model_validate({
                "content": [{"type": "text", "text": message}], "isError": True,
                "structuredContent": {"error": {"message": message, "kind": "timeout", "limit_seconds": seconds}},
            })
        raise MCPError(types.INTERNAL_ERROR, message, {"kind": "timeout", "limit_seconds": seconds})

    return middleware


class _BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str, open_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.open_paths = set(open_paths)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(given, self.expected):
            body = json.dumps({
                "error": "unauthorized",
                "message": "missing or wrong bearer token",
                "guidance": "Send 'Authorization: Bearer <token>' with the token the server was started with "
                            "(--token or PLEXOR_TOKEN).",
            }).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="plexor"'),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class _TrimMcpHeaders:
    """ASGI middleware: drop leading/trailing whitespace from ``Mcp-*`` header values.

    RFC 9110 section 5.5 excludes that whitespace from a field value, but the HTTP parser may keep
    it, and the SDK compares ``Mcp-Name`` with the body byte for byte (SEP-2243).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers") or []
            if any(v != v.strip(b" \t") for k, v in headers if k.startswith(b"mcp-")):
                scope = {**scope, "headers": [(k, v.strip(b" \t") if k.startswith(b"mcp-") else v) for k, v in headers]}
        await self.app(scope, receive, send)


def _security(opts: HttpOptions) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*",
               "http://127.0.0.1", "http://localhost", "http://[::1]"]
    if not is_loopback(opts.host) and opts.host not in ("0.0.0.0", "::"):
        hosts += [f"{opts.host}:*", opts.host]
        origins += [f"http://{opts.host}:*", f"https://{opts.host}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts + list(opts.allowed_hosts),
        allowed_origins=origins + list(opts.allowed_origins),
    )


def build_http_app(kernel: Kernel, opts: HttpOptions, *, on_ready: Callable[[], Any] | None = None,
                   on_stop: Callable[[], Any] | None = None) -> Any:
    """The Starlette app for Streamable HTTP (``/mcp``) or legacy SSE (``/sse`` + ``/messages/``).

    ``on_ready`` runs once the kernel has started (the daemon writes its registry
    file then); ``on_stop`` when serving ends.
    """
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from plexor.server import build_server

    if kernel.state == State.CREATED:
        kernel.load()
    server = build_server(kernel)
    server.middleware.append(_timeout_middleware(opts.request_timeout))
    security = _security(opts)

    async def started() -> None:
        await kernel.start()
        _freeze_heap()
        if on_ready is not None:
            on_ready()

    async def stopped() -> None:
        try:
            await kernel.stop(opts.grace)
        finally:
            if on_stop is not None:
                on_stop()

    async def healthz(request: Request) -> Response:
        return JSONResponse(kernel.health())

    if opts.transport == "sse":
        from mcp.server.sse import SseServerTransport

        sse = SseServerTransport("/messages/", security_settings=security, max_request_body_size=opts.max_body_bytes)

        async def handle_sse(request: Request) -> Response:
            async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
                await server.run(streams[0], streams[1], server.create_initialization_options())
            return Response()

        @contextlib.asynccontextmanager
        async def sse_lifespan(app: Any) -> Any:
            await started()
            try:
                yield
            finally:
                await stopped()

        app: Any = Starlette(routes=[
            Route("/healthz", healthz),
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ], lifespan=sse_lifespan)
    else:
        inner = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=opts.stateless,
            json_response=opts.json_response,
            event_store=None if opts.stateless else _MemoryEventStore(opts.event_history),
            retry_interval=opts.sse_retry_ms,
            transport_security=security,
            host=opts.host,
            max_request_body_size=opts.max_body_bytes,
            custom_starlette_routes=[Route("/healthz", healthz)],
        )
        manager_lifespan = inner.router.lifespan_context

        @contextlib.asynccontextmanager
        async def http_lifespan(app: Any) -> Any:
            await started()
            try:
                async with manager_lifespan(app):
                    yield
            finally:
                await stopped()

        inner.router.lifespan_context = http_lifespan
        app = _TrimMcpHeaders(inner)
    if opts.token:
        return _BearerAuth(app, opts.token, open_paths=())
    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port); raises ``OSError``."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _uvicorn_config(app: Any, opts: HttpOptions, **extra: Any) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=opts.host,
        port=opts.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        # uvicorn stops accepting on SIGTERM, waits this long for open requests, then the lifespan stops the kernel.
        timeout_graceful_shutdown=max(1, int(opts.grace)),
        log_config=None,
        **extra,
    )


def worker_app() -> Any:
    """App factory for ``--workers`` (uvicorn imports ``plexor.transports:worker_app`` in each worker)."""
    from plexor.core.kernel import Kernel
    from plexor.log import configure

    configure(os.environ.get("PLEXOR_LOG_LEVEL") or "warning")
    opts = HttpOptions.from_json(os.environ[OPTIONS_ENV])
    kernel = Kernel()
    kernel.load()
    return build_http_app(kernel, opts)


def serve_http(kernel: Kernel | None, opts: HttpOptions, *, sock: socket.socket | None = None,
               on_ready: Callable[[], Any] | None = None, on_stop: Callable[[], Any] | None = None) -> None:
    """Run uvicorn until SIGTERM/SIGINT: it stops accepting, lets open requests finish, then the kernel drains and stops.

    With ``opts.workers > 1`` (stateless Streamable HTTP only) uvicorn starts that
    many processes on one socket; each builds its own kernel from the environment.
    """

    if opts.workers > 1:
        if not opts.stateless or opts.transport != "http":
            raise ValueError("--workers needs stateless Streamable HTTP (--stateless): sessions cannot span processes")
        os.environ[OPTIONS_ENV] = opts.to_json()
        config = _uvicorn_config("plexor.transports:worker_app", opts, factory=True, workers=opts.workers)
        from uvicorn.supervisors import Multiprocess

        listen = sock if sock is not None else bind_socket(opts.host, opts.port)
        if on_ready is not None:
            on_ready()
        try:
            Multiprocess(config, sockets=[listen]).run()
        finally:
            if on_stop is not None:
                on_stop()
        return
    assert kernel is not None
    app = build_http_app(kernel, opts, on_ready=on_ready, on_stop=on_stop)
    server = _DrainingServer(_uvicorn_config(app, opts), kernel, opts.grace)
    server.run(sockets=[sock] if sock is not None else None)


def _draining_server_class() -> Any:
    import asyncio

    import uvicorn

    class DrainingServer(uvicorn.Server):
        """uvicorn, but the first SIGTERM/SIGINT drains the kernel before uvicorn starts closing.

        Plain uvicorn (and sse-starlette, which watches uvicorn's exit flag) would
        end open SSE response streams at once; a tool call in flight would lose
        its answer. Here new calls are refused with guidance while in-flight
        ones finish (up to ``grace`` seconds); then uvicorn shuts down as usual.
        A second signal exits at once.
        """

        def __init__(self, config: Any, kernel: Kernel, grace: float) -> None:
            super().__init__(config)
            self._kernel = kernel
            self._grace = grace
            self._draining = False
            self._loop: Any = None

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self._draining or self._loop is None:
                super().handle_exit(sig, frame)
                return
            self._draining = True
            self._kernel.log.info("signal", signal=signal.Signals(sig).name, action="draining")

            async def drain_then_exit() -> None:
                try:
                    await self._kernel.drain(self._grace)
                    await asyncio.sleep(0.2)  # let the last responses reach their clients
                finally:
                    super(DrainingServer, self).handle_exit(sig, frame)

            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(drain_then_exit()))

    return DrainingServer


def _DrainingServer(config: Any, kernel: Kernel, grace: float) -> Any:  # noqa: N802 - a lazy class
    return _draining_server_class()(config, kernel, grace)
