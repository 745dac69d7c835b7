"""Streamable HTTP and legacy SSE, through the SDK, under uvicorn.

Security defaults: bind 127.0.0.1; Host/Origin allow-lists matched exactly on every route
(``plexor.serving.guard``); an optional bearer token (``--token`` or ``PLEXOR_TOKEN``); a
request body limit (413) and a per-request time limit; header and body read timeouts and a
connection cap (``plexor.serving.protocol``). A non-loopback bind without a token is refused
by the CLI unless explicitly allowed. Stateless Streamable HTTP can run in several worker
processes (``--workers``), each with its own kernel over the same storage. Streamable HTTP
keeps a bounded in-memory event store, so a client whose SSE stream drops can resume it with
``Last-Event-ID``. ``docs/transports.md`` describes all of it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http import EventStore  # already loaded by mcp.server.lowlevel

from plexor.core.kernel import Kernel, State
from plexor.serving.features import CallerPrincipal, refuse_unguarded
from plexor.serving.guard import default_allow_lists
from plexor.serving.stdio import _freeze_heap
from plexor.serving.watchdog import Watchdog

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.extending import ServerSetup

__all__ = ["HttpOptions", "bind_socket", "build_http_app", "serve_http", "worker_app"]

OPTIONS_ENV = "PLEXOR_HTTP_OPTIONS"  # how `--workers` hands the options to each worker process


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
    header_timeout: float = 10.0  # a request's headers must arrive within this many seconds
    body_timeout: float = 60.0  # and its body within this many seconds of the headers
    max_connections: int = 0  # open connections at most; 0: three quarters of the file descriptor limit
    auth_issuer: str | None = None  # OAuth: overrides [plexor.auth] issuer (plexor.auth)
    resource_url: str | None = None  # OAuth: overrides [plexor.auth] resource
    profile: str | None = None  # the tool profile of connections that name none

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> HttpOptions:
        return cls(**json.loads(raw))


def _event_store(setup: ServerSetup) -> EventStore:
    """Stateful Streamable HTTP's event store: a plugin's (the ``bus`` plugin's, shared through the kernel's
    database), else this process's memory."""
    from plexor.limits import value
    from plexor.state.memory_events import MemoryEventStore

    store = setup.kernel.pm.hook.plexor_event_store(setup=setup)
    if store is not None:
        return store
    environ = setup.kernel.environ
    return MemoryEventStore(setup.options.event_history, int(value("event_store_session_bytes", environ)),
                            int(value("event_store_bytes", environ)))


def _timeout_middleware(seconds: float, kernel: Kernel | None = None) -> Callable[..., Any]:
    """SDK middleware: a request running longer than ``seconds`` (or its tool's own, longer, timeout) is cancelled
    and answered with guidance; a call that became a task (``ctx.detach()``) ends it failed."""


    import anyio
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.context import DETACHER
    from plexor.limits import overran
    from plexor.tasks.bounds import run_limit

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is None:  # notifications are not timed
            return await call_next(ctx)
        shown = seconds
        if kernel is not None and ctx.method == "tools/call" and isinstance(ctx.params, dict):
            shown = run_limit(kernel, ctx.params.get("name"), seconds)[0] or seconds
        with anyio.move_on_after(shown) as scope:
            return await call_next(ctx)
        if not scope.cancelled_caught:  # pragma: no cover - the body returned
            return None
        message = overran(ctx.method, shown, seconds)
        detacher = DETACHER.get()  # set around a call that may become a task (the tasks plugin)
        if ctx.method == "tools/call" and (detacher is None or not detacher.became_task):
            return types.CallToolResult.model_validate({
                "content": [{"type": "text", "text": message}], "isError": True,
                "structuredContent": {"error": {"message": message, "kind": "timeout", "limit_seconds": shown}},
            })
        raise MCPError(types.INTERNAL_ERROR, message, {"kind": "timeout", "limit_seconds": shown})

    return middleware


