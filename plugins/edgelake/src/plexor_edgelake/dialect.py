"""What SQL the node runs where: rewrite into accepted forms, or refuse before sending.

Observed on a real node (PROTOCOL.md, "Observed later"): a query sent with
``destination`` set (the network, or named nodes) is parsed by the operators'
own WHERE parser, which accepts ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
``and``, ``or`` and refuses ``IN``, ``BETWEEN``, ``LIKE``, ``NOT``, ``<>`` and a
``''`` escape (error 46); ``ORDER BY`` an aggregate gives an empty reply (by its
alias works); arithmetic in the select list comes back as the plain column (also
under an alias: ``value + 1 as v``). Arithmetic inside an aggregate
(``avg(value * 2)``) is error 46 wherever the query runs.
Run on the node itself (no destination), all of that works as in SQLite, but
``increments()``, ``period()`` and ``NOW()`` give an empty reply.

So a query is never sent in a form known to fail or to come back wrong: each
refused construct is rewritten into an equivalent accepted one, or refused
here with guidance saying what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from plexor import InvalidArgument

__all__ = ["SQL", "adapt"]

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<word>[A-Za-z_][\w.]*)"
                    r"|(?P<op><=|>=|<>|!=|[=<>(),*+\-/%]))")
_AGGREGATE = re.compile(r"^(count|avg|sum|min|max)\s*\(.*\)$", re.I | re.S)
_ONLY_NETWORK = re.compile(r"\b(increments|period|now)\s*\(", re.I)
_AGG_ARITHMETIC = re.compile(r"\b(?:count|avg|sum|min|max)\s*\([^()]*(?:[-+/%]|\w\s*\*\s*\w)[^()]*\)", re.I)
_REFUSED_HINT = re.compile(r"\b(?:in|between|like|not)\b|<>|''", re.I)  # cheap test before tokenising
_OPERATOR_HINT = re.compile(r"[-+/%*]")


class SQL(str):
    """The statement's text, plus what the plugin does to the reply: the result keys to rename back (an
    alias the rewrite introduced) and, when the network cannot order the rows right, the ordering and
    limit to apply here (``order``: result keys as sent, descending or not)."""

    renames: dict[str, str]
    order: list[tuple[str, bool]] | None
    limit: int | None
    hidden: list[str]  # columns added to select only to order by, dropped from the rows


def _refuse(argument: str, why: str, instead: str) -> InvalidArgument:
    return InvalidArgument(f"argument {argument!r} cannot be sent as written: {why}", instead,
                           data={"argument": argument})


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise _refuse("where", f"cannot read {text[pos:]!r}", "Write a plain condition.")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _bump(prefix: str) -> str:
    """The smallest string greater than every string starting with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _like(col: str, pattern: str, types: Mapping[str, str] | None) -> str:
    """``col LIKE 'pattern'`` over the network, in a form proven equal for the column's kind, or refused."""
    from plexor_edgelake.answer import column_kind, prefix_ranges

    prefix = pattern[:-1]
    simple = pattern.endswith("%") and prefix and not re.search(r"[%_]", prefix)
    col_kind = column_kind(types, col)
    if simple and col_kind == "integer":
        ranges = prefix_ranges(col, prefix)
        if ranges is not None:
            return ranges
        raise _refuse("where", f"no integer's text starts with {prefix!r}, so {col} LIKE '{pattern}' matches nothing",
                      "Check the pattern; an integer LIKE '12%' matches 12, 120-129, 1200-1299 and so on.")
    if simple and col_kind == "text" and not re.search(r"[A-Za-z]", prefix):
        # Text compares code point by code point and a prefix without letters has no case: the range is exact.
        return f"{col} >= '{prefix}' and {col} < '{_bump(prefix)}'"
    if simple and col_kind == "text":
        # LIKE ignores the case of ASCII letters, a range does not: say so rather than change the result
        raise _refuse("where", f"LIKE '{pattern}' is refused by network queries (error 46), and LIKE ignores "
                               "letter case, which no accepted form does",
                      f"For a case-sensitive prefix match write {col} >= '{prefix}' and {col} < '{_bump(prefix)}'; "
                      "to ignore case, run the query on the node itself with destination local.")
    if simple:
        what = {"unknown": "the plugin could not read the column's type (edgelake_get_schema; a dry run reads "
                           "only types already known)",
                "number": "a decimal column's text form (12.5, 1.2e-05) has no exact range form",
                "timestamp": "a time column is compared as a time over the network, not as text"}.get(col_kind, "")
        raise _refuse("where", f"LIKE is refused by network queries (error 46), and for {col} {what or 'its type'} "
                               "no accepted form is known to give the same rows",
                      "Write the range you mean with >= and < (a time range for a time column), or run the query "
                      "on the node itself with destination local.")
    raise _refuse("where", f"LIKE '{pattern}' is refused by network queries (error 46); only a prefix ('12%') "
                           "can be rewritten",
                  "Run the query on the node itself with destination local, or write the condition with =, !=, "
                  "<, <=, >, >=, and, or.")


