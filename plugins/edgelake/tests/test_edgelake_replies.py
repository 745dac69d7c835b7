"""Every malformed reply of the capture becomes an error naming node, command, code, text and advice."""

from __future__ import annotations

import re
from typing import Any

import pytest
from standin import StandIn

from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node
from plexor_edgelake.replies import ERROR_ADVICE, check

pytestmark = pytest.mark.anyio


def client_for(node: StandIn, **kw: Any) -> tuple[EdgeLakeClient, Node]:
    n = Node("edge1", "127.0.0.1", node.port)
    return EdgeLakeClient([n], **kw), n


async def judged(node: StandIn, command: str, method: str = "GET", destination: str | None = None,
                 **kw: Any) -> tuple[str, str | None]:
    client, n = client_for(node)
    try:
        reply = await client.send(n, method, command, destination=destination, timeout=5)
        return check(reply, destination=destination, **kw)
    finally:
        await client.aclose()


async def refused(node: StandIn, command: str, method: str = "GET", destination: str | None = None) -> EdgeLakeError:
    with pytest.raises(EdgeLakeError) as err:
        await judged(node, command, method, destination)
    return err.value


@pytest.mark.parametrize(("command", "destination", "code", "text", "http"), [
    # the error JSON in the status line, chunked declared, the same JSON unframed
    ("get node info", None, 2, "Error Command Structure", 400),
    ('sql mydb format = json "select * from no_such_table"', None, 29, "No metadata info", 400),
    ('sql nodb format = json "select * from t"', None, 5, "Wrong DBMS Name or DBMS not connected", 400),
    ('sql mydb format = json "selec bogus"', None, 16, "SQL Failure", 400),
    ("get columns where dbms = mydb and table = nope and format = json", None, 132,
     "Local table not declared in blockchain", 400),
    # a plain 400 with the error in the body
    ("info table mydb temperature columns", None, 156, "Wrong HTTP method used", 400),
    # 200 OK whose body is an error object, chunk-framed or not
    ('sql mydb format = json "select * from no_such_table"', "network", 45,
     "Failed to load table metadata from blockchain", 200),
    ('sql mydb format = json "selec bogus"', "network", 155, "Failed to determine destination node", 200),
    ("get status where format = mcp", "127.0.0.1:32048,127.0.0.1:32048", 20,
     "IP and Port of destination servers are not properly provided", 200),
    ('sql mydb format = mcp "select device, value from temperature limit 3"', "network", 175,
     "Wrong value assigned to a key", 200),
])
async def test_captured_error_replies(node: StandIn, command: str, destination: str | None, code: int, text: str,
                                      http: int) -> None:
    err = await refused(node, command, destination=destination)
    assert err.data["err_code"] == code and err.data["err_text"] == text and err.data["http_status"] == http
    assert err.data["node"] == "edge1" and err.data["command"] == command
    assert f"EdgeLake node edge1 (127.0.0.1:{node.port}) answered {command!r} with error {code}: {text}" in err.message
    assert err.guidance and len(err.guidance) > 40 and err.guidance == ERROR_ADVICE[code]