def build_http_app(kernel: Kernel, opts: HttpOptions, *, on_ready: Callable[[], Any] | None = None,
                   on_stop: Callable[[], Any] | None = None) -> Any:
    """The ASGI app for Streamable HTTP (``/mcp``) or legacy SSE (``/sse`` + ``/messages/``), plus ``/healthz``.

    ``on_ready`` runs once the kernel has started (the daemon writes its registry
    file then); ``on_stop`` when serving ends. Every route is behind the Host/Origin
    guard and, with a token, the bearer check.
    """
    import contextlib

    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from plexor.serving.guard import AnswerIds, BearerAuth, HostOriginGuard, TrimMcpHeaders
    from plexor.serving.server import build_server

    if kernel.state == State.CREATED:
        kernel.load()
    refuse_unguarded(kernel, opts.profile, opts.auth_issuer)  # auth configured but its plugin off: no server
    server = build_server(kernel, transport=opts.transport, options=opts)
    setup = server.setup
    assert setup is not None  # noqa: S101 - build_server sets it
    from plexor.tasks.bounds import limit_runs

    limit_runs(kernel, opts.request_timeout)  # tasks obey the same run-time limit (plexor.tasks.bounds)
    server.path.add("timeout", _timeout_middleware(opts.request_timeout, kernel))
    # plugins' routes (the telemetry plugin's /metrics, ...), beside /healthz and the card
    observing = [route for routes in kernel.pm.hook.plexor_routes(setup=setup) for route in routes or ()]
    # Host and Origin are checked by HostOriginGuard (exact matches, every route); the SDK keeps its Content-Type check.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)

    async def started() -> None:
        import asyncio

        from plexor.serving.protocol import install_accept_log

        install_accept_log(asyncio.get_running_loop(), kernel.log)
        await kernel.start()
        backend = kernel.pm.hook.plexor_notifier_backend(setup=setup)  # the bus plugin, when processes share data
        if backend is not None:
            from plexor.state.bus import install

            install(kernel.notifier, backend)
            await kernel.notifier.start()
        _freeze_heap()
        if on_ready is not None:
            on_ready()

    async def stopped() -> None:
        try:
            await kernel.stop(opts.grace)
            await kernel.notifier.close()
        finally:
            if on_stop is not None:
                on_stop()

    async def healthz(request: Request) -> Response:
        # 503 unless ready (starting, draining after SIGTERM, stopped): a balancer's health check then
        # sends new requests elsewhere while calls in flight here finish.
        return JSONResponse(kernel.health(), status_code=200 if kernel.state == State.READY else 503)

    async def card(request: Request) -> Response:  # /.well-known/mcp/server-card.json (plexor.serving.card)
        from plexor.serving.card import server_card

        return JSONResponse(server_card(kernel, server, str(request.base_url), transport=opts.transport,
                                        stateless=opts.stateless, access=request.scope.get("plexor.access")))

    if opts.transport == "sse":
        from mcp.server.sse import SseServerTransport

        from plexor.serving.sse import AnsweringSse

        sse = SseServerTransport("/messages/", security_settings=security, max_request_body_size=opts.max_body_bytes)
        answering = AnsweringSse(sse, opts.max_body_bytes)  # unparsable posts answered on the stream, with their id

        from plexor.limits import PerCaller, principal, refuse, value

        streams_of = PerCaller(int(value("sse_per_caller", kernel.environ)))  # so one client cannot hold every connection

        async def handle_sse(request: Request) -> Response:
            who = principal(request.scope)
            if not streams_of.take(who):
                message = refuse("sse_per_caller", streams_of.limit, "this client already has that many SSE connections "
                                 "open", "close one first")
                return JSONResponse({"error": "too_many_connections", "message": message}, status_code=429,
                                    headers={"Retry-After": "1"})
            try:
                # Starlette private (Request._send): a Route endpoint gets no public send for the raw ASGI reply
                async with answering.connect(request.scope, request.receive, request._send) as streams:
                    await server.run(streams[0], streams[1], server.create_initialization_options())
            finally:
                streams_of.give_back(who)
            return Response()

        @contextlib.asynccontextmanager
        async def sse_lifespan(app: Any) -> Any:
            await started()
            try:
                yield
            finally:
                await stopped()

        app: Any = Starlette(routes=[
            Route("/healthz", healthz), *observing, Route("/.well-known/mcp/server-card.json", card),
            Route("/sse", handle_sse, methods=["GET"]),
            Mount("/messages/", app=answering.post),
        ], lifespan=sse_lifespan)
    else:
        from plexor.limits import value

        event_store = None if opts.stateless else _event_store(setup)
        inner = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=opts.stateless,
            json_response=opts.json_response,
            event_store=event_store,
            retry_interval=opts.sse_retry_ms,
            transport_security=security,
            host=opts.host,
            max_request_body_size=opts.max_body_bytes,
            session_idle_timeout=value("session_idle_seconds", kernel.environ),
            custom_starlette_routes=[Route("/healthz", healthz), *observing,
                                     Route("/.well-known/mcp/server-card.json", card)],
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
        app = TrimMcpHeaders(inner)
        from plexor.state.events import ForgetOnDelete, ResumeAnywhere, SessionBinding, SharedEventStore, watch_sessions
        from plexor.state.memory_events import MemoryEventStore

        # SDK private (the session manager's _server_instances): which sessions this process serves; no public way
        manager = getattr(server, "_session_manager", None)
        sessions = watch_sessions(manager, event_store) if event_store is not None else {}  # an ended one's events go
        if isinstance(event_store, SharedEventStore):  # a stream may be resumed through any process
            app = ResumeAnywhere(app, event_store, sessions.__contains__, retry_ms=opts.sse_retry_ms)
        elif isinstance(event_store, MemoryEventStore):
            event_store.holds = sessions.__contains__  # and any session missed, with the next event written
        if event_store is not None:
            from plexor.serving.sessions import limit_sessions

            app = SessionBinding(ForgetOnDelete(limit_sessions(app, sessions, kernel.environ), event_store))
    app = AnswerIds(app)
    if opts.transport != "sse":  # legacy SSE answers on the event stream (plexor.serving.sse), and its parser refuses
        from plexor.serving.bounds import NestingLimit

        app = NestingLimit(app, opts.max_body_bytes)  # both eras, before anything runs
    app = CallerPrincipal(app, kernel)  # inside the wrappers: the auth guard has verified the token by then
    # Plugins' wrappers, each around the previous one (the auth plugin's access guard: OAuth, scopes and
    # profiles, when configured, docs/security.md), in the hook's call order.
    for impl in reversed(kernel.pm.hook.plexor_asgi_wrapper.get_hookimpls()):
        app = impl.function(app, setup) or app
    if not setup.shared.get("profiles"):
        from plexor.auth import NoProfiles

        app = NoProfiles(app)  # a request naming a profile is never served with every tool
    if opts.token and not setup.shared.get("authenticates"):
        app = BearerAuth(app, opts.token)
    hosts, origins = default_allow_lists(opts.host, opts.allowed_hosts, opts.allowed_origins)
    return HostOriginGuard(app, hosts, origins)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port); raises ``OSError``.

    Created with ``IPPROTO_TCP`` so asyncio sets ``TCP_NODELAY`` on every accepted connection
    (the protocol sets it too, for sockets made elsewhere).
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _uvicorn_config(app: Any, opts: HttpOptions, **extra: Any) -> Any:
    import uvicorn

    from plexor.serving.protocol import Limits

    config = uvicorn.Config(
        app,
        host=opts.host,
        port=opts.port,
        log_level="warning",
        access_log=False,
        # The client address keys the per-caller limits of callers without a token: uvicorn's default
        # (trust X-Forwarded-For from loopback) let any local process claim as many addresses as it liked.
        proxy_headers=False,
        lifespan="on",
        http="plexor.serving.protocol:LimitedHttp",
        # uvicorn stops accepting on SIGTERM, waits this long for open requests, then the lifespan stops the kernel.
        timeout_graceful_shutdown=max(1, int(opts.grace)),
        log_config=None,
        **extra,
    )
    config.plexor_limits = Limits(opts.header_timeout, opts.body_timeout, opts.max_connections)  # type: ignore[attr-defined]
    return config


