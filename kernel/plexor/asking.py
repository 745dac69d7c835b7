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
ask. This module holds the questions and imports nothing but the standard library and
:mod:`plexor.errors`; :mod:`plexor.exchange` puts them to the client and checks the answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

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

    def __init__(self, message: str, schema: Mapping[str, object]) -> None:
        if not isinstance(message, str) or not message.strip():
            raise PlexorError("Elicit needs a non-empty message", "Pass the question to show the user, e.g. Elicit(\"Your name?\", {\"name\": str}).")
        self.message = message
        self.schema = _form_schema(schema)

    def wire(self) -> dict[str, object]:
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

    def wire(self) -> dict[str, object]:
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
        prompt: str | Sequence[Mapping[str, object]],
        *,
        max_tokens: int = 512,
        system: str | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        tools: Sequence[Mapping[str, object]] | None = None,
        tool_choice: str | None = None,
    ) -> None:
        if isinstance(prompt, str):
            messages: list[dict[str, object]] = [{"role": "user", "content": {"type": "text", "text": prompt}}]
        elif isinstance(prompt, Sequence) and prompt and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt):
            messages = [dict(m) for m in prompt if isinstance(m, Mapping)]
        else:
            raise PlexorError("Sample needs a prompt string or a non-empty list of messages with role and content",
                              "Pass Sample(\"text\") or Sample([{\"role\": \"user\", \"content\": {\"type\": \"text\", \"text\": \"...\"}}]).")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise PlexorError(f"Sample max_tokens must be a positive integer, not {max_tokens!r}", "Pass e.g. max_tokens=256.")
        params: dict[str, object] = {"messages": messages, "maxTokens": max_tokens}
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

    def wire(self) -> dict[str, object]:
        return {"method": self.method, "params": self.params}


class ListRoots:
    """Ask the client for its roots (``roots/list``); the answer is ``{"roots": [{"uri", "name"?}, ...]}``."""

    capability = "roots"
    method = "roots/list"

    def wire(self) -> dict[str, object]:
        return {"method": self.method, "params": {}}


Question = Elicit | ElicitURL | Sample | ListRoots


def _sampling_tools(tools: object) -> list[dict[str, object]]:
    if isinstance(tools, str | Mapping) or not isinstance(tools, Sequence) or not tools:
        raise PlexorError("Sample tools must be a non-empty list of tool dicts",
                          'Pass tools=[{"name": "lookup", "description": "...", "inputSchema": {"type": "object", ...}}].')
    out: list[dict[str, object]] = []
    for tool in tools:
        schema = tool.get("inputSchema") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str) \
                or not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise PlexorError(f"Sample tool {tool!r} is not a tool",
                              "Each tool needs a 'name' and an 'inputSchema' that is a JSON Schema of type 'object'.")
        out.append(json.loads(json.dumps(dict(tool))))
    return out


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

    def __init__(self, requests: dict[str, dict[str, object]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


class AskError(PlexorError):
    """A question could not be asked or its answer was unusable.

    On 2026-07-28 it becomes a JSON-RPC error (``rpc_code``): -32021 when the
    client did not declare the capability, -32602 for a malformed answer.
    Before that it becomes an ``isError`` tool result with the same guidance.
    """

    code = "ask_failed"

    def __init__(self, message: str, guidance: str, *, rpc_code: int, data: Mapping[str, object] | None = None) -> None:
        super().__init__(message, guidance, data=data)
        self.rpc_code = rpc_code


def _form_schema(schema: object) -> dict[str, object]:
    if not isinstance(schema, Mapping) or not schema:
        raise PlexorError("Elicit needs a schema: a JSON Schema object or {field: type}",
                          "Pass e.g. {\"name\": str, \"age\": int} or {\"type\": \"object\", \"properties\": {...}}.")
    if schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping):
        out: dict[str, object] = json.loads(json.dumps(schema))  # a copy, JSON all through
    else:
        props: dict[str, object] = {}
        for field, kind in schema.items():
            if kind not in _PRIMITIVES:
                raise PlexorError(f"Elicit field {field!r} has type {kind!r}; forms hold only str, int, float and bool",
                                  "Use one of those types in the shorthand, or pass a full JSON Schema object.")
            props[str(field)] = {"type": _PRIMITIVES[kind]}
        out = {"type": "object", "properties": props, "required": list(props)}
    checked = out["properties"]
    for field, prop in (checked.items() if isinstance(checked, Mapping) else ()):  # always a mapping, see above
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind not in ("string", "integer", "number", "boolean", "array"):
            raise PlexorError(f"Elicit field {field!r} must be a string, number, integer, boolean or enum array, not {kind!r}",
                              "MCP forms are flat: give each property a primitive type.")
    return out


def question_from_wire(request: Mapping[str, object]) -> Question:
    """Rebuild a question from an ``InputRequiredResult`` input request (what ``plexor connect`` relays)."""
    method, given = request.get("method"), request.get("params")
    params: dict[str, object] = dict(given) if isinstance(given, Mapping) else {}
    if method == "elicitation/create" and params.get("mode") == "url":
        named = params.get("elicitationId")
        return ElicitURL(str(params.get("message") or "?"), str(params.get("url")),
                         elicitation_id=None if named is None else str(named))
    if method == "elicitation/create":
        schema = params.get("requestedSchema")
        return Elicit(str(params.get("message") or "?"), schema if isinstance(schema, Mapping) else {})
    if method == "sampling/createMessage":
        messages, most = params.get("messages"), params.get("maxTokens")
        question = Sample(messages if isinstance(messages, list) else [],
                          max_tokens=int(most) if isinstance(most, int | float | str) and most else 512)
        question.params = params  # keep every field the server sent
        return question
    if method == "roots/list":
        return ListRoots()
    raise PlexorError(f"the server asked for {method!r}, which Plexor cannot relay", "Upgrade plexor on both sides.")
