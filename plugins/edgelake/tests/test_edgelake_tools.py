"""Every shipped tool and both resource templates, through the real kernel and a real MCP client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standin import StandIn

pytestmark = pytest.mark.anyio

SHIPPED = {"list_databases", "list_tables", "get_schema", "query", "node_status", "server_info",
           "blockchain_get", "info_table", "get_data_nodes", "get_nodes", "monitor_nodes", "get_root_policies",
           "get_policy_children", "list_connections", "list_local_databases", "help_index", "help_topic",
           "help_command"}


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
        assert tools["edgelake_info_table"].annotations.read_only_hint is True  # partitions is a POST, but a read
        assert tools["edgelake_server_info"].annotations.open_world_hint is False
        assert "databases" in tools["edgelake_list_databases"].description


async def test_list_databases_and_tables(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        dbs = await call(client, "list_databases")
        assert dbs["databases"] == ["mydb"]
        assert dbs["source"] == {"node": node.address, "command": "blockchain get table"}
        tables = await call(client, "list_tables", database="mydb")
        assert tables["tables"] == ["bulk", "humidity", "temperature"]
        text = await fail(client, "list_tables", database="nodb")
        assert "no tables are declared for database nodb" in text and "edgelake_list_databases" in text
    assert [(r.method, r.command, r.destination) for r in node.requests] == [("GET", "blockchain get table", "")] * 3
    assert node.requests[0].headers["user-agent"] == "AnyLog/1.23"


async def test_empty_metadata_is_not_synced_guidance_not_no_databases(edgelake: Any, node: StandIn) -> None:
    node.metadata_synced = False
    async with edgelake() as client:
        text = await fail(client, "list_databases")
    assert "metadata not yet synced" in text and "retry" in text


async def test_get_schema(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        schema = await call(client, "get_schema", database="mydb", table="temperature")
        text = await fail(client, "get_schema", database="mydb", table="nope")
    assert schema["columns"][-1] == {"name": "value", "type": "decimal"}
    assert node.requests[0].command == "get columns where dbms = mydb and table = temperature and format = json"
    assert "error 132: Local table not declared in blockchain" in text and "edgelake_list_tables" in text


async def test_query_rows_come_back_from_the_network(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        rows = await call(client, "query", database="mydb", table="temperature", select="device, value",
                          where="device = 'dev1'", limit=3)
        grouped = await call(client, "query", database="mydb", table="bulk", select="device, count(*)",
                             group_by=["device"], order_by=[{"column": "device"}])
    assert [r["value"] for r in rows["rows"]] == [18.24, 15.72, 15.58] and rows["statistics"]["nodes"] == 1
    assert grouped["rows"][0] == {"device": "dev0", "count(*)": 500}
    sent = node.requests[0]
    assert sent.method == "GET" and sent.destination == "network"
    assert sent.command == 'sql mydb format = json "select device, value from temperature where device = \'dev1\' limit 3"'


@pytest.mark.parametrize(("where", "sent"), [
    ("device in ('dev1','dev2')", "device = 'dev1' or device = 'dev2'"),
    ("value between 30 and 40", "value >= 30 and value <= 40"),
    ("status <> 'ok'", "status != 'ok'"),
    ("not status = 'ok'", "status != 'ok'"),
    ("tsd_name like '21%'", "tsd_name >= '21' and tsd_name < '22'"),
    ("device not in ('dev1', 'dev2')", "device != 'dev1' and device != 'dev2'"),
    ("status is not null and device = 'dev1'", "status is not null and device = 'dev1'"),  # the operators parse it
])
async def test_network_where_is_rewritten_into_forms_the_operators_accept(edgelake: Any, node: StandIn, where: str,
                                                                           sent: str) -> None:
    async with edgelake() as client:
        rows = await call(client, "query", database="mydb", table="humidity", select="device, status", where=where,
                          limit=5)
        local = await call(client, "query", database="mydb", table="humidity", select="device, status", where=where,
                           limit=5, destination="local")
    sql = [r for r in node.requests if r.command.startswith("sql ")]  # a LIKE first reads the column types
    assert sql[0].command == f'sql mydb format = json "select device, status from humidity where {sent} limit 5"'
    assert sql[1].command == f'sql mydb format = json "select device, status from humidity where {where} limit 5"'
    assert sql[1].destination == ""
    assert rows["rows"] == local["rows"] and rows["row_count"] >= 1


@pytest.mark.parametrize(("args", "named"), [
    ({"where": "device = 'it''s'"}, "doubled quote"),
    ({"where": "status like '%a%'"}, "LIKE"),
    ({"where": "status like 'wa%'", "table": "humidity"}, "status >= 'wa' and status < 'wb'"),  # LIKE ignores case; a range does not
    ({"where": "not (status = 'ok' or device = 'dev1')"}, "NOT"),
    ({"select": "device, value * 2"}, "arithmetic"),
    ({"select": "device, value + 1 as v"}, "arithmetic"),
    ({"order_by": [{"column": "sum(value)"}], "group_by": ["device"], "select": "device"}, "unless the aggregate is selected"),
])
async def test_network_sql_that_cannot_be_rewritten_is_refused_before_sending(edgelake: Any, node: StandIn,
                                                                              args: dict[str, Any], named: str) -> None:
    async with edgelake() as client:
        text = await fail(client, "query", **{"database": "mydb", "table": "temperature", **args})
    assert named in text and "destination local" in text
    assert [r.command for r in node.requests if not r.command.startswith("get columns ")] == []


@pytest.mark.parametrize("destination", ["network", "local"])
async def test_arithmetic_inside_an_aggregate_is_refused_everywhere(edgelake: Any, node: StandIn, destination: str) -> None:
    async with edgelake() as client:
        text = await fail(client, "query", database="mydb", table="temperature", select="avg(value * 2)",
                          destination=destination)
        ok = await call(client, "query", database="mydb", table="temperature", select="count(*), avg(value)",
                        destination=destination)
    assert "avg(value * 2)" in text and "error 46" in text and "avg(value) * 2" in text
    sql = [r for r in node.requests if r.command.startswith("sql ")]  # aggregates over the network read the types
    assert len(sql) == 1 and ok["rows"][0]["count(*)"] == 300


async def test_order_by_an_aggregate_is_done_here_on_every_group(edgelake: Any, node: StandIn) -> None:
    """Over the network the operators cut the groups before ordering by an aggregate (wrong top N): every
    group is fetched, without order or limit, and ordered and limited here."""
    async with edgelake() as client:
        r = await call(client, "query", database="mydb", table="bulk", select="device, count(*)", group_by=["device"],
                       order_by=[{"column": "count(*)", "direction": "DESC"}, {"column": "device", "direction": "desc"}],
                       limit=2)
        aliased = await call(client, "query", database="mydb", table="temperature", select="device, max(value) as m",
                             group_by=["device"], order_by=[{"column": "max(value)", "direction": "Desc"}], limit=1)
        local = await call(client, "query", database="mydb", table="temperature", select="device, max(value) as m",
                           group_by=["device"], order_by=[{"column": "max(value)", "direction": "Desc"}], limit=1,
                           destination="local")
    sql = [r for r in node.requests if r.command.startswith("sql ")]  # after the column types lookup
    assert sql[0].command == 'sql mydb format = json "select device, count(*) as order_1 from bulk group by device"'
    assert r["rows"] == [{"device": "dev4", "count(*)": 500}, {"device": "dev3", "count(*)": 500}]
    assert r["row_count"] == 2
    assert sql[1].command == 'sql mydb format = json "select device, max(value) as m from temperature group by device"'
    assert aliased["rows"] == local["rows"] and len(aliased["rows"]) == 1


async def test_network_only_functions_are_refused_locally(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        text = await fail(client, "query", database="mydb", table="bulk", select="count(*)",
                          where="timestamp >= NOW() - 2 hours", destination="local")
        ok = await call(client, "query", database="mydb", table="bulk", select="count(*)",
                        where="timestamp >= NOW() - 2 hours")
    assert "NOW() answers nothing when the query runs on the node itself" in text
    assert len([r for r in node.requests if r.command.startswith("sql ")]) == 1 and "count(*)" in ok["rows"][0]


async def test_a_data_node_subset_is_the_destination(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await call(client, "query", database="mydb", table="temperature", select="device, value",
                       where="device = 'dev1'", limit=2, destination="127.0.0.1:32048, 127.0.0.1:32048")
    assert node.requests[0].destination == "127.0.0.1:32048" and r["row_count"] == 2
    assert r["source"]["destination"] == "127.0.0.1:32048"


async def test_table_format_keeps_every_row_of_every_page(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await call(client, "query", database="mydb", table="bulk", limit=2500, format="table")
        local = await call(client, "query", database="mydb", table="bulk", limit=2500, format="table",
                           destination="local")
    assert r["row_count"] == 2500 == r["statistics"]["count"] and r["truncated"] is False
    assert [row["row_id"] for row in r["rows"]] == list(range(1, 2501))
    assert local["row_count"] == 2500


async def test_query_arguments_are_validated(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        assert "argument 'limit'" in await fail(client, "query", database="mydb", table="bulk", limit=0)
        assert "'format'" in await fail(client, "query", database="mydb", table="bulk", format="csv")
        assert "argument 'table' is required" in await fail(client, "query", database="mydb")
        assert "direction" in await fail(client, "query", database="mydb", table="bulk",
                                         order_by=[{"column": "value", "direction": "up"}])
        assert "IP:Port" in await fail(client, "query", database="mydb", table="bulk", destination="somewhere")
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
        text = await fail(client, "query", **{"database": "mydb", "table": "bulk", **args})
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
    async with edgelake(network_timeout=90, max_rows=500, max_reply_bytes=1_000_000) as client:
        info = await call(client, "server_info")
    assert node.requests == []
    assert info["nodes"] == [{"name": node.address, "address": node.address, "default": True}]
    assert info["timeouts"]["network_queries"] == 90.0 and info["max_rows"] == 500
    assert info["max_reply_bytes"] == 1_000_000 and "one per request" in info["connections"]
    by_name = {t["name"]: t for t in info["tools"]}
    assert by_name["edgelake_query"]["timeout"] == 90.0 and by_name["edgelake_query"]["destination"] == "{destination}"
    assert by_name["edgelake_info_table"]["cases"]["partitions"] == "info table {database} {table} partitions"
    assert by_name["edgelake_list_tables"]["timeout"] == 20.0


async def test_blockchain_get_clauses_and_policy_type_lists(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        everything = await call(client, "blockchain_get")
        tables = await call(client, "blockchain_get", policy_type="table", where="dbms = mydb and name = bulk")
        several = await call(client, "blockchain_get", policy_type=["master", "query", "operator"])
        as_text = await call(client, "blockchain_get", policy_type="(master, operator)")
        bad = await fail(client, "blockchain_get", where="dbms = mydb bring ['table']")
    assert [r.command for r in node.requests] == [
        "blockchain get *",
        "blockchain get table where dbms = mydb and name = bulk",
        "blockchain get (master, query, operator)",
        "blockchain get (master, operator)",
    ]
    assert len(everything["policies"]) == 9
    assert [p["table"]["name"] for p in tables["policies"]] == ["bulk"]
    assert [next(iter(p)) for p in several["policies"]] == ["master", "operator"] == [next(iter(p)) for p in as_text["policies"]]
    assert "'bring'" in bad


async def test_info_table_answers_what_the_node_only_prints(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        cols = await call(client, "info_table", database="mydb", table="temperature")
        exists = await call(client, "info_table", database="mydb", table="bulk", info_type="exists")
        missing = await call(client, "info_table", database="mydb", table="nosuch", info_type="exists")
        parts = await fail(client, "info_table", database="mydb", table="temperature", info_type="partitions")
    assert [(r.method, r.command) for r in node.requests] == [
        ("GET", "get columns where dbms = mydb and table = temperature and format = json"),
        ("GET", "blockchain get table where dbms = mydb and name = bulk"),
        ("GET", "blockchain get table where dbms = mydb and name = nosuch"),
        ("POST", "info table mydb temperature partitions"),
    ]
    assert cols["columns"][0] == {"name": "row_id", "type": "integer"}
    assert exists["exists"] is True and missing["exists"] is False
    assert "error 82: Missing partition declaration" in parts and "no partition declaration" in parts


async def test_get_data_nodes_optionally_narrowed(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        every = await call(client, "get_data_nodes")
        one = await call(client, "get_data_nodes", database="mydb", table="bulk", company="testco")
        other = await call(client, "get_data_nodes", company="other co")
    assert [n["Table"] for n in every["nodes"]] == ["temperature", "humidity", "bulk"]
    assert [n["Table"] for n in one["nodes"]] == ["bulk"] and other["nodes"] == []
    assert [r.command for r in node.requests] == [
        "get data nodes where dbms = * and table = * and format = json",
        'get data nodes where dbms = mydb and table = bulk and format = json and company = "testco"',
        'get data nodes where dbms = * and table = * and format = json and company = "other co"']


async def test_upstream_tools_send_upstreams_commands(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        nodes = await call(client, "get_nodes")
        roots = await call(client, "get_root_policies")
        children = await call(client, "get_policy_children", parent_id="ad3b3c99935c8f3579fb41ee410efad2")
        conns = await call(client, "list_connections")
        dbs = await call(client, "list_local_databases")
        remote = await call(client, "list_local_databases", nodes="127.0.0.1:32048")
        types = await call(client, "blockchain_get", bring=".unique.json [*]")  # upstream's listPolicyTypes
    assert [r.command for r in node.requests] == [
        "blockchain get (master, query, operator) bring.json [*] [*][name] [*][ip] [*][port]",
        "blockchain get root policies",
        'blockchain get * where parent = "ad3b3c99935c8f3579fb41ee410efad2"',
        "get connections where format = json",
        "get databases where format = json",
        "get databases where format = json",
        "blockchain get * bring.unique.json [*]",
    ]
    assert [t["policy"] for t in types["policies"]] == ["master", "cluster", "operator", "table"]
    assert nodes["nodes"][1] == {"policy": "operator", "name": "el-operator", "ip": "127.0.0.1", "port": 32048}
    assert roots["policies"] == []
    assert [next(iter(p)) for p in children["policies"]] == ["cluster"] * 3
    assert {p["cluster"]["parent"] for p in children["policies"]} == {"ad3b3c99935c8f3579fb41ee410efad2"}
    assert conns["connections"][0]["REST"]["local"] == "127.0.0.1:32049"
    assert "mydb" in dbs["databases"][0] and remote["databases"][0]["node"] == "127.0.0.1:32048"
    assert node.requests[-2].destination == "127.0.0.1:32048"


@pytest.mark.parametrize(("status_type", "command", "field"), [
    ("status", "get status where format = json", "status"),
    ("version", "get version where format = mcp", "version"),
    ("resources", "get node resources where format = json", "memory_total"),
    ("cpu", "get cpu usage where format = json", "Average"),
])
async def test_monitor_nodes_asks_every_node_once(edgelake: Any, node: StandIn, status_type: str, command: str,
                                                  field: str) -> None:
    async with edgelake() as client:
        r = await call(client, "monitor_nodes", status_type=status_type)
    assert [(q.command, q.destination) for q in node.requests] == [
        ("blockchain get (master, query, operator) bring.ip_port", ""),
        (command, "127.0.0.1:32048"),  # the metadata names it twice (master and operator): sent once
    ]
    assert r["nodes"][0]["node"] == "127.0.0.1:32048" and field in r["nodes"][0]


async def test_network_is_refused_for_commands_that_are_not_queries(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        text = await fail(client, "monitor_nodes", nodes="network")
        conns = await fail(client, "list_connections", nodes="network")
    assert "only sql queries can be sent to the network" in text and "error 155" in text
    assert "ask every node of the network" in text and "ask this node" in conns
    assert node.requests == []


async def test_help_tools(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        index = await call(client, "help_index")
        topic = await call(client, "help_topic", topic="blockchain")
        one = await call(client, "help_command", command="get status")
        no_topic = await fail(client, "help_topic", topic="nosuchtopic")
        no_command = await fail(client, "help_command", command="no such command")
        bad = await fail(client, "help_command", command="get status where format = json")
    assert [r.command for r in node.requests] == [
        "help index where format = mcp", "help index blockchain where format = mcp",
        "help get status where format = mcp", "help index nosuchtopic where format = mcp",
        "help no such command where format = mcp"]
    assert "blockchain" in index["help"] and "blockchain get" in topic["help"]
    assert one["help"]["command"]["usage"].startswith("get status where format = [table/json/mcp]")
    assert "has no topic nosuchtopic" in no_topic and "edgelake_help_index" in no_topic
    assert "knows no command no such command" in no_command
    assert "'where'" in bad


async def test_dry_run_returns_the_request_without_sending_it(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        q = await call(client, "query", database="mydb", table="bulk", select="device", where="device in ('dev1')",
                       dry_run=True)
        p = await call(client, "info_table", database="mydb", table="bulk", info_type="partitions", dry_run=True)
        m = await call(client, "monitor_nodes", dry_run=True)
    assert node.requests == []
    command = 'sql mydb format = json "select device from bulk where device = \'dev1\' limit 100"'
    assert q["rest"] == {"method": "GET", "url": f"http://{node.address}/",
                         "headers": {"command": command, "User-Agent": "AnyLog/1.23", "destination": "network"}}
    assert q["cli"] == f"run client () {command}"
    assert q["curl"].startswith(f"curl -X GET http://{node.address}/ -H 'command: sql mydb")
    assert p["rest"]["method"] == "POST" and p["cli"] == "info table mydb bulk partitions"
    assert "blockchain get (master, query, operator) bring.ip_port" in m["cli"]


async def test_resource_templates(edgelake: Any) -> None:
    async with edgelake() as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"edgelake://database/{database}", "edgelake://database/{database}/table/{table}"}
        db = await client.read_resource("edgelake://database/mydb")
        table = await client.read_resource("edgelake://database/mydb/table/bulk")
        assert json.loads(db.contents[0].text)["tables"] == ["bulk", "humidity", "temperature"]
        columns = json.loads(table.contents[0].text)["columns"]
        assert [c["name"] for c in columns][:2] == ["row_id", "insert_timestamp"]
        with pytest.raises(Exception, match="no tables are declared for database nodb"):
            await client.read_resource("edgelake://database/nodb")
        with pytest.raises(Exception, match="not a plain identifier"):
            await client.read_resource("edgelake://database/my%20db")
        with pytest.raises(Exception, match="error 132: Local table not declared") as missing:
            await client.read_resource("edgelake://database/mydb/table/nope")
        assert missing.value.error.code == -32002  # not found, like an unknown database (was -32603)


async def test_repeated_and_alternating_queries_each_send_their_own_command(edgelake: Any, node: StandIn) -> None:
    # The plugin remembers the command rendered for the same arguments (issue 27, overhead): a repeat, another
    # where, another limit or another destination must each still send exactly their own command.
    base = {"database": "mydb", "table": "temperature", "select": "device, value"}
    calls = [({"where": "device = 'dev1'", "limit": 3}, "network"),
             ({"where": "device = 'dev2'", "limit": 3}, "network"),
             ({"where": "device = 'dev1'", "limit": 2}, "network"),
             ({"where": "device = 'dev1'", "limit": 3, "destination": "local"}, None),
             ({"where": "device = 'dev1'", "limit": 3}, "network")]
    async with edgelake() as client:
        results = [await call(client, "query", **base, **args) for args, _ in calls]
    sent = [(r.command, r.destination or None) for r in node.requests if r.command.startswith("sql ")]
    assert sent == [(f'sql mydb format = json "select device, value from temperature where {a["where"]} '
                     f'limit {a["limit"]}"', dest) for a, dest in calls]
    assert [r["source"]["command"] for r in results] == [c for c, _ in sent]
    assert [len(r["rows"]) for r in results][:3] == [3, 3, 2] and results[4]["rows"] == results[0]["rows"]
