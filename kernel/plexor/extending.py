"""Server-extension hooks: what a plugin adds to the server itself, rather than to its content.

:mod:`plexor.hookspecs` is about content (tools, resources, prompts, settings, commands) and
calls each plugin on its own. The hooks here extend the *server*: a layer on the request path,
an ASGI wrapper, a route, a capability, a protocol method, a drain participant, the notifier
backend, the event store, the caller's principal (and, for the built-in features only, top-level
``plexor`` commands). Their order matters, so they are pluggy's
ordinary combined calls: ``tryfirst``/``trylast`` on an implementation decide who goes first,
as in pytest's ``pytest_addhooks`` and datasette's ``asgi_wrapper``/``actor_from_request``.

The server's own features are plugins of these hooks, shipped with the kernel and listed by
``plexor plugins`` like any other (:data:`FEATURES`): ``tasks`` (long-running calls),
``auth`` (OAuth, scopes, profiles, audit), ``telemetry`` (OpenTelemetry, ``/metrics``),
``bus`` (notifications and the event store shared across processes), ``install`` (``plexor install``,
``uninstall`` and ``bundle``), ``daemon`` (the shared daemon and ``plexor connect``), ``card`` (the server card
at ``/.well-known/mcp/server-card.json``) and ``direct`` (a stateless POST answered in its own task). ``PLEXOR_DISABLE`` turns
one off; ``PLEXOR_PLUGINS`` never does (a list of content plugins must not drop the server's
security by omission). ``docs/authoring.md#extending-the-server`` has a working example.

Every hook receives a :class:`ServerSetup`: the kernel, the SDK server, the transport and the
HTTP options of the server being built. A hook that has nothing to add returns ``None`` (or
an empty list).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import HandlerResult, ServerMiddleware
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http import EventStore
    from mcp_types import ServerCapabilities
    from pydantic import BaseModel
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp

    from plexor.core.base import KernelBase
    from plexor.notify import Backend

__all__ = ["FEATURES", "Clock", "Due", "HttpSettings", "ProtocolMethod", "RequestLayer", "ServerSetup", "hookspec"]

hookspec = pluggy.HookspecMarker("plexor")

#: The server features shipped as built-in plugins: plugin name -> module.
FEATURES: Mapping[str, str] = {
    "tasks": "plexor.features.tasks.plugin",
    "auth": "plexor.features.auth.plugin",
    "telemetry": "plexor.features.telemetry.plugin",
    "bus": "plexor.features.bus",
    "install": "plexor.features.install.plugin",
    "daemon": "plexor.features.daemon.plugin",
    "card": "plexor.features.card",
    "direct": "plexor.features.direct.plugin",
}

#: SDK middleware: ``async (ctx, call_next) -> result``, as the SDK's ``Server.middleware`` holds it.
Middleware: TypeAlias = "ServerMiddleware[object]"


@dataclass(frozen=True)
class RequestLayer:
    """A layer of the request path: ``middleware`` placed at ``position``, one of
    :data:`plexor.serving.layers.POSITIONS` (several layers at one position keep the order of
    the hook's implementations: ``tryfirst`` runs outermost)."""

    position: str
    middleware: Middleware
    name: str = ""


@dataclass(frozen=True)
class ProtocolMethod:
    """A JSON-RPC request method the server answers: ``handler(ctx, params)`` with ``params``
    validated as ``params_type`` (a pydantic model, e.g. a subclass of ``mcp_types.RequestParams``).

    ``scopes`` are the OAuth scopes a caller needs, decided by the same authorization layer as a tool
    call (scopes, then the connection's profile: a profile must admit one of the plugin's tools).
    ``None`` (the default) means the plugin's ``<plugin>:write``, as for a tool that may write: an
    undeclared method is never open to a weaker token. ``()`` means none: the method checks its caller
    itself (the ``tasks`` feature's ``tasks/*`` answer only the task's owner).

    .. versionchanged:: 0.3.0 ``scopes``
    """

    method: str
    params_type: type[BaseModel]
    handler: Callable[..., Awaitable[HandlerResult]]  # (ctx, params), params an instance of params_type
    scopes: tuple[str, ...] | None = None


class HttpSettings(Protocol):
    """The HTTP options of the server being built, as server-extension hooks read them
    (``plexor.serving.http_options.HttpOptions``, each field one option of ``plexor serve``)."""

    host: str
    port: int
    token: str | None
    stateless: bool
    max_body_bytes: int
    request_timeout: float
    workers: int
    event_history: int
    auth_issuer: str | None
    resource_url: str | None
    profile: str | None
    json_response: bool
    ping_seconds: float  # PLEXOR_SSE_PING_SECONDS: a silent answer's SSE stream is pinged this often


class Due(Protocol):
    """What a :class:`Clock` ends: a cancel scope, or an answer whose silence has lasted long enough."""

    def cancel(self) -> object: ...


class Clock(Protocol):
    """The request time limit's clock (``plexor.serving.deadlines.Deadlines``): one loop timer for every
    request in flight. ``add(due, seconds)`` calls ``due.cancel()`` that many seconds from now unless
    ``discard(due)`` came first; both run on the event loop's thread."""

    def add(self, due: Due, seconds: float) -> None: ...

    def discard(self, due: Due) -> None: ...


@dataclass
class ServerSetup:
    """The server being built, as every server-extension hook sees it.

    :ivar kernel: the kernel (loaded over HTTP; under stdio it may load after the handshake).
    :ivar server: the SDK's low-level server (``plexor.serving.server.PlexorServer``).
    :ivar transport: ``"stdio"``, ``"http"`` or ``"sse"``.
    :ivar options: the HTTP options (``plexor.serving.http_options.HttpOptions``); ``None`` under stdio.
    :ivar profile: the tool profile of the stdio client (``serve --profile``), else ``None``.
    :ivar clock: the request time limit's :class:`Clock` (HTTP); ``None`` under stdio.
    :ivar shared: one place per server for a feature's own objects, so its hooks (a layer and a
        method, say) share them: ``setup.shared.setdefault("tasks", ...)``. Two keys are read by the
        kernel: ``authenticates`` (a wrapper checks bearer tokens itself, the static one included, so
        the kernel's own static-token check stands aside) and ``profiles`` (a wrapper answers requests
        that name a tool profile; without one they are refused with 404).
    """

    kernel: KernelBase
    server: Server[object]
    transport: str = "stdio"
    options: HttpSettings | None = None
    profile: object = None  # plexor.features.auth's Profile, read by the auth feature
    clock: Clock | None = None
    shared: dict[str, object] = field(default_factory=dict)


@hookspec
def plexor_request_layers(setup: ServerSetup) -> list[RequestLayer] | None:
    """Add layers to the request path that every MCP request crosses, of every kind and era.

    :param setup: the server being built.
    :return: the layers, each with its position (``"session"``, ``"authorization"``, ``"tasks"``,
        ``"observe"``, ``"timeout"``, ...; see :mod:`plexor.serving.layers`).

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_protocol_methods(setup: ServerSetup) -> list[ProtocolMethod] | None:
    """Answer JSON-RPC methods beyond MCP's own (e.g. ``tasks/get``); each request of one still
    crosses every layer of the request path first.

    :param setup: the server being built.

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_capabilities(capabilities: ServerCapabilities, protocol_version: str | None, setup: ServerSetup) -> None:
    """Change the capabilities the server advertises (``initialize``, ``server/discover``), in place.

    :param capabilities: the SDK's ``ServerCapabilities`` built so far.
    :param protocol_version: the era asked for (``None``: the handshake era's derivation).
    :param setup: the server being built.

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_drain(kernel: KernelBase) -> Awaitable[None] | None:
    """Take part in draining (SIGTERM, stop): runs after the kernel's in-flight calls have
    finished or the grace period ended, before plugins' shutdown hooks; e.g. hand running
    tasks over to other workers. May return an awaitable.

    :param kernel: the kernel draining.

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_asgi_wrapper(app: ASGIApp, setup: ServerSetup) -> ASGIApp | None:
    """Wrap the HTTP app (every route): return an ASGI app that calls ``app``, or ``None``.

    Wrappers are applied in the hook's call order, each around the previous one, inside the
    Host/Origin guard (which stays outermost) and outside the MCP endpoint's own checks.

    :param app: the ASGI app built so far.
    :param setup: the server being built (``setup.options`` holds the HTTP options).

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_endpoint_wrapper(app: ASGIApp, setup: ServerSetup) -> ASGIApp | None:
    """Wrap the MCP endpoint itself (the SDK's Streamable HTTP app at ``/mcp``): return an ASGI app that calls
    ``app``, or ``None``. Applied innermost, in the hook's call order: inside every guard, limit and
    :func:`plexor_asgi_wrapper`, so a request reaches it only once those have let it through (the
    ``direct`` feature answers stateless POSTs here). Not under legacy SSE or stdio.

    :param app: the endpoint's app built so far.
    :param setup: the server being built (``setup.options``, and ``setup.clock`` for timers).

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_routes(setup: ServerSetup) -> list[BaseRoute] | None:
    """Add HTTP routes (Starlette ``Route``/``Mount``) beside ``/mcp``, ``/healthz`` and the card.

    :param setup: the server being built.

    .. versionadded:: 0.3.0
    """


@hookspec(firstresult=True)
def plexor_notifier_backend(setup: ServerSetup) -> Backend | None:
    """The backend carrying change notifications between processes (``plexor.notify.Backend``),
    or ``None`` to keep them in this process. The first non-``None`` answer wins.

    :param setup: the server being built.

    .. versionadded:: 0.3.0
    """


@hookspec(firstresult=True)
def plexor_event_store(setup: ServerSetup) -> EventStore | None:
    """The event store of stateful Streamable HTTP (the SDK's ``EventStore``: resumable streams),
    or ``None``. The first non-``None`` answer wins; the kernel keeps events in memory otherwise.

    :param setup: the server being built.

    .. versionadded:: 0.3.0
    """


@hookspec(firstresult=True)
def plexor_principal(scope: Mapping[str, object], kernel: KernelBase) -> str | None:
    """Who is calling, for per-caller limits and task ownership, from an ASGI ``scope``: the
    first non-``None`` answer wins (the auth plugin answers from the verified token); the kernel
    falls back to the connection.

    :param scope: the ASGI scope of the HTTP request.
    :param kernel: the kernel serving it.

    .. versionadded:: 0.3.0
    """


@hookspec
def plexor_cli_commands() -> Mapping[str, str] | None:
    """Top-level ``plexor`` commands of a built-in feature: command name -> ``"module:attribute"`` of its click
    command, imported only when the command runs or ``plexor --help`` lists it.

    The ``plexor`` command asks the built-in features (:data:`FEATURES`) alone, without loading a plugin, so
    ``plexor install`` starts no kernel; a third-party plugin adds ``plexor <plugin> ...`` with
    ``plexor_register_commands`` instead. A feature turned off with ``PLEXOR_DISABLE`` loses its commands
    (invoked, each says which variable removed it, exit 2). The names are the core commands' own
    (:data:`plexor.plugin_commands.CORE_COMMANDS`): no plugin may take them.

    .. versionadded:: 0.3.0
    """
