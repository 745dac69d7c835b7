"""HTTP round trip on one keep-alive connection: `ping` against plexor and a bare Starlette app.

    python bench/http_rtt.py [--requests 2000] [--rounds 3]

Servers, both started at the start and measured in the same run:
  * starlette - a bare Starlette app under uvicorn (httptools) that parses the JSON-RPC body and answers
                `{"result": {}}`, on a socket created with IPPROTO_TCP (so TCP_NODELAY is on): the anchor
  * sdk       - the bare SDK low-level Server (bench/anchors/http_anchor.py), stateless Streamable HTTP,
                the same stack plexor serves through, on a socket with TCP_NODELAY
  * plexor    - `plexor serve --transport http --stateless` with the conformance fixture plugin only,
                answering `ping` (2025-11-25 era: the SDK answers over a short SSE stream)
  * plexor-json - the same with --json-response: one JSON body per POST, no SSE stream

One client, one connection per server, requests sent one after another (http.client; the request is
written in one send). Rounds interleave the servers. Prints p50/p90/p99 per round and the median p50
with the ratio to the anchor. Without TCP_NODELAY each reply after the first waits ~40 ms (Nagle's
algorithm holding the body until the headers are acknowledged, which delayed ACK postpones).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "tests" / "conformance" / "site"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25"}


def anchor(port_file: str, kind: str) -> None:
    """An anchor (run in its own process by --anchor): the bare Starlette app, or the bare SDK server."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def mcp(request: Request) -> JSONResponse:
        msg = json.loads(await request.body())
        return JSONResponse({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

    if kind == "sdk":
        sys.path.insert(0, str(HERE / "anchors"))
        from http_anchor import build_app

        app = build_app()
    else:
        app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    Path(port_file).write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(app, log_level="warning", access_log=False, http="httptools")
    uvicorn.Server(config).run(sockets=[sock])


def start_anchor(tmp: Path, kind: str) -> tuple[subprocess.Popen, int]:
    port_file = tmp / f"{kind}.port"
    proc = subprocess.Popen([sys.executable, __file__, "--anchor", str(port_file), "--kind", kind])
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "the anchor did not start"
        time.sleep(0.05)
    return proc, int(port_file.read_text())


def start_plexor(tmp: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(tmp / "home"), PLEXOR_PLUGINS="conformance", PLEXOR_LOG_LEVEL="warning",
               PYTHONPATH=os.pathsep.join(p for p in (str(FIXTURE), env.get("PYTHONPATH", "")) if p))
    err = tmp / f"plexor{len(extra)}.err"
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless",
                             "--port", "0", *extra], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(err, "wb"), env=env)
    deadline = time.monotonic() + 60
    while not (m := re.search(r"on http://127\.0\.0\.1:(\d+)", err.read_text(errors="replace"))):
        assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    port = int(m.group(1))
    while True:  # ready once /healthz says so
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if json.loads(conn.getresponse().read())["kernel"]["state"] == "ready":
                conn.close()
                return proc, port
        except (OSError, ValueError, KeyError):
            pass
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.1)


def measure(port: int, requests: int) -> list[float]:
    """Seconds per round trip of ``requests`` pings on one keep-alive connection (after 50 warm-up ones)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times = []
    for i in range(requests + 50):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode()
        started = time.perf_counter()
        conn.request("POST", "/mcp", body, HEADERS)
        resp = conn.getresponse()
        data = resp.read()
        elapsed = time.perf_counter() - started
        if resp.status != 200 or b'"result"' not in data:
            raise SystemExit(f"port {port}: unexpected answer {resp.status} {data[:200]!r}")
        if i >= 50:
            times.append(elapsed)
    conn.close()
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--anchor", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="starlette", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.anchor:
        anchor(args.anchor, args.kind)
        return
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        servers = [("starlette", *start_anchor(tmp, "starlette")), ("sdk", *start_anchor(tmp, "sdk")),
                   ("plexor", *start_plexor(tmp)), ("plexor-json", *start_plexor(tmp, "--json-response"))]
        p50s: dict[str, list[float]] = {name: [] for name, _, _ in servers}
        try:
            for rnd in range(1, args.rounds + 1):
                for name, _proc, port in servers:
                    times = measure(port, args.requests)
                    p50s[name].append(pct(times, 0.5))
                    print(f"round {rnd} {name:11s} p50 {pct(times, 0.5):6.3f} ms  p90 {pct(times, 0.9):6.3f} ms  "
                          f"p99 {pct(times, 0.99):6.3f} ms  max {max(times) * 1000:6.2f} ms", flush=True)
        finally:
            for _name, proc, _port in servers:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    base = statistics.median(p50s["starlette"])
    for name, values in p50s.items():
        med = statistics.median(values)
        print(f"{name:11s} median p50 {med:6.3f} ms ({min(values):.3f}-{max(values):.3f})  x{med / base:.2f} of starlette")


if __name__ == "__main__":
    main()
