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

import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from plexor.core.kernel import Kernel, State
from plexor.serving.features import CallerPrincipal, refuse_unguarded
from plexor.serving.guard import default_allow_lists
from plexor.serving.http_apps import Lifespan, kernel_routes, sse_app, streamable_app
from plexor.serving.http_options import HttpOptions
from plexor.serving.watchdog import Watchdog

if TYPE_CHECKING:  # pragma: no cover - typing only
    from types import FrameType

    import uvicorn
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
    from starlette.types import ASGIApp

    from plexor.extending import ServerSetup
    from plexor.serving.deadlines import Deadlines

__all__ = ["bind_socket", "build_http_app", "serve_http", "worker_app"]

OPTIONS_ENV = "PLEXOR_HTTP_OPTIONS"  # how `--workers` hands the options to each worker process


def _timeout_middleware(seconds: float, kernel: Kernel | None = None, deadlines: Deadlines | None = None
                        ) -> ServerMiddleware[object]:
    """SDK middleware: a request running longer than ``seconds`` (or its tool's own, longer, timeout) is cancelled
    and answered with guidance; a call that became a task (``ctx.detach()``) ends it failed. One loop timer serves
    every request in flight (:mod:`plexor.serving.deadlines`)."""
    import anyio
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.context import DETACHER
    from plexor.features.tasks.bounds import run_limit
    from plexor.limits import overran
    from plexor.serving.deadlines import Deadlines

    deadlines = deadlines or Deadlines()
    scope_type = anyio.CancelScope

    async def middleware(ctx: ServerRequestContext[object], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # notifications are not timed
            return await call_next(ctx)
        shown = seconds
        if kernel is not None and ctx.method == "tools/call" and isinstance(ctx.params, dict):
            shown = run_limit(kernel, ctx.params.get("name"), seconds)[0] or seconds
        scope = scope_type()
        deadlines.add(scope, shown)
        try:
            with scope:
                return await call_next(ctx)
        finally:
            deadlines.discard(scope)
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


def build_http_app(kernel: Kernel, opts: HttpOptions, *, on_ready: Callable[[], object] | None = None,
                   on_stop: Callable[[], object] | None = None) -> ASGIApp:
    """The ASGI app for Streamable HTTP (``/mcp``) or legacy SSE (``/sse`` + ``/messages/``), plus ``/healthz``.

    ``on_ready`` runs once the kernel has started (the daemon writes its registry
    file then); ``on_stop`` when serving ends. Every route is behind the Host/Origin
    guard and, with a token, the bearer check.
    """
    from plexor.serving.server import build_server

    if kernel.state == State.CREATED:
        kernel.load()
    refuse_unguarded(kernel, opts.profile, opts.auth_issuer)  # auth configured but its plugin off: no server
    server = build_server(kernel, transport=opts.transport, options=opts)
    setup = server.setup
    assert setup is not None  # noqa: S101 - build_server sets it
    from plexor.features.tasks.bounds import limit_runs

    limit_runs(kernel, opts.request_timeout)  # tasks obey the same run-time limit (plexor.features.tasks.bounds)
    from plexor.serving.deadlines import Deadlines

    # one clock for the time limit and a wrapper's timers (setup.clock: the direct feature's pings)
    setup.clock = deadlines = Deadlines()
    server.path.add("timeout", _timeout_middleware(opts.request_timeout, kernel, deadlines))
    routes = kernel_routes(setup, kernel)
    lifespan = Lifespan(setup, opts.grace, on_ready, on_stop)
    if opts.transport == "sse":
        app = sse_app(server, opts, routes, lifespan)
    else:
        app = streamable_app(server, opts, routes, lifespan)
    return _guarded(app, setup, opts, kernel)


def _guarded(app: ASGIApp, setup: ServerSetup, opts: HttpOptions, kernel: Kernel) -> ASGIApp:
    """``app`` inside the ASGI guards, innermost first; the outermost (Host/Origin) is returned."""
    from plexor.serving.extensions import wrapped
    from plexor.serving.guard import AnswerIds, BearerAuth, HostOriginGuard

    app = AnswerIds(app)
    if opts.transport != "sse":  # legacy SSE answers on the event stream (plexor.serving.sse), and its parser refuses
        from plexor.serving.bounds import NestingLimit

        app = NestingLimit(app, opts.max_body_bytes)  # both eras, before anything runs
    app = CallerPrincipal(app, kernel)  # inside the wrappers: the auth guard has verified the token by then
    # Plugins' wrappers, each around the previous one (the auth plugin's access guard: OAuth, scopes and
    # profiles, when configured, docs/security.md), in the hook's call order; one that raises or answers
    # no ASGI app fails its plugin (plexor.serving.extensions), and a server configured for authorization
    # whose auth plugin failed so does not start.
    app = wrapped(kernel, "plexor_asgi_wrapper", app, setup)
    refuse_unguarded(kernel, opts.profile, opts.auth_issuer)
    if not setup.shared.get("profiles"):
        from plexor.features.auth import NoProfiles

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


def _uvicorn_config(app: ASGIApp | str, opts: HttpOptions, *, factory: bool = False, workers: int | None = None
                    ) -> uvicorn.Config:
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
        factory=factory,
        workers=workers,
    )
    config.plexor_limits = Limits(opts.header_timeout, opts.body_timeout, opts.max_connections)  # type: ignore[attr-defined]
    return config