def _network_where(where: str, types: Mapping[str, str] | None = None) -> str:
    """``where`` in the forms the operators' parser accepts, or :class:`InvalidArgument` with guidance."""
    toks = _tokens(where)
    if any(k == "str" and "''" in v[1:-1] for k, v in toks):
        raise _refuse("where", "a doubled quote ('') inside a value is refused by network queries (error 46)",
                      "Match the value without the quote (for example with >= and < around it), or run the query "
                      "on the node itself with destination local.")
    out: list[str] = []
    words = [v.lower() for k, v in toks if k == "word"]
    multi = words.count("and") + words.count("or") - words.count("between") > 0
    i = 0
    while i < len(toks):
        kind, value = toks[i]
        low = value.lower() if kind == "word" else value
        nxt = toks[i + 1][1].lower() if i + 1 < len(toks) else ""
        if kind == "word" and low not in _KEYWORDS and nxt in ("in", "between", "like", "not"):
            text, i = _predicate(toks, i, types, multi)
            out.append(text)
            continue
        if kind == "word" and low == "not":
            text, i = _not(toks, i)
            out.append(text)
            continue
        if kind == "op" and value == "<>":
            out.append("!=")
        elif kind == "word" and low in ("in", "between", "like"):
            raise _refuse("where", f"{value.upper()} is refused by network queries (error 46)",
                          "Write it with =, !=, <, <=, >, >=, and, or.")
        else:
            out.append(value)
        i += 1
    if out == [v for _, v in toks]:
        return where.strip()  # nothing to rewrite: send it as written
    text = " ".join(out).replace(" , ", ", ").replace("( ", "(").replace(" )", ")")
    return re.sub(r"(?i)\b(?!and\b|or\b)(\w+) \(", r"\1(", text)


_KEYWORDS = ("and", "or", "not", "in", "between", "like", "is", "null")


def _group(parts: list[str], joiner: str, multi: bool) -> str:
    """Comparisons joined by ``joiner``, in parentheses when the condition has other terms beside them."""
    text = f" {joiner} ".join(parts)
    return f"({text})" if multi and len(parts) > 1 else text


def _predicate(toks: list[tuple[str, str]], i: int, types: Mapping[str, str] | None,
               multi: bool) -> tuple[str, int]:
    """``col [not] in (...)``, ``col [not] between a and b`` or ``col like 'p%'`` at ``toks[i]`` in the
    network's forms, and the index after it; anything else there is refused."""
    col, negated = toks[i][1], toks[i + 1][1].lower() == "not"
    j = i + (2 if negated else 1)
    op = toks[j][1].lower() if j < len(toks) else ""
    if op == "in" and j + 1 < len(toks) and toks[j + 1][1] == "(":
        values, k = [], j + 2
        while k < len(toks) and toks[k][1] != ")":
            if toks[k][1] != ",":
                values.append(toks[k][1])
            k += 1
        cmp_, joiner = ("!=", "and") if negated else ("=", "or")
        return _group([f"{col} {cmp_} {v}" for v in values], joiner, multi), k + 1
    if op == "between" and j + 3 < len(toks) and toks[j + 2][1].lower() == "and":
        low_v, high_v = toks[j + 1][1], toks[j + 3][1]
        parts = [f"{col} < {low_v}", f"{col} > {high_v}"] if negated else [f"{col} >= {low_v}", f"{col} <= {high_v}"]
        return _group(parts, "or" if negated else "and", multi), j + 4
    if op == "like" and j + 1 < len(toks) and toks[j + 1][0] == "str" and not negated:
        like = _like(col, toks[j + 1][1][1:-1], types)
        return (f"({like})" if multi and (" or " in like or " and " in like) else like), j + 2
    raise _refuse("where", f"'{op.upper() if op else 'NOT'}' as used here is refused by network queries "
                           "(error 46)",
                  "Over the network write conditions with =, !=, <, <=, >, >=, and, or: IN becomes "
                  "equalities joined by or, BETWEEN becomes >= and <=, LIKE 'ab%' on a text or integer column "
                  "becomes ranges; other LIKE patterns and NOT cannot be sent to the network — run the query on "
                  "the node itself with destination local.")


