"""Running the server: stdio, Streamable HTTP and legacy SSE, all through the SDK.

Security defaults for HTTP: bind 127.0.0.1; the SDK's Host/Origin checks on
(DNS-rebinding protection) with an allowlist that can be extended; an optional
bearer token (``--token`` or ``PLEXOR_TOKEN``); a request body limit. A
non-loopback bind without a token is refused unless explicitly allowed.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from plexor.kernel import Kernel, State

__all__ = ["HttpOptions", "build_http_app", "is_loopback", "serve_http", "serve_stdio"]


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
    request_timeout: float = 300.0
    json_response: bool = False


async def _run_until_signal(kernel: Kernel, scope: Any, grace: float) -> None:
    """On SIGTERM/SIGINT: stop taking calls, let in-flight ones finish, then end serving."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            kernel.log.info("signal", signal=signal.Signals(signum).name)
            await kernel.drain(grace)
            scope.cancel()
            return


async def serve_stdio(kernel: Kernel, *, grace: float = 30.0) -> None:
    """Serve one client over stdin/stdout until EOF or a signal; then drain and stop the kernel."""
    import anyio
    from mcp.server.stdio import stdio_server

    from plexor.server import build_server

    if kernel.state == State.CREATED:
        kernel.load()
    server = build_server(kernel)
    try:
        async with anyio.create_task_group() as tg:
            # The handshake is answered while plugins start; calls to a plugin
            # still starting wait for it (bounded) instead of failing.
            tg.start_soon(kernel.start)
            tg.start_soon(_run_until_signal, kernel, tg.cancel_scope, grace)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            kernel.log.info("stdin_closed")
            await kernel.drain(grace)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await kernel.stop(grace)


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


def build_http_app(kernel: Kernel, opts: HttpOptions) -> Any:
    """The Starlette app for Streamable HTTP (``/mcp``) or legacy SSE (``/sse`` + ``/messages/``)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from plexor.server import build_server

    if kernel.state == State.CREATED:
        kernel.load()
    server = build_server(kernel)
    security = _security(opts)

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
            await kernel.start()
            try:
                yield
            finally:
                await kernel.stop(opts.request_timeout)

        app = Starlette(routes=[
            Route("/healthz", healthz),
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ], lifespan=sse_lifespan)
    else:
        inner = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=opts.stateless,
            json_response=opts.json_response,
            transport_security=security,
            host=opts.host,
            max_request_body_size=opts.max_body_bytes,
            custom_starlette_routes=[Route("/healthz", healthz)],
        )
        manager_lifespan = inner.router.lifespan_context

        @contextlib.asynccontextmanager
        async def http_lifespan(app: Any) -> Any:
            await kernel.start()
            try:
                async with manager_lifespan(app):
                    yield
            finally:
                await kernel.stop(opts.request_timeout)

        inner.router.lifespan_context = http_lifespan
        app = inner
    if opts.token:
        return _BearerAuth(app, opts.token, open_paths=())
    return app


def serve_http(kernel: Kernel, opts: HttpOptions) -> None:
    """Run uvicorn until SIGTERM/SIGINT; uvicorn drains connections, the lifespan stops the kernel."""
    import uvicorn

    app = build_http_app(kernel, opts)
    config = uvicorn.Config(
        app,
        host=opts.host,
        port=opts.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(opts.request_timeout),
        log_config=None,
    )
    uvicorn.Server(config).run()
