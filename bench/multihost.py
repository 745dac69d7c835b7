"""Many workers behind a load balancer, and notifications across processes (issue 13).

    sudo python bench/multihost.py [--clients 16] [--seconds 8] [--rounds 3] [--touches 200] [--only calls|notify|bus]

**Calls per second** (needs root: the hosts are network namespaces, as in tests/multihost):
  * direct      - one `plexor serve --transport http --stateless` process on 127.0.0.1, no balancer: the anchor
  * lb-w1/2/4   - one host (a network namespace) running the same with --workers 1, 2, 4, behind HAProxy
                  (round robin, keep-alive to the host), the client talking to HAProxy only
All with the kernel's database on the machine's PostgreSQL (a scratch database), the multi-host fixture
plugin and arbor loaded, `--json-response`, a trivial tool (`multihost_whoami`, run inline). The load is
--clients keep-alive HTTP/1.1 connections on plain asyncio streams in this process, each POSTing
2026-07-28 `tools/call` requests back to back for --seconds. Rows interleave over --rounds. Reported:
median calls/s, its ratio to `direct`, and CPU time per call of the servers (all processes), of HAProxy
and of the load generator (from /proc), so a larger machine's figures can be worked out.

**Notification latency across processes**: two server processes (A, B) on the same PostgreSQL database
(and then on one SQLite data directory); a 2026-07-28 `subscriptions/listen` stream on A; --touches
`multihost_touch` calls on B, one at a time. Latency = the moment the listener's client gets the event
minus the moment B published it (B's clock = this machine's clock). p50 / p90 / p99 / max.

**The bus alone** (``--only bus``): two backends in this process, publish on one, delivery on the other:
PostgreSQL, and the SQLite choices side by side (a table with a wake-up datagram, as shipped; the same
table polled every 50 ms and every 250 ms, as it runs where there are no Unix sockets).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "tests")]

from conformance.serving import serve_http  # noqa: E402
from multihost.cluster import SITE, Cluster, Unavailable, _pg_connect  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    return total


def tree(pid: int) -> list[int]:
    out = [pid]
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            out += tree(int(child))
    return out


# ------------------------------------------------------------------ load
def request(host: str, token: str | None) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "multihost_whoami", "arguments": {}, "_meta": meta}}).encode()
    head = ["POST /mcp HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
            "Accept: application/json, text/event-stream", "MCP-Protocol-Version: 2026-07-28",
            "Mcp-Method: tools/call", "Mcp-Name: multihost_whoami", f"Content-Length: {len(body)}"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def one_client(port: int, payload: bytes, stop: float, counts: list[int], failures: list[str]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < stop:
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200") or b'"isError":true' in body:
                failures.append(head.split(b"\r\n", 1)[0].decode() + " " + body[:200].decode(errors="replace"))
                return
            counts[0] += 1
    finally:
        writer.close()


def load(port: int, host_header: str, token: str | None, clients: int, seconds: float) -> tuple[int, float, list[str]]:
    payload = request(host_header, token)
    counts, failures = [0], []

    async def run() -> None:
        stop = time.monotonic() + seconds
        await asyncio.gather(*(one_client(port, payload, stop, counts, failures) for _ in range(clients)))

    started = time.monotonic()
    asyncio.run(run())
    return counts[0], time.monotonic() - started, failures


# ------------------------------------------------------------------ rows
class Direct:
    name = "direct"

    def __init__(self, root: Path, url: str) -> None:
        self.ctx = serve_http(root, "--stateless", "--json-response", env={
            "PLEXOR_PLUGINS": "multihost,arbor", "PYTHONPATH": str(SITE),
            "PLEXOR_DATABASE_URL": url, "PLEXOR_ARBOR_DATABASE_URL": url})

    def __enter__(self) -> Direct:
        self.served = self.ctx.__enter__()
        self.port, self.host, self.token = self.served.port, f"127.0.0.1:{self.served.port}", None
        return self

    def __exit__(self, *exc: object) -> None:
        self.ctx.__exit__(*exc)

    def server_pids(self) -> list[int]:
        return tree(self.served.proc.pid)

    def balancer_pids(self) -> list[int]:
        return []


class Balanced:
    def __init__(self, root: Path, workers: int) -> None:
        self.name = f"lb-w{workers}"
        self.cluster = Cluster(root, workers=workers, hosts_count=1, extra_args=("--json-response",),
                               server_close=False)

    def __enter__(self) -> Balanced:
        self.cluster.start()
        self.port, self.host, self.token = self.cluster.port, self.cluster.public_host, self.cluster.token
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.stop()

    def server_pids(self) -> list[int]:
        return [p for h in self.cluster.hosts if h.proc is not None for p in tree(h.proc.pid)]

    def balancer_pids(self) -> list[int]:
        return [p.pid for p in self.cluster._procs if p.args[0] == self.cluster.haproxy]


def bench_calls(args: argparse.Namespace) -> None:
    if os.geteuid() != 0:
        print("calls/s behind the balancer: skipped (needs root for network namespaces)")
        return
    results: dict[str, list[tuple[float, float, float, float]]] = {}
    root = Path(tempfile.mkdtemp(prefix="plexor-bench-mh-"))
    conn = _pg_connect()
    db = f"plexor_bench_{os.getpid()}"
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{db}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{db}"
    rows: list[Direct | Balanced] = [Direct(root / "direct", url), *(Balanced(root / f"w{w}", w) for w in (1, 2, 4))]
    opened = []
    try:
        for row in rows:  # all up at the start, measured in turn
            opened.append(row.__enter__())
        load(opened[0].port, opened[0].host, opened[0].token, args.clients, 1.0)  # warm-up
        for rnd in range(args.rounds):
            for row in opened:
                load(row.port, row.host, row.token, args.clients, 1.0)
                server, lb, me = cpu_seconds(row.server_pids()), cpu_seconds(row.balancer_pids()), time.process_time()
                calls, wall, failures = load(row.port, row.host, row.token, args.clients, args.seconds)
                server = cpu_seconds(row.server_pids()) - server
                lb = cpu_seconds(row.balancer_pids()) - lb
                me = time.process_time() - me
                if failures:
                    raise SystemExit(f"{row.name}: {len(failures)} failed calls, e.g. {failures[0]}")
                results.setdefault(row.name, []).append((calls / wall, server / calls * 1e6, lb / calls * 1e6,
                                                         me / calls * 1e6))
                print(f"round {rnd + 1} {row.name:7s} {calls / wall:8.0f} calls/s", flush=True)
    finally:
        for row in reversed(opened):
            with contextlib.suppress(Exception):
                row.__exit__(None, None, None)
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.close()
    anchor = statistics.median(r[0] for r in results["direct"])
    print(f"\n{args.clients} clients, {args.seconds:g} s x {args.rounds} rounds; load average now {os.getloadavg()[0]:.2f}")
    print(f"{'row':8s} {'calls/s (min-max)':>22s} {'vs direct':>9s} {'server CPU/call':>16s} {'HAProxy':>8s} {'client':>7s}")
    for name, got in results.items():
        rate = statistics.median(r[0] for r in got)
        lo, hi = min(r[0] for r in got), max(r[0] for r in got)
        print(f"{name:8s} {rate:10.0f} ({lo:.0f}-{hi:.0f}) {rate / anchor:8.2f}x "
              f"{statistics.median(r[1] for r in got):13.0f} µs {statistics.median(r[2] for r in got):6.0f} µs"
              f" {statistics.median(r[3] for r in got):5.0f} µs")


# ------------------------------------------------------------------ notifications
async def measure_latency(listener_url: str, writer_url: str, touches: int) -> list[float]:
    from mcp import Client

    latencies = []
    async with Client(listener_url, mode="auto") as listener, listener.listen(resource_subscriptions=["mh://board"]) as sub, \
            Client(writer_url, mode="auto") as writer:
        for _ in range(touches):
            result = await writer.call_tool("multihost_touch", {})
            published = result.structured_content["at"]
            await asyncio.wait_for(sub.__anext__(), 10)
            latencies.append((time.time() - published) * 1000)
    return latencies


def bench_notify(args: argparse.Namespace) -> None:
    env = {"PLEXOR_PLUGINS": "multihost", "PYTHONPATH": str(SITE)}
    conn = None
    try:
        conn = _pg_connect()
    except Unavailable as exc:
        print(f"PostgreSQL: skipped ({exc})")
    root = Path(tempfile.mkdtemp(prefix="plexor-bench-notify-"))
    cases = []
    if conn is not None:
        db = f"plexor_bench_n{os.getpid()}"
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{db}"')
        cases.append(("PostgreSQL", root / "pa", root / "pb", {**env, "PLEXOR_DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{db}"}))
    cases.append(("SQLite", root / "shared", root / "shared", {**env, "PLEXOR_EVENT_STORE": "memory"}))
    try:
        print(f"\nnotification latency, listener on process A, change made on process B ({args.touches} changes, one at a time)")
        print(f"{'backend':11s} {'p50':>8s} {'p90':>8s} {'p99':>8s} {'max':>8s}")
        for name, home_a, home_b, case_env in cases:
            # SQLite: the bus serves --workers on one host, so A and B each run 2 workers on the one data
            # directory (4 processes); PostgreSQL: one process each, no shared disk.
            extra = ("--stateless", "--workers", "2") if name == "SQLite" else ("--stateless",)
            with serve_http(home_a, *extra, env=case_env) as a, serve_http(home_b, *extra, env=case_env) as b:
                lat = sorted(asyncio.run(measure_latency(a.url, b.url, args.touches)))
            q = statistics.quantiles(lat, n=100, method="inclusive")
            print(f"{name:11s} {q[49]:6.1f} ms {q[89]:6.1f} ms {q[98]:6.1f} ms {lat[-1]:6.1f} ms")
    finally:
        if conn is not None:
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "plexor_bench_n{os.getpid()}" WITH (FORCE)')
            conn.close()


async def bus_latency(make, events: int) -> list[float]:
    """Publish on one backend, time the delivery on another (two backends in this process, as two processes would)."""
    from plexor.features.state.bus import install
    from plexor.notify import Notifier

    sender, receiver = Notifier(), Notifier()
    install(sender, make())
    install(receiver, make())
    arrived = asyncio.Event()
    receiver.subscribe(lambda event: arrived.set())
    await sender.start()
    await receiver.start()
    out = []
    try:
        for i in range(events):
            arrived.clear()
            started = time.perf_counter()
            sender.publish("resources/updated", {"uri": f"x://{i}"})
            await asyncio.wait_for(arrived.wait(), 5)
            out.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.005)
    finally:
        await sender.close()
        await receiver.close()
    return sorted(out)


def bench_bus(args: argparse.Namespace) -> None:
    """The SQLite choices side by side (and PostgreSQL's): publish to delivery, backends alone."""
    from plexor.features.state import open_state
    from plexor.features.state.bus import PostgresBus, SqliteBus

    root = Path(tempfile.mkdtemp(prefix="plexor-bench-bus-"))
    blocked = root / "no-sockets"
    blocked.write_text("")
    cases = [
        ("SQLite table + wake-up datagram", lambda: SqliteBus(open_state(root / "a"))),
        ("SQLite table, polled every 50 ms", lambda: SqliteBus(open_state(root / "b"), poll=0.05, socket_dir=blocked / "x")),
        ("SQLite table, polled every 250 ms", lambda: SqliteBus(open_state(root / "c"), poll=0.25, socket_dir=blocked / "x")),
    ]
    conn = None
    with contextlib.suppress(Unavailable):
        conn = _pg_connect()
    db = f"plexor_bench_b{os.getpid()}"
    if conn is not None:
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{db}"')
        cases.insert(0, ("PostgreSQL LISTEN/NOTIFY", lambda: PostgresBus(f"postgresql://postgres@127.0.0.1:5432/{db}")))
    try:
        print(f"\nbus alone: publish on one backend to delivery on another ({args.touches} events, one at a time)")
        print(f"{'backend':34s} {'p50':>8s} {'p99':>8s} {'max':>8s}")
        for name, make in cases:
            lat = asyncio.run(bus_latency(make, args.touches))
            q = statistics.quantiles(lat, n=100, method="inclusive")
            print(f"{name:34s} {q[49]:6.2f} ms {q[98]:6.2f} ms {lat[-1]:6.2f} ms")
    finally:
        if conn is not None:
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--touches", type=int, default=200)
    parser.add_argument("--only", choices=["calls", "notify", "bus"])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    if args.only in (None, "calls"):
        bench_calls(args)
    if args.only in (None, "notify"):
        bench_notify(args)
    if args.only in (None, "bus"):
        bench_bus(args)


if __name__ == "__main__":
    main()
