"""The client: one connection per request, calls in flight together, timeouts, retries, a node that is down,
bounded replies, row caps."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from standin import StandIn, free_port

from plexor_edgelake.client import EdgeLakeClient, Node, NodeUnreachable, ReplyTooLarge, parse_nodes

pytestmark = pytest.mark.anyio


async def test_one_connection_per_request_as_the_node_closes_each(edgelake: Any, node: StandIn) -> None:
    async with edgelake() as client:
        for _ in range(5):
            r = await client.call_tool("edgelake_node_status", {})
            assert not r.is_error
        bad = await client.call_tool("edgelake_query", {"database": "mydb", "table": "nope"})
        assert bad.is_error
        assert not (await client.call_tool("edgelake_node_status", {})).is_error
    assert len(node.requests) == 7 and node.connections == 7
    assert [r.connection for r in node.requests] == list(range(1, 8))
    assert all(r.headers["connection"] == "close" for r in node.requests)


async def test_several_calls_in_flight_at_once(edgelake: Any, node: StandIn) -> None:
    node.delays["get status"] = 0.4
    results: list[Any] = []
    async with edgelake() as client:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                async def one() -> None:
                    results.append(await client.call_tool("edgelake_node_status", {}))
                tg.start_soon(one)
        elapsed = time.perf_counter() - started
    assert all(not r.is_error for r in results) and len(results) == 6
    assert node.peak_inflight == 6
    assert elapsed < 6 * 0.4 / 2  # together, not one after the other


async def test_max_connections_bounds_calls_in_flight(edgelake: Any, node: StandIn) -> None:
    node.delays["get status"] = 0.1
    async with edgelake(max_connections=2) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(client.call_tool, "edgelake_node_status", {})
    assert node.peak_inflight == 2 and node.connections == 6


async def test_timeout_is_guidance_and_the_server_keeps_working(edgelake: Any, node: StandIn) -> None:
    node.delays["get status"] = 3
    async with edgelake(timeout=0.3) as client:
        started = time.perf_counter()
        r = await client.call_tool("edgelake_node_status", {})
        assert time.perf_counter() - started < 2
        assert r.is_error
        text = r.content[0].text
        assert "did not answer 'get status where format = json' within 0.3 s" in text
        assert "raise the tool's timeout" in text and "[edgelake] timeout" in text
        assert r.structured_content["error"]["type"] == "edgelake_timeout"
        node.delays.clear()
        assert not (await client.call_tool("edgelake_list_databases", {})).is_error
        assert not (await client.call_tool("plexor_health", {})).is_error


async def test_network_queries_use_the_network_timeout(edgelake: Any, node: StandIn) -> None:
    node.delays["sql "] = 0.5
    async with edgelake(timeout=0.2, network_timeout=5) as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "bulk", "limit": 1})
        assert not r.is_error, r.content[0].text
    async with edgelake(timeout=5, network_timeout=0.2) as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "bulk", "limit": 1})
        assert r.is_error and "within 0.2 s" in r.content[0].text and "network_timeout" in r.content[0].text


async def test_node_down_is_guidance_and_the_rest_keeps_working(edgelake: Any) -> None:
    port = free_port()
    async with edgelake(nodes=[f"127.0.0.1:{port}"], retries=2, backoff=0.05) as client:
        started = time.perf_counter()
        r = await client.call_tool("edgelake_list_databases", {})
        elapsed = time.perf_counter() - started
        assert r.is_error
        text = r.content[0].text
        assert f"EdgeLake node 127.0.0.1:{port} is unreachable" in text and "3 attempts" in text
        assert "Start the node" in text and "set [edgelake] nodes" in text
        assert r.structured_content["error"]["type"] == "edgelake_unreachable"
        assert elapsed >= 0.05 + 0.1  # two backoffs: 0.05 then 0.1
        assert not (await client.call_tool("edgelake_server_info", {})).is_error
        health = await client.call_tool("plexor_health", {})
        assert not health.is_error
        states = {p["name"]: p["state"] for p in (await client.call_tool("plexor_plugins", {})).structured_content["plugins"]}
        assert states["edgelake"] == "ready"


async def test_retry_with_backoff_reaches_a_node_that_comes_up() -> None:
    port = free_port()
    late = StandIn(port=port)
    timer = threading.Timer(0.15, late.start)
    timer.start()
    client = EdgeLakeClient([Node("late", "127.0.0.1", port)], retries=4, backoff=0.1)
    try:
        reply = await client.send(client.nodes[0], "GET", "get status", timeout=5)
        assert reply.status == 200 and reply.body == b"el-test@127.0.0.1:32048 running"
        assert 1 <= client.stats["retries"] <= 4
    finally:
        timer.join()
        await client.aclose()
        late.stop()


def _full_listener() -> tuple[Any, Any]:
    """A listening socket whose accept queue is full: the next connect stays in progress (its SYN dropped)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    filler = socket.create_connection(srv.getsockname())  # takes the one place in the queue
    return srv, filler


