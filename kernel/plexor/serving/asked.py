"""The server's side of asking (SEP-2322): the sealing key, the exchange of a request, its answers.

See :mod:`plexor.asking` for what a tool sees; this module turns a request into an
``Exchange`` and an ``InputRequired`` (or a failed question) into its wire answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from plexor.asking import AskError, InputRequired
from plexor.core.eras import stateless_era
from plexor.core.kernel import Kernel
from plexor.errors import PlexorError
from plexor.exchange import Exchange, client_capabilities

__all__ = ["BAD_STATE", "asked", "check_input_responses", "exchange_of", "progress_token",
           "state_key", "state_keys"]


BAD_STATE = (
    "this requestState was not issued by this server for this exact request (same tool or prompt "
    "name or resource URI, same arguments), was altered, or is more than an hour old. Send the "
    "request again without requestState and inputResponses to start over."
)


def state_key(kernel: Kernel) -> bytes:
    """The secret that seals requestState (the first of :func:`state_keys`)."""
    return state_keys(kernel)[0]


def state_keys(kernel: Kernel) -> list[bytes]:
    """The request-state key ring, shared by every process that serves this data or has the same key.

    ``PLEXOR_STATE_KEY`` / ``PLEXOR_STATE_KEY_FILE`` when set (hosts that share no
    disk), else ``<data>/request-state.key`` (mode 0600, made on first use); keys in
    ``PLEXOR_STATE_KEY_PREVIOUS(_FILE)`` are accepted but never seal (rotation).
    See :mod:`plexor.features.state.keys`.
    """
    from plexor.features.state.keys import request_state_keys

    return request_state_keys(kernel.environ, kernel.paths.data_dir, kernel.log)


def exchange_of(ctx: ServerRequestContext) -> Exchange:
    """What ``ctx.ask`` needs for this request: the era, the client's capabilities, the answers so far."""
    modern = stateless_era(ctx)
    raw: Mapping[str, object] = ctx.params or {}
    state, responses = raw.get("requestState"), raw.get("inputResponses")
    resumed = None
    if modern and state is not None:
        try:  # the boundary has verified and decrypted it: plaintext this server minted
            if not isinstance(state, (str, bytes, bytearray)):
                raise TypeError(state)
            resumed = json.loads(state)
        except (TypeError, ValueError):
            raise MCPError(types.INVALID_PARAMS, "Invalid or expired requestState: " + BAD_STATE) from None
    return Exchange(  # inputResponses are checked before (check_input_responses)
        modern=modern, capabilities=lambda: client_capabilities(ctx.session),
        responses=responses if modern and isinstance(responses, Mapping) else None, resumed=resumed,
        session=ctx.session, request_id=ctx.request_id,
    )


def asked(exc: BaseException, exchange: Exchange, *, tool: bool = False) -> types.InputRequiredResult | types.CallToolResult:
    """Answer a call that asked the client something (or could not); re-raise anything else."""
    inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 else exc
    if isinstance(inner, InputRequired):
        try:
            state = exchange.carry()
        except PlexorError as err:  # ctx.state held something that is not JSON
            if tool:
                return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())],
                                            structured_content={"error": err.payload()}, is_error=True)
            raise MCPError(types.INTERNAL_ERROR, err.render(), err.payload()) from None
        return types.InputRequiredResult.model_validate(
            {"resultType": "input_required", "inputRequests": inner.requests, "requestState": state})
    if isinstance(inner, AskError):
        raise MCPError(inner.rpc_code, inner.render(), {**inner.data, "guidance": inner.guidance}) from None
    raise exc


def check_input_responses(value: object) -> None:
    """Refuse malformed ``inputResponses`` with advice, before the SDK's terse params error."""
    if not isinstance(value, dict):
        raise MCPError(types.INVALID_PARAMS, (
            f"inputResponses must be an object mapping each input request key to its answer, not {json.dumps(value)[:40]}: "
            "leave it out on a first request, and on a retry send the answers under the keys of the inputRequests you were given."),
            {"field": "inputResponses"})
    from pydantic import ValidationError

    for key, answer in value.items():
        try:
            if not isinstance(answer, dict):
                raise ValueError(f"not an object but {json.dumps(answer)[:40]}")
            _response_adapter().validate_python(answer)
        except (ValueError, ValidationError) as exc:
            why = str(exc).splitlines()[0] if not isinstance(exc, ValidationError) else "it matches none of the answer shapes"
            raise MCPError(types.INVALID_PARAMS, (
                f"inputResponses[{key!r}] is not a valid answer ({why}): expected an ElicitResult "
                '{"action": "accept" | "decline" | "cancel", "content": {...}}, a CreateMessageResult or a ListRootsResult. '
                "Answer under the same key as the input request, with the result its method defines."),
                {"field": "inputResponses", "key": key}) from None


@functools.cache
def _response_adapter() -> TypeAdapter[types.InputResponse]:
    """Validates one answer against the union of answer shapes (built once, on first use)."""
    return TypeAdapter(types.InputResponse)


def progress_token(meta: object) -> str | int | None:
    """The request's progress token (a string or an integer, as MCP defines it), if it has one."""
    if meta is None:
        return None
    if isinstance(meta, dict):
        token = meta.get("progressToken", meta.get("progress_token"))
    else:
        token = getattr(meta, "progress_token", None)
    return token if isinstance(token, (str, int)) else None
