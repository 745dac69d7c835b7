"""Issue 27: never a silently wrong answer. Each case replays a real node's recorded replies
(``data/responses-3.txt``) through the real kernel and an MCP client; where the node's own answer to the
form the plugin no longer sends is recorded too, the test shows it differs, so each test can fail."""

from __future__ import annotations

import json
from typing import Any

import pytest
from standin import StandIn, load_records
from standin_replies import DATA

pytestmark = pytest.mark.anyio

READINGS = {"database": "mydb", "table": "readings"}


async def ask(client: Any, **args: Any) -> Any:
    return await client.call_tool("edgelake_query", {**READINGS, **args})


async def rows(client: Any, **args: Any) -> dict[str, Any]:
    r = await ask(client, **args)
    assert not r.is_error, r.content[0].text
    return r.structured_content


def recorded(command: str, destination: str = "") -> list[dict[str, Any]]:
    """The rows of a recorded raw reply (the node's own answer)."""
    rec = next(r for r in load_records(DATA / "responses-3.txt") if r.command == command and r.destination == destination)
    return list(json.loads(rec.content).get("Query", []))


def sent(node: StandIn) -> list[str]:
    return [r.command for r in node.requests if r.command.startswith("sql ")]


async def test_top_groups_by_an_average_are_ordered_here_from_every_group(edgelake: Any, node: StandIn) -> None:
    """Column types: tag int, value decimal. The network cuts groups before ordering by avg (recorded: 2, 1, 0)."""
    order = {"select": "tag, avg(value)", "group_by": ["tag"], "limit": 3,
             "order_by": [{"column": "avg(value)", "direction": "desc"}]}
    async with edgelake() as client:
        network = await rows(client, **order)
        local = await rows(client, **order, destination="local")
    assert sent(node)[0] == 'sql mydb format = json "select tag, avg(value) as order_1 from readings group by tag"'
    assert [r["tag"] for r in network["rows"]] == [r["tag"] for r in local["rows"]] == [2, 3, 1]
    assert set(network["rows"][0]) == {"tag", "avg(value)"} and network["row_count"] == 3
    assert "warnings" not in network  # grouped by an integer: no text for the network to lose
    node_own = recorded('sql mydb format = json "select tag, avg(value) as a from readings group by tag order by a '
                        'desc limit 3"', "network")
    assert [r["tag"] for r in node_own] == [2, 1, 0]  # what sending the ordering would have answered


@pytest.mark.parametrize(("where", "column_type"), [("code like '12%'", "int"), ("code like '-1%'", "int"),
                                                     ("tsd_name like '1%' and code < 100", "char(3)")])
async def test_a_like_prefix_is_sent_as_ranges_equal_for_the_columns_type(edgelake: Any, node: StandIn, where: str,
                                                                        column_type: str) -> None:
    async with edgelake() as client:
        network = await rows(client, select="count(*)", where=where)
        schema = await client.call_tool("edgelake_get_schema", READINGS)
        local = await rows(client, select="count(*)", where=where, destination="local") if "-1" not in where else None
    column = where.split()[0]
    assert {c["name"]: c["type"] for c in schema.structured_content["columns"]}[column] == column_type
    assert " like " not in sent(node)[0]
    if local is not None:
        assert network["rows"] == local["rows"] and network["rows"][0]["count(*)"] in (111, 25)
    if where == "code like '12%'":
        assert "code = 12 or (code >= 120 and code < 130) or (code >= 1200 and code < 1300)" in sent(node)[0]
        old = recorded('sql mydb format = json "select count(*) from readings where code >= \'12\' and code < \'13\'"',
                       "network")
        assert old == [{"count(*)": 1}]  # the rewrite this replaces: 1 row instead of 111


@pytest.mark.parametrize(("where", "why"), [("value like '5%'", "decimal column"), ("timestamp like '2026%'", "time"),
                                            ("code like '05%'", "matches nothing")])
async def test_a_like_without_an_equal_network_form_is_refused_before_sending(edgelake: Any, node: StandIn, where: str,
                                                                              why: str) -> None:
    async with edgelake() as client:
        r = await ask(client, select="count(*)", where=where)
    assert r.is_error and why in r.content[0].text
    assert sent(node) == []