async def test_a_connection_that_takes_long_is_bounded_by_connect_timeout() -> None:
    srv, filler = _full_listener()
    port = srv.getsockname()[1]
    client = EdgeLakeClient([Node("slow", "127.0.0.1", port)], connect_timeout=0.3, retries=1, backoff=0.01)
    try:
        started = time.perf_counter()
        with pytest.raises(NodeUnreachable) as err:
            await client.send(client.nodes[0], "GET", "get status", timeout=10)
        elapsed = time.perf_counter() - started
    finally:
        await client.aclose()
        filler.close()
        srv.close()
    assert 0.55 <= elapsed < 3  # two attempts of 0.3 s, not the 10 s call timeout
    assert "no connection within 0.3 s ([edgelake] connect_timeout)" in err.value.message
    assert "2 attempts" in err.value.message and client.stats["retries"] == 1


async def test_the_request_waits_for_a_slow_handshake_then_goes_out() -> None:
    """Off loopback a connect is still in progress when the request is first tried: it must wait, then send."""
    srv, filler = _full_listener()
    port = srv.getsockname()[1]
    seen: list[bytes] = []

    def serve() -> None:
        time.sleep(0.2)
        first, _ = srv.accept()  # frees the queue; the client's SYN gets in when it is sent again
        first.close()
        conn, _ = srv.accept()
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        seen.append(request)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrunning")
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    client = EdgeLakeClient([Node("slow", "127.0.0.1", port)], connect_timeout=5, retries=0)
    try:
        started = time.perf_counter()
        reply = await client.send(client.nodes[0], "GET", "get status", timeout=10)
        elapsed = time.perf_counter() - started
    finally:
        thread.join(10)
        await client.aclose()
        filler.close()
        srv.close()
    assert reply.status == 200 and reply.body == b"running"
    assert elapsed >= 0.2 and len(seen) == 1 and b"command: get status\r\n" in seen[0]
    assert client.stats["connections_opened"] == 1 and client.stats["retries"] == 0


async def test_a_reply_cut_by_a_reset_is_a_connection_failure_and_retried() -> None:
    """The node resets the connection halfway through its reply: reported as unreachable, after the retries."""
    import socket
    import struct

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    served: list[int] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = srv.accept()
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nContent-Length: 100\r\n\r\npartial")
            time.sleep(0.05)  # the client is waiting in the loop for the rest when the reset arrives
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            served.append(1)

    thread = threading.Thread(target=serve)
    thread.start()
    client = EdgeLakeClient([Node("flaky", "127.0.0.1", port)], retries=1, backoff=0.01)
    try:
        with pytest.raises(NodeUnreachable) as err:
            await client.send(client.nodes[0], "GET", "get status", timeout=5)
    finally:
        thread.join(10)
        await client.aclose()
        srv.close()
    assert "Connection reset by peer" in err.value.message and "2 attempts" in err.value.message
    assert len(served) == 2


async def test_commands_that_change_things_are_not_retried(node: StandIn) -> None:
    port = free_port()
    client = EdgeLakeClient([Node("down", "127.0.0.1", port)], retries=3, backoff=0.01)
    with pytest.raises(NodeUnreachable, match="1 attempt,"):
        await client.send(client.nodes[0], "POST", "blockchain reload metadata", timeout=2, read_only=False)
    assert client.stats["retries"] == 0


