"""Every parser kind, on the bodies the real node sent (from the recording)."""

from __future__ import annotations

import pytest
from standin import load_records

from plexor_edgelake.parsers import ParseError, compile_path, parse_reply, parse_table, validate_parser

BODIES = {(r.method, r.command, r.destination): r.body.decode() for r in load_records()}


def body(command: str, destination: str = "") -> str:
    return BODIES[("GET", command, destination)]


def test_json_path_unique_sorted() -> None:
    spec = {"kind": "json_path", "path": "$[*].table.dbms", "unique": True, "sort": True, "key": "databases"}
    assert parse_reply(spec, body("blockchain get table"), {}).data == {"databases": ["mydb"]}
    names = {"kind": "json_path", "path": "$[*].table.name", "sort": True, "key": "tables"}
    assert parse_reply(names, body("blockchain get table"), {}).data == {"tables": ["big", "t"]}


def test_json_path_filtered_by_an_argument() -> None:
    spec = {"kind": "json_path", "path": "$[?(@.table.dbms == '{database}')].table.name", "key": "tables"}
    assert parse_reply(spec, body("blockchain get table"), {"database": "mydb"}).data == {"tables": ["t", "big"]}
    assert parse_reply(spec, body("blockchain get table"), {"database": "other"}).data == {"tables": []}


def test_json_path_filters_on_absent_optional_arguments_are_dropped() -> None:
    spec = {"kind": "json_path", "path": "$[?(@.DBMS == '{database}' && @.Table == '{table}')]", "key": "nodes"}
    text = body("get data nodes where format = json")
    assert len(parse_reply(spec, text, {"database": None, "table": None}).data["nodes"]) == 2
    only_t = parse_reply(spec, text, {"database": "mydb", "table": "t"}).data["nodes"]
    assert [n["Table"] for n in only_t] == ["t"]
    assert parse_reply(spec, text, {"database": "nodb", "table": None}).data["nodes"] == []


def test_json_path_entries_turn_an_object_into_rows() -> None:
    spec = {"kind": "json_path", "path": "$", "entries": {"key": "name", "value": "type"}, "key": "columns"}
    cols = parse_reply(spec, body('get columns where dbms="mydb" and table="t" and format=json'), {}).data["columns"]
    assert cols[0] == {"name": "row_id", "type": "integer"} and len(cols) == 7


def test_json_path_syntax() -> None:
    doc = {"a": [{"b": 1, "c": {"d": "x"}}, {"b": 2}], "e": {"f": True}}
    assert compile_path("$.a[0].b").evaluate(doc, {}) == [1]
    assert compile_path("$['a'][-1].b").evaluate(doc, {}) == [2]
    assert compile_path("$.a[*].c.d").evaluate(doc, {}) == ["x"]
    assert compile_path("$.e.*").evaluate(doc, {}) == [True]
    assert compile_path("$.a[?(@.b != 1)]").evaluate(doc, {}) == [{"b": 2}]
    assert compile_path("$.a[?(@.b == 2)]").evaluate(doc, {}) == [{"b": 2}]
    for bad in ["a.b", "$.a[", "$..a", "$.a[?(@.b > 1)]"]:
        with pytest.raises(ParseError):
            compile_path(bad)


def test_pipe_table_with_title() -> None:
    table = parse_table(body("get databases"))
    assert table["title"] == "Active DBMS Connections"
    assert table["columns"] == ["Logical DBMS", "Database Type", "Owner", "IP:Port", "Configuration", "Storage"]
    assert [r["Logical DBMS"] for r in table["rows"]] == ["almgm", "blockchain", "mydb", "system_query"]
    assert table["rows"][3]["Storage"] == "MEMORY"
    assert table["rows"][2]["Configuration"] == "Autocommit On, Fsync full (after each write)"


def test_pipe_table_fill_down() -> None:
    spec = {"kind": "table", "fill_down": ["Database"], "key": "tables"}
    rows = parse_reply(spec, body("get tables where dbms = mydb"), {}).data["tables"]
    assert rows == [
        {"Database": "mydb", "Table name": "big", "Local DBMS": "V", "Blockchain": "V"},
        {"Database": "mydb", "Table name": "t", "Local DBMS": "V", "Blockchain": "V"},
    ]
    schema = parse_table(body("get columns where dbms = mydb and table = t"))
    assert schema["title"] == "Schema for DBMS: 'mydb' and Table: 't'"
    assert schema["rows"][1] == {"Column Name": "insert_timestamp", "Column Type": "timestamp without time zone"}


def test_query_reply_in_each_format() -> None:
    j = parse_reply({"kind": "query"}, body('sql mydb format = json "select * from t"'), {})
    assert len(j.data["rows"]) == 5 and j.data["statistics"] == {"count": 5, "time": "00:00:00", "nodes": 0}
    t = parse_reply({"kind": "query"}, body('sql mydb format = table "select device, value from t limit 3"', "network"), {})
    assert t.data["rows"] == [{"device": "dev1", "value": 10.5}, {"device": "dev0", "value": 20.5},
                              {"device": "dev1", "value": 30.5}]
    assert t.data["statistics"]["count"] == 3 and t.text is not None and t.text.startswith("device value")
    lst = parse_reply({"kind": "query"}, body('sql mydb format = json:list and stat = false "select device, value from t limit 3"', "network"), {})
    assert lst.data["rows"][2] == {"device": "dev1", "value": 30.5} and lst.data["statistics"] is None


def test_pass_through_json_and_auto() -> None:
    assert parse_reply("text", body("get status"), {}).data == {"text": "el-test@127.0.0.1:32048 running"}
    assert parse_reply({"kind": "json", "key": "v"}, body("get version where format = mcp"), {}).data["v"]["node_name"] == \
        "el-test@127.0.0.1:32048"
    assert parse_reply("auto", body("get tables where dbms = * and format = json"), {}).data["data"]["mydb"]["t"]["local"] is True
    assert parse_reply("auto", body("get tables where dbms = mydb"), {}).data["rows"][0]["Table name"] == "big"
    assert parse_reply("auto", body("get version"), {}).data == {"text": "EdgeLake Version: 1.4.2604"}
    assert parse_reply("auto", "true", {}).data == {"data": True}


def test_non_json_reply_to_a_json_parser_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not JSON"):
        parse_reply({"kind": "json_path", "path": "$[*]"}, body("get status"), {})
    with pytest.raises(ParseError, match="no table"):
        parse_table("just words")


def test_parser_declarations_are_validated() -> None:
    assert validate_parser({"kind": "json_path", "path": "$[*].table.dbms", "unique": True}, set()) == []
    assert "kind 'xml'" in validate_parser({"kind": "xml"}, set())[0]
    assert "not a parameter" in validate_parser({"kind": "json_path", "path": "$[?(@.a == '{nope}')]"}, {"database"})[0]
    assert "does not take" in validate_parser({"kind": "text", "path": "$"}, set())[0]
    assert "unique must be" in validate_parser({"kind": "json_path", "unique": "yes"}, set())[0]
