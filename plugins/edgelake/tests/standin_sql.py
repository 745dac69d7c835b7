"""The stand-in node's SQL: the captured node's tables in SQLite, its network-versus-local rules, its reply formats.

Everything here reproduces what ``data/responses-2.txt`` shows the real node
(EdgeLake 1.4.2604) doing, for SQL the capture does not hold verbatim:

* the tables ``mydb.temperature`` (300 rows), ``mydb.humidity`` (240) and
  ``mydb.bulk`` (2,500), rebuilt from the captured rows (``bulk`` exactly: its
  rows follow a rule; the other two keep every captured value and fill the
  rest deterministically);
* with ``destination: network``: ``IN``, ``BETWEEN``, ``LIKE``, ``NOT``, ``<>``
  and a ``''`` escape in WHERE are refused with error 46 (with or without
  ``operaor_msg``, alternating, as the real node varies); ``ORDER BY`` an
  aggregate gives an empty body; arithmetic in the select list comes back as
  the plain column; ``distinct col`` is keyed ``col``; a table page holds 14/15
  (many columns) or 25/23 rows, and a float like ``1000.0`` prints as ``1000``;
* without a destination: ``increments()``, ``period()`` and ``NOW()`` give an
  empty body; an unknown column in WHERE gives an empty body; pages of 25 rows;
* anywhere: arithmetic inside an aggregate (``avg(value * 2)``) is error 46;
* the chunk framing of every format: one chunk per JSON row, one per table
  page, a Statistics chunk; the empty-result forms.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from typing import Any

__all__ = ["COLUMNS", "NODE_TIME", "SqlNode", "seed"]

NODE_TIME = "2026-11-24 00:46:21"  # the capture's Date: NOW() on the stand-in
INSERTED = "2026-11-24 00:29:35.227589"
BULK_INSERTED = "2026-11-24 00:41:25.532840"

COLUMNS = {
    "temperature": [("row_id", "integer"), ("insert_timestamp", "timestamp without time zone"),
                    ("tsd_name", "char(3)"), ("tsd_id", "int"), ("timestamp", "timestamp without time zone"),
                    ("device", "char(4)"), ("value", "decimal")],
}
COLUMNS["bulk"] = COLUMNS["temperature"]
COLUMNS["humidity"] = COLUMNS["temperature"] + [("status", "char(5)")]  # as a real node declares it

# Values the capture shows, by table and row_id; every other row is filled deterministically.
_TEMPERATURE = {1: 18.24, 2: 16.51, 3: 21.51, 4: 15.72, 5: 20.36, 6: 18.66, 7: 15.58}
_HUMIDITY = {1: (37.72, "warn"), 2: (37.15, "ok"), 3: (41.0, "warn"), 4: (67.33, "ok")}


def _stamp(minutes_before: float) -> str:
    import datetime as dt

    base = dt.datetime(2026, 11, 24, 0, 29, 30)
    return (base - dt.timedelta(minutes=minutes_before)).strftime("%Y-%m-%d %H:%M:%S")


def seed(con: sqlite3.Connection) -> None:
    """Create and fill the three tables."""
    import datetime as dt

    rnd = random.Random(2604)
    for table, cols in COLUMNS.items():
        con.execute(f"CREATE TABLE {table} ({', '.join(n + (' REAL' if n == 'value' else '') for n, _ in cols)})")
    devices = ["dev1", "dev2", "dev3"]
    con.executemany("INSERT INTO temperature VALUES (?,?,?,?,?,?,?)", [
        (i, INSERTED, "212", 3, _stamp(10 * (i - 1)), devices[(i - 1) % 3],
         _TEMPERATURE.get(i, round(rnd.uniform(15, 24.93), 2))) for i in range(1, 301)])
    con.executemany("INSERT INTO humidity VALUES (?,?,?,?,?,?,?,?)", [
        (i, INSERTED, "212", 4, _stamp(10 * (i - 1)), ["dev1", "dev2", "dev3"][(i - 1) % 3],
         *_HUMIDITY.get(i, (round(rnd.uniform(30, 70), 2), rnd.choice(["ok", "warn"])))) for i in range(1, 241)])
    first = dt.datetime(2026, 11, 23, 16, 21, 23)
    con.executemany("INSERT INTO bulk VALUES (?,?,?,?,?,?,?)", [
        (i, BULK_INSERTED, "212", 8, (first - dt.timedelta(seconds=30 * (i - 1))).strftime("%Y-%m-%d %H:%M:%S"),
         f"dev{(i - 1) % 5}", 999.0 + i) for i in range(1, 2501)])


_SQL_CMD = re.compile(r'^sql\s+(?P<dbms>\S+)\s+(?:(?P<opts>format\s*=\s*[\w:]+(?:\s+and\s+stat\s*=\s*\w+)?)\s+)?"(?P<sql>.*)"$', re.S)
_NETWORK_REFUSED = re.compile(r"\b(in\s*\(|between\b|like\b|(?<!is )not\b)|<>|''", re.I)  # "is not null" parses
_AGGREGATE = re.compile(r"\b(count|avg|sum|min|max)\s*\(", re.I)
_AGG_ARITHMETIC = re.compile(r"\b(?:count|avg|sum|min|max)\s*\([^()]*(?:[-+/%]|\w\s*\*\s*\w)[^()]*\)", re.I)
_ONLY_NETWORK = re.compile(r"\b(increments|period|now)\s*\(", re.I)


def _error(code: int, text: str, **extra: Any) -> bytes:
    return json.dumps({"method": "get", "node": "127.0.0.1", "err_code": code, "err_text": text, **extra}).encode()


class SqlNode:
    """Answers ``sql`` commands as the captured node does; returns ``(kind, payload)`` for the framer.

    kinds: ``chunks`` (a 200 with these chunks; none: headers only), ``status400`` (the JSON error in
    the status line and, unframed, in the body), ``unframed200`` (a 200 whose chunked body is raw JSON).
    """

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.failures = 0  # alternates whether a network parse failure carries operaor_msg
        self.job = 200

    def answer(self, command: str, network: bool) -> tuple[str, Any, str]:
        m = _SQL_CMD.match(command)
        if not m:
            return "status400", _error(2, "Error Command Structure"), "text/json"
        opts = " ".join((m.group("opts") or "format = json").split())
        fmt = re.search(r"format\s*=\s*([\w:]+)", opts).group(1)  # type: ignore[union-attr]
        ctype = "text" if fmt == "table" else "text/json"
        if fmt not in ("json", "table", "json:list"):
            err = _error(175, "Wrong value assigned to a key")
            return ("chunks", [err], ctype) if network else ("status400", err, ctype)
        dbms, sql = m.group("dbms"), m.group("sql").strip()
        table_m = re.search(r"\bfrom\s+(\w+)", sql, re.I)
        if not re.match(r"(?i)^select\b", sql) or table_m is None:
            if network:
                return "unframed200", _error(155, "Failed to determine destination node"), ctype
            return "status400", _error(16, "SQL Failure", local_msg=f'Error executing SQL:\r\n{sql}\r\nnear "{sql.split()[0]}": syntax error'), ctype
        table = table_m.group(1)
        if dbms != "mydb":
            if network:
                return "chunks", [_error(45, "Failed to load table metadata from blockchain")], ctype
            return "status400", _error(5, "Wrong DBMS Name or DBMS not connected",
                                       local_msg=f"Logical DBMS '{dbms}' not opened on Operator Node"), ctype
        if table not in COLUMNS:
            if network:
                return "chunks", [_error(45, "Failed to load table metadata from blockchain")], ctype
            return "status400", _error(29, "No metadata info",
                                       local_msg=f"Table '{table}' in DBMS 'mydb' not defined (using 'sqlite')"), ctype
        select_part = sql[len("select"):table_m.start()].strip()
        where_m = re.search(r"\bwhere\b(.*?)(?=\bgroup by\b|\border by\b|\blimit\b|$)", sql, re.I | re.S)
        where = where_m.group(1) if where_m else ""
        known = {n for n, _ in COLUMNS[table]}
        for item in _split(select_part):
            inner = _AGG_ARITHMETIC.search(item)
            if inner:  # seen on a real node, with and without a destination
                err = _error(46, "Failed to parse SQL statement",
                             local_msg=f'Non supported SQL: Error parsing SQL stmt near function: "{inner.group(0)}"')
                return ("chunks", [err], ctype) if network else ("status400", err, ctype)
            bare = re.sub(r"(?i)^distinct\s+", "", item)
            if re.fullmatch(r"[A-Za-z_]\w*", bare) and bare not in known:
                err = _error(46, "Failed to parse SQL statement",
                             local_msg=f"Non supported SQL: Column '{bare}' is not recognized in table: mydb.{table}")
                return ("chunks", [err], ctype) if network else ("status400", err, ctype)
        if network:
            refused = _NETWORK_REFUSED.search(where)
            if refused:
                self.failures += 1
                self.job += 1
                extra = {}
                if self.failures % 2:
                    extra["operaor_msg"] = (f"From operator at: 127.0.0.1:32048, relating job[{self.job}] ID: "
                                            f"{self.job + 1}, received error <Failed to parse SQL statement>")
                return "chunks", [_error(46, "Failed to parse SQL statement", **extra)], ctype
            order = re.search(r"\border by\s+(.*?)(?=\blimit\b|$)", sql, re.I | re.S)
            if order and _AGGREGATE.search(order.group(1)):
                return "chunks", [], ctype
        elif _ONLY_NETWORK.search(sql):
            return "chunks", [], ctype
        items = _split(select_part)
        run = sql
        if network and select_part != "*":  # the operator drops arithmetic: it sends the stored column
            run = sql[:len("select")] + " " + ", ".join(
                _network_name(i) if re.match(r"^[A-Za-z_]\w*\s*[-+*/%]", i) else i for i in items
            ) + " " + sql[table_m.start():]
        try:
            cur = self.con.execute(_sqlite(run))
        except sqlite3.Error as exc:
            if not network:
                return "chunks", [], ctype  # an unknown column or a syntax error in WHERE: an empty body
            self.job += 1
            detail = (f"From operator at: 127.0.0.1:32048, relating job[{self.job}] ID: {self.job + 1}, received "
                      f"error <SQL Failure> Details: <SQL error on DBMS 'mydb': Error executing SQL:\r\n{sql}\r\n{exc}>")
            return "chunks", [_error(16, "SQL Failure", operaor_msg=detail)], ctype
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        if re.search(r"(?i)\bincrements\s*\(", sql):  # the time bucket is not a column of the reply
            names, rows = names[1:], [r[1:] for r in rows]
        if network:
            names = [_network_name(n) for n in names]
        elif len(items) == len(names):  # locally the key is the select item as written
            names = [i if i.lower().startswith("distinct ") else n for i, n in zip(items, names, strict=False)]
        nodes = 1 if network else 0
        if fmt == "table":
            return "chunks", _table_chunks(names, rows, nodes, network), ctype
        spaced = "timestamp" in names and (not network or bool(re.search(r"(?i)\border by\b", sql)) or bool(_AGGREGATE.search(select_part)))
        if fmt == "json:list" or "stat = false" in opts:
            return "chunks", _list_chunks(names, rows, spaced), ctype
        return "chunks", _json_chunks(names, rows, nodes, spaced), ctype


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def _network_name(name: str) -> str:
    """Over the network the operator's reply is keyed by the bare column: arithmetic and distinct fall away."""
    bare = re.sub(r"(?i)^distinct\s+", "", name)
    m = re.match(r"^([A-Za-z_]\w*)\s*[-+*/%]", bare)
    return m.group(1) if m else bare


