"""The query tool's extra steps around the request: the table's column types (read once, cached), a
reply cut short by a node error, and the rows made right (ordered here, typed, NULL told from '')."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from plexor_edgelake.answer import column_kind, kind, order_rows, text_in_result, type_value

__all__ = ["TYPES_TTL", "column_types", "finish", "needs_types", "partial_error", "types_command"]

TYPES_TTL = 300.0  # seconds a table's column types are reused before they are read again
_LIKE = re.compile(r"(?i)\blike\b")
_TIME_LITERAL = re.compile(r"'\d{4}-\d{2}-\d{2}")
_AGG_ITEM = re.compile(r"^(count|avg|sum|min|max)\s*\(\s*(?:distinct\s+)?([\w.*]*)\s*\)$", re.I)
_GROUPING = re.compile(r"(?i)\b(?:distinct|count|avg|sum|min|max)\b")
_ALIASED = re.compile(r"^(.*?)\s+as\s+(\w+)$", re.I | re.S)
_ERROR_TAIL = re.compile(r'\{\s*"(?:method|node|err_code|err_text|Result\.set)"\s*:')


def types_command(database: str, table: str) -> str:
    return f"get columns where dbms = {database} and table = {table} and format = json"


def needs_types(plain: Mapping[str, Any], network: bool) -> bool:
    """Whether the statement depends on the column types: locally a time literal; over the network a LIKE,
    an ordering, or a grouping (whether its rows hold text decides how it is sent, or what it warns of)."""
    where = plain.get("where") or ""
    if not network:
        return bool(_TIME_LITERAL.search(where))
    select = plain.get("select") or "*"
    select = ", ".join(select) if isinstance(select, list) else str(select)
    return bool(_LIKE.search(where) or plain.get("order_by") or plain.get("group_by") or _GROUPING.search(select))


def parse_types(body: str) -> dict[str, str] | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in doc.items()} if isinstance(doc, dict) and doc else None


class TypeCache:
    """Column types per (node, database, table), each kept for :data:`TYPES_TTL` seconds."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], tuple[float, dict[str, str] | None]] = {}

    def get(self, key: tuple[str, str, str]) -> tuple[bool, dict[str, str] | None]:
        hit = self._items.get(key)
        if hit is None or time.monotonic() - hit[0] > TYPES_TTL:
            return False, None
        return True, hit[1]

    def put(self, key: tuple[str, str, str], types: dict[str, str] | None) -> None:
        self._items[key] = (time.monotonic(), types)


def partial_error(body: str) -> tuple[str, dict[str, Any] | None]:
    """``(data part, the node's error)`` when a reply ends in an error object after data, else ``(body, None)``.

    Only the reply's last 2,000 characters are searched: an error object is short and comes last.
    """
    for m in _ERROR_TAIL.finditer(body, max(len(body) - 2000, 1)):
        if m.start() == 0 or not body[:m.start()].strip():
            continue
        try:
            err, end = json.JSONDecoder().raw_decode(body, m.start())
        except ValueError:
            continue
        if isinstance(err, dict) and body[end:].strip() == "" and any(
                k in err for k in ("err_code", "err_text", "Result.set")):
            return body[:m.start()], err
    return body, None


def _result_kinds(select: str, types: Mapping[str, str] | None, columns: list[str]) -> dict[str, str]:
    """The kind of each result column: declared, or derived from the aggregate that computes it."""
    from plexor_edgelake.dialect import _items

    exprs: dict[str, str] = {}
    for item in _items(select or "*"):
        m = _ALIASED.match(item)
        body, alias = (m.group(1).strip(), m.group(2)) if m else (item.strip(), item.strip())
        exprs[alias.lower()] = body
    out = {}
    for name in columns:
        col_kind = column_kind(types, name)
        if col_kind == "unknown":
            body = exprs.get(name.lower(), name)
            agg = _AGG_ITEM.match(body)
            if agg and agg.group(1).lower() == "count":
                col_kind = "integer"
            elif agg and agg.group(1).lower() == "avg":
                col_kind = "number"
            elif agg:
                inner = column_kind(types, agg.group(2))
                col_kind = "number" if inner == "integer" and agg.group(1).lower() == "sum" else inner
            else:
                col_kind = column_kind(types, body)
        out[name] = col_kind
    return out


