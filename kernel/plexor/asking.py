"""Asking the client in the middle of a call: elicitation, sampling and roots.

A tool, resource reader or prompt that needs something only the client has (an
answer from the user, a completion from the client's model, the client's roots)
asks through its :class:`~plexor.Context`::

    async def book(ctx: Context, city: str) -> str:
        got = await ctx.ask(
            who=Elicit("Who is travelling?", {"name": str}),
            pitch=Sample(f"One sentence selling {city}.", max_tokens=60),
        )
        return f"{got['who']['content']['name']}: {got['pitch']['content']['text']}"

How the question travels depends on the protocol the client speaks, and the
plugin never sees the difference:

* **2026-07-28 and later** (SEP-2322, multi-round requests): the call ends with
  an ``InputRequiredResult`` listing every unanswered question; the client
  answers and sends the *same* request again with ``inputResponses`` and the
  ``requestState`` it was given. The function runs again from the top; this
  time ``ctx.ask`` returns the answers. Answers given in earlier rounds, the
  round number and :attr:`Context.state` ride in ``requestState``, which the
  server encrypts and binds to the request (see :mod:`plexor.serving.server`), so a
  client cannot forge or alter them.
* **2025-11-25 and earlier**: each question is sent as a server-to-client
  request while the call waits, and ``ctx.ask`` returns when the client answers.

A function that asks must therefore be safe to run again up to the point where
it asks (do side effects after the answers are in). Only ``async`` functions can
ask. This module imports nothing but the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plexor.errors import PlexorError

__all__ = ["AskError", "Elicit", "ElicitURL", "InputRequired", "ListRoots", "Sample"]

# JSON-RPC codes these failures map to on the wire (2026-07-28 era).
INVALID_PARAMS = -32602
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021

_PRIMITIVES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Elicit:
    """Ask the user to fill in a form (``elicitation/create``).

    :param message: the question, shown to the user.
    :param schema: a JSON Schema object with flat properties of primitive types
        (what MCP allows in a form), or the shorthand ``{"name": str, "age": int}``
        (every field required).

    The answer is ``{"action": "accept" | "decline" | "cancel", "content": {...}}``;
    ``content`` is present when accepted, and is checked against ``schema``.
    """

    capability = "elicitation"
    method = "elicitation/create"

    def __init__(self, message: str, schema: Mapping[str, Any]) -> None:
        if not isinstance(message, str) or not message.strip():
            raise PlexorError("Elicit needs a non-empty message", "Pass the question to show the user, e.g. Elicit(\"Your name?\", {\"name\": str}).")
        self.message = message
        self.schema = _form_schema(schema)

    def wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": {"message": self.message, "requestedSchema": self.schema}}


class ElicitURL:
    """Send the user to a web page (``elicitation/create`` in URL mode).

    For what must not pass through the client or its model: signing in to a third
    party, a payment, entering an API key. The client shows ``message`` and offers to
    open ``url``; the user does the rest in the browser.

    :param message: why the user should go there, shown to the user.
    :param url: an ``https://`` URL (``http://`` only for localhost).
    :param elicitation_id: names this interaction (default: derived from ``url``, the
        same in every round); send ``notifications/elicitation/complete`` with it
        (:meth:`plexor.Context.elicitation_complete`) when the page reports it done.
        2025-11-25 clients receive it; from 2026-07-28 on the spec has none (the retry
        of the request is what follows the page).

    The answer is ``{"action": "accept" | "decline" | "cancel"}``: ``accept`` means the
    user agreed to open the page, not that they finished there. The client must have
    declared ``elicitation: {"url": {}}``.
    """

    capability = "elicitation"
    method = "elicitation/create"

    def __init__(self, message: str, url: str, *, elicitation_id: str | None = None) -> None:
        if not isinstance(message, str) or not message.strip():
            raise PlexorError("ElicitURL needs a non-empty message",
                              "Say why the user should open the page, e.g. ElicitURL(\"Sign in to GitHub\", url).")
        from urllib.parse import urlsplit

        parts = urlsplit(url) if isinstance(url, str) else None
        local = parts is not None and parts.hostname in ("localhost", "127.0.0.1", "::1")
        if parts is None or not parts.netloc or not (parts.scheme == "https" or (parts.scheme == "http" and local)):
            raise PlexorError(f"ElicitURL needs an https:// URL, not {url!r}",
                              "Give the full address of the page (http:// only for localhost).")
        self.message = message
        self.url = url
        if elicitation_id is None:
            import hashlib

            elicitation_id = "plexor-" + hashlib.sha256(url.encode()).hexdigest()[:16]
        self.elicitation_id = elicitation_id

    def wire(self) -> dict[str, Any]:
        # The 2026-07-28 input request (the only use of this shape) has no elicitationId: the round names it.
        return {"method": self.method, "params": {"mode": "url", "message": self.message, "url": self.url}}


class Sample:
    """Ask the client's language model for a completion (``sampling/createMessage``).

    :param prompt: the user message text, or a list of MCP sampling messages
        (``{"role": "user", "content": {"type": "text", "text": "..."}}``).
    :param max_tokens: the most tokens the client may generate.
    :param system: an optional system prompt.
    :param temperature: optional sampling temperature.
    :param stop: optional stop sequences.
    :param tools: tools the model may ask to use, MCP ``Tool`` dicts
        (``{"name", "description", "inputSchema"}``); the client must declare
        ``sampling: {"tools": {}}``. When the model uses one, the answer's
        ``content`` is a list with ``tool_use`` blocks and ``stopReason`` is
        ``"toolUse"``: run the tool yourself and ask again with the conversation
        so far plus a ``tool_result`` message.
    :param tool_choice: ``"auto"`` (the model decides), ``"required"`` or ``"none"``.

    The answer is a ``CreateMessageResult``: ``{"role", "content", "model", "stopReason"}``;
    for a text reply, ``answer["content"]["text"]``.
    """

    capability = "sampling"
    method = "sampling/createMessage"

    def __init__(
        self,
        prompt: str | Sequence[Mapping[str, Any]],
        *,
        max_tokens: int = 512,
        system: str | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> None:
        if isinstance(prompt, str):
            messages: list[dict[str, Any]] = [{"role": "user", "content": {"type": "text", "text": prompt}}]
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt):
            messages = [dict(m) for m in prompt if isinstance(m, Mapping)]
        else:
            raise PlexorError("Sample needs a prompt string or a non-empty list of messages with role and content",
                              "Pass Sample(\"text\") or Sample([{\"role\": \"user\", \"content\": {\"type\": \"text\", \"text\": \"...\"}}]).")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise PlexorError(f"Sample max_tokens must be a positive integer, not {max_tokens!r}", "Pass e.g. max_tokens=256.")
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
        if system is not None:
            params["systemPrompt"] = system
        if temperature is not None:
            params["temperature"] = temperature
        if stop:
            params["stopSequences"] = list(stop)
        if tools is not None:
            params["tools"] = _sampling_tools(tools)
        if tool_choice is not None:
            if tool_choice not in ("auto", "required", "none"):
                raise PlexorError(f"Sample tool_choice={tool_choice!r} is not a choice", "Use 'auto', 'required' or 'none'.")
            params["toolChoice"] = {"mode": tool_choice}
        self.params = params

    @property
    def needs_tools(self) -> bool:
        return "tools" in self.params or "toolChoice" in self.params

    def wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


class ListRoots:
    """Ask the client for its roots (``roots/list``); the answer is ``{"roots": [{"uri", "name"?}, ...]}``."""

    capability = "roots"
    method = "roots/list"

    def wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": {}}


Question = Elicit | ElicitURL | Sample | ListRoots


def _sampling_tools(tools: Any) -> list[dict[str, Any]]:
    if isinstance(tools, str | Mapping) or not isinstance(tools, Sequence) or not tools:
        raise PlexorError("Sample tools must be a non-empty list of tool dicts",
                          'Pass tools=[{"name": "lookup", "description": "...", "inputSchema": {"type": "object", ...}}].')
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str) \
                or not isinstance(tool.get("inputSchema"), Mapping) or tool["inputSchema"].get("type") != "object":
            raise PlexorError(f"Sample tool {tool!r} is not a tool",
                              "Each tool needs a 'name' and an 'inputSchema' that is a JSON Schema of type 'object'.")
        out.append(json.loads(json.dumps(dict(tool))))
    return out


def requirement(question: Question) -> dict[str, Any]:
    """The client capabilities ``question`` needs, in wire shape."""
    if isinstance(question, ElicitURL):
        return {"elicitation": {"url": {}}}
    if isinstance(question, Elicit):
        return {"elicitation": {"form": {}}}
    if isinstance(question, Sample):
        return {"sampling": {"tools": {}}} if question.needs_tools else {"sampling": {}}
    return {"roots": {}}


def covers(caps: Mapping[str, Any] | None, question: Question) -> bool:
    """Whether client capabilities ``caps`` (wire shape) let the client answer ``question``."""
    if isinstance(question, ElicitURL):
        have = caps.get("elicitation") if caps else None
        return isinstance(have, Mapping) and have.get("url") is not None
    if isinstance(question, Sample) and question.needs_tools:
        have = caps.get("sampling") if caps else None
        return isinstance(have, Mapping) and have.get("tools") is not None
    return declares(caps, question.capability)


def default_key(question: Question) -> str:
    """A key that names the same question the same way in every round."""
    import hashlib

    digest = hashlib.sha256(json.dumps(question.wire(), sort_keys=True, ensure_ascii=True).encode()).hexdigest()
    return f"{question.method.split('/')[0]}-{digest[:12]}"


class InputRequired(BaseException):
    """Raised by ``ctx.ask`` to end this round with an ``InputRequiredResult``.

    A :class:`BaseException`, like cancellation, so that a plugin's own
    ``except Exception`` around its work cannot swallow it. The kernel turns it
    into the result; plugins never raise or catch it.
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


