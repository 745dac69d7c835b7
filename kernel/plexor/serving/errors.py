"""The one place a kernel failure outside a tool result becomes a JSON-RPC error (tool failures are results)."""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from plexor.errors import InvalidArgument, NotFound, NotReady, PlexorError

__all__ = ["RESOURCE_NOT_FOUND", "SERVER_NOT_READY", "protocol_error"]

RESOURCE_NOT_FOUND = -32002
SERVER_NOT_READY = -32000


def protocol_error(err: PlexorError, method: str = "", *, modern: bool = False, uri: str | None = None) -> MCPError:
    """The one place a :class:`PlexorError` outside a tool result becomes a JSON-RPC error.

    The code follows the error's class, except where the spec says otherwise for a method: an
    unknown prompt is invalid params, and so is an unknown resource from 2026-07-28 on (SEP-2164,
    with ``data.uri``). Tool failures never come here: they are results with ``isError``.
    """
    data = err.payload()
    if isinstance(err, NotFound) and (method == "prompts/get" or (method == "resources/read" and modern)):
        code = types.INVALID_PARAMS
        if uri is not None:
            data = {**data, "uri": uri}
    elif isinstance(err, NotFound):
        code = RESOURCE_NOT_FOUND
    elif isinstance(err, InvalidArgument):
        code = types.INVALID_PARAMS
    else:
        code = SERVER_NOT_READY if isinstance(err, NotReady) else types.INTERNAL_ERROR
    return MCPError(code, err.render(), data)