def worker_app() -> ASGIApp:
    """App factory for ``--workers`` (uvicorn imports ``plexor.serving.http:worker_app`` in each worker)."""
    from plexor.log import configure

    configure(os.environ.get("PLEXOR_LOG_LEVEL") or "warning")
    opts = HttpOptions.from_json(os.environ[OPTIONS_ENV])
    kernel = Kernel()
    kernel.load()
    app = build_http_app(kernel, opts)
    # uvicorn's worker calls this factory on its event loop, after installing its own signal handlers: wrapped, this
    # worker drains its kernel before uvicorn closes its connections, as one process does (_draining_server)
    uvicorn_exit = signal.getsignal(signal.SIGTERM)
    if callable(uvicorn_exit) and threading.current_thread() is threading.main_thread():
        drain = _drain_first(kernel, opts.grace, uvicorn_exit)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, drain)
    return app


def serve_http(kernel: Kernel | None, opts: HttpOptions, *, sock: socket.socket | None = None,
               on_ready: Callable[[], object] | None = None, on_stop: Callable[[], object] | None = None) -> None:
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
    server = _draining_server(_uvicorn_config(app, opts), kernel, opts.grace)
    server.run(sockets=[sock] if sock is not None else None)


def _draining_server(config: uvicorn.Config, kernel: Kernel, grace: float) -> uvicorn.Server:
    import uvicorn

    class DrainingServer(uvicorn.Server):
        """uvicorn, but the first SIGTERM/SIGINT drains the kernel before uvicorn starts closing (:func:`_drain_first`)."""

        def __init__(self, config: uvicorn.Config, kernel: Kernel, grace: float) -> None:
            super().__init__(config)
            self._kernel = kernel
            self._grace = grace
            self._drain: Callable[[int, FrameType | None], None] | None = None

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            self._drain = _drain_first(self._kernel, self._grace, super().handle_exit)
            await super().serve(sockets=sockets)

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            drain, self._drain = self._drain, None  # the first signal drains; uvicorn's own handling after that
            (drain or super().handle_exit)(sig, frame)

    return DrainingServer(config, kernel, grace)


def _drain_first(kernel: Kernel, grace: float, exit_now: Callable[[int, FrameType | None], object]
                 ) -> Callable[[int, FrameType | None], None]:
    """A SIGTERM/SIGINT handler (called on the event loop's thread, with the loop running) that drains ``kernel``
    first: new calls are refused with guidance, calls in flight get ``grace`` seconds and are then stopped and
    answered (``Kernel.drain``); only then is the signal passed to ``exit_now``, uvicorn's own handler, which closes
    the connections. Plain uvicorn closes first: it would end open SSE streams at once, and cut off (a bare 500, a
    stream without its answer) a call still running when its graceful-shutdown wait ended. From the first signal
    on, a second one exits at once, and a shutdown that hangs (a plugin's hook) is ended by a watchdog after twice
    the grace period plus a margin (:mod:`plexor.serving.watchdog`)."""
    import asyncio

    from plexor.serving.watchdog import EXIT_MARGIN

    loop = asyncio.get_running_loop()
    watchdog = Watchdog(kernel, 2 * grace + EXIT_MARGIN + max(1, int(grace)))

    def on_signal(sig: int, frame: FrameType | None) -> None:
        kernel.log.info("signal", signal=signal.Signals(sig).name, action="draining")
        watchdog.arm(signal.Signals(sig).name)  # from here a second signal exits at once

        async def drain_then_exit() -> None:
            try:
                await kernel.drain(grace)
                await asyncio.sleep(0.2)  # let the last responses reach their clients
            finally:
                exit_now(sig, frame)

        loop.call_soon_threadsafe(lambda: loop.create_task(drain_then_exit()))

    return on_signal