@pytest.mark.parametrize("fmt", ["table", "json"])
async def test_a_reply_ending_in_a_node_error_after_rows_is_an_error(edgelake: Any, node: StandIn, fmt: str) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "big", "select": "k, a, b",
                                                      "where": "k < 400", "limit": 1000, "format": fmt})
    text = r.content[0].text
    assert r.is_error and "with 262 rows and then error 77: Query data volume above limit" in text
    assert "incomplete" in text and "max_volume" in text
    assert r.structured_content["error"]["details"]["truncated"] is True


@pytest.mark.parametrize("fmt", ["table", "json"])
async def test_rows_then_the_nodes_rest_timeout_is_an_error_not_a_short_answer(edgelake: Any, node: StandIn,
                                                                               fmt: str) -> None:
    """Recorded: the node streams one operator's 60 rows, then error 26 when the other never answers."""
    command = f'sql mydb format = {fmt} "select k, a, b from big where k < 60 limit 100"'
    raw = next(r for r in load_records(DATA / "responses-3.txt") if r.command == command).content
    assert b'"err_code": 26' in raw and b"row59" in raw  # the rows came, and then the node's error
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "big", "select": "k, a, b",
                                                      "where": "k < 60", "limit": 100, "format": fmt})
    assert sent(node) == [command]
    text = r.content[0].text
    assert r.is_error and "with 60 rows and then error 26: Time Out" in text
    assert "REST Server Timeout after 20s waiting for data from operators" in text
    assert "incomplete" in text and "did not answer" in text and "edgelake_get_data_nodes" in text
    details = r.structured_content["error"]["details"]
    assert details["truncated"] is True and details["rows_received"] == 60 and details["err_code"] == 26


async def test_table_values_are_typed_by_the_schema_and_null_is_null(edgelake: Any, node: StandIn) -> None:
    """Column types: tsd_name char(3) (digits), code int, value decimal (NULL in row 1), name varchar."""
    async with edgelake() as client:
        got = await rows(client, select="tsd_name, code, value, name, timestamp", where="code <= 7", format="table")
    first, fifth = got["rows"][0], got["rows"][4]
    assert first == {"tsd_name": "0", "code": 1, "value": None, "name": "alpha", "timestamp": "2026-11-20 00:00:00"}
    assert fifth["name"] is None and fifth["value"] == 59.325
    assert any("NULL, the empty text and the text 'null' alike" in w and "name" in w for w in got["warnings"])


@pytest.mark.parametrize(("destination", "blank", "said"), [("local", "", 'alike as ""'), ("network", None, "alike as null")])
async def test_json_nulls_are_null_where_the_type_says_so_and_flagged_where_not(
        edgelake: Any, node: StandIn, destination: str, blank: Any, said: str) -> None:
    async with edgelake() as client:
        got = await rows(client, select="code, value, name", where="code <= 7", destination=destination)
    assert got["rows"][0]["value"] is None  # a decimal column cannot hold "": NULL
    assert got["rows"][4]["name"] == blank and got["rows"][5]["name"] == blank  # '' and NULL: the node sends them alike
    assert len(got["warnings"]) == 1 and said in got["warnings"][0] and "name" in got["warnings"][0]


@pytest.mark.parametrize(("where", "count"), [
    ("timestamp >= '2026-11-23 12:00:00'", 1000),
    ("timestamp between '2026-11-23 12:00:00' and '2026-11-24 12:00:00'", 286),
])
async def test_local_time_literals_are_sent_in_the_stored_form(edgelake: Any, node: StandIn, where: str,
                                                             count: int) -> None:
    async with edgelake() as client:
        local = await rows(client, select="count(*)", where=where, destination="local")
        network = await rows(client, select="count(*)", where=where)
    assert local["rows"] == network["rows"] == [{"count(*)": count}]
    assert "'2026-11-23T12:00:00Z'" in sent(node)[0]
    if count == 1000:
        node_own = recorded('sql mydb format = json "select count(*) from readings where timestamp >= '
                            '\'2026-11-23 12:00:00\'"')
        assert node_own == [{"count(*)": 1142}]  # the node's answer to the literal as written


