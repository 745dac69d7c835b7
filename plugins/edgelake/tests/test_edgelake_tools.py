"""Every shipped tool and both resource templates, through the real kernel and a real MCP client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standin import StandIn

pytestmark = pytest.mark.anyio

SHIPPED = {"list_databases", "list_tables", "get_schema", "query", "node_status", "server_info",
           "blockchain_get", "info_table", "get_data_nodes"}


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    r = await client.call_tool(f"edgelake_{tool}", args)
    assert not r.is_error, r.content[0].text
    return r.structured_content


async def fail(client: Any, tool: str, **args: Any) -> str:
    r = await client.call_tool(f"edgelake_{tool}", args)
    assert r.is_error, r.content[0].text
    return r.content[0].text


async def test_every_shipped_tool_is_listed_with_a_schema(edgelake: Any) -> None:
    async with edgelake() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {n for n in tools if n.startswith("edgelake_")} == {f"edgelake_{n}" for n in SHIPPED}
        q = tools["edgelake_query"].input_schema
        assert set(q["required"]) == {"database", "table"}
        assert q["properties"]["limit"]["default"] == 100
        assert q["properties"]["format"]["enum"] == ["json", "table"]
        assert "order_by" in q["properties"] and "node" in q["properties"]
        assert tools["edgelake_info_table"].annotations.read_only_hint is True
        assert tools["edgelake_server_info"].annotations.open_world_hint is False
        assert "databases" in tools["edgelake_list_databases"].description


async def test_list_databases_and_tables(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        dbs = await call(client, "list_databases")
        assert dbs["databases"] == ["mydb"]
        assert dbs["source"] == {"node": node.address, "command": "blockchain get table"}
        tables = await call(client, "list_tables", database="mydb")
        assert tables["tables"] == ["big", "t"]
        text = await fail(client, "list_tables", database="nodb")
        assert "no tables are declared for database nodb" in text and "edgelake_list_databases" in text
    assert [(r.method, r.command, r.destination) for r in node.requests] == [("GET", "blockchain get table", "")] * 3
    assert node.requests[0].headers["user-agent"] == "AnyLog/1.23"


async def test_get_schema(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        schema = await call(client, "get_schema", database="mydb", table="t")
    assert schema["columns"][-1] == {"name": "value", "type": "decimal"}
    assert node.requests[-1].command == 'get columns where dbms="mydb" and table="t" and format=json'


async def test_query_end_to_end_through_sqlite(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        grouped = await call(client, "query", database="mydb", table="t", select="device, count(*), avg(value)",
                             group_by=["device"], order_by=[{"column": "device"}])
        filtered = await call(client, "query", database="mydb", table="t", select=["row_id", "value"],
                              where="device = 'dev1' and value > 20", order_by=[{"column": "value", "direction": "desc"}])
    assert grouped["rows"] == [{"device": "dev0", "count(*)": 2, "avg(value)": 30.5},
                               {"device": "dev1", "count(*)": 3, "avg(value)": 30.5}]
    assert grouped["row_count"] == 2 and grouped["statistics"]["nodes"] == 1
    assert filtered["rows"] == [{"row_id": 5, "value": 50.5}, {"row_id": 3, "value": 30.5}]
    sent = node.requests[-1]
    assert sent.method == "GET" and sent.destination == "network"
    assert sent.command == ('sql mydb format = json "select row_id, value from t where device = \'dev1\' and value > 20 '
                            'order by value desc limit 100"')


async def test_query_matching_a_recorded_command_gets_the_recorded_reply(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        top = await call(client, "query", database="mydb", table="t", order_by=[{"column": "value", "direction": "desc"}], limit=2)
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "t", "select": "device, value",
                                                      "limit": 3, "format": "table"})
    assert [row["row_id"] for row in top["rows"]] == [5, 4]
    assert top["rows"][0]["insert_timestamp"] == "2026-11-22 06:47:24.244874"  # the node's own row, replayed
    assert not r.is_error
    assert r.content[0].text.startswith("device value\n------ ----- \ndev1    10.5")
    assert r.structured_content["rows"][1] == {"device": "dev0", "value": 20.5}
    assert node.requests[-1].command == 'sql mydb format = table "select device, value from t limit 3"'


async def test_query_arguments_are_validated(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        assert "argument 'limit'" in await fail(client, "query", database="mydb", table="t", limit=0)
        assert "'format'" in await fail(client, "query", database="mydb", table="t", format="csv")
        assert "argument 'table' is required" in await fail(client, "query", database="mydb")
        assert "direction" in await fail(client, "query", database="mydb", table="t",
                                         order_by=[{"column": "value", "direction": "up"}])
    assert node.requests == []  # nothing bad reached the node


@pytest.mark.parametrize(("args", "expected"), [
    ({"where": "1=1\" and format = table"}, "double quote"),
    ({"where": "1=1; drop table t"}, "semicolon"),
    ({"where": "1=1 -- "}, "comment"),
    ({"where": "value in (select value from big)"}, "'select'"),
    ({"where": "1=1 union select * from big"}, "'union'"),
    ({"select": "device from big"}, "'from'"),
    ({"select": "* from big; --"}, "semicolon"),
    ({"table": "t where 1=1"}, "not a plain identifier"),
    ({"database": "mydb format = table"}, "not a plain identifier"),
    ({"group_by": ["device; drop table t"]}, "not a plain identifier"),
    ({"order_by": [{"column": "value desc, (select 1)"}]}, "refused"),
    ({"where": "device = 'x'\r\ncommand: exit node"}, "control character"),
])
async def test_injection_attempts_never_reach_the_node(edgelake: Any, node: StandIn, args: dict[str, Any], expected: str) -> None:
    async with edgelake() as client:
        text = await fail(client, "query", **{"database": "mydb", "table": "t", **args})
    assert expected in text
    assert node.requests == []


async def test_node_status_and_node_choice(edgelake: Any, node: StandIn) -> None:
    with StandIn() as second:
        async with edgelake(nodes=[node.address, f"edge2={second.address}"]) as client:
            status = await call(client, "node_status")
            other = await call(client, "node_status", node="edge2")
            by_address = await call(client, "node_status", node=second.address)
            text = await fail(client, "node_status", node="nowhere")
        assert len(second.requests) == 2
    assert status["status"] == {"assigned_name": "el-test@127.0.0.1:32048", "status": "running", "profiling": False}
    assert other["source"]["node"] == "edge2" and by_address["source"]["node"] == "edge2"
    assert "'nowhere' is not one of the configured EdgeLake nodes" in text and "edge2" in text
    assert len(node.requests) == 1


async def test_server_info_is_answered_by_the_plugin(edgelake: Any, node: StandIn) -> None:
    async with edgelake(network_timeout=90, max_rows=500) as client:
        info = await call(client, "server_info")
    assert node.requests == []
    assert info["version"] == "0.1.0"
    assert info["nodes"] == [{"name": node.address, "address": node.address, "default": True}]
    assert info["timeouts"]["network_queries"] == 90.0 and info["max_rows"] == 500
    by_name = {t["name"]: t for t in info["tools"]}
    assert by_name["edgelake_query"]["timeout"] == 90.0 and by_name["edgelake_query"]["destination"] == "network"
    assert by_name["edgelake_info_table"]["method"] == "POST"
    assert by_name["edgelake_list_tables"]["timeout"] == 20.0


async def test_blockchain_get_clauses_appear_exactly_when_given(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        everything = await call(client, "blockchain_get")
        tables = await call(client, "blockchain_get", policy_type="table", where="dbms = mydb and name = t")
        brought = await client.call_tool("edgelake_blockchain_get", {"policy_type": "table", "bring": "['table']['name']"})
        recorded = await call(client, "blockchain_get", policy_type="table", bring=".json")
        bad = await fail(client, "blockchain_get", where="dbms = mydb bring ['table']")
    assert [r.command for r in node.requests] == [
        "blockchain get *",
        "blockchain get table where dbms = mydb and name = t",
        "blockchain get table bring ['table']['name']",
        "blockchain get table bring.json",
    ]
    assert len(everything["policies"]) == 2
    assert [p["table"]["name"] for p in tables["policies"]] == ["t"]
    assert brought.content[0].text.split() == ["t", "big"]
    assert recorded["policies"][1]["table"]["name"] == "big"
    assert "'bring'" in bad


async def test_info_table_is_posted(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        cols = await call(client, "info_table", database="mydb", table="t")
        exists = await call(client, "info_table", database="mydb", table="nosuch", info_type="exists")
    assert [r.method for r in node.requests] == ["POST", "POST"]
    assert node.requests[0].command == "info table mydb t columns"
    assert cols["info"][0] == {"name": "row_id", "type": "integer"}
    assert exists["info"] is False


async def test_get_data_nodes_optionally_narrowed(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        every = await call(client, "get_data_nodes")
        one = await call(client, "get_data_nodes", database="mydb", table="big")
    assert [n["Table"] for n in every["nodes"]] == ["t", "big"]
    assert [n["Table"] for n in one["nodes"]] == ["big"] and one["nodes"][0]["External IP/Port"] == "127.0.0.1:32048"
    assert {r.command for r in node.requests} == {"get data nodes where format = json"}


async def test_resource_templates(edgelake: Any) -> None:
    async with edgelake() as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"edgelake://database/{database}", "edgelake://database/{database}/table/{table}"}
        db = await client.read_resource("edgelake://database/mydb")
        table = await client.read_resource("edgelake://database/mydb/table/t")
        assert json.loads(db.contents[0].text)["tables"] == ["big", "t"]
        columns = json.loads(table.contents[0].text)["columns"]
        assert [c["name"] for c in columns][:2] == ["row_id", "insert_timestamp"]
        with pytest.raises(Exception, match="no tables are declared for database nodb"):
            await client.read_resource("edgelake://database/nodb")
        with pytest.raises(Exception, match="not a plain identifier"):
            await client.read_resource("edgelake://database/my%20db")