def _sqlite(sql: str) -> str:
    """The node's SQL dialect as SQLite: NOW() - N unit, increments(unit, n, col), period(...) to plain SQL."""
    def now(m: re.Match[str]) -> str:
        n, unit = m.group(1), m.group(2).rstrip("s")
        return f"datetime('{NODE_TIME}', '-{n} {unit}s')"

    sql = re.sub(r"(?i)NOW\(\)\s*-\s*(\d+)\s*(minute|hour|day)s?\b", now, sql)
    sql = re.sub(r"(?i)\bNOW\(\)", f"'{NODE_TIME}'", sql)
    unit_fmt = {"minute": "%Y-%m-%d %H:%M", "hour": "%Y-%m-%d %H", "day": "%Y-%m-%d"}

    def inc(m: re.Match[str]) -> str:
        return f"strftime('{unit_fmt.get(m.group(1).lower(), '%Y-%m-%d %H')}', {m.group(3)}) AS bucket_{m.group(2)}"

    inc_m = re.search(r"(?i)increments\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(\w+)\s*\)", sql)
    if inc_m:
        sql = sql.replace(inc_m.group(0), inc(inc_m))
        tail = re.search(r"(?i)\b(limit\b.*)$", sql)
        body = sql[:tail.start()] if tail else sql
        sql = f"{body} GROUP BY 1 ORDER BY 1 {tail.group(1) if tail else ''}".strip()

    def period(m: re.Match[str]) -> str:
        unit, n, _start, col = (p.strip() for p in m.group(1).split(",")[:4])
        rest = m.group(1).split(",", 4)[4].strip() if m.group(1).count(",") >= 4 else ""
        cond = f"{col} >= datetime('{NODE_TIME}', '-{n} {unit}s')"
        return f"{cond} {rest}" if rest else cond

    return re.sub(r"(?i)period\((.*?)\)(?=\s*(?:limit\b|order\b|$))", period, sql)