def _not(toks: list[tuple[str, str]], i: int) -> tuple[str, int]:
    """NOT at ``toks[i]``: kept in ``is not null``, ``not col = v`` as the opposite comparison, else refused."""
    if i and toks[i - 1][1].lower() == "is":
        return toks[i][1], i + 1  # "is not null" is part of the operators' grammar
    if i + 3 < len(toks) and toks[i + 1][0] == "word" and toks[i + 2][1] in ("=", "!=", "<>"):
        opposite = "!=" if toks[i + 2][1] == "=" else "="
        return f"{toks[i + 1][1]} {opposite} {toks[i + 3][1]}", i + 4
    raise _refuse("where", "NOT is refused by network queries (error 46)",
                  "Write the opposite comparison instead (not a = b is a != b, not a > b is a <= b), or "
                  "run the query on the node itself with destination local.")


def _items(select: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in select:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()]


def _arithmetic(item: str) -> bool:
    bare = re.sub(r"\([^()]*\)", "()", re.sub(r"(?i)\s+as\s+\w+$", "", item))
    return bool(re.search(r"[+\-/%]|\w\s*\*\s*\w|\)\s*\*|\*\s*\(", bare)) and item.strip() != "*"


def adapt(parts: Mapping[str, str | None], network: bool, types: Mapping[str, str] | None = None,
          ) -> tuple[dict[str, str | None], dict[str, str], list[tuple[str, bool]] | None]:
    """The checked parts (``select``, ``where``, ``order_by`` as text) adapted to where the query runs.

    Returns the parts to assemble, the result keys to rename back, and the ordering the plugin applies
    itself (None when the node orders the rows right). ``types``: the table's declared column types.
    """
    out = dict(parts)
    renames: dict[str, str] = {}
    select = parts.get("select") or "*"
    inner = _AGG_ARITHMETIC.search(select) if _OPERATOR_HINT.search(select.replace("(*)", "")) else None
    if inner:
        raise _refuse("select", f"{inner.group(0)}: the node cannot parse arithmetic inside an aggregate (error 46), "
                                "wherever the query runs",
                      "Aggregate the column itself and scale the result (avg(value) * 2 is 2 × avg(value)), or "
                      "select the column and compute from the rows.")
    if not network:
        for name in ("select", "where"):
            m = _ONLY_NETWORK.search(parts.get(name) or "")
            if m:
                raise _refuse(name, f"{m.group(1)}() answers nothing when the query runs on the node itself",
                              "Leave destination at network (the default) or name data nodes: increments(), "
                              "period() and NOW() work only in queries sent to the network.")
        if types and parts.get("where"):
            from plexor_edgelake.answer import local_times

            out["where"] = local_times(parts["where"] or "", types, _tokens(parts["where"] or ""))
        return out, renames, None
    where = parts.get("where")
    if where and _REFUSED_HINT.search(where):
        out["where"] = _network_where(where, types)
    if not parts.get("order_by") and not _OPERATOR_HINT.search(select.replace("(*)", "")):
        return out, renames, None
    items = _items(select)
    for item in items:
        if _arithmetic(item):
            raise _refuse("select", f"{item!r}: arithmetic in the select list comes back from network queries as "
                                    "the plain column, with the stored values",
                          "Select the column and compute the expression from the rows, or run the query on the "
                          "node itself with destination local.")
    if not parts.get("order_by"):
        return out, renames, None
    return _network_order(parts, out, items, renames, types)


