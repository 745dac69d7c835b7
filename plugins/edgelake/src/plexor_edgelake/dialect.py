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
    """The statement's text, plus the result keys to rename back (an alias the rewrite introduced)."""

    renames: dict[str, str]


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


def _network_where(where: str) -> str:
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

    def group(parts: list[str], joiner: str) -> str:
        text = f" {joiner} ".join(parts)
        return f"({text})" if multi and len(parts) > 1 else text

    while i < len(toks):
        kind, value = toks[i]
        low = value.lower() if kind == "word" else value
        nxt = toks[i + 1][1].lower() if i + 1 < len(toks) else ""
        if kind == "word" and low not in ("and", "or", "not", "in", "between", "like", "is", "null") and nxt in (
                "in", "between", "like", "not"):
            col, negated, j = value, nxt == "not", i + (2 if nxt == "not" else 1)
            op = toks[j][1].lower() if j < len(toks) else ""
            if op == "in" and j + 1 < len(toks) and toks[j + 1][1] == "(":
                values, k = [], j + 2
                while k < len(toks) and toks[k][1] != ")":
                    if toks[k][1] != ",":
                        values.append(toks[k][1])
                    k += 1
                cmp_, joiner = ("!=", "and") if negated else ("=", "or")
                out.append(group([f"{col} {cmp_} {v}" for v in values], joiner))
                i = k + 1
                continue
            if op == "between" and j + 3 < len(toks) and toks[j + 2][1].lower() == "and":
                low_v, high_v = toks[j + 1][1], toks[j + 3][1]
                parts = [f"{col} < {low_v}", f"{col} > {high_v}"] if negated else [f"{col} >= {low_v}", f"{col} <= {high_v}"]
                out.append(group(parts, "or" if negated else "and"))
                i = j + 4
                continue
            if op == "like" and j + 1 < len(toks) and toks[j + 1][0] == "str" and not negated:
                pattern = toks[j + 1][1][1:-1]
                prefix = pattern[:-1]
                if pattern.endswith("%") and prefix and not re.search(r"[%_]", prefix):
                    if not re.search(r"[A-Za-z]", prefix):
                        out.append(group([f"{col} >= '{prefix}'", f"{col} < '{_bump(prefix)}'"], "and"))
                        i = j + 2
                        continue
                    # LIKE ignores the case of ASCII letters, a range does not: say so rather than change the result
                    raise _refuse("where", f"LIKE '{pattern}' is refused by network queries (error 46), and LIKE "
                                           "ignores letter case, which no accepted form does",
                                  f"For a case-sensitive prefix match write {col} >= '{prefix}' and {col} < "
                                  f"'{_bump(prefix)}'; to ignore case, run the query on the node itself with "
                                  "destination local.")
            raise _refuse("where", f"'{op.upper() if op else 'NOT'}' as used here is refused by network queries "
                                   "(error 46)",
                          "Over the network write conditions with =, !=, <, <=, >, >=, and, or: IN becomes "
                          "equalities joined by or, BETWEEN becomes >= and <=, LIKE '12%' becomes >= '12' and "
                          "< '13'; other LIKE patterns and NOT cannot be sent to the network — run the query on "
                          "the node itself with destination local.")
        if kind == "word" and low == "not" and i and toks[i - 1][1].lower() == "is":
            out.append(value)  # "is not null" is part of the operators' grammar
            i += 1
            continue
        if kind == "word" and low == "not":
            # not col = v / not col != v: the opposite comparison
            if i + 3 < len(toks) and toks[i + 1][0] == "word" and toks[i + 2][1] in ("=", "!=", "<>"):
                opposite = "!=" if toks[i + 2][1] == "=" else "="
                out.append(f"{toks[i + 1][1]} {opposite} {toks[i + 3][1]}")
                i += 4
                continue
            raise _refuse("where", "NOT is refused by network queries (error 46)",
                          "Write the opposite comparison instead (not a = b is a != b, not a > b is a <= b), or "
                          "run the query on the node itself with destination local.")
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


def adapt(parts: Mapping[str, str | None], network: bool) -> tuple[dict[str, str | None], dict[str, str]]:
    """The checked parts (``select``, ``where``, ``order_by`` as text) adapted to where the query runs.

    Returns the parts to assemble and the result keys to rename back.
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
        return out, renames
    where = parts.get("where")
    if where and _REFUSED_HINT.search(where):
        out["where"] = _network_where(where)
    if not parts.get("order_by") and not _OPERATOR_HINT.search(select.replace("(*)", "")):
        return out, renames
    items = _items(select)
    for item in items:
        if _arithmetic(item):
            raise _refuse("select", f"{item!r}: arithmetic in the select list comes back from network queries as "
                                    "the plain column, with the stored values",
                          "Select the column and compute the expression from the rows, or run the query on the "
                          "node itself with destination local.")
    if parts.get("order_by"):
        keys = []
        for key in _items(parts["order_by"] or ""):
            m = re.match(r"^(.*?)(\s+(?:asc|desc))?$", key, re.I | re.S)
            expr, direction = (m.group(1).strip(), m.group(2) or "") if m else (key, "")
            if _AGGREGATE.match(expr):
                expr = _alias_for(expr, items, renames)
            keys.append(expr + direction)
        out["order_by"] = ", ".join(keys)
        out["select"] = ", ".join(items) if select != "*" else select
    return out, renames


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
