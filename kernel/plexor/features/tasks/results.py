"""What a task keeps of how its call ended: the wire ``CallToolResult`` of an outcome, or the JSON-RPC error
of a failure, as ``tools/call`` would have answered them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from plexor.errors import PlexorError

if TYPE_CHECKING:  # pragma: no cover
    from plexor.core.results import Outcome

__all__ = ["WORKER_DIED", "tool_error", "tool_result"]

WORKER_DIED = -32603


def tool_error(exc: BaseException) -> dict[str, object]:
    """The JSON-RPC error a failure would have been on ``tools/call``, for a failed task."""
    from mcp.shared.exceptions import MCPError

    from plexor.asking import AskError

    inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 else exc
    if isinstance(inner, AskError):
        return {"code": inner.rpc_code, "message": inner.render(), "data": {**inner.data, "guidance": inner.guidance}}
    if isinstance(inner, MCPError):
        return {"code": inner.error.code, "message": inner.error.message,
                **({"data": inner.error.data} if inner.error.data is not None else {})}
    if isinstance(inner, PlexorError):
        return {"code": WORKER_DIED, "message": inner.render(), "data": inner.payload()}
    return {"code": WORKER_DIED, "message": f"the task failed: {type(inner).__name__}: {inner}",
            "data": {"type": "unexpected"}}


def tool_result(outcome: Outcome) -> dict[str, object]:
    """A tool's :class:`Outcome` as the wire ``CallToolResult`` (what ``tools/call`` would have answered)."""
    out: dict[str, object] = {"content": [{"type": "text", "text": outcome.text}, *outcome.content],
                              "isError": bool(outcome.is_error)}
    if outcome.data is not None:
        out["structuredContent"] = outcome.data
    if outcome.meta:
        out["_meta"] = json.loads(json.dumps(outcome.meta, default=str))
    return out