def type_table_rows(rows: list[dict[str, Any]], kinds: Mapping[str, str]) -> list[str]:
    """Type table cells by column kind in place; the warnings to give (unknown kinds are typed by looks)."""
    from plexor_edgelake.parsers import _number

    guessed = sorted({k for k, v in kinds.items() if v == "unknown"})
    for row in rows:
        for key, value in row.items():
            if isinstance(value, str):
                k = kinds.get(key, "unknown")
                row[key] = _number(value) if k == "unknown" else type_value(value, k)
    if not guessed:
        return []
    return [f"The type of {', '.join(guessed)} is not known to the plugin (edgelake_get_schema could not read it): "
            "its table values are numbers when they look like numbers, text otherwise."]


def finish(data: dict[str, Any], sql: Any, plain: Mapping[str, Any], types: Mapping[str, str] | None,
           table_format: bool, network: bool) -> list[str]:
    """Make the rows right in place: typed, NULLs, ordered and limited here when the network cannot.
    Returns warnings for what the node left undecidable."""
    rows = data.get("rows")
    if not isinstance(rows, list):
        return []
    warnings: list[str] = []
    columns = list(data.get("columns") or (rows[0].keys() if rows and isinstance(rows[0], dict) else []))
    blank = "" if not network else None  # how the node writes NULL in JSON: "" locally, null over the network
    kinds: Mapping[str, str] = {}  # a JSON answer with no NULL-like value needs no kinds (costly to derive per call)
    if table_format or any(blank in row.values() for row in rows if isinstance(row, dict)):
        kinds = _result_kinds(plain.get("select") or "*", types, columns)
    if table_format:
        warnings += type_table_rows(rows, kinds)
        warnings += _table_nulls(rows, kinds)
    elif not network:
        warnings += _local_json_nulls(rows, kinds)
    else:
        warnings += _network_json_nulls(rows, kinds)
    order = getattr(sql, "order", None)
    if order:
        rows = order_rows(rows, order)
        limit = getattr(sql, "limit", None)
        data["rows"] = rows = rows[:limit] if limit else rows
    for column in getattr(sql, "hidden", None) or []:
        for row in rows:
            row.pop(column, None)
    if network and _grouped(plain) and text_in_result(str(plain.get("select") or "*"), types):
        warnings.append(
            "Over the network the node groups these rows in a table of its own and loses every row whose text "
            "holds an apostrophe (') and the rows after it, without an error, and it puts NULL and the empty text "
            "in one group. If a text column here may hold an apostrophe or NULLs, this answer may be missing or "
            "merging groups: run the query with destination local on each node that holds the table "
            "(edgelake_get_data_nodes names them), or leave the text column out.")
    return warnings


def _grouped(plain: Mapping[str, Any]) -> bool:
    select = plain.get("select") or "*"
    select = ", ".join(select) if isinstance(select, list) else str(select)
    return bool(plain.get("group_by") or _GROUPING.search(select))


def _network_json_nulls(rows: list[dict[str, Any]], kinds: Mapping[str, str]) -> list[str]:
    """Over the network the node writes NULL and the empty text alike as null: in a text column, ambiguous."""
    ambiguous = sorted({k for row in rows for k, v in row.items() if v is None and kinds.get(k) in ("text", "unknown")})
    if not ambiguous:
        return []
    return [f"Over the network the node writes NULL and the empty text alike as null, so the null values of "
            f"{', '.join(ambiguous)} may be either. Tell them apart with a where condition ({ambiguous[0]} = '' or "
            f"{ambiguous[0]} is null)."]


def _local_json_nulls(rows: list[dict[str, Any]], kinds: Mapping[str, str]) -> list[str]:
    """Locally the node writes NULL as "": a number or time column cannot hold "", so that is NULL; a text
    column can, so there the two are not told apart and the result says so."""
    ambiguous: set[str] = set()
    for row in rows:
        for key, value in row.items():
            if value == "":
                if kinds.get(key) in ("integer", "number", "timestamp", "boolean"):
                    row[key] = None
                else:
                    ambiguous.add(key)
    if not ambiguous:
        return []
    return [f"Run on the node itself, the node writes NULL and the empty text alike as \"\", so the \"\" values "
            f"of {', '.join(sorted(ambiguous))} may be NULL or empty text. Ask with destination network (NULL "
            "comes back as null), or add a where condition such as col is null to tell them apart."]


