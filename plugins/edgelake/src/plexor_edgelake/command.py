"""Turning validated arguments into EdgeLake command text, safely.

EdgeLake commands travel in an HTTP header and are parsed by the node's own
command language, and SQL travels inside that command between double quotes.
So every argument is checked before it is placed into a command:

* identifiers (database, table, column) must be plain identifiers;
* values are quoted and may not contain the quote or control characters;
* free-form expressions (a SQL ``where``, a policy ``where``, a ``bring``)
  are tokenised: only the tokens of their small grammar are accepted, so they
  cannot close the statement (``"``), end it (``;``), comment the rest out
  (``--``, ``/*``), chain a second command (``&``, ``|``) or open a subquery
  (``select``, ``union`` ...).

Nothing here talks to a node; it is pure and unit-tested.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from plexor import InvalidArgument
from plexor_edgelake.template import Template, TemplateError, render_command

__all__ = [
    "Template",
    "TemplateError",
    "assemble_select",
    "bring_clause",
    "edgelake_condition",
    "identifier",
    "identifier_list",
    "order_by",
    "quoted_value",
    "render_command",
    "select_list",
    "select_statement",
    "sql_condition",
]

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Words that would turn a condition or a select list into another statement or a subquery.
SQL_FORBIDDEN = frozenset(
    """select insert update delete drop create alter attach detach pragma union intersect except replace
    vacuum grant revoke truncate exec execute into from where limit offset order group having with returning
    join set values begin commit rollback declare copy load_extension reindex analyze explain""".split()
)
# Inside a policy condition these would open a second clause of the same command.
EDGELAKE_FORBIDDEN = frozenset({"where", "bring"})

_WHAT_TO_DO_SQL = (
    "Write a plain condition such as \"device = 'dev1' and value > 10\": column names, numbers, "
    "'single-quoted' strings, comparison operators, and/or/not, in, like, between, is null and "
    "function calls; no double quotes, semicolons, comments or subqueries."
)


def _reject(name: str, value: Any, why: str, guidance: str) -> InvalidArgument:
    shown = value if isinstance(value, str) and len(value) <= 80 else (str(value)[:77] + "...")
    return InvalidArgument(f"argument {name!r} = {shown!r} was refused: {why}", guidance, data={"argument": name})


def _no_control(name: str, value: str) -> None:
    m = _CONTROL.search(value)
    if m:
        raise _reject(name, value, f"it contains the control character {m.group()!r} (position {m.start()})",
                      "Put it on one line without tabs, line breaks or other control characters.")


def identifier(name: str, value: Any, *, wildcard: bool = False) -> str:
    """A plain identifier (letters, digits, ``_``; not starting with a digit), or ``*`` when allowed."""
    if not isinstance(value, str):
        raise _reject(name, value, "it must be a string", "Pass a name such as 'mydb'.")
    if wildcard and value == "*":
        return value
    if not IDENT.match(value):
        extra = " or '*' for all" if wildcard else ""
        raise _reject(
            name, value, "it is not a plain identifier",
            f"Use letters, digits and '_' only, starting with a letter or '_', at most 64 characters{extra}.",
        )
    return value


def identifier_list(name: str, value: Any) -> str:
    """Comma-joined identifiers (for ``group by``)."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value or [])
    if not items:
        raise _reject(name, value, "it is empty", "Give at least one column name, or leave the argument out.")
    return ", ".join(identifier(f"{name}[{i}]", v) for i, v in enumerate(items))


