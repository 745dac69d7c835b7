"""The two apps :func:`plexor.serving.http.build_http_app` wraps: legacy SSE and Streamable HTTP.

Both carry the kernel's routes (``/healthz``, the plugins' routes, the server card) and the same
lifespan: the kernel starts with the app and drains and stops with it. The guards around them are
``build_http_app``'s, in their one order.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, cast

from plexor.core.kernel import Kernel, State
from plexor.serving.stdio import _freeze_heap

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.streamable_http import EventStore
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute, Route
    from starlette.types import ASGIApp, Receive, Scope, Send, StatelessLifespan
    from starlette.types import Lifespan as AppLifespan

    from plexor.extending import ServerSetup
    from plexor.notify import Backend
    from plexor.serving.http_options import HttpOptions
    from plexor.serving.server import PlexorServer

__all__ = ["Endpoint", "Lifespan", "kernel_routes", "sse_app", "streamable_app"]


class Lifespan:
    """The app's lifespan: the kernel (and a plugin's notifier backend) starts with it, drains and stops with it.

    ``on_ready`` runs once the kernel has started (the daemon writes its registry file then);
    ``on_stop`` when serving ends.
    """

    def __init__(self, setup: ServerSetup, grace: float, on_ready: Callable[[], object] | None = None,
                 on_stop: Callable[[], object] | None = None) -> None:
        self.setup = setup
        # the hooks see the kernel as KernelBase (plexor.extending); a served one is always the whole Kernel
        self.kernel = cast("Kernel", setup.kernel)
        self.grace = grace
        self.on_ready = on_ready
        self.on_stop = on_stop

    async def started(self) -> None:
        import asyncio

        from plexor.serving.protocol import install_accept_log

        kernel = self.kernel
        install_accept_log(asyncio.get_running_loop(), kernel.log)
        await kernel.start()
        from plexor.serving.extensions import first

        backend = cast("Backend | None", first(kernel, "plexor_notifier_backend", self.setup))  # the bus plugin's
        if backend is not None:
            from plexor.features.state.bus import install

            install(kernel.notifier, backend)
            await kernel.notifier.start()
        _freeze_heap()
        if self.on_ready is not None:
            self.on_ready()

    async def stopped(self) -> None:
        try:
            await self.kernel.stop(self.grace)
            await self.kernel.notifier.close()
        finally:
            if self.on_stop is not None:
                self.on_stop()

    def context(self, inner: AppLifespan[Starlette] | None = None) -> StatelessLifespan[Starlette]:
        """A Starlette ``lifespan``: the kernel's start and stop around ``inner`` (the SDK's session manager's), if any."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            await self.started()
            try:
                if inner is None:
                    yield
                else:
                    async with inner(app):
                        yield
            finally:
                await self.stopped()

        return lifespan


def kernel_routes(setup: ServerSetup, kernel: Kernel) -> list[BaseRoute]:
    """``/healthz`` and the plugins' routes (the ``card`` plugin's server card, the telemetry plugin's ``/metrics``...)
    (``kernel``: the served one, ``setup.kernel`` seen as the whole :class:`Kernel`)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from plexor.extending import FEATURES
    from plexor.serving.extensions import FAILED, ask, checked_routes, impls

    taken: set[str] = set()  # the paths of the plugins' routes so far (plexor.serving.extensions)
    asked = sorted(impls(kernel, "plexor_routes"), key=lambda impl: impl.plugin_name not in FEATURES)  # features first
    observing = [route for impl in asked
                 if (answer := ask(kernel, impl, "plexor_routes", setup)) is not FAILED
                 for route in checked_routes(setup, impl.plugin_name, answer, taken) or ()]

    async def healthz(request: Request) -> Response:
        # 503 unless ready (starting, draining after SIGTERM, stopped): a balancer's health check then
        # sends new requests elsewhere while calls in flight here finish.
        return JSONResponse(kernel.health(), status_code=200 if kernel.state == State.READY else 503)

    return [Route("/healthz", healthz), *observing]


def _security() -> TransportSecuritySettings:
    from mcp.server.transport_security import TransportSecuritySettings

    # Host and Origin are checked by HostOriginGuard (exact matches, every route); the SDK keeps its Content-Type check.
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def sse_app(server: PlexorServer, opts: HttpOptions, routes: list[BaseRoute], lifespan: Lifespan) -> ASGIApp:
    """Legacy SSE: ``GET /sse`` opens a session's stream, ``POST /messages/`` carries its requests."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route

    from plexor.limits import PerCaller, principal, refuse, value
    from plexor.serving.sse import AnsweringSse

    sse = SseServerTransport("/messages/", security_settings=_security(), max_request_body_size=opts.max_body_bytes)
    answering = AnsweringSse(sse, opts.max_body_bytes)  # unparsable posts answered on the stream, with their id
    streams_of = PerCaller(int(value("sse_per_caller", lifespan.kernel.environ)))  # so one client cannot hold every connection

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

    return Starlette(routes=[*routes, Route("/sse", handle_sse, methods=["GET"]),
                             Mount("/messages/", app=answering.post)], lifespan=lifespan.context())


