"""The kernel, spoken as MCP: the SDK's low-level ``Server`` with handlers built from the registry.

The SDK owns the wire: JSON-RPC framing, the 2025-11-25 ``initialize``
handshake and the 2026-07-28 stateless era with ``server/discover``. This
module only hands the SDK the handlers built from the registrations
(:mod:`plexor.serving.handlers`) and adds two middlewares: one keeps every
failure a guidance message and never a traceback, the other (the SDK's
``RequestStateBoundary``) encrypts and verifies the ``requestState`` of
multi-round requests (SEP-2322, see :mod:`plexor.asking`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server

from plexor.core.kernel import Kernel
from plexor.core.specs import MethodSpec
from plexor.serving.asked import state_keys
from plexor.serving.boot import Boot
from plexor.serving.handlers import Handlers
from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import ServerRequestContext
    from mcp.server.models import InitializationOptions

    from plexor.extending import ServerSetup
    from plexor.features.auth.config import Profile
    from plexor.features.tasks.listen import Listen
    from plexor.serving.http_options import HttpOptions
    from plexor.serving.layers import RequestPath

__all__ = ["PlexorServer", "build_server"]

# The server's own icon (a hexagon with a P), embedded: clients fetch nothing.
SERVER_ICON = ("data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAy"
               "NCAyNCI+PHBhdGggZD0iTTEyIDEuNWw5LjUgNS4yNXYxMC41TDEyIDIyLjVsLTkuNS01LjI1VjYuNzV6IiBmaWxsPSIjM2I0Y2NhIi8+"
               "PHBhdGggZD0iTTkgNi41aDQuMmEzLjMgMy4zIDAgMDEwIDYuNkgxMXY0LjRIOXoiIGZpbGw9IiNmZmYiLz48L3N2Zz4=")
# How long a requestState stays valid: long enough for a person to fill in a form.
REQUEST_STATE_TTL = 3600.0


class PlexorServer(Server[object]):
    """The SDK server, advertising list-changed notifications by default; its layers in ``path``.

    Its lifespan state is the SDK's default one, which nothing reads: ``object``."""

    setup: ServerSetup | None = None  # what the server-extension hooks see (build_server sets it)
    _extended: frozenset[str] = frozenset()  # the plugins whose server-extension hooks have been applied

    @functools.cached_property
    def path(self) -> RequestPath:
        """The named layers of the request path; every module adds its layer by name (plexor.serving.layers).
        Made on first use, which build_server's is: ``middleware`` then holds only the SDK's own."""
        from plexor.serving.layers import RequestPath

        return RequestPath(self.middleware)

    def extend(self) -> None:
        """Apply the server-extension hooks (:mod:`plexor.extending`) of plugins not applied yet: their
        request layers and protocol methods, each plugin's checked whole before any of it is applied (a bad
        one fails its plugin: :mod:`plexor.serving.extensions`). Called when the server is built and again
        once plugins have loaded (under stdio the server is built first)."""
        from plexor.serving.extensions import FAILED, ask, checked_layers, checked_methods, gated, impls

        setup = self.setup
        if setup is None:
            return
        kernel = setup.kernel
        fresh = [(hook, impl) for hook in ("plexor_request_layers", "plexor_protocol_methods")
                 for impl in impls(kernel, hook) if impl.plugin_name not in self._extended]
        from plexor.extending import FEATURES

        plugins = list(dict.fromkeys(impl.plugin_name for _hook, impl in fresh))  # in pluggy's call order,
        for plugin in sorted(plugins, key=lambda name: name not in FEATURES):  # the server's own features first
            self._extended |= {plugin}
            asked = {hook: ask(kernel, impl, hook, setup) for hook, impl in fresh if impl.plugin_name == plugin}
            if FAILED in asked.values():
                continue
            layers = checked_layers(setup, plugin, asked.get("plexor_request_layers"))
            methods = checked_methods(setup, plugin, asked.get("plexor_protocol_methods")) if layers is not None else None
            if layers is None or methods is None:
                continue
            for layer in layers:
                self.path.add(layer.position, layer.middleware, layer.name or plugin, owner=plugin)
            for method in methods:
                self.add_request_handler(method.method, method.params_type, gated(kernel, plugin, method.handler))
                kernel.protocol_methods[method.method] = MethodSpec(method.method, plugin, method.scopes)

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, object]] | None = None,
                         extensions: dict[str, dict[str, object]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        caps = super().get_capabilities(notification_options, experimental_capabilities, extensions,
                                        protocol_version=protocol_version)
        if self.setup is not None:  # each plugin's on its own: one that raises is failed, not initialize
            from plexor.serving.extensions import ask, impls

            for impl in impls(self.setup.kernel, "plexor_capabilities"):
                ask(self.setup.kernel, impl, "plexor_capabilities", self.setup, capabilities=caps,
                    protocol_version=protocol_version)
        return caps

    @property
    def server_info_stamp(self) -> dict[str, object]:
        # The serverInfo stamped into every 2026-07-28 result's _meta: identity without the icon
        # (a few hundred bytes on each response); initialize and server/discover carry the icon.
        return {k: v for k, v in self._server_info_stamp_source.items() if k != "icons"}

    async def _handle_discover(self, ctx: ServerRequestContext[object],
                               params: types.RequestParams | None) -> types.DiscoverResult:
        import copy

        from mcp_types import SERVER_INFO_META_KEY

        result = await super()._handle_discover(ctx, params)  # the stamp leaves a handler's serverInfo alone
        return result.model_copy(update={"meta": {SERVER_INFO_META_KEY: copy.deepcopy(self._server_info_stamp_source)}})

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, object]] | None = None,
                                      extensions: dict[str, dict[str, object]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True),
            experimental_capabilities,
            extensions,
        )


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
                 options: HttpOptions | None = None, profile: Profile | None = None) -> PlexorServer:
    """Create the SDK server for ``kernel`` (started, starting, or booted lazily by ``boot``), served over
    ``transport`` with the HTTP ``options`` (``None`` under stdio), for a stdio client limited to ``profile``."""
    from plexor.features.tasks.listen import Listen

    if kernel.telemetry is None:  # PLEXOR_OTEL: the kernel's pipeline observes through it from now on
        from plexor.features.telemetry import for_kernel

        kernel.telemetry = for_kernel(kernel)
    h = Handlers(kernel, page_size or kernel.page_size, boot)
    listen = Listen(h.changes.bus, kernel)  # the SDK's listen contract, plus the tasks extension's taskIds
    h.changes.task_events = listen.on_task_event
    kernel.on_drain(listen.close)  # open listen streams end (gracefully) when the server drains
    kernel.on_drain(lambda: setattr(h.changes, "closing", True))  # a closing session is told nothing more
    server = _sdk_server(kernel, h, listen)
    h.known = server.get_request_handler
    _kernel_layers(server, h, kernel)
    # The built-in features (tasks, auth, telemetry, bus) and every loaded plugin extend the server
    # through the hooks of plexor.extending: request layers, protocol methods, capabilities.
    from plexor.extending import ServerSetup
    from plexor.serving.features import refuse_unguarded

    if profile is not None:
        refuse_unguarded(kernel, profile.name)  # a profile with auth off: no server
    kernel.register_features()
    server.setup = ServerSetup(kernel, server, transport, options, profile)
    server.extend()
    if profile is not None:  # nor with auth failed by its own extension (plexor.serving.extensions)
        refuse_unguarded(kernel, profile.name)
    if boot is not None:
        boot.after_load = server.extend  # plugins loaded after the handshake extend it then
    return server


def _sdk_server(kernel: Kernel, h: Handlers, listen: Listen) -> PlexorServer:
    """The SDK server answering with the handlers of ``h``, and ``listen`` for ``subscriptions/listen``."""
    import warnings

    with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28, still served to 2025 clients
        warnings.simplefilter("ignore")
        return PlexorServer(
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


def _kernel_layers(server: PlexorServer, h: Handlers, kernel: Kernel) -> None:
    """The kernel's own layers of the request path: sessions and guidance, echoed lengths, ``requestState``."""
    server.path.add("session", h.guidance_middleware)
    from plexor.limits import value
    from plexor.serving.bounds import echo_middleware

    server.path.add("limits", echo_middleware(int(value("echoed_length", kernel.environ))))
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    # Inside the guidance middleware, so a refused requestState gets its advice appended.
    security = RequestStateSecurity(keys=state_keys(kernel), ttl=REQUEST_STATE_TTL)
    server.path.add("request-state", RequestStateBoundary(security, default_audience="plexor"))
