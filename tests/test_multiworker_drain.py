"""Graceful drain behind a balancer: on SIGTERM /healthz turns 503 (so health checks send new requests
elsewhere) while the call in flight finishes and is answered."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
from conformance.serving import serve_http

SITE = str(Path(__file__).resolve().parent / "multihost" / "site")
ENV = {"PLEXOR_PLUGINS": "multihost", "PYTHONPATH": SITE}


def test_healthz_is_503_while_draining_and_the_call_in_flight_is_answered(tmp_path):
    with serve_http(tmp_path, "--stateless", "--json-response", "--grace", "10", env=ENV) as served:
        assert httpx.get(f"{served.base}/healthz").status_code == 200
        answer: list[httpx.Response] = []
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "multihost_slow", "arguments": {"seconds": 2},
                           "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                                     "io.modelcontextprotocol/clientCapabilities": {}}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "multihost_slow"}
        call = threading.Thread(target=lambda: answer.append(
            httpx.post(f"{served.url}", json=body, headers=headers, timeout=30)))
        call.start()
        deadline = time.monotonic() + 30
        while httpx.get(f"{served.base}/healthz").json()["kernel"]["inflight"] < 1:  # wait for the call to run
            assert time.monotonic() < deadline, "the call never started"
            time.sleep(0.02)
        served.proc.send_signal(signal.SIGTERM)
        statuses = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                reply = httpx.get(f"{served.base}/healthz", timeout=2)
            except httpx.TransportError:
                break
            statuses.append((reply.status_code, reply.json()["kernel"]["state"]))
            time.sleep(0.1)
        call.join(30)
        assert (503, "draining") in statuses, statuses
        assert answer and answer[0].status_code == 200, answer
        assert answer[0].json()["result"]["structuredContent"]["pid"] == served.proc.pid
