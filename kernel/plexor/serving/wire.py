"""What to answer a message the SDK could not take: one JSON-RPC error, naming what was wrong.

The SDK validates each message against the JSON-RPC envelope and, on stdio, silently drops
what fails; over HTTP it answers 400 with ``"id": null`` and the pydantic report. Here the raw
message is read again to find its id, so every request with a readable id gets exactly one
answer carrying that id, and the text says how to fix the message. Only failing messages
come here: the well-formed path costs nothing.

Codes: -32700 for text that is not JSON (or not valid Unicode), -32600 for JSON that is not
a request (batches, a non-string method, nesting deeper than the parser takes), -32602 for
``params`` that is not an object. A message with no readable id gets ``"id": null``; a
malformed *response* or notification is never answered (answering could loop two peers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Reply", "diagnose", "id_of", "max_depth"]


def max_depth(environ: Mapping[str, str] | None = None) -> int:
    """The nesting limit in force: ``PLEXOR_MAX_NESTING`` (``docs/security.md#limits``), at most :data:`MAX_DEPTH`."""
    from plexor.limits import value

    return int(value("nesting", environ))

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_DEPTH = 200  # pydantic-core's JSON parser refuses deeper nesting; PLEXOR_MAX_NESTING may only lower it
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ID_KEY = re.compile(r'"id"\s*:\s*')


@dataclass(frozen=True)
class Reply:
    """One error answer: ``id`` is None when no id could be read (sent as ``"id": null``)."""

    id: int | str | None
    code: int
    message: str

    def wire(self) -> dict[str, object]:
        return {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}}