async def test_a_reply_larger_than_max_reply_bytes_is_abandoned_with_the_setting_named(node: StandIn) -> None:
    def endless() -> Any:
        yield b"HTTP/1.1 200 OK\r\nContent-Type: text\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        for _ in range(4096):  # 256 MB unless the client stops reading
            yield b"10000\r\n" + b"x" * 65536 + b"\r\n"

    node.overrides["get huge"] = endless
    client = EdgeLakeClient([Node("edge1", "127.0.0.1", node.port)], max_reply_bytes=1_000_000)
    try:
        with pytest.raises(ReplyTooLarge) as err:
            await client.send(client.nodes[0], "GET", "get huge", timeout=10)
    finally:
        await client.aclose()
    assert "more than 1,000,000 bytes" in err.value.message and "[edgelake] max_reply_bytes" in err.value.message
    assert "PLEXOR_EDGELAKE_MAX_REPLY_BYTES" in (err.value.guidance or "")


def test_memory_stays_bounded_while_a_huge_reply_is_refused() -> None:
    """In a fresh process: a 512 MB reply against a 4 MB limit; peak RSS must not grow by more than 40 MB."""
    import subprocess
    import sys
    from pathlib import Path

    script = f"""
import asyncio, resource, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from standin import StandIn
from plexor_edgelake.client import EdgeLakeClient, Node, ReplyTooLarge

def endless():
    yield b"HTTP/1.1 200 OK\\r\\nContent-Type: text\\r\\nContent-Length: 536870912\\r\\nConnection: close\\r\\n\\r\\n"
    block = b"y" * 1048576
    for _ in range(512):
        yield block

async def main(port):
    client = EdgeLakeClient([Node("n", "127.0.0.1", port)], max_reply_bytes=4 * 1024 * 1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        await client.send(client.nodes[0], "GET", "get huge", timeout=60)
        print("NOT REFUSED")
    except ReplyTooLarge:
        pass
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((after - before) // 1024)

node = StandIn(overrides={{"get huge": endless}}).start()
asyncio.run(main(node.port))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert "NOT" not in lines and int(lines[-1]) < 40, out.stdout  # MB of peak RSS growth


async def test_large_results_come_back_complete(edgelake: Any) -> None:
    async with edgelake() as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "bulk", "limit": 2500})
    data = r.structured_content
    assert not r.is_error and data["row_count"] == 2500 and len(data["rows"]) == 2500
    assert data["truncated"] is False and data["rows"][-1]["row_id"] == 2500


async def test_row_cap_with_guidance(edgelake: Any) -> None:
    async with edgelake(max_rows=1000) as client:
        r = await client.call_tool("edgelake_query", {"database": "mydb", "table": "bulk", "limit": 2500})
    data = r.structured_content
    assert not r.is_error and data["row_count"] == 2500 and len(data["rows"]) == 1000 and data["truncated"] is True
    text = r.content[0].text
    assert "The reply had 2500 rows; the first 1000 are returned" in text and "raise max_rows" in text


def test_node_list_parsing() -> None:
    nodes = parse_nodes(["127.0.0.1:32049", "edge2=10.0.0.2:32049", "http://host.lan:1/"])
    assert [(n.name, n.address) for n in nodes] == [("127.0.0.1:32049", "127.0.0.1:32049"),
                                                     ("edge2", "10.0.0.2:32049"), ("host.lan:1", "host.lan:1")]
    assert parse_nodes("a=1.2.3.4:5,6.7.8.9:10")[1].port == 10
    from plexor import ConfigError

    for bad in [[], ["nohost"], ["1.2.3.4:99999"], ["a=1.1.1.1:1", "a=2.2.2.2:2"], [" ; rm:1"]]:
        with pytest.raises(ConfigError):
            parse_nodes(bad)


async def test_bad_node_setting_fails_the_plugin_clearly(plexor: Any, plexor_config: Any) -> None:
    plexor_config({"edgelake": {"nodes": ["not a node"]}})
    async with plexor.client(installed=["edgelake"]) as client:
        plugins = {p["name"]: p for p in (await client.call_tool("plexor_plugins", {})).structured_content["plugins"]}
        assert plugins["edgelake"]["state"] == "failed"
        assert "'not a node' is not host:port or name=host:port" in plugins["edgelake"]["error"]
        assert not (await client.call_tool("plexor_health", {})).is_error