def worker_app() -> Any:
    """App factory for ``--workers`` (uvicorn imports ``plexor.serving.http:worker_app`` in each worker)."""
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
        config = _uvicorn_config("plexor.serving.http:worker_app", opts, factory=True, workers=opts.workers)
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
    server = _draining_server_class()(_uvicorn_config(app, opts), kernel, opts.grace)
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
        A second signal exits at once, and a shutdown that hangs (a plugin's
        hook) is ended by a watchdog after twice the grace period plus a margin.
        """

        def __init__(self, config: Any, kernel: Kernel, grace: float) -> None:
            super().__init__(config)
            self._kernel = kernel
            self._grace = grace
            self._draining = False
            self._loop: Any = None
            from plexor.serving.watchdog import EXIT_MARGIN

            self._watchdog = Watchdog(kernel, 2 * grace + EXIT_MARGIN + max(1, int(grace)))

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets=sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self._draining or self._loop is None:
                super().handle_exit(sig, frame)
                return
            self._draining = True
            self._kernel.log.info("signal", signal=signal.Signals(sig).name, action="draining")
            self._watchdog.arm(signal.Signals(sig).name)  # from here a second signal exits at once

            async def drain_then_exit() -> None:
                try:
                    await self._kernel.drain(self._grace)
                    await asyncio.sleep(0.2)  # let the last responses reach their clients
                finally:
                    super(DrainingServer, self).handle_exit(sig, frame)

            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(drain_then_exit()))

    return DrainingServer