class AskError(PlexorError):
    """A question could not be asked or its answer was unusable.

    On 2026-07-28 it becomes a JSON-RPC error (``rpc_code``): -32021 when the
    client did not declare the capability, -32602 for a malformed answer.
    Before that it becomes an ``isError`` tool result with the same guidance.
    """

    code = "ask_failed"

    def __init__(self, message: str, guidance: str, *, rpc_code: int, data: dict[str, Any] | None = None) -> None:
        super().__init__(message, guidance, data=data)
        self.rpc_code = rpc_code


def declares(caps: Mapping[str, Any] | None, capability: str) -> bool:
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
    defaults: dict[str, dict[str, Any]] = {"elicitation": {"elicitation": {"form": {}}}, "sampling": {"sampling": {}},
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


def can_answer(caps: Mapping[str, Any] | None, method: str) -> bool:
    """Whether client capabilities ``caps`` (wire shape) cover an input request of ``method``."""
    return method in CAPABILITY_OF_METHOD and declares(caps, CAPABILITY_OF_METHOD[method])


def check_answer(key: str, question: Question, answer: Any) -> dict[str, Any]:
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

    model: Any = {"elicitation/create": types.ElicitResult, "sampling/createMessage": types.CreateMessageResult,
                  "roots/list": types.ListRootsResult}[question.method]
    try:
        parsed = model.model_validate(dict(answer))
    except ValidationError as exc:
        if question.method != "sampling/createMessage":
            raise bad(_first_error(exc)) from None
        try:  # array content: the tool-use arm of the sampling result
            parsed = types.CreateMessageResultWithTools.model_validate(dict(answer))
        except ValidationError:
            raise bad(_first_error(exc)) from None
    out: dict[str, Any] = parsed.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(question, Elicit) and out.get("action") == "accept":
        import jsonschema

        try:
            jsonschema.validate(out.get("content") or {}, question.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "content"
            raise bad(f"the accepted content does not match the requested schema at {where}: {exc.message}") from None
    return out


def _first_error(exc: Any) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "the answer"
    return f"{where}: {err.get('msg', 'invalid')}"


def _form_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or not schema:
        raise PlexorError("Elicit needs a schema: a JSON Schema object or {field: type}",
                          "Pass e.g. {\"name\": str, \"age\": int} or {\"type\": \"object\", \"properties\": {...}}.")
    if schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping):
        out: dict[str, Any] = json.loads(json.dumps(schema))
    else:
        props: dict[str, Any] = {}
        for field, kind in schema.items():
            if kind not in _PRIMITIVES:
                raise PlexorError(f"Elicit field {field!r} has type {kind!r}; forms hold only str, int, float and bool",
                                  "Use one of those types in the shorthand, or pass a full JSON Schema object.")
            props[str(field)] = {"type": _PRIMITIVES[kind]}
        out = {"type": "object", "properties": props, "required": list(props)}
    for field, prop in out["properties"].items():
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind not in ("string", "integer", "number", "boolean", "array"):
            raise PlexorError(f"Elicit field {field!r} must be a string, number, integer, boolean or enum array, not {kind!r}",
                              "MCP forms are flat: give each property a primitive type.")
    return out


def question_from_wire(request: Mapping[str, Any]) -> Question:
    """Rebuild a question from an ``InputRequiredResult`` input request (what ``plexor connect`` relays)."""
    method, params = request.get("method"), dict(request.get("params") or {})
    if method == "elicitation/create" and params.get("mode") == "url":
        return ElicitURL(str(params.get("message") or "?"), str(params.get("url")),
                         elicitation_id=params.get("elicitationId"))
    if method == "elicitation/create":
        return Elicit(str(params.get("message") or "?"), params.get("requestedSchema") or {})
    if method == "sampling/createMessage":
        question = Sample(params.get("messages") or [], max_tokens=int(params.get("maxTokens") or 512))
        question.params = params  # keep every field the server sent
        return question
    if method == "roots/list":
        return ListRoots()
    raise PlexorError(f"the server asked for {method!r}, which Plexor cannot relay", "Upgrade plexor on both sides.")


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


def client_capabilities(session: Any) -> dict[str, Any]:
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
        capabilities: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        responses: Mapping[str, Any] | None = None,
        resumed: Mapping[str, Any] | None = None,
        session: Any = None,
        request_id: Any = None,
    ) -> None:
        self.modern = modern
        self._capabilities = capabilities
        self.responses = dict(responses or {})
        resumed = resumed or {}
        self.answers: dict[str, Any] = dict(resumed.get("answers") or {})
        self.state: dict[str, Any] = dict(resumed.get("state") or {})
        self.round: int = int(resumed.get("round") or 1)
        self.session = session
        self.request_id = request_id

    @property
    def capabilities(self) -> dict[str, Any]:
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

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
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

    async def _send(self, key: str, question: Question) -> dict[str, Any]:
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

    async def request(self, session: Any, question: Question) -> Any:
        import mcp_types as types

        if isinstance(question, Elicit):
            return await session.elicit_form(question.message, question.schema, related_request_id=self.request_id)
        if isinstance(question, ElicitURL):
            return await session.elicit_url(question.message, question.url, question.elicitation_id,
                                            related_request_id=self.request_id)
        if isinstance(question, Sample):
            p = question.params
            tools = [types.Tool.model_validate(t) for t in p["tools"]] if "tools" in p else None
            choice = types.ToolChoice.model_validate(p["toolChoice"]) if "toolChoice" in p else None
            return await session.create_message(
                [types.SamplingMessage.model_validate(m) for m in p["messages"]], max_tokens=p["maxTokens"],
                system_prompt=p.get("systemPrompt"), temperature=p.get("temperature"),
                stop_sequences=p.get("stopSequences"), related_request_id=self.request_id,
                tools=tools, tool_choice=choice,
            )
        return await session.list_roots()
