"""Every malformed reply of the recording becomes an error naming node, command, code, text and advice."""

from __future__ import annotations

from typing import Any

import pytest
from standin import StandIn

from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node
from plexor_edgelake.replies import check

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
    # the error JSON in the status line, chunked, no body
    ("get status where format = mcp include statistics", None, 2, "Error Command Structure", 400),
    ("get nonsense command", None, 2, "Error Command Structure", 400),
    ('sql mydb format = json "select * from no_such_table"', None, 29, "No metadata info", 400),
    # a plain 400 with the error in the body
    ("info table mydb t columns", None, 156, "Wrong HTTP method used", 400),
    ("blockchain reload metadata", None, 156, "Wrong HTTP method used", 400),
    # 200 OK whose body is an error object
    ('sql mydb format = json "select * from no_such_table"', "network", 45,
     "Failed to load table metadata from blockchain", 200),
    ('sql nodb format = json "select * from t"', "network", 45, "Failed to load table metadata from blockchain", 200),
    ('sql mydb format = mcp "select device, value from t limit 3"', "network", 175, "Wrong value assigned to a key", 200),
])
async def test_recorded_error_replies(node: StandIn, command: str, destination: str | None, code: int, text: str, http: int) -> None:
    err = await refused(node, command, destination=destination)
    assert err.data["err_code"] == code and err.data["err_text"] == text and err.data["http_status"] == http
    assert err.data["node"] == "edge1" and err.data["command"] == command
    assert f"EdgeLake node edge1 (127.0.0.1:{node.port}) answered {command!r} with error {code}: {text}" in err.message
    assert err.guidance and len(err.guidance) > 40


async def test_status_line_error_keeps_the_local_message(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "select * from no_such_table"')
    assert "Table 'no_such_table' in DBMS 'mydb' not defined (using 'sqlite')" in err.message
    assert err.data["reported_in"] == "status line"
    assert "edgelake_list_tables" in (err.guidance or "")


async def test_wrong_method_advice_names_the_fix(node: StandIn) -> None:
    err = await refused(node, "info table mydb t columns")
    assert "method: POST" in (err.guidance or "")


async def test_empty_200_reply_of_a_bad_network_query(node: StandIn) -> None:
    err = await refused(node, 'sql mydb format = json "selec bogus"', destination="network")
    assert "200 OK" in err.message and "selec bogus" in err.message
    assert "SQL statement is invalid" in (err.guidance or "") and "edgelake_get_schema" in (err.guidance or "")
    assert err.data["err_text"] in ("reply body missing", "empty reply")


async def test_framed_empty_200_is_an_error_too(node: StandIn) -> None:
    node.overrides["get empty"] = b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 0\r\n\r\n"
    err = await refused(node, "get empty")
    assert err.data["err_text"] == "empty reply" and "empty reply" in err.message


async def test_empty_reply_accepted_where_declared(node: StandIn) -> None:
    body, relayed = await judged(node, "blockchain reload metadata", method="POST", empty_ok=True)
    assert body == "" and relayed is None


async def test_cut_off_reply(node: StandIn) -> None:
    node.overrides["get cut"] = b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 50\r\n\r\n{\"partial\": "
    err = await refused(node, "get cut")
    assert "cut its reply" in err.message and "after 12 bytes" in err.message


async def test_garbage_instead_of_http(node: StandIn) -> None:
    node.overrides["get garbage"] = b"SSH-2.0-OpenSSH_9.6\r\n\r\n"
    err = await refused(node, "get garbage")
    assert "unreadable reply" in err.message and "REST port" in (err.guidance or "")


async def test_relayed_reply_prefix_is_removed(node: StandIn) -> None:
    body, relayed = await judged(node, "get status", destination="127.0.0.1:32048")
    assert body.strip() == "el-test@127.0.0.1:32048 running" and relayed == "127.0.0.1:32048"


async def test_every_recorded_success_passes_the_check(node: StandIn) -> None:
    client, n = client_for(node)
    bad = {156, 2, 29, 45, 175}
    try:
        for rec in node.records:
            reply = await client.send(n, rec.method, rec.command, destination=rec.destination or None, timeout=5)
            if rec.status_line.startswith(b"HTTP/1.1 200") and rec.body and b"err_code" not in rec.body:
                body, _ = check(reply)
                assert body.strip()
            else:
                with pytest.raises(EdgeLakeError) as err:
                    check(reply, destination=rec.destination or None)
                assert err.value.data.get("err_code") in bad | {None}
    finally:
        await client.aclose()


async def test_malformed_replies_through_mcp(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "no_such_table"})
        assert r.is_error and "with error 45: Failed to load table metadata from blockchain" in r.content[0].text
        assert r.structured_content["error"]["details"]["err_code"] == 45
        assert r.structured_content["error"]["details"]["node"] == node.address
        r = await client.call_tool("edgelake_query", {"database": "nodb", "table": "t"})
        assert r.is_error and "error 45" in r.content[0].text
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "t", "where": "no_column = 1"})
        assert r.is_error and "200 OK" in r.content[0].text and "edgelake_get_schema" in r.content[0].text
        # The server and the plugin are still fine afterwards.
        ok = await client.call_tool("edgelake_list_databases", {})
        assert not ok.is_error
