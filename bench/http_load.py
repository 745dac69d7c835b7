"""HTTP load: C concurrent clients x N tool calls against stateless Streamable HTTP.

    python bench/http_load.py [--clients 64] [--calls 100] [--workers 2] [--rounds 3] [--tools both]
                              [--client raw|sdk] [--era 2026-07-28|2025-11-25|both] [--gen-procs 1]

Servers, all started at the start and measured in the same run, on the same machine:
  * sdk           - the bare SDK low-level Server with one async echo tool (bench/anchors/http_anchor.py),
                    stateless, one process: the anchor
  * plexor        - `plexor serve --transport http --stateless` with every installed plugin loaded, plus the
                    conformance fixture and bench/site: calls `test_echo`, a plain function that plexor runs
                    in a worker thread as it does every sync tool by default
  * plexor async  - the same server, calling `bench_echo`: a coroutine, like the anchor's tool
  * plexor-wN ... - the same two with --workers N

Load generators (--client):
  * raw (default) - each client is one keep-alive HTTP/1.1 connection on plain asyncio streams that POSTs
    standalone JSON-RPC `tools/call` requests and checks every reply (the echoed text, no isError). It costs a
    small fraction of what the server spends per call, so the server is what is measured.
    Era 2026-07-28: every request carries the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers and the
    protocol version, client info and capabilities in params._meta (no handshake exists).
    Era 2025-11-25: the SDK's stateless mode serves a request without `initialize` when it carries the
    MCP-Protocol-Version header; the answer comes as an SSE stream.
  * sdk - each client is the SDK's own `mcp.Client` (initialize once in the 2025 era, then calls). Heavy: on a
    small machine the generator, not the server, sets the pace.
The generator runs in --gen-procs processes (default 1) that connect first and start together.

Rounds interleave the rows (sdk, plexor, plexor async, plexor-wN, ..., sdk, ...) so drift in machine load hits all of them.
Prints each round, then the median calls/s per server and era with the spread (min-max) and the ratio of the
medians to the SDK's, the CPU time per call of the server (all its processes) and of the generator (from
/proc and process_time; medians), how many CPUs everything else on the machine kept busy meanwhile ("others",
from /proc/stat), and the load average at the start and end. Exits 1 if any call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITES = (HERE.parent / "tests" / "conformance" / "site", HERE / "site")  # the fixture (test_echo), bench_echo
ERAS = ("2026-07-28", "2025-11-25")
HOST = "127.0.0.1"


# ------------------------------------------------------------------ generator (runs in child processes)
def _request_head(port: int, tool: str, era: str) -> bytes:
    lines = [
        "POST /mcp HTTP/1.1", f"Host: {HOST}:{port}", "Content-Type: application/json",
        "Accept: application/json, text/event-stream", f"MCP-Protocol-Version: {era}",
    ]
    if era >= "2026-07-28":
        lines += ["Mcp-Method: tools/call", f"Mcp-Name: {tool}"]
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode()


def _request_body(tool: str, era: str, request_id: int, text: str) -> bytes:
    params: dict = {"name": tool, "arguments": {"text": text}}
    if era >= "2026-07-28":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientInfo": {"name": "plexor-http-load", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers are sent
                break
            parts.append((await reader.readexactly(size + 2))[:-2])
        body = b"".join(parts)
    else:
        body = await reader.read()  # until the server closes
    return status, headers, body


def _reply(content_type: str, body: bytes, request_id: int) -> dict:
    """The JSON-RPC response for ``request_id`` from a JSON body or an SSE stream."""
    if content_type.startswith("application/json"):
        msg = json.loads(body)
        if msg.get("id") != request_id:
            raise ValueError(f"reply to request {msg.get('id')!r}, expected {request_id}")
        return msg
    for line in body.decode().splitlines():
        if line.startswith("data:"):
            msg = json.loads(line[5:])
            if msg.get("id") == request_id:
                return msg
    raise ValueError("no response for the request in the SSE stream")


class RawClient:
    """One keep-alive connection; each call is one standalone POST."""

    def __init__(self, port: int, tool: str, era: str) -> None:
        self.port, self.tool, self.era = port, tool, era
        self.head = _request_head(port, tool, era)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
            self.writer = None

    async def call(self, request_id: int, text: str) -> None:
        if self.writer is None:
            await self.connect()
        assert self.reader is not None and self.writer is not None
        body = _request_body(self.tool, self.era, request_id, text)
        self.writer.write(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        try:
            status, headers, raw = await _read_response(self.reader)
        except BaseException:
            await self.close()
            raise
        if headers.get("connection", "").lower() == "close":
            await self.close()
        if status != 200:
            raise ValueError(f"HTTP {status}: {raw[:200]!r}")
        msg = _reply(headers.get("content-type", ""), raw, request_id)
        result = msg.get("result")
        if result is None:
            raise ValueError(f"error reply: {json.dumps(msg)[:200]}")
        if result.get("isError") or (result.get("structuredContent") or {}).get("text") != text:
            raise ValueError(f"wrong reply: {json.dumps(result)[:200]}")


class SdkClient:
    """The SDK's own client: legacy mode (initialize) for 2025-11-25, the modern mode for 2026-07-28."""

    def __init__(self, port: int, tool: str, era: str) -> None:
        from contextlib import AsyncExitStack

        self.url, self.tool = f"http://{HOST}:{port}/mcp", tool
        self.mode = "legacy" if era < "2026-07-28" else era
        self.stack = AsyncExitStack()
        self.client = None

    async def connect(self) -> None:
        from mcp import Client

        self.client = await self.stack.enter_async_context(Client(self.url, mode=self.mode))

    async def close(self) -> None:
        await self.stack.aclose()

    async def call(self, request_id: int, text: str) -> None:
        r = await self.client.call_tool(self.tool, {"text": text})
        if r.is_error or (r.structured_content or {}).get("text") != text:
            raise ValueError(f"wrong reply: {r!r}"[:200])


