"""Judging a node's reply: the good ones become text to parse, every bad one a clear error.

The node reports errors in several malformed ways besides a plain 4xx with a
JSON body (see PROTOCOL.md, "Observed later"); each becomes an
:class:`EdgeLakeError` naming the node, the command, the error code and text,
the node's own detail (``local_msg``, or ``operaor_msg`` — so spelled by the
node — from the operator that ran a network query), and what to try:

* ``HTTP/1.1 400 {"err_code": 29, ...}`` — the error JSON in the status line's
  reason phrase, ``Transfer-Encoding: chunked``, and the same JSON unframed;
* ``200 OK`` whose body is a JSON error object, chunk-framed (45, 46, 16) or
  unframed (155, 20);
* ``200 OK`` with an empty body (SQL the chosen path cannot run).
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
       "command template against the EdgeLake documentation (edgelake_help_command shows a command's usage).",
    5: "The node has no such database connected. Check the name with edgelake_list_databases; a database "
       "the network knows may live on other nodes: query it with destination network.",
    11: "The command has unbalanced brackets. Check the parentheses and square brackets in the arguments "
        "(a where condition, a bring clause, a list of policy types).",
    16: "The SQL failed where it ran (the node's detail above names the statement and the reason, such as an "
        "unknown column). Check the column names with edgelake_get_schema.",
    20: "The destination list is not a list of distinct IP:Port addresses. Give each node once, as the node's "
        "TCP address (edgelake_get_nodes lists them).",
    21: "The node has no working TCP server to send the query to the operators with: its TCP port could not be "
        "bound when it started (another process held the port, often the node's own previous run after a restart). "
        "edgelake_list_connections shows the TCP address; edgelake_node_status and the node's 'get processes' "
        "show TCP not running. Free the port and restart the node; until then ask with destination local.",
    26: "The node stopped waiting for the operators after its REST timeout ('run rest server ... timeout = N', 20 s "
        "by default): an operator holding the table answered too slowly or did not answer at all (one that is down "
        "or unreachable keeps every network query waiting this long; edgelake_get_data_nodes lists the operators "
        "of the table, and a query with destination local on each shows which one is missing). Narrow the query "
        "(a time range, a smaller limit, group_by with aggregates) or raise that timeout on the node.",
    29: "The node has no metadata for that database or table. Check the names with edgelake_list_databases "
        "and edgelake_list_tables; to reach the nodes that hold the table, query with destination network.",
    45: "The table's metadata could not be loaded from the blockchain: the database or table name is wrong, "
        "or the table was just created. Check the names with edgelake_list_databases / edgelake_list_tables; "
        "a new table appears after the node runs 'blockchain reload metadata'.",
    46: "The node could not parse the SQL statement. Over the network the operators accept only simple "
        "conditions: =, !=, <, <=, >, >=, and, or, parentheses; write IN as equalities joined by or, BETWEEN as "
        ">= and <=, and leave out LIKE, NOT and doubled quotes. Check column names with edgelake_get_schema.",
    50: "The database is declared but not connected on the node that ran the query. Connect it on that node "
        "(connect dbms ...) or query a node that holds it (edgelake_get_data_nodes).",
    77: "The operator stopped sending rows at the node's data volume limit for one query ('set query mode using "
        "max_volume = N' on the node). Narrow the query (where, a smaller limit, aggregates) or raise that limit.",
    82: "The table has no partition declaration, so it has no partitions to describe; ask for columns or "
        "exists instead.",
    132: "The node has no such table declared in its metadata. Check the database and table names with "
         "edgelake_list_tables; a table on other nodes shows in edgelake_get_data_nodes.",
    155: "The node could not determine which node should answer: the SQL was not understood, the table's "
         "metadata is not loaded yet, or the command cannot be sent to the network. Check the SQL and the "
         "names; if the table is new, let the node run 'blockchain reload metadata' and retry.",
    156: "The command was sent with the wrong HTTP method. For a tool of your own, set method: POST "
         "(or GET) in its YAML; only sql, get and blockchain get/read may use GET.",
    175: "A value in the command is not accepted (for example format must be json or table). "
         "Check the arguments against the tool's description.",
    181: "The node could not parse a condition. Check the where condition: key = value pairs joined by and/or, "
         "values with spaces in double quotes.",
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


_DETAILS = re.compile(r"Details:\s*<(.*)>\s*$", re.S)


def _operator_detail(msg: str) -> str:
    """The useful part of the node's ``operaor_msg``: the ``Details: <...>`` when present, else all of it."""
    m = _DETAILS.search(msg)
    return " ".join((m.group(1) if m else msg).split())


def _node_error(reply: Reply, err: dict[str, Any], how: str) -> EdgeLakeError:
    code = err.get("err_code")
    text = str(err.get("err_text") or "no error text")
    local = err.get("local_msg")
    operator = err.get("operaor_msg") or err.get("operator_msg")  # the node spells it operaor_msg
    detail = _operator_detail(str(operator)) if operator else None
    message = (f"EdgeLake node {reply.node.label()} answered {reply.command!r} with error "
               f"{code if code is not None else '?'}: {text}" + (f" ({local})" if local else "")
               + (f"; the operator says: {detail}" if detail else ""))
    advice = ERROR_ADVICE.get(code, _DEFAULT_ADVICE) if isinstance(code, int) else _DEFAULT_ADVICE
    if code == 46 and local and "Column" in str(local):  # the node names the column: lead with that
        advice = ("The node does not know a column the statement names (see its message above). Check the column "
                  "names with edgelake_get_schema.")
    return EdgeLakeError(message, advice, data={
        "node": reply.node.name, "address": reply.node.address, "command": reply.command, "method": reply.method,
        "http_status": reply.status, "err_code": code, "err_text": text, "local_msg": local,
        "operator_msg": operator, "reported_in": how,
    })


def check(reply: Reply, *, empty_ok: bool = False, destination: str | None = None) -> tuple[str, str | None]:
    """Return ``(body text, relayed_from)`` for a good reply; raise :class:`EdgeLakeError` otherwise."""
    body = reply.text()
    if reply.status != 200:
        err = _error_object(reply.reason) or _error_object(body)
        if err is not None:
            raise _node_error(reply, err, "status line" if _error_object(reply.reason) else "body")
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
    if "err_" in body[-2000:] or "Result.set" in body[-2000:]:
        from plexor_edgelake.queries import partial_error, partial_failure

        data, failure = partial_error(body)
        if failure is not None:  # part of the answer, then the node's error: never passed on as a whole answer
            raise partial_failure(reply, data, failure, "format = table" in reply.command)
    if not body.strip() and not empty_ok:
        raise EdgeLakeError(
            f"EdgeLake node {reply.node.label()} answered {reply.command!r} with 200 OK and an empty reply",
            _empty_advice(destination),
            data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
                  "http_status": 200, "err_code": None, "err_text": "empty reply"},
        )
    return body, relayed


def _empty_advice(destination: str | None) -> str:
    if destination:
        return ("Over the network the node answers nothing at all, without an error, for SQL its operators cannot "
                "run: ordering by a column that is not selected or by the original name of an aliased column, "
                "ordering by an aggregate, an unknown column in the where clause, or no node holding the table. "
                "Order by a selected column or alias (edgelake_query does this for you), check the table with "
                "edgelake_get_data_nodes and the columns with edgelake_get_schema.")
    return ("Run on the node itself, the node answers nothing for increments(), period() and NOW() (they work "
            "only with destination network) and for an unknown column or a syntax error in the where clause. "
            "Check the columns with edgelake_get_schema; the node's log has the details.")

