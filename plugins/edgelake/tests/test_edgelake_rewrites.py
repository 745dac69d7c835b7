"""Every network rewrite gives the same rows as the statement as written, for the column types it depends on.

The proof runs both forms in SQLite (the operators' own storage here) over values chosen to break a wrong
rewrite: NULLs, '', negatives, numbers whose text starts like the prefix, letters in both cases, apostrophes.
"""

from __future__ import annotations

import sqlite3

import pytest

from plexor_edgelake.dialect import _network_where

TYPES = {"code": "int", "name": "character varying", "tsd_name": "char(3)", "value": "decimal",
         "timestamp": "timestamp without time zone"}
CODES = [None, -130, -12, -1, 0, 1, 5, 12, 13, 99, 119, 120, 125, 129, 130, 1199, 1200, 1250, 1299, 1300, 12345,
         120000, 9_223_372_036_854_775_807, 1_299_999_999_999_999_999]
NAMES = [None, "", "12", "120", "12a", "1", "13", "2", "O'Brien", "alpha", "Alpha", "zeta", "1-2", "12:00", "Zoë"]


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("create table t (code int, name varchar, tsd_name char(3), value decimal)")
    rows = [(c, n, n, (c / 10 if c is not None and abs(c) < 10**6 else None))
            for i, c in enumerate(CODES) for n in NAMES[i % 3::3]]
    con.executemany("insert into t values (?, ?, ?, ?)", rows)
    return con


def same(db: sqlite3.Connection, where: str) -> str:
    rewritten = _network_where(where, TYPES)
    want = db.execute(f"select rowid from t where {where} order by rowid").fetchall()
    got = db.execute(f"select rowid from t where {rewritten} order by rowid").fetchall()
    assert got == want, f"{where} -> {rewritten}"
    return rewritten


@pytest.mark.parametrize(("where", "column_type"), [
    ("code like '12%'", "int"), ("code like '1%'", "int"), ("code like '129%'", "int"), ("code like '0%'", "int"),
    ("code like '-1%'", "int"), ("code like '-%'", "int"), ("code like '12%' and name = 'alpha'", "int"),
    ("name like '12%'", "varchar"), ("name like '1-%'", "varchar"), ("tsd_name like '1%'", "char(3)"),
    ("name like '12%' or code like '13%'", "varchar, int"),
])
def test_like_prefix_ranges_match_like(db: sqlite3.Connection, where: str, column_type: str) -> None:
    assert " like " not in same(db, where).lower(), column_type


@pytest.mark.parametrize("where", [
    "code in (12, 13, -1)", "name in ('alpha', '', 'zeta')", "code not in (12, 0)",
    "name not in ('alpha', '')", "value between 1 and 13", "name between '1' and '13'", "code not between 0 and 130",
    "code <> 12", "not name = 'alpha'", "not code = 5", "code in (12, 13) and name <> ''",
])
def test_type_independent_rewrites_match_for_int_text_and_decimal(db: sqlite3.Connection, where: str) -> None:
    """IN, NOT IN, BETWEEN, NOT BETWEEN, <> and NOT a = b are the same rows for any type, NULLs included."""
    same(db, where)


@pytest.mark.parametrize(("where", "why"), [
    ("value like '1%'", "decimal column"), ("timestamp like '2026%'", "time column"), ("name like 'al%'", "letter case"),
    ("code like '05%'", "matches nothing"), ("name like '%a'", "only a prefix"), ("other like '1%'", "could not read"),
])
def test_a_like_without_a_proven_equal_form_is_refused(where: str, why: str) -> None:
    from plexor import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        _network_where(where, TYPES)
    assert why in str(err.value)


@pytest.mark.parametrize(("select", "order", "types", "sent_order"), [
    ("code, value", "code desc", TYPES, "code desc"),           # numbers only: the node orders right
    ("code, name", "code desc", TYPES, None),                   # text in the rows: the node may lose some; done here
    ("code, value", "code desc", None, None),                   # types unknown: done here
    ("code, value", "code desc, value", TYPES, None),           # several keys: the network applies none
    ("code as c", "code desc", TYPES, None),                    # an aliased column: empty reply / error 16
])
def test_an_ordering_stays_on_the_node_only_where_it_is_right(select: str, order: str, types: dict[str, str] | None,
                                                              sent_order: str | None) -> None:
    from plexor_edgelake.dialect import adapt

    out, _, here = adapt({"table": "t", "select": select, "order_by": order}, True, types)
    assert out["order_by"] == sent_order
    assert (here is None) == (sent_order is not None)


def test_an_unselected_ordering_column_is_refused_where_adding_it_changes_the_rows() -> None:
    from plexor import InvalidArgument
    from plexor_edgelake.dialect import adapt

    out, _, here = adapt({"table": "t", "select": "name", "order_by": "code desc"}, True, TYPES)
    assert out["select"] == "name, code" and out["hidden"] == "code" and here == [("code", True)]
    for select, group in (("distinct name", None), ("name, count(*)", "name")):
        with pytest.raises(InvalidArgument, match="neither selected nor grouped"):
            adapt({"table": "t", "select": select, "group_by": group, "order_by": "code"}, True, TYPES)