def _value_text(value: Any, network: bool) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and network and value.is_integer():
        return str(int(value))
    return str(value)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, str) and bool(re.fullmatch(r"-?\d+(\.\d+)?", value)))


def _page(names: list[str], rows: list[tuple[Any, ...]], network: bool) -> bytes:
    cells = [[_value_text(v, network) for v in r] for r in rows]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    lines = ["", " ".join(n.ljust(w) for n, w in zip(names, widths, strict=False)).rstrip(),
             "".join("-" * w + " " for w in widths)]
    for raw, c in zip(rows, cells, strict=False):
        lines.append("".join((v.rjust(w) if _numeric(x) else v.ljust(w)) + " "
                             for x, v, w in zip(raw, c, widths, strict=False)))
    return ("\n".join(lines) + "\n").encode()


def _stats_block(count: int, nodes: int) -> bytes:
    return (f'\n{{"Statistics":[{{"Count": {count},\n                "Time":"00:00:00",\n'
            f'                "Nodes": {nodes}}}]}}').encode()


def _table_chunks(names: list[str], rows: list[tuple[Any, ...]], nodes: int, network: bool) -> list[bytes]:
    sizes = ([14, 15] if len(names) >= 5 else [25, 23]) if network else [25]
    chunks, at, turn = [], 0, 0
    while at < len(rows):
        size = sizes[turn % len(sizes)]
        chunks.append(_page(names, rows[at:at + size], network))
        at, turn = at + size, turn + 1
    return [*chunks, _stats_block(len(rows), nodes)]


def _row_json(names: list[str], row: tuple[Any, ...], spaced: bool) -> str:
    return json.dumps(dict(zip(names, row, strict=False)), separators=(", ", ": ") if spaced else (",", ":"))


def _json_chunks(names: list[str], rows: list[tuple[Any, ...]], nodes: int, spaced: bool) -> list[bytes]:
    if not rows:
        return [_stats_block(0, nodes)]
    head = '{"Query": [' if spaced else '{"Query":['
    chunks = [(head if i == 0 else ",") + _row_json(names, r, spaced) for i, r in enumerate(rows)]
    chunks.append(f'],\n"Statistics":[{{"Count": {len(rows)},"Time":"00:00:00","Nodes": {nodes}}}]}}')
    return [c.encode() for c in chunks]


def _list_chunks(names: list[str], rows: list[tuple[Any, ...]], spaced: bool) -> list[bytes]:
    if not rows:
        return [b'{"reply" : "Empty data set"}']
    chunks = [("[" if i == 0 else ",\n") + _row_json(names, r, spaced) for i, r in enumerate(rows)]
    return [c.encode() for c in chunks] + [b"]"]
