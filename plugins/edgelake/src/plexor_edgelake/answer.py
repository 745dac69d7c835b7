"""Making a query's answer right where the node alone would not: column kinds, integer LIKE prefixes,
ordering done here, values typed by the schema, time literals in the stored form.

Each function here replaces one thing the node gets wrong (PROTOCOL.md, "Observed later", and the
notes beside ``tests/data/responses-3.txt``) by something proven equivalent for the column kinds
involved, or says why it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["INT64_MAX", "kind", "order_rows", "prefix_ranges", "stored_time", "type_value"]

INT64_MAX = 2**63 - 1
_INTEGER = re.compile(r"^(?:int|integer|bigint|smallint|tinyint|mediumint|int2|int4|int8|serial|bigserial)\b")
_NUMBER = re.compile(r"^(?:float|double|real|decimal|numeric|number)\b")
_TEXT = re.compile(r"^(?:char|varchar|character|text|string|nchar|nvarchar|uuid)\b")
_TIME = re.compile(r"^(?:timestamp|date|time)\b")


def kind(sql_type: str | None) -> str:
    """``integer``, ``number``, ``text``, ``timestamp``, ``boolean`` or ``unknown`` for a declared type."""
    t = (sql_type or "").strip().lower()
    if _INTEGER.match(t):
        return "integer"
    if _NUMBER.match(t):
        return "number"
    if _TEXT.match(t):
        return "text"
    if _TIME.match(t):
        return "timestamp"
    if t.startswith("bool"):
        return "boolean"
    return "unknown"


def column_kind(types: Mapping[str, str] | None, column: str) -> str:
    """The kind of ``column`` (matched without regard to case), ``unknown`` when the schema does not say."""
    if not types:
        return "unknown"
    low = column.lower()
    for name, sql_type in types.items():
        if name.lower() == low:
            return kind(sql_type)
    return "unknown"


def prefix_ranges(column: str, prefix: str) -> str | None:
    """Conditions on an integer ``column`` equal to ``column LIKE 'prefix%'``; None when no integer matches.

    An integer's text starts with ``12`` exactly when it is 12, 120–129, 1200–1299, … (up to the
    largest 64-bit integer); a ``-`` prefix does the same for negative numbers.
    """
    negative = prefix.startswith("-")
    digits = prefix[1:] if negative else prefix
    if negative and not digits:
        return f"{column} < 0"
    if not digits.isdigit():
        return None
    if digits.startswith("0"):
        return f"{column} = 0" if digits == "0" and not negative else None
    low, high, parts = int(digits), int(digits) + 1, []
    while low <= INT64_MAX:
        if high - low == 1:
            parts.append(f"{column} = {-low if negative else low}")
        elif negative:
            parts.append(f"({column} > {-high} and {column} <= {-low})")
        else:
            parts.append(f"({column} >= {low} and {column} < {high})")
        low, high = low * 10, high * 10
    return " or ".join(parts)


def _sort_key(value: Any) -> tuple[int, Any]:
    """SQLite's order of values: NULL, then numbers, then text (compared by code point)."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, str(value))


def order_rows(rows: list[dict[str, Any]], keys: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """``rows`` ordered by ``keys`` (result key, descending), the first key first; stable for ties."""
    out = list(rows)
    for key, descending in reversed(keys):
        out.sort(key=lambda row: _sort_key(row.get(key)), reverse=descending)
    return out


_INT_TEXT = re.compile(r"^-?\d+$")
_NUM_TEXT = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def type_value(text: str, column_kind_: str) -> Any:
    """A table cell typed by its column's kind: numbers for integer and number columns, text otherwise."""
    if column_kind_ == "integer" and _INT_TEXT.match(text):
        return int(text)
    if column_kind_ == "number" and _NUM_TEXT.match(text):
        number = float(text)
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    return text


_LITERAL_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?))?Z?$")


def stored_time(literal: str) -> str | None:
    """A time literal (``2026-11-23 12:00:00``, ``2026-11-23T12:00``, ``2026-11-23``) in the form the
    node stores what it ingests (``2026-11-23T12:00:00Z``; a fraction kept when given), or None."""
    m = _LITERAL_TIME.match(literal)
    if not m:
        return None
    date, clock = m.group(1), m.group(2) or "00:00:00"
    if len(clock) == 5:
        clock += ":00"
    whole, _, fraction = clock.partition(".")
    return f"{date}T{whole}" + (f".{fraction}" if fraction else "") + "Z"


_KEYWORDS = frozenset({"and", "or", "not", "in", "between", "like", "is", "null"})


def local_times(where: str, types: Mapping[str, str] | None, tokens: list[tuple[str, str]]) -> str:
    """``where`` with each time literal compared with a time column in the node's stored form.

    Stored locally, a time is the text ``2026-11-23T12:00:00.000000Z`` and the node compares it as text with
    the literal as written, so ``'2026-11-23 12:00:00'`` (a space, no zone) orders wrong against it.
    """
    out, column, changed = [], "", False
    for kind_, value in tokens:
        if kind_ == "word" and value.lower() not in _KEYWORDS:
            column = value
        if kind_ == "str" and column_kind(types, column) == "timestamp":
            stored = stored_time(value[1:-1])
            if stored is not None and stored != value[1:-1]:
                value, changed = f"'{stored}'", True
        out.append(value)
    if not changed:
        return where
    text = " ".join(out).replace(" , ", ", ").replace("( ", "(").replace(" )", ")")
    return re.sub(r"(?i)\b(?!and\b|or\b)(\w+) \(", r"\1(", text)


def text_in_result(select: str, types: Mapping[str, str] | None) -> bool:
    """Whether a result column may hold text (or its kind is not known): the network loses such rows when the
    query node orders or groups them itself and a value holds an apostrophe."""
    from plexor_edgelake.dialect import _items

    if not types:
        return True
    items = _items(select or "*")
    if "*" in items:
        return any(kind(t) in ("text", "unknown") for t in types.values())
    for item in items:
        body = re.sub(r"(?i)\s+as\s+\w+$", "", item).strip()
        agg = re.match(r"(?i)^(count|avg|sum|min|max)\s*\(\s*(?:distinct\s+)?([\w.*]*)\s*\)$", body)
        if agg and agg.group(1).lower() in ("count", "avg", "sum"):
            continue
        if column_kind(types, agg.group(2) if agg else body) in ("text", "unknown"):
            return True
    return False
