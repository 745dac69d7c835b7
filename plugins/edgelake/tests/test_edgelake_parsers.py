"""Every parser kind, on the bodies the real node sent (from the capture, responses-2.txt)."""

from __future__ import annotations

import pytest
from standin import load_records

from plexor_edgelake.parsers import ParseError, compile_path, parse_reply, parse_table, validate_parser

BODIES: dict[tuple[str, str, str], str] = {}
for _r in load_records():
    BODIES.setdefault((_r.method, _r.command, _r.destination), _r.content.decode())


def body(command: str, destination: str = "") -> str:
    return BODIES[("GET", command, destination)]


def test_json_path_unique_sorted() -> None:
    spec = {"kind": "json_path", "path": "$[*].table.dbms", "unique": True, "sort": True, "key": "databases"}
    assert parse_reply(spec, body("blockchain get table bring.json"), {}).data == {"databases": ["mydb"]}
    names = {"kind": "json_path", "path": "$[*].table.name", "sort": True, "key": "tables"}
    assert parse_reply(names, body("blockchain get table bring.json"), {}).data == {"tables": ["bulk", "humidity", "temperature"]}


def test_json_path_filtered_by_an_argument() -> None:
    spec = {"kind": "json_path", "path": "$[?(@.table.dbms == '{database}')].table.name", "key": "tables"}
    assert parse_reply(spec, body("blockchain get table bring.json"), {"database": "mydb"}).data == {"tables": ["temperature", "humidity", "bulk"]}
    assert parse_reply(spec, body("blockchain get table bring.json"), {"database": "other"}).data == {"tables": []}


def test_json_path_filters_on_absent_optional_arguments_are_dropped() -> None:
    spec = {"kind": "json_path", "path": "$[?(@.DBMS == '{database}' && @.Table == '{table}')]", "key": "nodes"}
    text = body("get data nodes where dbms = * and table = * and format = json")
    assert len(parse_reply(spec, text, {"database": None, "table": None}).data["nodes"]) == 3
    only_t = parse_reply(spec, text, {"database": "mydb", "table": "bulk"}).data["nodes"]
    assert [n["Table"] for n in only_t] == ["bulk"]
    assert parse_reply(spec, text, {"database": "nodb", "table": None}).data["nodes"] == []


def test_json_path_entries_turn_an_object_into_rows() -> None:
    spec = {"kind": "json_path", "path": "$", "entries": {"key": "name", "value": "type"}, "key": "columns"}
    cols = parse_reply(spec, body("get columns where dbms = mydb and table = temperature and format = json"), {}).data["columns"]
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
        {"Database": "mydb", "Table name": "bulk", "Local DBMS": "V", "Blockchain": "V"},
        {"Database": "mydb", "Table name": "humidity", "Local DBMS": "V", "Blockchain": "V"},
        {"Database": "mydb", "Table name": "temperature", "Local DBMS": "V", "Blockchain": "V"},
    ]
    schema = parse_table(body("get columns where dbms = mydb and table = temperature"))
    assert schema["title"] == "Schema for DBMS: 'mydb' and Table: 'temperature'"
    assert schema["rows"][1] == {"Column Name": "insert_timestamp", "Column Type": "timestamp without time zone"}


def test_query_reply_in_each_format() -> None:
    j = parse_reply({"kind": "query"}, body('sql mydb format = json "select device, value from temperature where device = \'dev1\' limit 3"'), {})
    assert [r["value"] for r in j.data["rows"]] == [18.24, 15.72, 15.58]
    assert j.data["statistics"] == {"count": 3, "time": "00:00:00", "nodes": 0}
    t = parse_reply({"kind": "query"}, body('sql mydb format = table "select value, device, tsd_name from bulk limit 2"', "network"), {})
    assert t.data["rows"] == [{"value": 1000, "device": "dev0", "tsd_name": 212}, {"value": 1001, "device": "dev1", "tsd_name": 212}]
    assert t.data["statistics"]["count"] == 2 and t.text is not None and t.text.startswith("value device")
    lst = parse_reply({"kind": "query"}, body('sql mydb format = json:list and stat = false "select device, value from temperature limit 3"', "network"), {})
    assert lst.data["rows"][2] == {"device": "dev3", "value": 21.51} and lst.data["statistics"] is None
    none = parse_reply({"kind": "query"}, body('sql mydb format = json:list and stat = false "select device, value from temperature where device = \'nope\'"'), {})
    assert none.data["rows"] == []
    empty = parse_reply({"kind": "query"}, body('sql mydb format = table "select device, value from temperature where device = \'nope\'"'), {})
    assert empty.data["rows"] == [] and empty.data["statistics"]["count"] == 0


@pytest.mark.parametrize("destination", ["network", ""])
def test_paged_tables_keep_every_row(destination: str) -> None:
    """The node repeats the header every 25 rows locally and per operator block over the network."""
    reply = parse_reply({"kind": "query"}, body('sql mydb format = table "select * from bulk limit 60"', destination), {})
    assert reply.data["statistics"]["count"] == 60
    assert [r["row_id"] for r in reply.data["rows"]] == list(range(1, 61))
    assert reply.data["rows"][59]["value"] in (1059, 1059.0)
    two = parse_reply({"kind": "query"}, body('sql mydb format = table "select device, value from bulk limit 100"', destination), {})
    assert len(two.data["rows"]) == 100 and two.data["rows"][-1] == {"device": "dev4", "value": two.data["rows"][-1]["value"]}


def test_pass_through_json_and_auto() -> None:
    assert parse_reply("text", body("get status"), {}).data == {"text": "el-test@127.0.0.1:32048 running"}
    assert parse_reply({"kind": "json", "key": "v"}, body("get version where format = mcp"), {}).data["v"]["node_name"] == \
        "el-test@127.0.0.1:32048"
    assert parse_reply("auto", body("get tables where dbms = * and format = json"), {}).data["data"]["mydb"]["bulk"]["local"] is True
    assert parse_reply("auto", body("get tables where dbms = mydb"), {}).data["rows"][0]["Table name"] == "bulk"
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
