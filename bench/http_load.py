"""HTTP load: C concurrent clients x N tool calls against stateless Streamable HTTP.

    python bench/http_load.py [--clients 64] [--calls 100] [--workers 4]

Measures, in one run and on the same machine:
  * sdk      - the bare SDK low-level Server (one echo tool), stateless, one process (the anchor)
  * plexor   - `plexor serve --transport http --stateless` with every installed plugin loaded (plus the fixture, for its echo tool)
  * plexor-wN - the same with --workers N
Each client is the SDK's own `Client` over Streamable HTTP; each call is tools/call of an
echo-like tool (`plexor_health` is avoided: it walks every plugin). Errors are counted;
the target is 0. Prints calls/s and the ratio to the SDK.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
SITE = HERE.parent / "tests" / "conformance" / "site"

SDK_SERVER = textwrap.dedent('''
    import sys, uvicorn, mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="echo", description="echo",
            inputSchema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})])

    async def call_tool(ctx, params):
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structuredContent={"text": text})

    server = Server("sdk-anchor", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                time.sleep(0.5)  # let the lifespan finish starting the kernel
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


async def load(url: str, tool: str, clients: int, calls: int) -> tuple[float, int, int]:
    from mcp import Client

    errors = 0
    done = 0

    async def one(idx: int) -> None:
        nonlocal errors, done
        try:
            async with Client(url, mode="legacy") as client:
                for i in range(calls):
                    try:
                        r = await client.call_tool(tool, {"text": f"c{idx}-{i}"})
                        if r.is_error or (r.structured_content or {}).get("text") != f"c{idx}-{i}":
                            errors += 1
                        else:
                            done += 1
                    except Exception:  # noqa: BLE001 - counted
                        errors += 1
        except Exception:  # noqa: BLE001 - a client that could not connect loses all its calls
            errors += calls

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(one, c)
    return time.perf_counter() - started, done, errors


def run_case(name: str, cmd: list[str], env: dict[str, str], port: int, tool: str, args: argparse.Namespace) -> dict:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(port, proc)
        anyio.run(load, f"http://127.0.0.1:{port}/mcp", tool, 4, 5)  # warm-up
        seconds, ok, errors = anyio.run(load, f"http://127.0.0.1:{port}/mcp", tool, args.clients, args.calls)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"name": name, "seconds": seconds, "ok": ok, "errors": errors, "rate": ok / seconds if seconds else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="plexor-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=home, PLEXOR_LOG_LEVEL="warning",
               PYTHONPATH=os.pathsep.join(p for p in (str(SITE), env.get("PYTHONPATH", "")) if p))
    # every installed plugin plus the fixture (for its echo tool): PLEXOR_PLUGINS unset loads all
    script = Path(home) / "sdk_server.py"
    script.write_text(SDK_SERVER)

    rows = []
    port = free_port()
    rows.append(run_case("sdk (bare low-level Server, stateless)", [sys.executable, str(script), str(port)], env, port, "echo", args))
    port = free_port()
    base = [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless", "--port", str(port)]
    rows.append(run_case("plexor (stateless, installed plugins)", base, env, port, "test_echo", args))
    if args.workers > 1:
        port = free_port()
        cmd = [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless", "--port", str(port),
               "--workers", str(args.workers)]
        rows.append(run_case(f"plexor --workers {args.workers}", cmd, env, port, "test_echo", args))

    anchor = rows[0]["rate"] or 1.0
    print(f"\n{args.clients} clients x {args.calls} calls, stateless Streamable HTTP, {os.cpu_count()} CPUs\n")
    print(f"{'server':<42} {'calls/s':>9} {'ok':>7} {'errors':>7} {'vs sdk':>7}")
    for r in rows:
        print(f"{r['name']:<42} {r['rate']:>9.1f} {r['ok']:>7} {r['errors']:>7} {r['rate'] / anchor:>6.2f}x")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
