"""Questions of a relayed call (``ctx.ask`` in a tool the daemon runs), passed on by ``plexor connect``.

The relay speaks 2026-07-28 to the daemon, declaring the end client's capabilities, and the daemon answers
with an ``InputRequiredResult``. A 2026-07-28 end client gets it as is and retries through the relay; for an
older client the relay asks each question itself (a server-to-client request on stdio) and retries upstream
with the answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from plexor.asking import AskError
from plexor.core.eras import stateless_era
from plexor.errors import PlexorError

__all__ = ["MAX_ASK_ROUNDS", "asking_caps", "error_result", "relay_asking", "relay_call", "relay_read"]

# Rounds of InputRequiredResult the relay resolves for a pre-2026 client before giving up.
MAX_ASK_ROUNDS = 10

R = TypeVar("R", bound=types.Result)
#: ``send(input_responses, request_state)``: the request sent upstream once more, with the answers so far.
Send = Callable[[types.InputResponses | None, str | None], Awaitable[R | types.InputRequiredResult]]


def asking_caps(ctx: ServerRequestContext) -> frozenset[str]:
    """What the end client can be asked, to declare upstream for this request.

    ``elicitation`` is form-mode elicitation, ``elicitation.url`` URL mode, ``sampling.tools``
    sampling with tools (the sub-capabilities ``plexor.exchange.covers`` checks).
    """
    from plexor.exchange import client_capabilities, declares

    caps = client_capabilities(ctx.session)
    names = {name for name in ("elicitation", "sampling", "roots") if declares(caps, name)}
    elicitation, sampling = caps.get("elicitation"), caps.get("sampling")
    if isinstance(elicitation, dict) and elicitation.get("url") is not None:
        names.add("elicitation.url")
    if "sampling" in names and isinstance(sampling, dict) and sampling.get("tools") is not None:
        names.add("sampling.tools")
    return frozenset(names)


async def relay_call(ctx: ServerRequestContext, params: types.InputResponseRequestParams,
                     send: Send[R]) -> R | types.InputRequiredResult | types.CallToolResult:
    """:func:`relay_asking` for ``tools/call``: a question that cannot be asked is the tool's error result
    for an older client, as ``plexor serve`` answers it."""
    try:
        return await relay_asking(ctx, params, send)
    except AskError as err:
        if stateless_era(ctx):
            raise MCPError(err.rpc_code, err.render(), {**err.data, "guidance": err.guidance}) from None
        return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())], is_error=True)
    except PlexorError as err:  # too many rounds, or the daemon stopped mid-call (plexor.features.daemon.repeat)
        return error_result(err)


def error_result(err: PlexorError) -> types.CallToolResult:
    """``err`` as the tool error result ``plexor serve`` gives: its text, and the error in ``structuredContent``."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())],
                                structured_content={"error": err.payload()}, is_error=True)


async def relay_read(ctx: ServerRequestContext, params: types.InputResponseRequestParams,
                     send: Send[R]) -> R | types.InputRequiredResult:
    """:func:`relay_asking` for ``resources/read`` and ``prompts/get``: a question that cannot be asked is an error."""
    try:
        return await relay_asking(ctx, params, send)
    except AskError as err:
        raise MCPError(err.rpc_code, err.render(), {**err.data, "guidance": err.guidance}) from None
    except PlexorError as err:
        raise MCPError(types.INTERNAL_ERROR, err.render()) from None


async def relay_asking(ctx: ServerRequestContext, params: types.InputResponseRequestParams,
                       send: Send[R]) -> R | types.InputRequiredResult:
    """Send ``send(input_responses, request_state)`` upstream, resolving questions for old clients.

    A 2026-07-28 client receives the upstream ``InputRequiredResult`` unchanged (after a check that
    it declared what is asked). For an older client the relay asks each question over its own
    stdio session, like the kernel does, and retries upstream with the answers. A question that
    cannot be asked raises ``AskError``; too many rounds, ``PlexorError``.
    """
    modern = stateless_era(ctx)
    rounds = 0
    result = await _first_answer(send, params.input_responses, params.request_state)
    while isinstance(result, types.InputRequiredResult):
        wire = {k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in (result.input_requests or {}).items()}
        if modern:
            _check_answerable(ctx, wire)
            return result
        rounds += 1
        if rounds > MAX_ASK_ROUNDS:
            raise PlexorError(f"the call asked more than {MAX_ASK_ROUNDS} rounds of questions",
                              "Answer fewer follow-ups, or use a 2026-07-28 client, which drives the rounds itself.")
        result = await send(await _ask_end_client(ctx, wire), result.request_state)
    return result


async def _first_answer(send: Send[R], responses: types.InputResponses | None,
                        state: str | None) -> R | types.InputRequiredResult:
    """The daemon's answer to the request as the end client sent it; its refusal for a capability the end
    client lacks becomes the ``AskError`` that ``plexor serve`` would raise."""
    from plexor.asking import MISSING_REQUIRED_CLIENT_CAPABILITY

    try:
        return await send(responses, state)
    except MCPError as exc:
        if exc.error.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
            raise
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        raise AskError(exc.error.message.split("\n", 1)[0], str(data.get("guidance") or ""), rpc_code=exc.error.code,
                       data={k: v for k, v in data.items() if k != "guidance"}) from None


def _check_answerable(ctx: ServerRequestContext, wire: Mapping[str, Mapping[str, object]]) -> None:
    """Refuse (``AskError``) questions a 2026-07-28 end client did not declare it can answer."""
    from plexor.asking import question_from_wire
    from plexor.exchange import can_answer, client_capabilities, covers, missing_capability

    caps = client_capabilities(ctx.session)
    for key, request in wire.items():
        method = str(request["method"])
        if not can_answer(caps, method):
            raise missing_capability(key, method)
        question = question_from_wire(request)
        if not covers(caps, question):  # URL-mode elicitation, sampling with tools
            raise missing_capability(key, method, question)


async def _ask_end_client(ctx: ServerRequestContext, wire: Mapping[str, Mapping[str, object]]) -> types.InputResponses:
    """One round of questions asked of an older end client over its own session; its answers, typed for upstream."""
    from pydantic import TypeAdapter

    from plexor.asking import question_from_wire
    from plexor.exchange import Exchange, client_capabilities

    exchange = Exchange(capabilities=lambda: client_capabilities(ctx.session), session=ctx.session,
                        request_id=ctx.request_id)
    answers = await exchange.ask({k: question_from_wire(r) for k, r in wire.items()})
    adapter: TypeAdapter[types.InputResponse] = TypeAdapter(types.InputResponse)
    return {k: adapter.validate_python(v) for k, v in answers.items()}
