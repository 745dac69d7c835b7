"""A session's requests, checked before the SDK's handlers: order of the handshake, and params.

- A request other than ``initialize`` or ``ping`` before the handshake gets -32600 saying to
  send ``initialize`` first (the SDK answers a bare -32602 "Invalid request parameters").
- A second ``initialize`` on a session that already has one is refused with -32600 (the SDK
  would accept it and switch the session's protocol version under the client's feet).
- ``params`` that do not fit the method's shape get -32602 naming the field and the problem,
  with an example of the expected params, instead of "Invalid request parameters".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import mcp_types as types
from mcp.shared.exceptions import MCPError

from plexor.context import connection_of
from plexor.core.eras import stateless_era

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.context import ServerRequestContext
    from pydantic import ValidationError

__all__ = ["check_order", "explain_params"]

_EXEMPT = frozenset({"initialize", "ping"})


def check_order(ctx: ServerRequestContext[object], known: Callable[[str], object]) -> None:
    """Raise the error owed when a request comes before ``initialize``, or ``initialize`` comes twice."""
    if ctx.request_id is None:
        return
    connection = connection_of(ctx.session)
    if connection is None:
        return
    if ctx.method == "initialize":
        # From 2026-07-28 on there is no handshake: the SDK answers initialize itself (404, -32601).
        modern = stateless_era(ctx)
        if connection.client_params is not None and not modern:
            raise MCPError(types.INVALID_REQUEST, (
                f"this session is already initialized (protocol {connection.protocol_version}); initialize is sent "
                "once per session. To start over, open a new session: over HTTP post initialize without an "
                "Mcp-Session-Id header; over stdio start a new server process."))
        return
    if ctx.method not in _EXEMPT and not connection.initialize_accepted and known(ctx.method) is not None:
        raise MCPError(types.INVALID_REQUEST, (
            f"{ctx.method} was sent before the session was initialized: send initialize first (then the "
            "notifications/initialized notification), and make requests after its answer; or, with the "
            "2026-07-28 protocol, carry the protocol version and capabilities in each request's _meta."))


def explain_params(exc: ValidationError, method: str) -> MCPError | None:
    """-32602 with what was wrong for a pydantic ``ValidationError`` of a request's params, else None."""
    title = getattr(exc, "title", "") or ""
    if not (title.endswith("Request") or title.endswith("Params")):
        return None
    problems = []
    for err in exc.errors()[:3]:
        loc = [str(p) for p in err.get("loc", ())]
        if title.endswith("Params"):
            loc = ["params", *loc]
        where = ".".join(loc) or "params"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    from plexor.serving.wire import _EXAMPLES

    example = _EXAMPLES.get(method)
    hint = f" Send params like {example}." if example else " Check the method's params against the MCP schema."
    return MCPError(types.INVALID_PARAMS, f"Invalid params for {method}: {'; '.join(problems)}.{hint}",
                    {"method": method, "problems": problems})
