"""What a task keeps of how its call failed: the JSON-RPC error ``tools/call`` would have answered.
(A result is kept as :meth:`plexor.core.results.Outcome.wire` shapes it, as the server answers it.)"""

from __future__ import annotations

from plexor.errors import PlexorError

__all__ = ["WORKER_DIED", "tool_error"]

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