async def test_an_unknown_select_column_is_advised_as_such(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "select bogus_col from temperature limit 3"', destination="network")
    assert "Column 'bogus_col' is not recognized" in err.message
    assert (err.guidance or "").startswith("The node does not know a column") and "IN as" not in (err.guidance or "")


async def test_the_operators_detail_is_surfaced(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "select * from humidity where device in (\'dev1\',\'dev2\') limit 3"',
                        destination="network")
    assert "the operator says: Process failed with parsing of WHERE condition: 'device in('dev1','dev2')'" in err.message
    assert err.data["operator_msg"].startswith("From operator at: 127.0.0.1:32048")
    assert "IN as equalities joined by or" in (err.guidance or "")
    sqlite = await refused(node, 'sql mydb format = json "select * from temperature where bogus_col = 1 limit 3"',
                           destination="network")
    assert "no such column: bogus_col" in sqlite.message and "edgelake_get_schema" in (sqlite.guidance or "")


def test_every_code_named_in_issue_15_has_specific_advice() -> None:
    for code in (11, 16, 46, 50, 82, 132, 181):
        assert code in ERROR_ADVICE and len(ERROR_ADVICE[code]) > 60


async def test_status_line_error_keeps_the_local_message(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "select * from no_such_table"')
    assert "Table 'no_such_table' in DBMS 'mydb' not defined (using 'sqlite')" in err.message
    assert err.data["reported_in"] == "status line"
    assert "edgelake_list_tables" in (err.guidance or "")


async def test_wrong_method_advice_names_the_fix(node: StandIn) -> None:
    err = await refused(node, "info table mydb temperature columns")
    assert "method: POST" in (err.guidance or "")


async def test_empty_200_replies_say_why(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "select device, count(*) from temperature group by device '
                              'order by count(*) desc"', destination="network")
    assert "200 OK" in err.message and "ordering by an aggregate" in (err.guidance or "")
    local = await refused(node, 'sql mydb format = json "select count(*) from temperature where timestamp >= NOW() - 2 hours"')
    assert "increments(), period() and NOW()" in (local.guidance or "")


async def test_framed_empty_200_is_an_error_too(node: StandIn) -> None:
    node.overrides["get empty"] = b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 0\r\n\r\n"
    err = await refused(node, "get empty")
    assert err.data["err_text"] == "empty reply" and "empty reply" in err.message


async def test_info_tables_empty_reply_is_accepted_only_where_declared(node: StandIn) -> None:
    body, relayed = await judged(node, "info table mydb temperature columns", method="POST", empty_ok=True)
    assert body == "" and relayed is None
    err = await refused(node, "info table mydb temperature columns", method="POST")
    assert err.data["err_text"] == "empty reply"


async def test_cut_off_reply(node: StandIn) -> None:
    node.overrides["get cut"] = b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 50\r\n\r\n{\"partial\": "
    err = await refused(node, "get cut")
    assert "cut its reply" in err.message and "after 12 bytes" in err.message


async def test_garbage_instead_of_http(node: StandIn) -> None:
    node.overrides["get garbage"] = b"SSH-2.0-OpenSSH_9.6\r\n\r\n"
    err = await refused(node, "get garbage")
    assert "unreadable reply" in err.message and "REST port" in (err.guidance or "")


async def test_relayed_reply_prefix_is_removed(node: StandIn) -> None:
    body, relayed = await judged(node, "get version", destination="127.0.0.1:32048")
    assert body.strip() == "EdgeLake Version: 1.4.2604" and relayed == "127.0.0.1:32048"


async def test_every_captured_reply_is_judged(node: StandIn) -> None:
    client, n = client_for(node)
    try:
        for rec in node.records:
            if rec.note:
                continue
            reply = await client.send(n, rec.method, rec.command, destination=rec.destination or None, timeout=5)
            content = re.sub(rb"^\s*\[From Node [^\]]+\]", b"", rec.content)
            if rec.status_line.startswith(b"HTTP/1.1 200") and content.strip() and b"err_code" not in content:
                # (a reply ending in err_code after rows is an error too: see test_edgelake_faults)
                body, _ = check(reply)
                assert body.strip() or rec.destination
            else:
                with pytest.raises(EdgeLakeError):
                    check(reply, destination=rec.destination or None)
    finally:
        await client.aclose()


async def test_malformed_replies_through_mcp(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "no_such_table"})
        assert r.is_error and "with error 45: Failed to load table metadata from blockchain" in r.content[0].text
        assert r.structured_content["error"]["details"]["err_code"] == 45
        assert r.structured_content["error"]["details"]["node"] == node.address
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "temperature", "where": "no_column = 1"})
        assert r.is_error and "no such column: no_column" in r.content[0].text
        ok = await client.call_tool("edgelake_list_databases", {})
        assert not ok.is_error