async def _generate(spec: dict) -> None:
    """Child process: open the clients, say ready, wait for go, run, print the result as JSON.

    Each client is one task from connect to close (the SDK client's cancel scopes need that).
    """
    kind = RawClient if spec["client"] == "raw" else SdkClient
    samples: list[str] = []
    ok = errors = waiting = 0
    finished: list[float] = []
    all_connected = asyncio.Event()
    go = asyncio.Event()

    async def one(idx: int) -> None:
        nonlocal ok, errors, waiting
        client = kind(spec["port"], spec["tool"], spec["era"])
        try:
            await client.connect()
        except Exception as exc:  # noqa: BLE001 - a client that cannot connect loses all its calls
            samples.append(f"connect: {exc!r}"[:200])
            client = None
        waiting += 1
        if waiting == spec["clients"]:
            all_connected.set()
        await go.wait()
        if client is None:
            errors += spec["calls"]
            return
        try:
            for i in range(spec["calls"]):
                try:
                    await client.call(i + 1, f"g{spec['offset'] + idx}-{i}")
                    ok += 1
                except Exception as exc:  # noqa: BLE001 - counted
                    errors += 1
                    if len(samples) < 3:
                        samples.append(repr(exc)[:300])
            finished.append(time.monotonic())
        finally:
            await client.close()

    tasks = [asyncio.ensure_future(one(i)) for i in range(spec["clients"])]
    await all_connected.wait()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    started, cpu = time.monotonic(), time.process_time()
    go.set()
    await asyncio.gather(*tasks)
    ended, cpu = max(finished, default=time.monotonic()), time.process_time() - cpu
    print(json.dumps({"started": started, "ended": ended, "ok": ok, "errors": errors, "cpu": cpu, "samples": samples}),
          flush=True)