def _table_nulls(rows: list[dict[str, Any]], kinds: Mapping[str, str]) -> list[str]:
    """In a table the node prints NULL and the empty text alike as ``null``: null here; ambiguous for text."""
    ambiguous: set[str] = set()
    for row in rows:
        for key, value in row.items():
            if value == "null":
                row[key] = None
                if kinds.get(key) in ("text", "unknown"):
                    ambiguous.add(key)
    if not ambiguous:
        return []
    return [f"The node's table prints NULL, the empty text and the text 'null' alike, so the null values of "
            f"{', '.join(sorted(ambiguous))} may be any of them. Tell them apart with a where condition "
            f"({sorted(ambiguous)[0]} = '' or {sorted(ambiguous)[0]} is null)."]


__all__ += ["TypeCache", "kind", "parse_types"]


def _count_rows(data_part: str, table_format: bool) -> int:
    if table_format:
        lines = [ln for ln in data_part.splitlines() if ln.strip()]
        dashes = sum(1 for ln in lines if set(ln.strip()) <= {"-", " ", "|"})
        return len(lines) - 2 * dashes  # each page: a header and a line of dashes
    return data_part.count("{") - data_part.count('{"Query"') - data_part.count('{"Statistics"')


def partial_failure(reply: Any, data_part: str, err: dict[str, Any], table_format: bool) -> BaseException:
    """The error for a reply that sent part of the answer and then the node's error: never a complete answer."""
    from plexor_edgelake.nodes import EdgeLakeError
    from plexor_edgelake.replies import ERROR_ADVICE

    code = err.get("err_code")
    text = str(err.get("err_text") or err.get("Result.set") or "no error text")
    local = err.get("local_msg")
    operator = err.get("operaor_msg") or err.get("operator_msg")  # the node spells it operaor_msg
    received = max(_count_rows(data_part, table_format), 0)
    message = (f"EdgeLake node {reply.node.label()} answered {reply.command!r} with {received} rows and then "
               f"error {code if code is not None else '?'}: {text}" + (f" ({local})" if local else "")
               + (f"; the operator says: {' '.join(str(operator).split())}" if operator else "")
               + ". The answer is incomplete, so no rows are returned as if it were whole")
    if code == 26 or "timeout" in text.lower():
        code = 26
    advice = ERROR_ADVICE.get(code, "The node failed part way through the answer; retry, and check the node's log "
                                    "for the cause.") if isinstance(code, int) else "Retry; check the node's log."
    return EdgeLakeError(message, advice, data={
        "node": reply.node.name, "address": reply.node.address, "command": reply.command, "http_status": reply.status,
        "err_code": code, "err_text": text, "local_msg": local, "operator_msg": operator, "truncated": True, "rows_received": received,
        "reported_in": "after part of the answer"})


def invalid_network_json(reply: Any, body: str, why: str) -> BaseException:
    """A network reply that is not JSON: the node does not escape a double quote held in a text value."""
    from plexor_edgelake.nodes import EdgeLakeError

    quote = '\\"' not in body and re.search(r'[^:,{\[]\s*"[^,:}\]]', body) is not None
    cause = ("over the network the node writes a double quote held in a text value without escaping it, which "
             "breaks the JSON" if quote else "over the network the node's JSON came back malformed")
    return EdgeLakeError(
        f"EdgeLake node {reply.node.label()} answered {reply.command!r} with rows that are not valid JSON ({why}): "
        f"{cause}",
        "Ask the same query with destination local (the node itself escapes those values) on the node that holds "
        "the data (edgelake_get_data_nodes names it), or leave the column holding the double quotes out of select.",
        data={"node": reply.node.name, "address": reply.node.address, "command": reply.command,
              "http_status": reply.status, "err_code": None, "err_text": "invalid JSON", "reply_start": body[:200]})


async def column_types(engine: Any, node: Any, plain: Mapping[str, Any]) -> dict[str, str] | None:
    """The declared column types of the query's table on ``node`` (cached), None when it cannot say."""
    from plexor_edgelake.nodes import EdgeLakeError
    from plexor_edgelake.replies import check

    key = (node.name, str(plain.get("database")), str(plain.get("table")))
    hit, types = engine.types.get(key)  # type: tuple[bool, dict[str, str] | None]
    if hit:
        return types
    try:
        reply = await engine.client.send(node, "GET", types_command(key[1], key[2]), timeout=engine.limits.timeout)
        types = parse_types(check(reply)[0])
    except EdgeLakeError:
        types = None  # not known on this node (a query node need not hold the table): said where it matters
    engine.types.put(key, types)
    return types
