"""The client's HTTP/1.1 reading on the wire: replies in pieces, framing by close, extra bytes, headers it refuses.

Every request goes on its own connection (the node closes each after one reply)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from standin import StandIn

from plexor import InvalidArgument
from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node

pytestmark = pytest.mark.anyio



@asynccontextmanager
async def raw_node(answer: Callable[[bytes], tuple[list[bytes], bool]]) -> AsyncIterator[tuple[EdgeLakeClient, list[bytes], list[int]]]:
    """A node on 127.0.0.1 that sends ``answer(request)``'s pieces one write at a time."""
    requests: list[bytes] = []
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                requests.append(head)
                pieces, close = answer(head)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.001)
                if close:
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = EdgeLakeClient([Node("raw", "127.0.0.1", port)], retries=0)
    try:
        yield client, requests, connections
    finally:
        await client.aclose()
        server.close()


CHUNKED = (b'HTTP/1.1 200 OK\r\nContent-Type: text/json\r\nTransfer-Encoding: chunked\r\n\r\n'
           b'11\r\n{"Status": "ok"}\n\r\n0\r\n\r\n')


async def test_a_reply_sent_byte_by_byte_is_read_whole() -> None:
    async with raw_node(lambda head: ([CHUNKED[i:i + 1] for i in range(len(CHUNKED))], False)) as (client, requests, conns):
        for _ in range(2):
            reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
            assert reply.status == 200 and reply.reason == "OK" and reply.framing_error is None
            assert reply.body == b'{"Status": "ok"}\n' and reply.headers["transfer-encoding"] == "chunked"
    assert len(requests) == 2 and len(conns) == 2


async def test_a_malformed_status_line_in_pieces_keeps_the_node_error() -> None:
    head = (b'HTTP/1.1 400 {"err_code": 29, "err_text": "No metadata info"}\r\n'
            b'Content-Type: text/json\r\nTransfer-Encoding: chunked\r\n\r\n')
    async with raw_node(lambda _: ([head[:20], head[20:50], head[50:]], True)) as (client, _, _c):
        reply = await client.send(client.nodes[0], "GET", "sql x format = json \"select 1\"", timeout=5)
    assert reply.status == 400 and reply.reason == '{"err_code": 29, "err_text": "No metadata info"}'
    assert reply.body == b"" and reply.framing_error


async def test_a_body_framed_by_closing_is_read_to_the_end_and_not_reused() -> None:
    reply_bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text\r\n\r\nline one\r\n"
    async with raw_node(lambda _: ([reply_bytes, b"line two\r\n"], True)) as (client, _, conns):
        for _ in range(2):
            reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
            assert reply.status == 200 and reply.body == b"line one\r\nline two\r\n" and reply.framing_error is None
    assert len(conns) == 2


@pytest.mark.parametrize("reply_bytes", [
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
])
async def test_a_reply_that_ends_the_connection_is_not_reused(reply_bytes: bytes) -> None:
    async with raw_node(lambda _: ([reply_bytes], False)) as (client, _, conns):
        for _ in range(2):
            assert (await client.send(client.nodes[0], "GET", "get status", timeout=5)).body == b"ok"
    assert len(conns) == 2


async def test_an_interim_reply_is_skipped() -> None:
    both = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    async with raw_node(lambda _: ([both[:30], both[30:]], False)) as (client, _, conns):
        for _ in range(2):
            reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
            assert reply.status == 200 and reply.reason == "OK" and reply.body == b"ok"
    assert len(conns) == 2


async def test_bytes_after_the_reply_drop_the_connection_not_the_reply() -> None:
    extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlater"
    async with raw_node(lambda _: ([extra], False)) as (client, _, conns):
        for _ in range(2):
            reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
            assert reply.body == b"ok" and reply.framing_error is None
    assert len(conns) == 2


async def test_a_body_cut_off_mid_chunk_is_a_framing_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"Query\": [{\"a\""
    async with raw_node(lambda _: ([cut], True)) as (client, _, _c):
        reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
    assert reply.status == 200 and reply.body == b'{"Query": [{"a"' and reply.framing_error


async def test_garbage_headers_are_an_unreadable_reply() -> None:
    async with raw_node(lambda _: ([b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"], True)) as (client, _, _c):
        with pytest.raises(EdgeLakeError, match="unreadable reply.*malformed"):
            await client.send(client.nodes[0], "GET", "get status", timeout=5)


async def test_the_request_on_the_wire() -> None:
    async with raw_node(lambda _: ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], False)) as (client, requests, _c):
        await client.send(client.nodes[0], "GET", "get status where format = json", destination="network", timeout=5)
        await client.send(client.nodes[0], "POST", "blockchain reload metadata", headers={"X-Extra": "1"}, timeout=5)
    port = client.nodes[0].port
    assert requests[0] == (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: AnyLog/1.23\r\n"
                           "Connection: close\r\ncommand: get status where format = json\r\ndestination: network\r\n\r\n").encode()
    assert requests[1] == (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: AnyLog/1.23\r\n"
                           "Connection: close\r\ncommand: blockchain reload metadata\r\nX-Extra: 1\r\nContent-Length: 0\r\n\r\n").encode()


@pytest.mark.parametrize(("command", "named"), [
    ("get status café", "'é' at position 14"),
    ("get status\r\nX-Evil: 1", "'\\r' at position 10"),
    ("get\x00status", "'\\x00' at position 3"),
])
async def test_a_command_a_header_cannot_carry_is_refused_before_sending(command: str, named: str) -> None:
    async with raw_node(lambda _: ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], False)) as (client, requests, _c):
        with pytest.raises(InvalidArgument) as err:
            await client.send(client.nodes[0], "GET", command, timeout=5)
        assert named in err.value.message and "printable ASCII" in (err.value.guidance or "")
        assert (await client.send(client.nodes[0], "GET", "get status\twith a tab", timeout=5)).body == b"ok"
    assert len(requests) == 1


async def test_non_ascii_in_a_query_is_a_clear_error_through_mcp(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "t", "where": "name = 'café'"})
        assert r.is_error and "cannot be sent: it holds 'é'" in r.content[0].text
        assert r.structured_content["error"]["type"] == "invalid_argument"
        assert not (await client.call_tool("edgelake_node_status", {})).is_error
    assert [req.command for req in node.requests] == ["get status where format = json"]


async def test_an_unframed_body_after_a_chunked_header_is_kept_as_the_body() -> None:
    err = b'{"method": "get", "node": "127.0.0.1", "err_code": 155, "err_text": "Failed to determine destination node"}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    async with raw_node(lambda _: ([head, err[:30], err[30:]], True)) as (client, _, _c):
        reply = await client.send(client.nodes[0], "GET", "get status", destination="network", timeout=5)
    assert reply.status == 200 and reply.body == err and reply.framing_error