# ------------------------------------------------------------------------------------------- parent
def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_up(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its descendants (Linux /proc; 0.0 elsewhere)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                total += sum(cpu_seconds(int(child)) for child in fh.read().split())
    except (OSError, ValueError, IndexError):
        pass
    return total


def machine_cpu_seconds() -> float:
    """CPU seconds all processes have used since boot (Linux /proc/stat; 0.0 elsewhere)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def load(port: int, tool: str, era: str, clients: int, calls: int, client: str, procs: int,
         server_pid: int | None = None) -> dict:
    """Run the generator in ``procs`` processes that start together; calls/s over the whole span."""
    procs = max(1, min(procs, clients))
    share = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    children = []
    offset = 0
    for n in share:
        spec = {"port": port, "tool": tool, "era": era, "clients": n, "calls": calls, "client": client, "offset": offset}
        offset += n
        children.append(subprocess.Popen([sys.executable, __file__, "--generate", json.dumps(spec)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for child in children:
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("a load generator failed to start")
    server_cpu = cpu_seconds(server_pid) if server_pid else 0.0
    machine, wall = machine_cpu_seconds(), time.monotonic()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=3600)
        results.append(json.loads(out.strip().splitlines()[-1]))
    server_cpu = (cpu_seconds(server_pid) - server_cpu) if server_pid else 0.0
    machine, wall = machine_cpu_seconds() - machine, time.monotonic() - wall
    seconds = max(r["ended"] for r in results) - min(r["started"] for r in results)
    ok = sum(r["ok"] for r in results)
    calls_made = max(1, ok + sum(r["errors"] for r in results))
    return {"seconds": seconds, "ok": ok, "errors": sum(r["errors"] for r in results),
            "rate": ok / seconds if seconds else 0.0, "samples": [s for r in results for s in r["samples"]][:3],
            "server_us": server_cpu / calls_made * 1e6, "gen_us": sum(r["cpu"] for r in results) / calls_made * 1e6,
            # CPUs busy on average during the run with anything else (other jobs on the machine)
            "other": max(0.0, machine - server_cpu - sum(r["cpu"] for r in results)) / wall if wall else 0.0}


class Target:
    """One server process (tree) and the tools measured on it, each a row: (row name, tool)."""

    def __init__(self, cmd: list[str], port: int, env: dict[str, str], rows: list[tuple[str, str]]) -> None:
        self.port, self.rows = port, rows
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def warm(self, args: argparse.Namespace, eras: list[str]) -> None:
        """Wait until every tool and era answers a full-width burst with no errors (all workers up, paths warm)."""
        wait_up(self.port, self.proc)
        for name, tool in self.rows:
            for era in eras:
                for _ in range(30):
                    r = load(self.port, tool, era, args.clients, 5, args.client, 1)
                    if r["errors"] == 0:
                        break
                    time.sleep(1)
                else:
                    raise SystemExit(f"{name} keeps failing in warm-up ({era}): {r['samples']}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client", choices=("raw", "sdk"), default="raw")
    ap.add_argument("--era", choices=(*ERAS, "both"), default="both")
    ap.add_argument("--gen-procs", type=int, default=1)
    ap.add_argument("--tools", choices=("sync", "async", "both"), default="both",
                    help="plexor's echo: test_echo (a plain function, run in a worker thread), bench_echo (a coroutine)")
    ap.add_argument("--anchor-no-schema-lookup", action="store_true",
                    help="run the anchor without get_tool_input_schema (the SDK then lists tools on every call)")
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        asyncio.run(_generate(json.loads(args.generate)))
        return

    eras = list(ERAS) if args.era == "both" else [args.era]
    home = tempfile.mkdtemp(prefix="plexor-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=home, PLEXOR_LOG_LEVEL="warning",
               PYTHONPATH=os.pathsep.join(p for p in (*map(str, SITES), env.get("PYTHONPATH", "")) if p))
    # every installed plugin plus the fixture and the bench plugin (for their echo tools): PLEXOR_PLUGINS unset loads all
    print(f"load average at start: {loadavg()}  ({os.cpu_count()} CPUs)", flush=True)

    tools = [("", "test_echo"), (" async", "bench_echo")] if args.tools == "both" else \
        [("", "test_echo")] if args.tools == "sync" else [(" async", "bench_echo")]
    targets: list[Target] = []
    try:
        port = free_port()
        anchor = [sys.executable, str(HERE / "anchors" / "http_anchor.py"), str(port)]
        targets.append(Target(anchor + (["--no-schema-lookup"] if args.anchor_no_schema_lookup else []), port, env,
                              [("sdk", "echo")]))
        serve = [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless", "--port"]
        port = free_port()
        targets.append(Target(serve + [str(port)], port, env, [(f"plexor{suffix}", tool) for suffix, tool in tools]))
        if args.workers > 1:
            port = free_port()
            targets.append(Target(serve + [str(port), "--workers", str(args.workers)], port, env,
                                  [(f"plexor-w{args.workers}{suffix}", tool) for suffix, tool in tools]))
        for t in targets:
            t.warm(args, eras)

        names = [name for t in targets for name, _ in t.rows]
        rows: dict[tuple[str, str], list[dict]] = {}
        for rnd in range(1, args.rounds + 1):
            for era in eras:
                line = []
                for t in targets:
                    for name, tool in t.rows:
                        r = load(t.port, tool, era, args.clients, args.calls, args.client, args.gen_procs, t.proc.pid)
                        rows.setdefault((name, era), []).append(r)
                        line.append(f"{name} {r['rate']:.0f}/s" + (f" ({r['errors']} errors)" if r["errors"] else ""))
                print(f"round {rnd} {era}: " + ", ".join(line) + f"   load avg {loadavg()}", flush=True)
    finally:
        for t in targets:
            t.stop()

    print(f"\n{args.clients} clients x {args.calls} calls, {args.client} generator in {args.gen_procs} process(es), "
          f"stateless Streamable HTTP, {os.cpu_count()} CPUs, {args.rounds} rounds; load average at end {loadavg()}\n")
    print(f"{'server':<17} {'era':<11} {'median/s':>9} {'min-max':>13} {'ok':>7} {'errors':>6} {'vs sdk':>7} "
          f"{'server CPU':>11} {'gen CPU':>8} {'others':>6}")
    failed = False
    for era in eras:
        base = statistics.median(r["rate"] for r in rows[("sdk", era)]) or 1.0
        for name in names:
            rs = rows[(name, era)]
            rates = [r["rate"] for r in rs]
            med = statistics.median(rates)
            errors = sum(r["errors"] for r in rs)
            failed = failed or errors > 0
            spread = f"{min(rates):.0f}-{max(rates):.0f}"
            server_us = statistics.median(r["server_us"] for r in rs)
            gen_us = statistics.median(r["gen_us"] for r in rs)
            other = statistics.median(r["other"] for r in rs)
            print(f"{name:<17} {era:<11} {med:>9.1f} {spread:>13} {sum(r['ok'] for r in rs):>7} {errors:>6} "
                  f"{med / base:>6.2f}x {server_us:>8.0f} us {gen_us:>5.0f} us {other:>6.2f}")
            for s in (s for r in rs for s in r["samples"]):
                print(f"    e.g. {s}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