def id_of(value: object) -> int | str | None:
    """A usable request id (a string or an integer, not a boolean), else None."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def diagnose(raw: str | bytes) -> list[Reply]:
    """The error answers owed for ``raw``, a message the SDK refused: none, one, or one per batch item."""
    found = _diagnose(raw)
    return found if isinstance(found, list) else ([] if found is None else [found])


def _diagnose(raw: str | bytes) -> Reply | list[Reply] | None:
    if isinstance(raw, bytes):
        data = raw
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = f"Parse error: the message is not valid UTF-8 (byte {exc.start}); send JSON text encoded as UTF-8."
            try:
                found = json.loads(data.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                found = None
            rid = id_of(found.get("id")) if isinstance(found, dict) and "method" in found else None
            return Reply(rid, PARSE_ERROR, text)
    if raw.startswith("{oversized line skipped}"):
        return Reply(None, INVALID_REQUEST, "Invalid Request: a line was longer than the server's limit and was "
                                            "skipped; send smaller messages.")
    try:
        msg = json.loads(raw)
    except RecursionError:
        found = _lexical_id(raw)
        return Reply(found, INVALID_REQUEST, _too_deep())
    except ValueError as exc:
        return Reply(None, PARSE_ERROR, f"Parse error: {_short(exc)}; send one complete JSON-RPC object per message.")
    if isinstance(msg, list):
        return _batch(msg)
    return _object(msg, raw)


def _object(msg: object, raw: str) -> Reply | None:
    if not isinstance(msg, dict):
        return Reply(None, INVALID_REQUEST, f"Invalid Request: a message must be a JSON object, not {_kind(msg)}; "
                                            'send {"jsonrpc": "2.0", "id": 1, "method": "...", "params": {...}}.')
    rid = id_of(msg.get("id"))
    if "method" not in msg and ("result" in msg or "error" in msg):
        return None  # a malformed response: never answered
    if "id" not in msg and isinstance(msg.get("method"), str):
        return None  # a malformed notification: never answered
    if "id" in msg and rid is None:
        return Reply(None, INVALID_REQUEST, f"Invalid Request: the id must be a string or an integer, not "
                                            f"{_show(msg.get('id'))}.")
    if msg.get("jsonrpc") != "2.0":
        return Reply(rid, INVALID_REQUEST, f'Invalid Request: "jsonrpc" must be "2.0", not {_show(msg.get("jsonrpc"))}.')
    method = msg.get("method")
    if not isinstance(method, str):
        return Reply(rid, INVALID_REQUEST, f'Invalid Request: "method" must be a string naming the method '
                                           f'(e.g. "tools/list"), not {_show(method)}.')
    params = msg.get("params")
    if "params" in msg and params is not None and not isinstance(params, dict):
        return Reply(rid, INVALID_PARAMS, params_guidance(method, params))
    if _has_lone_surrogate(msg):
        return Reply(rid, PARSE_ERROR, "Parse error: the message contains an unpaired UTF-16 surrogate escape "
                                       "(such as \\ud800), which is not a Unicode character; escape characters "
                                       "outside the BMP as a complete surrogate pair, or send them as UTF-8.")
    if _depth(msg) > max_depth():
        return Reply(rid, INVALID_REQUEST, _too_deep())
    return Reply(rid, INVALID_REQUEST, f"Invalid Request: the message for {method!r} is not a valid JSON-RPC "
                                       "request; send {\"jsonrpc\": \"2.0\", \"id\": <string or integer>, "
                                       "\"method\": \"...\", \"params\": {...}}.")


def params_guidance(method: str, params: object) -> str:
    """Why ``params`` of ``method`` was refused, and what it should look like."""
    example = _EXAMPLES.get(method, "{...} (or leave params out)")
    return (f"Invalid params: params must be an object (or left out), not {_kind(params)}; "
            f"for {method!r} send params like {example}.")


_EXAMPLES = {
    "tools/call": '{"name": "<tool>", "arguments": {...}}',
    "tools/list": '{} or {"cursor": "<nextCursor>"}',
    "resources/read": '{"uri": "<uri>"}',
    "prompts/get": '{"name": "<prompt>", "arguments": {...}}',
    "initialize": '{"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "...", "version": "..."}}',
}


def _batch(items: list[object]) -> Reply | list[Reply] | None:
    ids = dict.fromkeys(rid for item in items if isinstance(item, dict) and "method" in item
                        and (rid := id_of(item.get("id"))) is not None)  # one answer per id, in order
    owed = [Reply(rid, INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not part of MCP since "
                                        "2025-06-18; send each request as its own message.") for rid in ids]
    if owed:
        return owed
    return Reply(None, INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not part of MCP since "
                                        "2025-06-18; send each request as its own message.")


def _has_lone_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _depth(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _lexical_id(raw: str) -> int | str | None:
    """The top-level ``"id"`` of a message too deep to parse: found by scanning at depth 1."""
    depth, i, n = 0, 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == '"':
            if depth == 1:
                m = _ID_KEY.match(raw, i)
                if m:
                    try:
                        value, _ = json.JSONDecoder().raw_decode(raw, m.end())
                    except ValueError:
                        return None
                    return id_of(value)
            i += 1
            while i < n and raw[i] != '"':
                i += 2 if raw[i] == "\\" else 1
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return None


def _too_deep(limit: int | None = None) -> str:
    from plexor.limits import REFUSALS

    REFUSALS["nesting"] += 1
    shown = max_depth() if limit is None else limit
    return (f"Invalid Request: the message is nested deeper than {shown} levels, the most the server parses "
            "(PLEXOR_MAX_NESTING); flatten the arguments.")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({_show(value)})"
    if isinstance(value, str):
        return f"a string ({_show(value)})"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _show(value: object) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _short(exc: Exception) -> str:
    return str(exc).split(":")[0].strip() or type(exc).__name__


def stray_id(raw: str) -> Reply | None:
    """The answer owed for a message the SDK read as a notification although it has an ``id``.

    The SDK takes ``{"id": true, "method": "ping"}`` (an id that is not a string or an
    integer) for a notification and answers nothing; the sender is waiting for a reply.
    """
    if '"id"' not in raw:
        return None
    try:
        msg = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(msg, dict) and "id" in msg and "method" in msg and id_of(msg["id"]) is None:
        return Reply(None, INVALID_REQUEST, f"Invalid Request: the id must be a string or an integer, not "
                                            f"{_show(msg['id'])}.")
    return None
