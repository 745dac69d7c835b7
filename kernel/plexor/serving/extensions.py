"""A plugin's server extensions, each taken on its own: a bad one fails its plugin, never the server.

The hooks of :mod:`plexor.extending` run plugin code while the server is built (layers, protocol methods,
routes, ASGI wrappers, the event store and notifier backend) and on requests (capabilities, the principal).
A hook that raises, or answers something the server cannot use (a layer at no position, a protocol method
the server already answers, a route over one of the kernel's, a wrapper that is not an ASGI app), fails its
plugin: ``plexor_health`` and ``/healthz`` of that server show it failed with what was wrong and how to fix it,
the log has the traceback, and the server is built with nothing of that plugin's (its layers are taken out
again, its methods and routes answer that it failed). The other plugins are served as before.

A plugin's protocol methods wait for it while it starts and refuse while it has failed, as its tools do;
its routes answer ``503`` naming it once it has failed. A principal hook that raises refuses that request
(``500`` naming the plugin): the caller is not served as somebody else.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, cast

from plexor.core.records import State
from plexor.errors import PlexorError, PluginError
from plexor.serving.layers import RequestPath

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import HandlerResult, ServerRequestContext
    from pluggy import HookImpl
    from pydantic import BaseModel
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp, Receive, Scope, Send

    from plexor.core.base import KernelBase
    from plexor.core.kernel import Kernel
    from plexor.extending import ProtocolMethod, RequestLayer, ServerSetup

__all__ = ["FAILED", "ask", "checked_layers", "checked_methods", "checked_routes", "first", "gated", "impls", "refuse",
           "wrapped"]

FAILED = object()  # what ask() returns when the hook raised (its plugin has been failed)
PHASE = "server extension"
_METHOD = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+")  # namespaced, as MCP's own: "ledger/export"
#: Paths the kernel serves itself (Streamable HTTP, legacy SSE, health); the features' routes claim theirs first.
KERNEL_PATHS = ("/mcp", "/healthz", "/sse", "/messages")


def impls(kernel: KernelBase, hook: str) -> Iterator[HookImpl]:
    """The implementations of ``hook`` in pluggy's call order, of plugins that have not failed."""
    for impl in reversed(getattr(kernel.pm.hook, hook).get_hookimpls()):
        rec = kernel.records.get(impl.plugin_name)
        if rec is None or rec.state not in (State.FAILED, State.DISABLED):
            yield impl


def ask(kernel: KernelBase, impl: HookImpl, hook: str, setup: ServerSetup | None = None, **kwargs: object) -> object:
    """``impl``'s answer (called as pluggy calls it: with the arguments it names), or :data:`FAILED` when it
    raised, its plugin failed by :func:`refuse`."""
    given = {"setup": setup, **kwargs}
    try:
        return impl.function(*(given[name] for name in impl.argnames))
    except PlexorError as exc:  # the plugin's own refusal (a setting it cannot serve with): its words, no traceback
        refuse(kernel, impl.plugin_name, f"its {hook} hook refused: {exc.message}",
               f"{exc.guidance} Or turn the plugin off with PLEXOR_DISABLE." if exc.guidance else
               "Turn the plugin off with PLEXOR_DISABLE.", setup)
    except Exception as exc:  # noqa: BLE001 - a plugin's hook: its failure is its plugin's, not the server's
        refuse(kernel, impl.plugin_name, f"its {hook} hook raised {type(exc).__name__}: {exc}",
               "Fix the hook (the traceback is in the server log), or turn the plugin off with PLEXOR_DISABLE.",
               setup, exc)
    return FAILED


def refuse(kernel: KernelBase, plugin: str, problem: str, fix: str, setup: ServerSetup | None = None,
           cause: BaseException | None = None) -> None:
    """Fail ``plugin`` for a server extension the server cannot use, and take its layers out of the request path."""
    import traceback

    from plexor.core.records import TRANSITIONS

    rec = kernel.records.get(plugin)
    if cause is not None:
        kernel.log.error("server_extension_failed", plugin=plugin, error=problem,
                         traceback="".join(traceback.format_exception(cause)))
    if rec is not None and State.FAILED in TRANSITIONS[rec.state]:
        cast("Kernel", kernel).fail_plugin(rec, PluginError(problem, fix), PHASE)
    elif rec is not None and rec.state != State.FAILED:  # asked once it serves (a READY plugin cannot fail)
        rec.warnings.append(f"{PHASE} refused: {problem}. {fix}")
    path = getattr(setup.server, "path", None) if setup is not None else None  # a PlexorServer's request path
    if isinstance(path, RequestPath):
        path.drop(plugin)