def _network_order(parts: Mapping[str, str | None], out: dict[str, str | None], items: list[str],
                   renames: dict[str, str], types: Mapping[str, str] | None,
                   ) -> tuple[dict[str, str | None], dict[str, str], list[tuple[str, bool]] | None]:
    """The ordering of a network query: left to the node where it orders right, else done by the plugin."""
    select = parts.get("select") or "*"
    keys: list[tuple[str, bool]] = []
    here = False  # order here rather than on the node
    hidden: list[str] = []
    grouped = [g.strip().lower() for g in (parts.get("group_by") or "").split(",") if g.strip()]
    for key in _items(parts["order_by"] or ""):
        m = re.match(r"^(.*?)(\s+(?:asc|desc))?$", key, re.I | re.S)
        expr, direction = (m.group(1).strip(), (m.group(2) or "").strip().lower()) if m else (key, "")
        if _AGGREGATE.match(expr):
            here, expr = True, _alias_for(expr, items, renames)
        elif "*" not in items:
            name = _selected_name(expr, items, grouped)
            here = here or name != expr  # ordering by an alias of a column is error 16 over the network
            if name.lower() not in _output_names(items):
                items.append(name)
                hidden.append(name)
                here = True
            expr = name
        keys.append((expr, direction == "desc"))
    out["select"] = ", ".join(items) if select != "*" else select
    from plexor_edgelake.answer import text_in_result

    if here or len(keys) > 1 or text_in_result(select, types):
        # The network cuts groups before ordering by an aggregate, applies one key only, answers nothing for a
        # column not selected, and loses rows whose text holds an apostrophe when it orders them itself: fetch
        # every row without order or limit and order them here.
        out["order_by"] = None
        out["hidden"] = ", ".join(hidden) or None
        return out, renames, keys
    out["order_by"] = ", ".join(k + (" desc" if d else "") for k, d in keys)
    return out, renames, None


def _output_names(items: list[str]) -> dict[str, str]:
    """Each select item's result key (lower case) and the expression it comes from."""
    names = {}
    for item in items:
        m = re.match(r"^(.*?)\s+as\s+(\w+)$", item, re.I | re.S)
        body, alias = (m.group(1).strip(), m.group(2)) if m else (item.strip(), item.strip())
        names[alias.lower()] = body
    return names


def _selected_name(column: str, items: list[str], grouped: list[str]) -> str:
    """The result key to order by for ``column``: itself when selected, its alias when selected under one, or
    itself added to the select list (then dropped from the rows) when that keeps the statement's meaning."""
    names = _output_names(items)
    if column.lower() in names:
        return column
    for item in items:
        m = re.match(r"^(.*?)\s+as\s+(\w+)$", item, re.I | re.S)
        if m and m.group(1).strip().lower() == column.lower():
            return m.group(2)
    aggregated = any(_AGGREGATE.match(body) for body in names.values())
    distinct = any(re.match(r"(?i)^distinct\b", item.strip()) for item in items)
    if not distinct and ((not grouped and not aggregated) or column.lower() in grouped):
        return column
    raise _refuse("order_by", f"{column} is neither selected nor grouped: over the network the node answers an "
                              "ordering by a column that is not selected with nothing at all (an empty reply), "
                              "and in a grouped or distinct query it has no single value per row",
                  f"Order by a selected column, alias or aggregate, or add {column} to select and group_by.")


def _alias_for(expr: str, items: list[str], renames: dict[str, str]) -> str:
    """The alias to order by for an aggregate: its own, or one added to its select item (renamed back later)."""
    norm = re.sub(r"\s+", "", expr.lower())
    for n, item in enumerate(items):
        m = re.match(r"^(.*?)\s+as\s+(\w+)$", item, re.I | re.S)
        body, alias = (m.group(1), m.group(2)) if m else (item, None)
        if re.sub(r"\s+", "", body.lower()) == norm:
            if alias:
                return alias
            alias = f"order_{len(renames) + 1}"
            items[n] = f"{body} as {alias}"
            renames[alias] = body
            return alias
    raise _refuse("order_by", f"ordering by {expr} answers nothing over the network unless the aggregate is selected",
                  f"Add {expr} to select (for example '{expr} as n') and order by it, or run the query on the "
                  "node itself with destination local.")
