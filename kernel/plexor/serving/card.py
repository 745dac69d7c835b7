"""The server card at ``/.well-known/mcp/server-card.json``: what a client can know before connecting.

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

from typing import Any

__all__ = ["SCHEMA", "server_card"]

SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
ERAS = ["2025-11-25", "2026-07-28"]


def server_card(kernel: Any, server: Any, base_url: str, *, transport: str = "http", stateless: bool = False,
                access: Any = None) -> dict[str, Any]:
    """The card of ``server`` (serving ``kernel``) as reached at ``base_url`` (``http://host:port/``).

    ``access`` is the caller's (``plexor.features.auth.scopes.Access``, from the guard): the card then lists only
    the tools its ``tools/list`` shows, never more.
    """
    from plexor.version import __version__

    base = base_url.rstrip("/")
    if transport == "sse":
        remotes = [{"type": "sse", "url": f"{base}/sse", "supportedProtocolVersions": ERAS[:1]}]
    else:
        remotes = [{"type": "streamable-http", "url": f"{base}/mcp", "supportedProtocolVersions": ERAS}]
    tools = []
    restricted = access is not None and access.restricted
    for spec in kernel.list_tools():
        if restricted and not access.tool_visible(spec):
            continue
        entry: dict[str, Any] = {"name": spec.name, "description": spec.description}
        if spec.title:
            entry["title"] = spec.title
        if spec.annotations:
            entry["annotations"] = spec.annotations
        rec = kernel.records.get(spec.plugin)
        icons = spec.icons or (rec.icons if rec is not None else None)
        if icons:
            entry["icons"] = icons
        tools.append(entry)
    if restricted and access.profile is not None and access.profile.search:
        from plexor.features.auth.search import find_tools_wire

        found = find_tools_wire()
        tools.append({k: found[k] for k in ("name", "description", "annotations") if k in found})
    card: dict[str, Any] = {
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
        card["remotes"][0]["stateless"] = True
    return card
