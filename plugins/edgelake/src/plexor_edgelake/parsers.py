"""Response parsers: what a tool declares in YAML under ``parser`` to turn a node's reply into data.

Kinds:

``json_path``
    Extract values from a JSON reply with a small JSONPath subset (``$``,
    ``.key``, ``['key']``, ``[0]``, ``[*]``, ``.*`` and filters
    ``[?(@.a.b == '{argument}' && @.c != 'x')]``), then optionally ``unique``,
    ``sort``, turn an object into ``entries`` rows, and name the result ``key``.
``table``
    The node's text tables (columns separated by ``|``, or aligned under a
    dashed line) as rows of ``{column: value}``.
``query``
    A ``sql`` reply in any of its formats (``{"Query": [...], "Statistics": [...]}``,
    a bare JSON list, or a text table followed by a Statistics block).
``json``
    The whole JSON reply under ``key``.
``text``
    The reply as text (pass-through).
``auto``
    JSON when the reply is JSON, a table when it looks like one, text otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plexor_edgelake.jsonpath import PathError, compile_path, compiled

__all__ = ["KINDS", "ParseError", "Parsed", "compile_path", "parse_reply", "parse_table", "validate_parser"]


ParseError = PathError  # the reply does not have the shape the parser expects, or a path is outside the subset


@dataclass
class Parsed:
    """A parsed reply: ``data`` for structuredContent and, optionally, a human ``text``."""

    data: dict[str, Any]
    text: str | None = None
    list_key: str | None = None  # the key holding the rows (for the row cap)


# --------------------------------------------------------------------------------------------------
# Text tables

_STATS = re.compile(r"\{\s*\"Statistics\"")


def parse_table(text: str, *, fill_down: list[str] | None = None, numbers: bool = False) -> dict[str, Any]:
    """Parse one of the node's text tables into ``{"title", "columns", "rows"}``.

    The line of dashes fixes the columns: segments between ``|`` (the
    ``get ...`` tables) or runs of dashes separated by spaces (``format =
    table`` query output). The header line above it is cut at the same
    places; lines above the header form the title.
    """
    lines = [ln.rstrip("\r") for ln in text.replace("\r\n", "\n").split("\n")]
    dash_at = next((i for i, ln in enumerate(lines) if ln.strip() and set(ln.strip()) <= {"-", "|", " "}
                    and "-" in ln), None)
    if dash_at is None or dash_at == 0:
        raise ParseError("no table found (no header above a line of dashes)")
    dashes = lines[dash_at]
    header = lines[dash_at - 1]
    title = " ".join(ln.strip() for ln in lines[:dash_at - 1] if ln.strip()) or None
    piped = "|" in dashes
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
    columns = [header[a:(b if i < len(spans) - 1 else None)].strip() for i, (a, b) in enumerate(spans)]
    rows: list[dict[str, Any]] = []
    rest = lines[dash_at + 1:]
    i = 0
    while i < len(rest):
        ln = rest[i]
        i += 1
        if not ln.strip():
            # The node prints a long result in pages, each with its header and dashes again (every 25
            # rows locally, irregularly over the network): skip a repeated header, stop at anything else.
            j = i
            while j < len(rest) and not rest[j].strip():
                j += 1
            if (j + 1 < len(rest) and rest[j].split() == header.split()
                    and set(rest[j + 1].strip()) <= {"-", "|", " "} and "-" in rest[j + 1]):
                dashes = rest[j + 1]
                spans = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
                i = j + 2
                continue
            if rows or not piped:
                break
            continue
        if piped:
            cells = ln.split("|")
            if cells and cells[-1].strip() == "":
                cells = cells[:-1]
            cells = [c.strip() for c in cells]
        else:
            cells = [ln[a:(b if i < len(spans) - 1 else None)].strip() for i, (a, b) in enumerate(spans)]
        cells += [""] * (len(columns) - len(cells))
        row = dict(zip(columns, cells[: len(columns)], strict=False))
        rows.append(row)
    _fill_and_convert(rows, fill_down or [], numbers)
    return {"title": title, "columns": columns, "rows": rows}


def _fill_and_convert(rows: list[dict[str, Any]], fill_down: list[str], numbers: bool) -> None:
    """Blank cells of the ``fill_down`` columns take the value above; with ``numbers``, numeric text becomes numbers."""
    for col in fill_down:
        last = ""
        for row in rows:
            if row.get(col, "") == "":
                row[col] = last
            else:
                last = row[col]
    if numbers:
        for row in rows:
            for k, v in row.items():
                row[k] = _number(v)


def _number(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*(?:[eE][+-]?\d+)?", text):
        return float(text)
    return text


# --------------------------------------------------------------------------------------------------
# Declared parsers

KINDS = {
    "json_path": {"path", "unique", "sort", "key", "entries", "empty", "exists"},
    "table": {"key", "fill_down", "numbers", "empty"},
    "query": {"empty"},
    "json": {"key", "empty"},
    "text": {"key"},
    "auto": {"key", "empty"},
    "per_node": {"key", "empty"},
}


def validate_parser(spec: Any, params: set[str]) -> list[str]:
    """Problems with a ``parser`` declaration (empty when it is valid)."""
    if spec is None:
        return []
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        return ["must be a mapping such as {kind: json_path, path: '$[*]'}"]
    kind = spec.get("kind")
    if kind not in KINDS:
        return [f"kind {kind!r} is not one of {', '.join(sorted(KINDS))}"]
    problems = []
    unknown = set(spec) - KINDS[kind] - {"kind"}
    if unknown:
        problems.append(f"{kind} does not take {', '.join(sorted(unknown))} (it takes {', '.join(sorted(KINDS[kind]))})")
    if kind == "json_path":
        try:
            compiled = compile_path(spec.get("path", "$"))
            for arg in compiled.arguments():
                if arg not in params:
                    problems.append(f"path {compiled.text!r} uses {{{arg}}}, which is not a parameter of the tool")
        except ParseError as exc:
            problems.append(str(exc))
        entries = spec.get("entries")
        if entries is not None and not (isinstance(entries, dict) and set(entries) == {"key", "value"}
                                        and all(isinstance(v, str) for v in entries.values())):
            problems.append("entries must be {key: <column name>, value: <column name>}")
    for flag in ("unique", "sort", "numbers", "exists"):
        if flag in spec and not isinstance(spec[flag], bool):
            problems.append(f"{flag} must be true or false")
    if "key" in spec and not (isinstance(spec["key"], str) and re.match(r"^[A-Za-z_]\w*$", spec["key"])):
        problems.append("key must be a plain name such as 'rows'")
    if "fill_down" in spec and not (isinstance(spec["fill_down"], list) and all(isinstance(c, str) for c in spec["fill_down"])):
        problems.append("fill_down must be a list of column names")
    empty = spec.get("empty")
    if empty is not None and not (isinstance(empty, dict) and isinstance(empty.get("message"), str)
                                  and set(empty) <= {"message", "guidance"}):
        problems.append("empty must be {message: '...', guidance: '...'}")
    return problems


def _json(body: str) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ParseError(f"the reply is not JSON ({exc.msg} at position {exc.pos})") from None


def parse_reply(spec: Mapping[str, Any] | str | None, body: str, args: Mapping[str, Any],
                relayed: str | None = None, typed_later: bool = False) -> Parsed:
    """Apply a validated parser declaration to a reply body (``relayed``: the node a prefix named;
    ``typed_later``: a query's table cells stay text, to be typed by the table's schema)."""
    if spec is None:
        spec = {"kind": "auto"}
    if isinstance(spec, str):
        spec = {"kind": spec}
    kind = spec["kind"]
    key = spec.get("key")
    if kind == "text":
        return Parsed({key or "text": body}, text=body)
    if kind == "json":
        return Parsed({key or "data": _json(body)}, list_key=key or "data")
    if kind == "auto":
        stripped = body.strip()
        if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null") or re.fullmatch(r"-?\d+(\.\d+)?", stripped):
            try:
                return Parsed({key or "data": json.loads(stripped)}, list_key=key or "data")
            except ValueError:
                pass
        try:
            table = parse_table(body)
            return Parsed({key or "rows": table["rows"], "columns": table["columns"], "title": table["title"]},
                          list_key=key or "rows")
        except ParseError:
            return Parsed({key or "text": stripped}, text=stripped)
    if kind == "table":
        table = parse_table(body, fill_down=spec.get("fill_down"), numbers=bool(spec.get("numbers")))
        return Parsed({key or "rows": table["rows"], "columns": table["columns"], "title": table["title"]},
                      list_key=key or "rows")
    if kind == "query":
        return parse_query(body, numbers=not typed_later)
    if kind == "per_node":
        return parse_per_node(body, relayed, key or "nodes")
    if kind == "json_path":
        doc = _json(body)
        values = compiled(spec.get("path", "$")).evaluate(doc, args)
        entries = spec.get("entries")
        if entries:
            rows: list[Any] = []
            for value in values:
                if isinstance(value, dict):
                    rows.extend({entries["key"]: k, entries["value"]: v} for k, v in value.items())
            values = rows
        if spec.get("unique"):
            seen: list[Any] = []
            for v in values:
                if v not in seen:
                    seen.append(v)
            values = seen
        if spec.get("exists"):  # whether the path found anything, as true/false
            return Parsed({key or "exists": bool(values)})
        if spec.get("sort"):
            values = sorted(values, key=lambda v: json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)
        if not spec.get("path", "$").replace(" ", "") == "$" or entries:
            return Parsed({key or "values": values}, list_key=key or "values")
        only = values[0] if values else None
        return Parsed({key or "data": only}, list_key=(key or "data") if isinstance(only, list) else None)
    raise ParseError(f"unknown parser kind {kind!r}")


def parse_query(body: str, numbers: bool = True) -> Parsed:
    """A ``sql`` reply: JSON with Query/Statistics, a bare JSON list, or a text table with Statistics."""
    stripped = body.strip()
    if stripped.startswith("{") or stripped.startswith("["):
        doc = _json(stripped)
        if isinstance(doc, list):
            return Parsed({"rows": doc, "statistics": None}, list_key="rows")
        if isinstance(doc, dict) and doc.get("reply") == "Empty data set":
            return Parsed({"rows": [], "statistics": None}, list_key="rows")
        if isinstance(doc, dict) and "Query" in doc:
            stats = doc.get("Statistics")
            return Parsed({"rows": doc["Query"], "statistics": _stats(stats)}, list_key="rows")
        if isinstance(doc, dict) and set(doc) == {"Statistics"}:
            return Parsed({"rows": [], "statistics": _stats(doc["Statistics"])}, list_key="rows")
        raise ParseError("the reply is JSON but has no 'Query' rows")
    m = _STATS.search(body)
    table_text, stats = (body[:m.start()], _stats(_json(body[m.start():]).get("Statistics"))) if m else (body, None)
    if not table_text.strip():
        return Parsed({"rows": [], "statistics": stats}, text="(no rows)", list_key="rows")
    table = parse_table(table_text, numbers=numbers)
    return Parsed({"rows": table["rows"], "columns": table["columns"], "statistics": stats},
                  text=table_text.strip("\r\n"), list_key="rows")


_FROM = re.compile(r"\[From Node ([^\]]+)\]")


def parse_per_node(body: str, relayed: str | None, key: str) -> Parsed:
    """Replies gathered from several nodes, as rows ``{"node": "IP:Port", ...}``.

    The node wraps a JSON object from node X as ``{"X" : {...}}`` and prefixes
    anything else with ``[From Node X]``; a reply may hold several of either.
    """
    rows: list[dict[str, Any]] = []
    text = (f"[From Node {relayed}] " if relayed else "") + body
    pieces = _FROM.split(text)
    if len(pieces) > 1:
        for name, part in zip(pieces[1::2], pieces[2::2], strict=False):
            rows.append({"node": name, **_node_value(part.strip())})
        return Parsed({key: rows}, list_key=key)
    stripped = body.strip()
    decoder = json.JSONDecoder()
    at = 0
    while at < len(stripped):
        try:
            doc, end = decoder.raw_decode(stripped, at)
        except ValueError:
            break
        if isinstance(doc, dict) and doc and all(re.fullmatch(r"[\w.-]+:\d+", k) for k in doc):
            rows.extend({"node": k, **_node_value(v)} for k, v in doc.items())
        else:
            rows.append({"node": None, **_node_value(doc)})
        at = end
        while at < len(stripped) and stripped[at] in " \r\n\t,":
            at += 1
    if not rows and stripped:
        rows.append({"node": None, **_node_value(stripped)})
    return Parsed({key: rows}, list_key=key)


def _node_value(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            try:
                table = parse_table(value)
                return {"rows": table["rows"]}
            except ParseError:
                return {"text": value}
    if isinstance(value, dict):  # the node's own "node" field (a host name) must not hide which node answered
        return {("host" if k == "node" else k): v for k, v in value.items()}
    return {"value": value}


def _stats(stats: Any) -> Any:
    if isinstance(stats, list) and len(stats) == 1 and isinstance(stats[0], dict):
        return {k.lower(): v for k, v in stats[0].items()}
    return stats
