"""What a task costs: a trivial tool run as a task (create -> result) against the same tool called plainly.

    python bench/tasks.py [--calls 300] [--rounds 5] [--database-url postgresql://postgres@127.0.0.1/test]

One `plexor serve --transport http --stateless --json-response`, with a bench-only plugin written to a
temporary site directory: `bench_nothing`, a coroutine returning a constant, registered
`task="optional"`, and `bench_detached`, the same as a task from its first line. The kernel's database is SQLite in the data directory (the default), or the
PostgreSQL given. Rows, each one keep-alive connection sending sequentially, same server, same run,
rounds rotating the rows' order:

  * plain 2026     - `tools/call` from a 2026-07-28 client that does not declare the tasks extension
                     (the anchor: the same tool, no task)
  * at once 2026   - the same call declaring `io.modelcontextprotocol/tasks`: the server makes the task,
                     sees it end within 20 ms and answers with the result (SEP-2663 allows it)
  * task 2026      - `bench_detached` (it calls `ctx.detach()` first, so it is always a task), declaring
                     the extension -> CreateTaskResult, then `tasks/get` at once and again until
                     `completed` (no sleep between polls; a client honouring pollIntervalMs waits more)
  * plain 2025     - `tools/call`, 2025-11-25 (stateless)
  * task 2025      - `tools/call` with `task: {}` -> CreateTaskResult, then `tasks/result` (it waits)

For each row: client-observed time per operation (create -> result for tasks) and the server's CPU per
operation (from /proc), medians over the rounds; the ratios task/plain are the figures that matter.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from http_load import cpu_seconds, free_port, wait_up  # noqa: E402

HOST = "127.0.0.1"
TASKS = "io.modelcontextprotocol/tasks"
PLUGIN = '''
"""Bench-only: one trivial tool that may run as a task."""
from plexor import Context, hookimpl

PLEXOR_NAMESPACE = "bench"


@hookimpl
def plexor_register_tools(register, settings):
    register(nothing, task="optional")
    register(detached, task="optional", detach="manual")


async def nothing() -> dict:
    """Return a constant."""
    return {"ok": True}


async def detached(ctx: Context) -> dict:
    """Become a task at once, then return a constant."""
    await ctx.detach()
    return {"ok": True}
'''


def write_site(root: Path) -> Path:
    site = root / "site"
    (site / "plexor_bench_tasks-0.1.0.dist-info").mkdir(parents=True)
    (site / "plexor_bench_tasks.py").write_text(textwrap.dedent(PLUGIN))
    (site / "plexor_bench_tasks-0.1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: plexor-bench-tasks\nVersion: 0.1.0\n")
    (site / "plexor_bench_tasks-0.1.0.dist-info" / "entry_points.txt").write_text(
        "[plexor]\nbench-tasks = plexor_bench_tasks\n")
    return site


class Conn:
    def __init__(self, port: int, era: str, tasks: bool) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.era = era
        self.tasks = tasks
        self.ids = 0
        self.fallbacks = 0
        self.posts = 0

    def post(self, method: str, params: dict) -> dict:
        self.ids += 1
        self.posts += 1
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": self.era}
        if self.era == "2026-07-28":
            caps = {"extensions": {TASKS: {}}} if self.tasks else {}
            params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": self.era,
                                          "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
                                          "io.modelcontextprotocol/clientCapabilities": caps}}
            headers["Mcp-Method"] = method
            name = params.get("name") or params.get("taskId")
            if name:
                headers["Mcp-Name"] = name
        body = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        try:
            self.conn.request("POST", "/mcp", body, headers)
            resp = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.conn.close()  # the server closed the idle keep-alive connection while another row ran
            self.conn.request("POST", "/mcp", body, headers)
            resp = self.conn.getresponse()
        reply = json.loads(resp.read())
        if "result" not in reply:
            raise SystemExit(f"{method} failed: {reply}")
        return dict(reply["result"])

    def plain(self) -> None:
        result = self.post("tools/call", {"name": "bench_nothing", "arguments": {}})
        if result.get("resultType") == "task":  # it did not end within the window (a busy machine): follow it
            self.fallbacks += 1
            self.follow(result["taskId"])
            return
        assert result["structuredContent"] == {"ok": True}, result

    def follow(self, task_id: str) -> None:
        while True:
            got = self.post("tasks/get", {"taskId": task_id})
            if got["status"] == "completed":
                assert got["result"]["structuredContent"] == {"ok": True}, got
                return
            if got["status"] != "working":
                raise SystemExit(f"task ended {got['status']}: {got}")

    def task(self) -> None:
        if self.era == "2026-07-28":
            created = self.post("tools/call", {"name": "bench_detached", "arguments": {}})
            assert created.get("resultType") == "task", created
            self.follow(created["taskId"])
            return
        created = self.post("tools/call", {"name": "bench_nothing", "arguments": {}, "task": {}})
        result = self.post("tasks/result", {"taskId": created["task"]["taskId"]})
        assert result["structuredContent"] == {"ok": True}, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--database-url", default=None, help="the kernel's database (default: SQLite in the data dir)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="plexor-bench-tasks-"))
    site = write_site(root)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(root / "home"), PLEXOR_PLUGINS="bench-tasks", PLEXOR_LOG_LEVEL="warning",
               PYTHONPATH=os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p))
    if args.database_url:
        env["PLEXOR_DATABASE_URL"] = args.database_url
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless",
                             "--json-response", "--host", HOST, "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(root / "serve.err", "wb"))  # noqa: SIM115
    try:
        wait_up(port, proc)
        rows = {
            "plain 2026": (Conn(port, "2026-07-28", tasks=False), "plain"),
            "at once 2026": (Conn(port, "2026-07-28", tasks=True), "plain"),
            "task 2026": (Conn(port, "2026-07-28", tasks=True), "task"),
            "plain 2025": (Conn(port, "2025-11-25", tasks=False), "plain"),
            "task 2025": (Conn(port, "2025-11-25", tasks=True), "task"),
        }
        for conn, kind in rows.values():  # warm up: schemas, the database, the connection
            for _ in range(20):
                getattr(conn, kind)()
        wall: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        posts: dict[str, int] = {name: 0 for name in rows}
        names = list(rows)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                conn, kind = rows[name]
                op = getattr(conn, kind)
                p0 = conn.posts
                c0, t0 = cpu_seconds(proc.pid), time.perf_counter()
                for _ in range(args.calls):
                    op()
                t1, c1 = time.perf_counter(), cpu_seconds(proc.pid)
                posts[name] += conn.posts - p0
                wall[name].append((t1 - t0) / args.calls)
                cpu[name].append((c1 - c0) / args.calls)
            print(f"round {r + 1}: " + ", ".join(f"{n} {wall[n][-1] * 1e3:.2f} ms" for n in names), flush=True)
        backend = "PostgreSQL" if args.database_url else "SQLite"
        print(f"\n{args.calls} operations x {args.rounds} rounds per row; kernel database: {backend}")
        print(f"{'row':<13} {'ms/op':>8} {'server CPU ms/op':>17} {'wall ratio':>11} {'CPU ratio':>10} {'requests/op':>12}")
        for name in names:
            anchor = "plain " + name.split()[-1]
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            wa, ca = statistics.median(wall[anchor]), statistics.median(cpu[anchor])
            print(f"{name:<13} {w * 1e3:>8.3f} {c * 1e3:>17.3f} {w / wa:>10.2f}x {c / ca if ca else 0:>9.2f}x "
                  f"{posts[name] / (args.calls * args.rounds):>12.2f}")
        fallbacks = rows["at once 2026"][0].fallbacks
        print(f"'at once 2026': {fallbacks} of {(args.calls * args.rounds) + 20} calls outlasted the 20 ms window "
              "and were followed as tasks")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
