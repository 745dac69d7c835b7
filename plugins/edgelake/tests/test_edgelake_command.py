"""Building commands: identifiers, quoted values, checked expressions, templates, the SQL builder."""

from __future__ import annotations

import pytest

from plexor import InvalidArgument
from plexor_edgelake import command as cmd


@pytest.mark.parametrize("good", ["mydb", "t", "_x1", "Table_2", "a" * 64])
def test_plain_identifiers_pass(good: str) -> None:
    assert cmd.identifier("table", good) == good


@pytest.mark.parametrize("bad", ["", "1t", "my db", "t;", 't"', "t--", "a.b", "a" * 65, "t\r\ncommand: exit node", "ü"])
def test_other_identifiers_are_refused_with_guidance(bad: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        cmd.identifier("table", bad)
    assert "argument 'table'" in err.value.message and "refused" in err.value.message
    assert err.value.guidance


def test_wildcard_only_where_allowed() -> None:
    assert cmd.identifier("policy_type", "*", wildcard=True) == "*"
    with pytest.raises(InvalidArgument):
        cmd.identifier("table", "*")


def test_values_are_quoted_and_cannot_close_the_quote() -> None:
    assert cmd.quoted_value("name", "my company") == '"my company"'
    assert cmd.quoted_value("n", 5) == '"5"'
    with pytest.raises(InvalidArgument, match="double quote"):
        cmd.quoted_value("name", 'x" and format = json')
    with pytest.raises(InvalidArgument, match="control character"):
        cmd.quoted_value("name", "x\ny")


@pytest.mark.parametrize("good", [
    "device = 'dev1'",
    "value > 10 and device != 'dev0'",
    "device in ('dev0', 'dev1') or value between 1 and 2",
    "name like 'a%' and not (value is null)",
    "timestamp >= '2026-01-01 00:00:00'",
    "device = 'it''s'",
    "round(value, 2) <= 3.5e2",
])
def test_sql_conditions_that_are_plain_pass(good: str) -> None:
    assert cmd.sql_condition("where", good) == good


@pytest.mark.parametrize(("attack", "why"), [
    ('1=1" and format = table', "double quote"),
    ("1=1; drop table t", "semicolon"),
    ("1=1 -- the rest", "comment"),
    ("1=1 /* x */", "comment"),
    ("1=1 union select * from secrets", "'union'"),
    ("value in (select value from t)", "'select'"),
    ("1=1\n", "control character"),
    ("device = 'dev1", "single quote"),
    ("(value > 1", "never closed"),
    ("value > 1)", "closes nothing"),
    ("device = 'a' & get status", "chain"),
    ("x = $HOME", "variable"),
    ("x = !secret", "'!'"),
    ("", "empty"),
    ("1=1 limit 1000000", "'limit'"),
])
def test_injection_attempts_in_where_are_refused(attack: str, why: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        cmd.sql_condition("where", attack)
    assert why in err.value.message
    assert err.value.guidance  # every refusal says what to write instead


def test_select_list_accepts_columns_and_aggregates() -> None:
    assert cmd.select_list("select", "*") == "*"
    assert cmd.select_list("select", "device, count(*), avg(value) as mean") == "device, count(*), avg(value) as mean"
    assert cmd.select_list("select", ["device", "max(value)"]) == "device, max(value)"
    for bad in ["device from t; drop table t", 'device"', "(select 1)", "device,", ""]:
        with pytest.raises(InvalidArgument):
            cmd.select_list("select", bad)


def test_order_by_items() -> None:
    assert cmd.order_by("order_by", [{"column": "value", "direction": "DESC"}, {"column": "device"}]) == "value desc, device"
    assert cmd.order_by("order_by", [{"column": "count(*)", "direction": "asc"}]) == "count(*) asc"
    with pytest.raises(InvalidArgument, match="asc' or 'desc"):
        cmd.order_by("order_by", [{"column": "value", "direction": "sideways"}])
    with pytest.raises(InvalidArgument):
        cmd.order_by("order_by", [{"column": "value; drop table t"}])
    with pytest.raises(InvalidArgument, match="column"):
        cmd.order_by("order_by", [{"direction": "asc"}])


def test_select_statement_has_exactly_the_given_parts() -> None:
    assert cmd.select_statement({"table": "t"}) == "select * from t"
    assert cmd.select_statement({"table": "t", "select": "*", "limit": 100}) == "select * from t limit 100"
    full = cmd.select_statement({
        "table": "t", "select": "device, count(*)", "where": "value > 1", "group_by": ["device"],
        "order_by": [{"column": "device", "direction": "desc"}], "limit": 5,
    })
    assert full == "select device, count(*) from t where value > 1 group by device order by device desc limit 5"
    assert "where" not in cmd.select_statement({"table": "t", "where": None, "limit": 3})
    with pytest.raises(InvalidArgument):
        cmd.select_statement({"table": "t", "limit": 0})
    with pytest.raises(InvalidArgument):
        cmd.select_statement({"table": "t; drop", "limit": 1})


def test_policy_conditions_and_bring() -> None:
    assert cmd.edgelake_condition("where", 'dbms = mydb and name = "my table"') == 'dbms = mydb and name = "my table"'
    assert cmd.edgelake_condition("where", "[table][dbms] = mydb") == "[table][dbms] = mydb"
    for attack in ["dbms = mydb bring ['table']", "dbms = mydb where x = 1", "dbms = mydb & exit node",
                   "dbms = mydb; exit node", 'name = "x', "dbms = !password", "dbms = mydb | reset"]:
        with pytest.raises(InvalidArgument):
            cmd.edgelake_condition("where", attack)
    assert cmd.bring_clause("bring", "['table']['name']") == " ['table']['name']"
    assert cmd.bring_clause("bring", ".json.unique [*][dbms]") == ".json.unique [*][dbms]"
    with pytest.raises(InvalidArgument):
        cmd.bring_clause("bring", "['table'] where dbms = x")


def test_templates_fill_placeholders_and_refuse_unfilled_ones() -> None:
    t = cmd.Template("blockchain get {policy_type}")
    assert t.placeholders == ["policy_type"]
    assert t.render({"policy_type": "table"}) == "blockchain get table"
    with pytest.raises(InvalidArgument, match="needs policy_type"):
        t.render({"policy_type": None})
    assert cmd.Template("print {{x}} {a}").render({"a": "1"}) == "print {x} 1"
    for broken in ["get {", "get }", "get {not a name}", "", "get status\nexit node"]:
        with pytest.raises(cmd.TemplateError):
            cmd.Template(broken)


def test_optional_clauses_appear_exactly_when_given() -> None:
    main = cmd.Template("blockchain get {policy_type}")
    clauses = [cmd.Template("where {where}"), cmd.Template("bring{bring}")]
    render = cmd.render_command
    assert render(main, clauses, {"policy_type": "*", "where": None, "bring": None}) == "blockchain get *"
    # The original dropped a where clause given alone; here it is sent.
    assert render(main, clauses, {"policy_type": "table", "where": "dbms = mydb", "bring": None}) == \
        "blockchain get table where dbms = mydb"
    assert render(main, clauses, {"policy_type": "table", "where": None, "bring": " ['table']['name']"}) == \
        "blockchain get table bring ['table']['name']"
    assert render(main, clauses, {"policy_type": "table", "where": "dbms = mydb", "bring": ".json"}) == \
        "blockchain get table where dbms = mydb bring.json"


def test_every_parameter_type_has_a_renderer() -> None:
    from plexor_edgelake import params

    assert set(params._RENDER) == set(params.PARAM_TYPES)


def test_the_engine_builds_the_same_sql_as_the_checked_builder() -> None:
    # The engine assembles the query from parameters it already rendered (checked once, not twice).
    from plexor_edgelake.engine import Engine
    from plexor_edgelake.toolspec import load_catalog

    catalog = load_catalog(None)
    engine = Engine(catalog, {"nodes": ["127.0.0.1:1"], "timeout": 1.0, "network_timeout": 1.0, "max_rows": 10,
                              "user_agent": "AnyLog/1.23", "connect_timeout": 1.0, "max_connections": 1,
                              "retries": 0, "backoff": 0.0})
    query = catalog.tools["query"]
    cases = [
        {"database": "mydb", "table": "t", "select": "*", "limit": 100, "format": "json", "destination": "network"},
        {"database": "mydb", "table": "t", "select": "device, count(*)", "where": " value > 1 ", "group_by": ["device"],
         "order_by": [{"column": "count(*)", "direction": "DESC"}, {"column": "device"}], "limit": 5, "format": "table",
         "destination": "network"},
        {"database": "mydb", "table": "t", "select": "device", "where": "device in ('a', 'b')", "limit": 5,
         "format": "json", "destination": "local"},
    ]
    for args in cases:
        sql = cmd.select_statement(args, args["destination"] != "local")
        assert engine.render(query, args) == f'sql mydb format = {args["format"]} "{sql}"'
    with pytest.raises(InvalidArgument, match="'where'"):
        engine.render(query, {"database": "mydb", "table": "t", "where": "1; drop table t", "limit": 1})
    with pytest.raises(InvalidArgument, match="'limit'"):
        engine.render(query, {"database": "mydb", "table": "t", "limit": 0})
