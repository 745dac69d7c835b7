"""Judging a node's reply: the good ones become text to parse, every bad one a clear error.

The node reports errors in three malformed ways besides a plain 4xx with a
JSON body (see PROTOCOL.md); each becomes an :class:`EdgeLakeError` naming the
node, the command, the error code and text, and what to try:

* ``HTTP/1.1 400 {"err_code": 29, ...}`` — the error JSON in the status line's
  reason phrase, ``Transfer-Encoding: chunked`` and no body;
* ``200 OK`` whose body is a JSON error object (45, 175);
* ``200 OK`` with an empty body (a bad SQL statement sent to the network).
"""

from __future__ import annotations

import json
import re
from typing import Any

from plexor_edgelake.client import EdgeLakeError, Reply

__all__ = ["ERROR_ADVICE", "check"]

# What to do about each error code the node is known to send.
ERROR_ADVICE: dict[int, str] = {
    2: "The node did not understand the command. Check the arguments; for a tool of your own, check its "
       "command template against the EdgeLake documentation.",
    29: "The node has no metadata for that database or table. Check the names with edgelake_list_databases "
        "and edgelake_list_tables; to reach the nodes that hold the table, query with destination network.",
    45: "The table's metadata could not be loaded from the blockchain: the database or table name is wrong, "
        "or the table was just created. Check the names with edgelake_list_databases / edgelake_list_tables; "
        "a new table appears after the node runs 'blockchain reload metadata'.",
    155: "The SQL was refused, or the table's metadata is not loaded yet. Check the columns with "
         "edgelake_get_schema; if the table is new, let the node run 'blockchain reload metadata' and retry.",
    156: "The command was sent with the wrong HTTP method. For a tool of your own, set method: POST "
         "(or GET) in its YAML; only sql, get and blockchain get/read may use GET.",
    175: "A value in the command is not accepted (for example format must be json or table). "
         "Check the arguments against the tool's description.",
}
_DEFAULT_ADVICE = "Check the arguments; the node's log has the details of this error."
_RELAY = re.compile(r"^\s*\[From Node ([^\]]+)\]\s?")


def _error_object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    # Error objects are small and name err_code near the start; do not decode large row sets twice.
    if not text.startswith("{") or "err_code" not in text[:400] and "err_text" not in text[:400]:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if isinstance(obj, dict) and ("err_code" in obj or "err_text" in obj):
        return obj
    return None


def _node_error(reply: Reply, err: dict[str, Any], how: str) -> EdgeLakeError:
    code = err.get("err_code")
    text = str(err.get("err_text") or "no error text")
    local = err.get("local_msg")
    message = (f"EdgeLake node {reply.node.label()} answered {reply.command!r} with error "
               f"{code if code is not None else '?'}: {text}" + (f" ({local})" if local else ""))
    advice = ERROR_ADVICE.get(code, _DEFAULT_ADVICE) if isinstance(code, int) else _DEFAULT_ADVICE
    return EdgeLakeError(message, advice, data={
        "node": reply.node.name, "address": reply.node.address, "command": reply.command, "method": reply.method,
        "http_status": reply.status, "err_code": code, "err_text": text, "local_msg": local, "reported_in": how,
    })


def check(reply: Reply, *, empty_ok: bool = False, destination: str | None = None) -> tuple[str, str | None]:
    """Return ``(body text, relayed_from)`` for a good reply; raise :class:`EdgeLakeError` otherwise."""
    body = reply.text()
    if reply.status != 200:
        err = _error_object(reply.reason) or _error_object(body)
        if err is not None:
            return _raise(_node_error(reply, err, "status line" if _error_object(reply.reason) else "body"))
        raise EdgeLakeError(
            f"EdgeLake node {reply.node.label()} answered {reply.command!r} with HTTP {reply.status} "
            f"{reply.reason}" + (f": {body.strip()[:200]}" if body.strip() else ""),
            _DEFAULT_ADVICE,
            data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
                  "http_status": reply.status, "err_code": None, "err_text": reply.reason},
        )
    err = _error_object(body)
    if err is not None:
        raise _node_error(reply, err, "body of a 200 reply")
    if reply.framing_error is not None and not body:
        raise EdgeLakeError(
            f"EdgeLake node {reply.node.label()} answered {reply.command!r} with 200 OK but its reply body "
            f"never arrived ({reply.framing_error})",
            _empty_advice(destination),
            data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
                  "http_status": 200, "err_code": None, "err_text": "reply body missing"},
        )
    if reply.framing_error is not None:
        raise EdgeLakeError(
            f"EdgeLake node {reply.node.label()} cut its reply to {reply.command!r} off after "
            f"{len(reply.body)} bytes ({reply.framing_error})",
            "Retry; if it happens again the node may be overloaded or restarting — check its log.",
            data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
                  "http_status": 200, "err_code": None, "err_text": "reply cut off"},
        )
    relayed = None
    m = _RELAY.match(body)
    if m:
        relayed = m.group(1)
        body = body[m.end():]
    if not body.strip() and not empty_ok:
        raise EdgeLakeError(
            f"EdgeLake node {reply.node.label()} answered {reply.command!r} with 200 OK and an empty reply",
            _empty_advice(destination),
            data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
                  "http_status": 200, "err_code": None, "err_text": "empty reply"},
        )
    return body, relayed


def _empty_advice(destination: str | None) -> str:
    if destination == "network":
        return ("With destination network an empty reply usually means the SQL statement is invalid or no node "
                "holds the table: check the columns with edgelake_get_schema and the table with "
                "edgelake_get_data_nodes, then retry; the node's log has the details.")
    return "The node sent no data. Check the arguments; the node's log has the details."


def _raise(exc: EdgeLakeError) -> Any:
    raise exc