def first(kernel: KernelBase, hook: str, setup: ServerSetup) -> object:
    """The first answer that is not ``None`` of a ``firstresult`` hook, each plugin's asked on its own."""
    for impl in list(impls(kernel, hook)):
        found = ask(kernel, impl, hook, setup)
        if found is not None and found is not FAILED:
            return found
    return None


def wrapped(kernel: KernelBase, hook: str, app: ASGIApp, setup: ServerSetup) -> ASGIApp:
    """``app`` inside every answer of the wrapper ``hook`` (``plexor_asgi_wrapper``, ``plexor_endpoint_wrapper``),
    each around the previous one in the hook's call order; one that raises or answers no ASGI app fails its plugin."""
    for impl in list(impls(kernel, hook)):
        answer = ask(kernel, impl, hook, setup, app=app)
        if answer is not FAILED and answer is not None and not callable(answer):
            refuse(kernel, impl.plugin_name, f"its {hook} hook answered a {type(answer).__name__}",
                   "Make it return an ASGI app wrapping the one it was given, or None; or turn the plugin off with "
                   "PLEXOR_DISABLE.", setup)
        elif answer is not FAILED and answer is not None:
            app = cast("ASGIApp", answer)
    return app


class _Unusable(Exception):
    """What a hook answered that the server cannot use: the problem, and what it should have answered."""

    def __init__(self, problem: str, wanted: str) -> None:
        super().__init__(problem)
        self.problem, self.wanted = problem, wanted


def _items(answer: object, kind: type, wanted: str) -> list[object]:
    """The items of a hook's list answer (``None``: none), each an instance of ``kind``."""
    if answer is not None and not isinstance(answer, list | tuple):
        raise _Unusable(f"answered {type(answer).__name__}", f"a list of {wanted}")
    items = list(cast("list[object]", answer or ()))
    for item in items:
        if not isinstance(item, kind):
            raise _Unusable(f"answered a {type(item).__name__} in its list", f"{wanted} items")
    return items


def checked_layers(setup: ServerSetup, plugin: str, answer: object) -> list[RequestLayer] | None:
    """``answer`` of ``plugin``'s ``plexor_request_layers``, or ``None`` (plugin failed) when one is unusable."""
    from plexor.extending import RequestLayer
    from plexor.serving.layers import POSITIONS

    try:
        layers = cast("list[RequestLayer]", _items(answer, RequestLayer, "plexor.extending.RequestLayer"))
        for layer in layers:
            if layer.position not in POSITIONS:
                raise _Unusable(f"put a layer at {layer.position!r}", f"one of the positions {', '.join(POSITIONS)}")
            if not callable(layer.middleware):
                raise _Unusable("gave a layer that cannot be called", "an async function (ctx, call_next)")
    except _Unusable as bad:
        _bad(setup, plugin, "plexor_request_layers", bad)
        return None
    return layers


def checked_methods(setup: ServerSetup, plugin: str, answer: object) -> list[ProtocolMethod] | None:
    """``answer`` of ``plugin``'s ``plexor_protocol_methods``, or ``None`` (plugin failed) when one is unusable:
    each needs a namespaced name no one answers yet, a pydantic model for its params and a handler."""
    from pydantic import BaseModel

    from plexor.extending import ProtocolMethod

    seen: set[str] = set()
    try:
        methods = cast("list[ProtocolMethod]", _items(answer, ProtocolMethod, "plexor.extending.ProtocolMethod"))
        for m in methods:
            name = m.method if isinstance(m.method, str) else repr(m.method)
            if not isinstance(m.method, str) or not _METHOD.fullmatch(m.method):
                raise _Unusable(f"declared the method name {name!r}", f"a name of the form '{plugin}/action' "
                                "(letters, digits, '_', '.' or '-' between slashes)")
            if name in seen:
                raise _Unusable(f"declared {name!r} twice", "each method once")
            if setup.server.get_request_handler(name) is not None:
                owner = getattr(setup.kernel.protocol_methods.get(name), "plugin", None) or "the server itself"
                raise _Unusable(f"declared {name!r}, which {owner} already answers",
                                f"a name of its own, e.g. '{plugin}/{name.rpartition('/')[2]}'")
            if not (isinstance(m.params_type, type) and issubclass(m.params_type, BaseModel)) or not callable(m.handler):
                raise _Unusable(f"declared {name!r} without a params model or a handler",
                                "a pydantic model class (e.g. mcp_types.RequestParams) and an async handler")
            seen.add(name)
    except _Unusable as bad:
        _bad(setup, plugin, "plexor_protocol_methods", bad)
        return None
    return methods


