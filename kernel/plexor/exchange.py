"""The client's side of a call that asks: what it declared, its answers checked, the questions sent.

:mod:`plexor.asking` holds the questions a tool asks (``ctx.ask``); this module holds the
:class:`Exchange` the server builds for each request (the era, the client's capabilities, the
answers so far), which puts them to the client in either era, and the checks of capabilities
and answers that the server, ``plexor connect`` and the tasks feature share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from plexor.asking import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AskError,
    Elicit,
    ElicitURL,
    InputRequired,
    ListRoots,
    Question,
    Sample,
)
from plexor.errors import PlexorError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import mcp_types
    from mcp.server.session import ServerSession
    from mcp_types import LoggingLevel, RequestId
    from pydantic import ValidationError

__all__ = ["CAPABILITY_OF_METHOD", "Exchange", "Session", "can_answer", "check_answer", "client_capabilities", "covers",
           "declares", "missing_capability", "requirement", "unseen_client"]


class Session(Protocol):
    """The channel a call logs and reports progress on: the SDK's ``ServerSession``, or a stand-in for
    one (a task's, whose progress becomes its status message)."""

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None: ...

    async def send_log_message(self, level: LoggingLevel, data: object, logger: str | None = None,
                               related_request_id: RequestId | None = None) -> None: ...


def requirement(question: Question) -> dict[str, object]:
    """The client capabilities ``question`` needs, in wire shape."""
    if isinstance(question, ElicitURL):
        return {"elicitation": {"url": {}}}
    if isinstance(question, Elicit):
        return {"elicitation": {"form": {}}}
    if isinstance(question, Sample):
        return {"sampling": {"tools": {}}} if question.needs_tools else {"sampling": {}}
    return {"roots": {}}


def covers(caps: Mapping[str, object] | None, question: Question) -> bool:
    """Whether client capabilities ``caps`` (wire shape) let the client answer ``question``."""
    if isinstance(question, ElicitURL):
        have = caps.get("elicitation") if caps else None
        return isinstance(have, Mapping) and have.get("url") is not None
    if isinstance(question, Sample) and question.needs_tools:
        have = caps.get("sampling") if caps else None
        return isinstance(have, Mapping) and have.get("tools") is not None
    return declares(caps, question.capability)


def declares(caps: Mapping[str, object] | None, capability: str) -> bool:
    """Whether client capabilities ``caps`` (wire shape) include ``"elicitation"``, ``"sampling"`` or ``"roots"``."""
    have = caps.get(capability) if caps else None
    if have is None:
        return False
    if capability == "elicitation":
        # A bare ``elicitation: {}`` predates modes and means form support; url-only does not.
        return not isinstance(have, Mapping) or have.get("form") is not None or have.get("url") is None
    return True


CAPABILITY_OF_METHOD = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def missing_capability(key: str, method: str, question: Question | None = None) -> AskError:
    """The error for asking ``key`` (an ``method`` request) of a client that did not declare its capability."""
    capability = CAPABILITY_OF_METHOD.get(method, method)
    defaults: dict[str, dict[str, object]] = {"elicitation": {"elicitation": {"form": {}}}, "sampling": {"sampling": {}},
                                           "roots": {"roots": {}}}
    required = requirement(question) if question is not None else defaults.get(capability, {capability: {}})
    shown = capability + (" (URL mode)" if isinstance(question, ElicitURL) else
                          " with tools" if isinstance(question, Sample) and question.needs_tools else "")
    return AskError(
        f"the client did not declare the {shown} capability, which this call needs to ask {key!r} ({method})",
        f"Use a client that supports {capability} and declares it in its capabilities, or call a tool that does not need it.",
        rpc_code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        data={"requiredCapabilities": required},
    )


def can_answer(caps: Mapping[str, object] | None, method: str) -> bool:
    """Whether client capabilities ``caps`` (wire shape) cover an input request of ``method``."""
    return method in CAPABILITY_OF_METHOD and declares(caps, CAPABILITY_OF_METHOD[method])


def check_answer(key: str, question: Question, answer: object) -> dict[str, object]:
    """Validate a client's answer to ``question``; returns it as a plain dict or raises :class:`AskError`."""
    expected = {
        "elicitation/create": 'an ElicitResult: {"action": "accept" | "decline" | "cancel", "content": {...}}',
        "sampling/createMessage": 'a CreateMessageResult: {"role": "assistant", "content": {...}, "model": "..."}',
        "roots/list": 'a ListRootsResult: {"roots": [{"uri": "file:///..."}]}',
    }[question.method]

    def bad(why: str) -> AskError:
        return AskError(
            f"inputResponses[{key!r}] is not a valid answer to {question.method}: {why}",
            f"Answer with {expected}, under the same key as the input request.",
            rpc_code=INVALID_PARAMS, data={"key": key, "method": question.method},
        )

    if not isinstance(answer, Mapping):
        raise bad(f"expected an object, got {json.dumps(answer)[:60]}")
    import mcp_types as types
    from pydantic import ValidationError

    models: dict[str, type[types.ElicitResult | types.CreateMessageResult | types.ListRootsResult]] = {
        "elicitation/create": types.ElicitResult, "sampling/createMessage": types.CreateMessageResult,
        "roots/list": types.ListRootsResult}
    model = models[question.method]
    parsed: types.ElicitResult | types.CreateMessageResult | types.CreateMessageResultWithTools | types.ListRootsResult
    try:
        parsed = model.model_validate(dict(answer))
    except ValidationError as exc:
        if question.method != "sampling/createMessage":
            raise bad(_first_error(exc)) from None
        try:  # array content: the tool-use arm of the sampling result
            parsed = types.CreateMessageResultWithTools.model_validate(dict(answer))
        except ValidationError:
            raise bad(_first_error(exc)) from None
    out: dict[str, object] = parsed.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(question, Elicit) and out.get("action") == "accept":
        import jsonschema

        try:
            jsonschema.validate(out.get("content") or {}, question.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "content"
            raise bad(f"the accepted content does not match the requested schema at {where}: {exc.message}") from None
    return out


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "the answer"
    return f"{where}: {err.get('msg', 'invalid')}"


def unseen_client(key: str, question: Question) -> AskError:
    """The error for asking a 2025 client whose ``initialize`` this server never saw (stateless HTTP).

    In stateless mode every request is served by a fresh session that skipped the handshake: the
    client's capabilities are unknown and its answer would have nowhere to land.
    """
    capability = question.capability
    return AskError(
        f"this call needs to ask {key!r} ({question.method}), but the server runs stateless HTTP (--stateless) and "
        f"the client speaks the 2025-11-25 protocol: in stateless mode each request is a fresh session that never "
        f"saw the client's initialize, so the server does not know whether it supports {capability} and has no "
        f"channel to ask it",
        "Run the server stateful (plexor serve without --stateless; with several workers or hosts, route each "
        "Mcp-Session-Id to the same one with sticky sessions, see docs/deploy.md), or connect with a 2026-07-28 "
        "client, which answers questions within the request itself (inputResponses).",
        rpc_code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        data={"requiredCapabilities": requirement(question), "reason": "stateless_2025_client"},
    )


def client_capabilities(session: object) -> dict[str, object]:
    """The capabilities an SDK server session's client declared, in wire shape ({} when unknown)."""
    caps = getattr(session, "client_capabilities", None)
    return caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps is not None else {}


class Exchange:
    """One request's channel back to the client: the era, the capabilities and the answers so far.

    Built by the server for every tools/call, resources/read and prompts/get;
    ``Exchange()`` (no client) is what direct kernel calls get.
    """

    def __init__(
        self,
        *,
        modern: bool = False,
        capabilities: Mapping[str, object] | Callable[[], Mapping[str, object]] | None = None,
        responses: Mapping[str, object] | None = None,
        resumed: Mapping[str, object] | None = None,
        session: ServerSession | None = None,
        request_id: mcp_types.RequestId | None = None,
    ) -> None:
        self.modern = modern
        self._capabilities = capabilities
        self.responses = dict(responses or {})
        resumed = resumed or {}
        answers, state, round_ = resumed.get("answers"), resumed.get("state"), resumed.get("round")
        self.answers: dict[str, dict[str, object]] = (
            {str(k): dict(v) for k, v in answers.items() if isinstance(v, Mapping)} if isinstance(answers, Mapping) else {})
        self.state: dict[str, object] = dict(state) if isinstance(state, Mapping) else {}
        self.round: int = int(round_) if isinstance(round_, int | float | str) and round_ else 1
        self.session = session
        self.request_id = request_id

    @property
    def capabilities(self) -> dict[str, object]:
        """The client's declared capabilities (wire shape), read on first use."""
        caps = self._capabilities
        if callable(caps):
            caps = self._capabilities = dict(caps() or {})
        return dict(caps or {})

    def can_ask(self, what: str) -> bool:
        if what not in (*CAPABILITY_OF_METHOD.values(), "elicitation.url", "sampling.tools"):
            raise PlexorError(f"unknown capability {what!r}",
                              "Ask about 'elicitation', 'elicitation.url', 'sampling', 'sampling.tools' or 'roots'.")
        if not self.modern and self.session is None:
            return False
        if what in ("elicitation.url", "sampling.tools"):
            capability, mode = what.split(".")
            have = self.capabilities.get(capability)
            return isinstance(have, Mapping) and have.get(mode) is not None
        return declares(self.capabilities, what)

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        pending: dict[str, Question] = {}
        for key, question in questions.items():
            if not isinstance(question, (Elicit, ElicitURL, Sample, ListRoots)):
                raise PlexorError(f"ctx.ask({key}=...) got {type(question).__name__}",
                                  "Pass Elicit(...), ElicitURL(...), Sample(...) or ListRoots().")
            if key in self.answers:  # answered in an earlier round (sealed in requestState)
                out[key] = self.answers[key]
            elif self.modern and key in self.responses:
                out[key] = self.answers[key] = check_answer(key, question, self.responses[key])
            else:
                pending[key] = question
        if not pending:
            return out
        if not self.modern and self.session is None:
            raise PlexorError("this call has no MCP client to ask", "Call it through an MCP client (plexor serve); direct kernel calls cannot ask questions.")
        if not self.modern and getattr(self.session, "client_capabilities", False) is None:
            key, question = next(iter(pending.items()))
            raise unseen_client(key, question)
        for key, question in pending.items():
            if not covers(self.capabilities, question):
                raise missing_capability(key, question.method, question)
        if self.modern:
            raise InputRequired({key: q.wire() for key, q in pending.items()})
        for key, question in pending.items():
            out[key] = self.answers[key] = await self._send(key, question)
        return out

    def carry(self) -> str:
        """The plaintext ``requestState`` for the next round (sealed by the server)."""
        try:
            return json.dumps({"v": 1, "round": self.round + 1, "answers": self.answers, "state": self.state},
                              ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise PlexorError(f"ctx.state cannot be carried to the next round: {exc}",
                              "Keep only JSON values in ctx.state (str, int, float, bool, None, lists and dicts of them); "
                              "store anything else yourself and keep its id there.") from None

    async def _send(self, key: str, question: Question) -> dict[str, object]:
        import warnings

        from mcp.shared.exceptions import MCPDeprecationWarning

        session = self.session
        try:
            with warnings.catch_warnings():  # sampling and roots are deprecated in 2026-07-28, still the way for 2025 clients
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                reply = await self.request(session, question)
        except Exception as exc:  # noqa: BLE001 - a client error or a transport without a back channel
            detail = getattr(getattr(exc, "error", None), "message", None) or str(exc) or type(exc).__name__
            raise PlexorError(f"the client did not answer {key!r} ({question.method}): {detail}",
                              "Retry; if it keeps failing, the client may not support this request on this transport "
                              "(stateless HTTP on 2025-11-25 has no channel for it).") from None
        return check_answer(key, question, reply.model_dump(by_alias=True, mode="json", exclude_none=True))

    async def request(
        self, session: ServerSession | None, question: Question,
    ) -> mcp_types.ElicitResult | mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools \
            | mcp_types.ListRootsResult:
        """Put ``question`` to the client behind ``session`` as a server-to-client request (2025-11-25)."""
        import mcp_types as types

        if session is None:
            raise PlexorError("this call has no MCP client to ask", "Call it through an MCP client (plexor serve).")

        if isinstance(question, Elicit):
            return await session.elicit_form(question.message, question.schema, related_request_id=self.request_id)
        if isinstance(question, ElicitURL):
            return await session.elicit_url(question.message, question.url, question.elicitation_id,
                                            related_request_id=self.request_id)
        if isinstance(question, Sample):
            p = types.CreateMessageRequestParams.model_validate(question.params)  # wire shape, as sent in 2026-07-28
            send, rid = session.create_message, self.request_id  # its overloads: with tools, with a tool choice, neither
            if p.tools is not None:
                return await send(p.messages, max_tokens=p.max_tokens, system_prompt=p.system_prompt, temperature=p.temperature,
                                  stop_sequences=p.stop_sequences, related_request_id=rid, tools=p.tools,
                                  tool_choice=p.tool_choice)
            if p.tool_choice is not None:
                return await send(p.messages, max_tokens=p.max_tokens, system_prompt=p.system_prompt, temperature=p.temperature,
                                  stop_sequences=p.stop_sequences, related_request_id=rid, tool_choice=p.tool_choice)
            return await send(p.messages, max_tokens=p.max_tokens, system_prompt=p.system_prompt, temperature=p.temperature,
                              stop_sequences=p.stop_sequences, related_request_id=rid)
        return await session.list_roots()
