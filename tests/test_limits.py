"""Every surface bounded per caller (docs/security.md#limits), each through a real ``plexor serve``.

Each test drives one client to a limit and proves with a second, real MCP client that the server
still serves everyone else; where the limit is about memory, the server's own RSS is read from
``/proc``. Payloads are the smallest that still show the bound (the limits are lowered by their
settings for the test).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from conformance.serving import INIT, MCP_HEADERS, healthz, modern_post, serve_http

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def rss_mib(pid: int) -> float:
    """The resident set of process ``pid`` in MiB (Linux ``/proc``)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def deep_call(levels: int, rid: int | str = 41) -> bytes:
    nested = "[" * levels + "]" * levels
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": "test_echo", "arguments": {"text": "x", "deep": "@"}}}).replace(
        '"@"', nested).encode()


MODERN = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
          "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_echo"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "plexor-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def _modern_deep(levels: int) -> bytes:
    body = json.loads(deep_call(2))
    body["params"]["_meta"] = META
    return json.dumps(body).replace("[[]]", "[" * levels + "]" * levels).encode()


def _session(served, headers=None) -> dict[str, str]:
    r = httpx.post(served.url, json=INIT, headers={**MCP_HEADERS, **(headers or {})}, timeout=30)
    assert r.status_code == 200, r.text
    sent = {**MCP_HEADERS, **(headers or {}), "Mcp-Session-Id": r.headers["mcp-session-id"]}
    httpx.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=sent, timeout=30)
    return sent


def _answer(response: httpx.Response) -> dict:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return response.json()


async def _echo_through_sdk(url: str, mode: str, token: str | None = None) -> str:
    """A second, well-behaved client: the SDK's own, in era ``mode``; the echoed text."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        result = await client.call_tool("test_echo", {"text": "still served"})
        assert not result.is_error, result
        return str(result.content[0].text)


# ---------------------------------------------------------------- parsing
@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
async def test_nesting_is_refused_at_200_levels_in_both_eras(tmp_path, stateless):
    with serve_http(tmp_path, *(["--stateless"] if stateless else [])) as served:
        legacy = MCP_HEADERS if stateless else _session(served)
        for levels in (201, 900, 5000):
            for headers, body in ((legacy, deep_call(levels)), (MODERN, _modern_deep(levels))):
                r = httpx.post(served.url, content=body, headers=headers, timeout=30)
                assert r.status_code == 400, (levels, headers["MCP-Protocol-Version"], r.status_code, r.text[:300])
                error = r.json()
                assert error["id"] == 41 and error["error"]["code"] == -32600
                assert "nested deeper than 200 levels" in error["error"]["message"]
        # 200 levels below the message (params, arguments and 198 more) are still taken, as before
        ok = httpx.post(served.url, content=_modern_deep(198), headers=MODERN, timeout=30)
        assert ok.status_code == 200 and _answer(ok)["id"] == 41 and "result" in _answer(ok), ok.text[:300]
        for mode in ("legacy", "2026-07-28"):
            assert "still served" in await _echo_through_sdk(served.url, mode)


def test_an_echoed_progress_token_or_id_is_length_capped(tmp_path):
    with serve_http(tmp_path, env={"PLEXOR_MAX_ECHOED_LENGTH": "64"}) as served:
        sent = _session(served)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p" * 65}}}
        error = _answer(httpx.post(served.url, json=call, headers=sent, timeout=30))
        assert error["id"] == 5 and error["error"]["code"] == -32600, error
        assert "progress token is 65 characters" in error["error"]["message"]
        assert "PLEXOR_MAX_ECHOED_LENGTH" in error["error"]["message"]
        long_id = {**call, "id": "i" * 65, "params": {"name": "test_echo", "arguments": {"text": "x"}}}
        error = _answer(httpx.post(served.url, json=long_id, headers=sent, timeout=30))
        assert "request id is 65 characters" in error["error"]["message"]
        call["params"]["_meta"]["progressToken"] = "p" * 64  # at the limit: served, with its progress
        done = httpx.post(served.url, json=call, headers=sent, timeout=30)
        assert done.text.count('"progressToken":"' + "p" * 64) >= 1 and '"result"' in done.text
        modern = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "test_echo", "arguments": {"text": "x"}, "_meta": {**META, "progressToken": "q" * 65}}}
        error = _answer(httpx.post(served.url, json=modern, headers=MODERN, timeout=30))
        assert error["id"] == 6 and "progress token is 65 characters" in error["error"]["message"], error
        assert "still served" in modern_post(served, "tools/call", {"name": "test_echo", "arguments": {
            "text": "still served"}}, name="test_echo")[1]["result"]["content"][0]["text"]
        assert healthz(served)["kernel"]["state"] == "ready"
