"""Helpers for tests that run `plexor serve` / `plexor connect` as real processes with the fixture plugin."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SITE = Path(__file__).resolve().parent / "site"


def fixture_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment with only the fixture plugin (namespace ``test``), an isolated PLEXOR_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PLEXOR_HOME"] = str(home)
    env["PLEXOR_PLUGINS"] = "conformance"
    env["PLEXOR_LOG_LEVEL"] = "warning"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    port: int
    stderr_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@contextlib.contextmanager
def serve_http(home: Path, *args: str, env: dict[str, str] | None = None, token: str | None = None,
               wait: float = 30.0) -> Iterator[Served]:
    """Run `python -m plexor serve --transport http --port 0 ARGS` until the block ends (then SIGTERM)."""
    home.mkdir(parents=True, exist_ok=True)
    err = home / f"serve-{time.monotonic_ns()}.err"
    full_env = fixture_env(home, **(env or {}))
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0", *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh, env=full_env)
    try:
        port = _wait_port(proc, err, wait)
        served = Served(proc, port, err)
        _wait_ready(served, token, wait)
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_port(proc: subprocess.Popen[bytes], err: Path, wait: float) -> int:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        m = re.search(r"on http://[^:]+:(\d+)", err.read_text(errors="replace"))
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            raise RuntimeError(f"plexor serve exited {proc.returncode}: {err.read_text(errors='replace')}")
        time.sleep(0.05)
    raise RuntimeError(f"plexor serve printed no port: {err.read_text(errors='replace')}")


def _wait_ready(served: Served, token: str | None, wait: float) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if healthz(served, token)["kernel"]["state"] == "ready":
                return
        if served.proc.poll() is not None:
            raise RuntimeError(f"plexor serve exited {served.proc.returncode}: {served.stderr()}")
        time.sleep(0.05)
    raise RuntimeError(f"plexor serve never became ready: {served.stderr()}")


def healthz(served: Served, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(f"{served.base}/healthz", headers=headers)
    with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "plexor-tests", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}


def modern_post(served: Served, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
                name: str | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """One raw 2026-07-28 request (stateless: the envelope rides in ``_meta``); returns (status, reply).

    Sent with http.client, which passes header values as given (httpx refuses surrounding spaces).
    """
    import http.client

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "plexor-tests", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {"elicitation": {}, "sampling": {}}}
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name:
        sent["Mcp-Name"] = name
    sent.update(headers or {})
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body), headers=sent)
        resp = conn.getresponse()
        status, kind, text = resp.status, resp.getheader("content-type") or "", resp.read().decode()
    finally:
        conn.close()
    if kind.startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1]
    return status, json.loads(text)


def stdio_answers(env: dict[str, str], text: str, ids: set[int], *args: str) -> dict[int, dict[str, Any]]:
    """Write ``text`` (JSON-RPC lines) to `python -m plexor serve ARGS` and read until every id in ``ids`` has its
    answer; stdin stays open meanwhile (closing it ends the server before slow answers)."""
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    answers: dict[int, dict[str, Any]] = {}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(text)
        proc.stdin.flush()
        while not ids <= answers.keys():
            line = proc.stdout.readline()
            assert line, answers  # the server ended before answering them all
            message = json.loads(line)
            if "id" in message:
                answers[message["id"]] = message
    finally:
        proc.kill()
        proc.wait()
    return answers