def streamable_app(server: PlexorServer, opts: HttpOptions, routes: list[BaseRoute], lifespan: Lifespan) -> ASGIApp:
    """Streamable HTTP at ``/mcp``: the SDK's app, its session manager inside the kernel's lifespan, the plugins'
    endpoint wrappers around it (the ``direct`` feature answers a stateless POST in its own task), and (stateful)
    the event store that lets a dropped stream resume."""
    from plexor.limits import value
    from plexor.serving.extensions import wrapped

    event_store = None if opts.stateless else _event_store(lifespan.setup)
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=opts.stateless,
        json_response=opts.json_response,
        event_store=event_store,
        retry_interval=opts.sse_retry_ms,
        transport_security=_security(),
        host=opts.host,
        max_request_body_size=opts.max_body_bytes,
        session_idle_timeout=value("session_idle_seconds", lifespan.kernel.environ),
        custom_starlette_routes=cast("list[Route]", routes),  # the SDK's annotation is narrower than Starlette's
    )
    inner.router.lifespan_context = lifespan.context(inner.router.lifespan_context)
    app = Endpoint(wrapped(lifespan.kernel, "plexor_endpoint_wrapper", inner, lifespan.setup), inner)
    return _with_event_store(app, server, event_store, opts, lifespan.kernel)


class Endpoint:
    """ASGI around the SDK's Streamable HTTP app. ``Mcp-*`` header values lose surrounding whitespace (RFC 9110
    section 5.5: it is not part of a field's value; uvicorn's httptools parser keeps it, and the SDK compares
    ``Mcp-Name`` with the body byte for byte, SEP-2243). Requests to the MCP endpoint (``/mcp``; a profile's
    ``/mcp/NAME`` arrives rewritten to it) then go through the plugins' endpoint wrappers, every other route
    (``/healthz``, the plugins' routes) straight to the SDK's app."""

    def __init__(self, endpoint: ASGIApp, app: ASGIApp, path: str = "/mcp") -> None:
        self.endpoint, self.app, self.path = endpoint, app, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope["headers"]
        if any(k.startswith(b"mcp-") and v != v.strip(b" \t") for k, v in headers):
            scope = {**scope, "headers": [(k, v.strip(b" \t") if k.startswith(b"mcp-") else v) for k, v in headers]}
        await (self.endpoint if scope["path"] == self.path else self.app)(scope, receive, send)


def _event_store(setup: ServerSetup) -> EventStore:
    """Stateful Streamable HTTP's event store: a plugin's (the ``bus`` plugin's, shared through the kernel's
    database), else this process's memory."""
    from plexor.features.state.memory_events import MemoryEventStore
    from plexor.limits import value
    from plexor.serving.extensions import first
    from plexor.serving.http_options import HttpOptions

    store = cast("EventStore | None", first(setup.kernel, "plexor_event_store", setup))
    if store is not None:
        return store
    environ = setup.kernel.environ
    history = (setup.options or HttpOptions()).event_history  # Streamable HTTP always has its options
    return MemoryEventStore(history, int(value("event_store_session_bytes", environ)),
                            int(value("event_store_bytes", environ)))


def _with_event_store(app: ASGIApp, server: PlexorServer, event_store: EventStore | None, opts: HttpOptions,
                      kernel: Kernel) -> ASGIApp:
    """The wrappers that tie the event store to the SDK's sessions (none when stateless)."""
    from plexor.features.state.events import (
        ForgetOnDelete,
        ResumeAnywhere,
        SessionBinding,
        SharedEventStore,
        watch_sessions,
    )
    from plexor.features.state.memory_events import MemoryEventStore

    manager = getattr(server, "_session_manager", None)
    sessions = watch_sessions(manager, event_store) if event_store is not None else {}  # an ended one's events go
    if isinstance(event_store, SharedEventStore):  # a stream may be resumed through any process
        app = ResumeAnywhere(app, event_store, sessions.__contains__, retry_ms=opts.sse_retry_ms)
    elif isinstance(event_store, MemoryEventStore):
        event_store.holds = sessions.__contains__  # and any session missed, with the next event written
    if event_store is not None:
        from plexor.serving.sessions import limit_sessions

        app = SessionBinding(ForgetOnDelete(limit_sessions(app, sessions, kernel.environ), event_store))
    return app
