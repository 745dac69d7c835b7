"""The ``card`` built-in plugin: the server card at ``/.well-known/mcp/server-card.json``, what a client can know
before connecting (a route of the ``plexor_routes`` hook; ``PLEXOR_DISABLE=card`` serves none).

Shaped after the MCP server-card proposal (SEP-2127, schema v1): the server's identity (name,
title, description, version, icons), where to connect (``remotes``: this server's own endpoint
and transport, with the protocol versions it speaks there; ``packages``: how to run it locally
over stdio), plus two fields Plexor adds because clients ask for them before connecting:
``capabilities`` and ``tools`` (name, title, description, annotations and icons of every tool
the caller's ``tools/list`` shows: with OAuth or a profile, only what the caller may use; input
schemas stay with ``tools/list``). The URL of a remote is built from the
request's own address, which the Host/Origin guard has already checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from plexor.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.lowlevel import Server
    from starlette.routing import Route

    from plexor.core.kernel import Kernel
    from plexor.extending import ServerSetup
    from plexor.features.auth.scopes import Access

__all__ = ["PATH", "SCHEMA", "server_card"]

PATH = "/.well-known/mcp/server-card.json"
SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
ERAS = ["2025-11-25", "2026-07-28"]


@hookimpl
def plexor_routes(setup: ServerSetup) -> list[Route] | None:
    """``GET /.well-known/mcp/server-card.json`` over HTTP and legacy SSE, for the caller the guard let in."""
    options = setup.options
    if options is None:  # stdio: nothing to route
        return None
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    kernel, server = cast("Kernel", setup.kernel), setup.server

    async def card(request: Request) -> Response:
        return JSONResponse(server_card(kernel, server, str(request.base_url), transport=setup.transport,
                                        stateless=options.stateless, access=request.scope.get("plexor.access")))

    return [Route(PATH, card)]


def server_card(kernel: Kernel, server: Server[object], base_url: str, *, transport: str = "http",
                stateless: bool = False, access: Access | None = None) -> dict[str, object]:
    """The card of ``server`` (serving ``kernel``) as reached at ``base_url`` (``http://host:port/``).

    ``access`` is the caller's (``plexor.features.auth.scopes.Access``, from the guard): the card then lists only
    the tools its ``tools/list`` shows, never more.
    """
    from plexor.version import __version__

    base = base_url.rstrip("/")
    remotes: list[dict[str, object]]
    if transport == "sse":
        remotes = [{"type": "sse", "url": f"{base}/sse", "supportedProtocolVersions": ERAS[:1]}]
    else:
        remotes = [{"type": "streamable-http", "url": f"{base}/mcp", "supportedProtocolVersions": ERAS}]
    tools: list[dict[str, object]] = []
    restricted = access if access is not None and access.restricted else None  # the caller's, when it limits
    for spec in kernel.list_tools():
        if restricted is not None and not restricted.tool_visible(spec):
            continue
        entry: dict[str, object] = {"name": spec.name, "description": spec.description}
        if spec.title:
            entry["title"] = spec.title
        if spec.annotations:
            entry["annotations"] = spec.annotations
        rec = kernel.records.get(spec.plugin)
        icons = spec.icons or (rec.icons if rec is not None else None)
        if icons:
            entry["icons"] = icons
        tools.append(entry)
    if restricted is not None and restricted.profile is not None and restricted.profile.search:
        from plexor.features.auth.search import find_tools_wire

        found = find_tools_wire()
        tools.append({k: found[k] for k in ("name", "description", "annotations") if k in found})
    card: dict[str, object] = {
        "$schema": SCHEMA,
        "name": "io.github.plexor/plexor",
        "title": server.title or "Plexor",
        "description": server.description or "",
        "version": __version__,
        "icons": [icon.model_dump(by_alias=True, mode="json", exclude_none=True) for icon in server.icons or []],
        "remotes": remotes,
        "packages": [{"registryType": "pypi", "identifier": "plexor", "version": __version__,
                      "transport": {"type": "stdio"}, "runtimeArguments": ["serve"]}],
        # The 2025-11-25 handshake's capabilities (a 2026-07-28 client gets the same from server/discover).
        "capabilities": server.create_initialization_options().capabilities.model_dump(
            by_alias=True, mode="json", exclude_none=True),
        "tools": tools,
    }
    if stateless:
        remotes[0]["stateless"] = True
    return card