@pytest.mark.parametrize(("args", "expected"), [
    ({"select": "tag, code", "order_by": [{"column": "tag", "direction": "desc"}, {"column": "code"}], "limit": 4},
     [{"tag": 11, "code": 12}, {"tag": 10, "code": 11}, {"tag": 9, "code": 10}, {"tag": 8, "code": 9}]),
    ({"select": "tsd_name", "order_by": [{"column": "code", "direction": "desc"}], "limit": 3},
     [{"tsd_name": "1"}, {"tsd_name": "0"}, {"tsd_name": "11"}]),
    ({"select": "code as c", "order_by": [{"column": "code", "direction": "desc"}], "limit": 3},
     [{"c": 14}, {"c": 13}, {"c": 12}]),
])
async def test_orderings_the_network_gets_wrong_are_done_here(edgelake: Any, node: StandIn, args: dict[str, Any],
                                                             expected: list[dict[str, Any]]) -> None:
    """Several keys (not applied), a column not selected and an aliased column's name (an empty reply)."""
    async with edgelake() as client:
        got = await rows(client, where="code <= 14", **args)
    assert got["rows"] == expected and got["row_count"] == len(expected)
    assert " order by " not in sent(node)[0] and " limit " not in sent(node)[0]


async def test_an_ordering_of_numbers_only_stays_on_the_node(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        got = await rows(client, select="code, value", where="code <= 20", limit=3,
                         order_by=[{"column": "code", "direction": "desc"}])
    assert [r["code"] for r in got["rows"]] == [20, 19, 18] and "warnings" not in got
    assert sent(node) == ['sql mydb format = json "select code, value from readings where code <= 20 order by code desc '
                          'limit 3"']


async def test_grouping_text_over_the_network_warns_of_lost_apostrophe_rows(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        network = await rows(client, select="name, count(*)", group_by=["name"])
        local = await rows(client, select="name, count(*)", group_by=["name"], destination="local")
    assert network["row_count"] == 2 and local["row_count"] == 9  # the node's own loss, recorded
    assert any("apostrophe" in w and "NULL and the empty text in one group" in w for w in network["warnings"])
    assert not any("apostrophe" in w for w in local.get("warnings", []))


async def test_unescaped_double_quotes_in_network_json_suggest_destination_local(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "notes", "select": "n, note",
                                                      "where": "n < 6"})
        local = await rows(client, table="notes", select="n, note", where="n < 6", destination="local")
    assert r.is_error and "does not escape" not in r.content[0].text
    assert "double quote held in a text value without escaping it" in r.content[0].text
    assert "destination local" in r.content[0].text and "YAML" not in r.content[0].text
    assert local["rows"][0] == {"n": 0, "note": 'say "hi"'}


async def test_a_value_holding_a_double_quote_is_refused_before_sending(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "notes", "select": "n",
                                                      "where": "note = 'say \"hi\"'"})
    assert r.is_error and "holds a double quote" in r.content[0].text and "no escape" in r.content[0].text
    assert node.requests == []


async def test_error_21_after_a_restart_names_the_tcp_port(plexor: Any, plexor_config: Any) -> None:
    with StandIn(tcp_down=True) as down:
        plexor_config({"edgelake": {"nodes": [down.address], "retries": 0}})
        async with plexor.client(installed=["edgelake"]) as client:
            r = await ask(client, select="count(*)")
    text = r.content[0].text
    assert r.is_error and "error 21" in text and "TCP port could not be bound" in text and "Check the arguments" not in text


async def test_an_empty_network_answer_names_ordering_by_an_unselected_column(node: StandIn) -> None:
    from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node
    from plexor_edgelake.replies import check

    client = EdgeLakeClient([Node("n", "127.0.0.1", node.port)])
    command = 'sql mydb format = json "select tsd_name from readings where code <= 14 order by code desc limit 3"'
    try:
        reply = await client.send(client.node(None), "GET", command, destination="network", timeout=10)
    finally:
        await client.aclose()
    with pytest.raises(EdgeLakeError) as err:
        check(reply, destination="network")
    assert "reply body never arrived" in err.value.message and "not selected" in (err.value.guidance or "")