def quoted_value(name: str, value: Any) -> str:
    """A value placed between double quotes; it may not contain a double quote itself."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _reject(name, value, "it must be a string or a number", "Pass a plain value.")
    text = str(value)
    _no_control(name, text)
    if '"' in text:
        raise _reject(name, text, "it contains a double quote, which would close the quoted value",
                      "Leave the double quote out; EdgeLake has no way to escape it inside a value.")
    return f'"{text}"'


# --------------------------------------------------------------------------------------------------
# SQL expressions

_SQL_TOKEN = re.compile(
    r"""(?P<ws>[ \t]+)
      |(?P<str>'(?:[^'\\"]|'')*')
      |(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
      |(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)
      |(?P<op><=|>=|<>|!=|\|\||[=<>+\-*/%(),])""",
    re.X,
)

_BAD_CHAR_HINTS = {
    '"': "a double quote would close the SQL statement inside the EdgeLake command",
    ";": "a semicolon would end the statement and start another",
    "`": "backticks are not accepted",
    "\\": "backslashes are not accepted",
    "'": "a single quote opens a string that is never closed",
    "&": "'&' could chain a second EdgeLake command",
    "|": "a lone '|' could chain a second command",
    "!": "'!' is only accepted as part of '!='",
    "$": "'$' would expand a node variable",
    "#": "'#' starts a comment",
    "{": "braces are not accepted",
    "}": "braces are not accepted",
}


_WHAT_TO_DO_QUOTE = ("Match the value without its double quote: a range around it (name >= 'say ' and name < "
                     "'say!'), or, on the node itself (destination local), LIKE with _ for the quote "
                     "(name like 'say _hi_').")


def _sql_tokens(name: str, text: str) -> list[tuple[str, str, int]]:
    _no_control(name, text)
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _SQL_TOKEN.match(text, pos)
        if not m:
            ch = text[pos]
            if ch == "'" and re.match(r"'(?:[^']|'')*\"", text[pos:]):
                raise _reject(name, text, f"the value starting at position {pos} holds a double quote: the SQL "
                                          "travels inside double quotes in the EdgeLake command and the node ends it "
                                          "there (over the network it answers 0 rows, on the node itself nothing "
                                          "at all), and EdgeLake has no escape for it",
                              _WHAT_TO_DO_QUOTE)
            why = _BAD_CHAR_HINTS.get(ch, f"the character {ch!r} is not part of a condition")
            raise _reject(name, text, f"{why} (position {pos})", _WHAT_TO_DO_SQL)
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append((kind, m.group(), pos))
        pos = m.end()
    for (k1, v1, p1), (k2, v2, p2) in zip(tokens, tokens[1:], strict=False):
        if k1 == k2 == "op" and p2 == p1 + len(v1) and (v1, v2) in (("-", "-"), ("/", "*"), ("*", "/")):
            raise _reject(name, text, f"'{v1}{v2}' starts or ends a comment (position {p1})", _WHAT_TO_DO_SQL)
    depth = 0
    for kind, value, p in tokens:
        if kind == "name" and value.lower() in SQL_FORBIDDEN:
            raise _reject(name, text, f"the keyword {value!r} (position {p}) would start another statement or a subquery",
                          _WHAT_TO_DO_SQL)
        if value == "(":
            depth += 1
        elif value == ")":
            depth -= 1
            if depth < 0:
                raise _reject(name, text, f"a ')' at position {p} closes nothing", "Balance the parentheses.")
    if depth:
        raise _reject(name, text, "a '(' is never closed", "Balance the parentheses.")
    if not tokens:
        raise _reject(name, text, "it is empty", "Give a condition, or leave the argument out.")
    return tokens


def sql_condition(name: str, value: Any) -> str:
    """A SQL boolean expression for ``where``: checked token by token, returned trimmed."""
    if not isinstance(value, str):
        raise _reject(name, value, "it must be a string", _WHAT_TO_DO_SQL)
    _sql_tokens(name, value)
    return value.strip()


def _split_top_level(text: str) -> list[str]:
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def select_list(name: str, value: Any) -> str:
    """What to select: ``*`` or columns and expressions (``device, count(*), avg(value) as mean``)."""
    if value == "*":
        return "*"
    items = _split_top_level(value) if isinstance(value, str) else list(value or [])
    if not items or any(not isinstance(i, str) for i in items):
        raise _reject(name, value, "it must be '*', a comma-separated string or a list of strings",
                      "For example '*' or 'device, count(*), avg(value)'.")
    out = []
    for i, item in enumerate(items):
        label = f"{name}[{i}]" if len(items) > 1 else name
        if item == "*":
            out.append(item)
            continue
        if not item:
            raise _reject(label, value, "an item is empty", "Remove the doubled or trailing comma.")
        _sql_tokens(label, item)
        out.append(item)
    return ", ".join(out)


def order_by(name: str, items: Any) -> str:
    """``[{"column": "value", "direction": "desc"}, ...]`` as ``value desc, ...``."""
    if not isinstance(items, list) or not items:
        raise _reject(name, items, "it must be a non-empty list of {column, direction}",
                      'For example [{"column": "value", "direction": "desc"}].')
    parts = []
    for i, item in enumerate(items):
        if hasattr(item, "model_dump"):
            item = item.model_dump()
        if not isinstance(item, Mapping) or "column" not in item:
            raise _reject(f"{name}[{i}]", item, "each entry needs a 'column'", 'Use {"column": "value", "direction": "asc"}.')
        column = item["column"]
        if isinstance(column, str) and not IDENT.match(column):
            tokens = _sql_tokens(f"{name}[{i}].column", column)  # an aggregate such as count(*)
            if not tokens or tokens[0][0] != "name":
                raise _reject(f"{name}[{i}].column", column, "it is not a column or function call",
                              "Use a column name or an aggregate such as count(*).")
        else:
            identifier(f"{name}[{i}].column", column)
        direction = item.get("direction")
        if direction is None:
            parts.append(column)
            continue
        if not isinstance(direction, str) or direction.lower() not in ("asc", "desc"):
            raise _reject(f"{name}[{i}].direction", direction, "it must be 'asc' or 'desc'", "Use 'asc' or 'desc'.")
        parts.append(f"{column} {direction.lower()}")
    return ", ".join(parts)


def select_statement(args: Mapping[str, Any], network: bool | None = None,
                     types: Mapping[str, str] | None = None) -> str:
    """Build the query's SQL from ``table``, ``select``, ``where``, ``group_by``, ``order_by`` and ``limit``.

    Every part is validated by the functions above; optional parts appear
    exactly when given. Keywords are lower case, as EdgeLake's examples write them.
    With ``network`` true or false the parts are adapted to where the query runs
    (:mod:`plexor_edgelake.dialect`).
    """
    return assemble_select({
        "table": identifier("table", args.get("table")),
        "select": select_list("select", args.get("select") or "*"),
        "where": sql_condition("where", args["where"]) if args.get("where") not in (None, "") else None,
        "group_by": identifier_list("group_by", args["group_by"]) if args.get("group_by") else None,
        "order_by": order_by("order_by", args["order_by"]) if args.get("order_by") else None,
    }, args.get("limit"), network, types)


# The parameter types whose rendered text is exactly the checked part select_statement would build.
SELECT_PART_TYPES = {"table": "identifier", "select": "select_list", "where": "sql_condition",
                     "group_by": "identifier_list", "order_by": "order_by", "limit": "integer"}


def assemble_select(parts: Mapping[str, str | None], limit: Any, network: bool | None = None,
                    types: Mapping[str, str] | None = None) -> str:
    """The SQL from parts already checked (``table`` … ``order_by`` as rendered text) and ``limit``.

    ``types`` (the table's column types, when known) lets the network rewrites depend on them.
    """
    from plexor_edgelake.dialect import SQL, adapt

    renames: dict[str, str] = {}
    order = None
    if network is not None:
        parts, renames, order = adapt(parts, network, types)
    select = parts.get("select") or "*"
    sql = f"select {select} from {parts['table']}"
    if parts.get("where"):
        sql += f" where {parts['where']}"
    if parts.get("group_by"):
        sql += f" group by {parts['group_by']}"
    if parts.get("order_by"):
        sql += f" order by {parts['order_by']}"
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise _reject("limit", limit, "it must be a whole number of at least 1", "Pass a limit such as 100.")
        if order is None:
            sql += f" limit {limit}"
    out = SQL(sql)
    out.renames = renames
    out.order = order
    out.limit = limit if order is not None else None
    out.hidden = [h.strip() for h in (parts.get("hidden") or "").split(",") if h.strip()]
    return out


BUILDERS = {"select_statement": select_statement}

# --------------------------------------------------------------------------------------------------
# EdgeLake policy conditions and bring clauses

_EL_TOKEN = re.compile(
    r"""(?P<ws>[ \t]+)
      |(?P<str>"[^"]*"|'[^']*')
      |(?P<op><=|>=|!=|<>|=|<|>|[\[\](),])
      |(?P<word>[A-Za-z0-9_.:@*/+-]+)""",
    re.X,
)
_WHAT_TO_DO_EL = (
    "Write conditions such as 'dbms = mydb and name = t' or 'company = \"my company\"': keys, values "
    "(quoted when they hold spaces), comparison operators, and/or, brackets; nothing after them."
)


def _el_tokens(name: str, text: str, guidance: str) -> list[tuple[str, str, int]]:
    _no_control(name, text)
    tokens = []
    pos = 0
    while pos < len(text):
        m = _EL_TOKEN.match(text, pos)
        if not m:
            ch = text[pos]
            why = _BAD_CHAR_HINTS.get(ch, f"the character {ch!r} is not accepted here")
            raise _reject(name, text, f"{why} (position {pos})", guidance)
        if m.lastgroup != "ws":
            tokens.append((m.lastgroup or "", m.group(), pos))
        pos = m.end()
    if not tokens:
        raise _reject(name, text, "it is empty", "Give a value, or leave the argument out.")
    for kind, value, p in tokens:
        if kind == "word" and value.lower() in EDGELAKE_FORBIDDEN:
            raise _reject(name, text, f"the word {value!r} (position {p}) would start another clause or command",
                          guidance)
    return tokens


def edgelake_condition(name: str, value: Any) -> str:
    """A policy ``where`` condition for ``blockchain get``."""
    if not isinstance(value, str):
        raise _reject(name, value, "it must be a string", _WHAT_TO_DO_EL)
    _el_tokens(name, value, _WHAT_TO_DO_EL)
    return value.strip()


def bring_clause(name: str, value: Any) -> str:
    """What follows ``bring``: ``.json``-style modifiers, ``['key']['key']`` paths and quoted separators.

    Rendered with a leading space unless it starts with a modifier (``bring.json``).
    """
    guidance = "Write it as EdgeLake does, e.g. \"['table']['name']\" or \".json.unique [*][dbms]\"."
    if not isinstance(value, str):
        raise _reject(name, value, "it must be a string", guidance)
    text = value.strip()
    _el_tokens(name, text, guidance)
    return text if text.startswith(".") else " " + text