def checked_routes(setup: ServerSetup, plugin: str, answer: object, taken: set[str]) -> list[BaseRoute] | None:
    """``answer`` of ``plugin``'s ``plexor_routes``, each route made to answer ``503`` once the plugin failed, or
    ``None`` (plugin failed) when one is not a route or takes a path of the kernel's or of another plugin's."""
    from starlette.routing import BaseRoute, Mount

    try:
        routes = cast("list[BaseRoute]", _items(answer, BaseRoute, "Starlette route (Route, Mount)"))
        paths = [str(getattr(route, "path", "")).rstrip("/") for route in routes]
        for route, path in zip(routes, paths, strict=True):
            mount = isinstance(route, Mount)  # a mount answers every path below its own
            clash = [p for p in (*KERNEL_PATHS, *taken) if path == p or path.startswith(p + "/")
                     or (mount and (p.startswith(path + "/") or not path))]
            if clash:
                raise _Unusable(f"routes {path or '/'!r}, over {clash[0]!r} that is already served",
                                f"a path of its own, e.g. '/{plugin}/...'")
    except _Unusable as bad:
        _bad(setup, plugin, "plexor_routes", bad)
        return None
    taken.update(paths)
    for route in routes:
        if hasattr(route, "app"):
            route.app = _PluginRoute(route.app, setup.kernel, plugin)
    return routes


def gated(kernel: KernelBase, plugin: str, handler: Callable[..., Awaitable[HandlerResult]]
          ) -> Callable[[ServerRequestContext[object], BaseModel], Awaitable[HandlerResult]]:
    """``handler`` of ``plugin``'s protocol method, behind the plugin's readiness: waits while it starts,
    refuses (guidance naming the plugin and its error) when it failed, as a tool of the plugin does.

    A third-party plugin's method runs through the kernel's pipeline as its tools do (gate, in-flight count,
    context, error guidance): a drain waits for it, ``/healthz`` and the in-flight metric count it, and once the
    server drains a new one is refused. Its own JSON-RPC errors (``MCPError``) pass through unexplained. The server's
    features' methods stay out of the count (``tasks/result`` waits for a task, which is counted itself)."""
    from plexor.extending import FEATURES

    if plugin not in FEATURES:
        return _in_pipeline(cast("Kernel", kernel), plugin, handler)

    async def method(ctx: ServerRequestContext[object], params: BaseModel) -> HandlerResult:
        rec = kernel.records.get(plugin)
        if rec is not None and rec.state != State.READY:
            await cast("Kernel", kernel).admit(rec)
        return await handler(ctx, params)

    return method


class _Answered:
    """A protocol method's own JSON-RPC error, carried through the pipeline as its value (never explained)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _in_pipeline(kernel: Kernel, plugin: str, handler: Callable[..., Awaitable[HandlerResult]]
                 ) -> Callable[[ServerRequestContext[object], BaseModel], Awaitable[HandlerResult]]:
    from mcp.shared.exceptions import MCPError

    from plexor.core.base import Request
    from plexor.core.dispatch import Target

    async def method(ctx: ServerRequestContext[object], params: BaseModel) -> HandlerResult:
        async def call() -> object:
            try:
                return await handler(ctx, params)
            except MCPError as exc:  # an answer of the method's own, not a failure for the kernel to explain
                return _Answered(exc)

        answer = await kernel.run(Request("method", ctx.method, request_id=ctx.request_id), plugin,
                                  Target(call, "async", ()))
        if isinstance(answer, _Answered):
            raise answer.error
        return cast("HandlerResult", answer)

    return method


def _bad(setup: ServerSetup, plugin: str, hook: str, bad: _Unusable) -> None:
    refuse(setup.kernel, plugin, f"its {hook} hook {bad.problem}", f"Make it return {bad.wanted} (docs/authoring.md, "
           "\"Extending the server\"), or turn the plugin off with PLEXOR_DISABLE.", setup)


class _PluginRoute:
    """ASGI: a plugin's route, answering ``503`` with the plugin's error once it has failed."""

    def __init__(self, app: ASGIApp, kernel: KernelBase, plugin: str) -> None:
        self.app, self.kernel, self.plugin = app, kernel, plugin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rec = self.kernel.records.get(self.plugin)
        if rec is None or rec.state != State.FAILED or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from plexor.serving.guard import refuse_http

        failed = rec.handle.not_ready()
        await refuse_http(send, 503, "plugin_failed", failed.message, failed.guidance or "")
