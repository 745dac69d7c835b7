"""Where a stateless HTTP `tools/call` spends its time: plexor beside the bare SDK server, in process.

    python bench/http_profile.py [--ablations] [--repeat 3] [--calls 4000] [--concurrency 16]
                                 [--era 2026-07-28|2025-11-25] [--configs sdk,plexor,...] [--gc-freeze]
    python bench/http_profile.py --profile NAME [--top 40]

The anchor of bench/http_load.py and plexor's `build_http_app` (every installed plugin loaded, plus the
fixture and bench/site) are driven as ASGI apps, without uvicorn or sockets: the HTTP server layer is the
same for both, so what is left is each app's own cost. Every configuration runs in its own process; the
runs are interleaved and the medians printed: CPU microseconds per call, and how much of it went to the
garbage collector. Configurations (CONFIGS): the anchor, plexor with the sync `test_echo` (run in a worker
thread) and with the async `bench_echo`, and with --ablations plexor with one layer taken away at a time
(monkeypatched here; nothing in the kernel changes), so each layer's cost is a difference.
`--profile NAME` runs cProfile over one configuration and prints the top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib.util
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "conformance" / "site"), str(HERE / "site")]  # test_echo, bench_echo
os.environ.setdefault("PLEXOR_HOME", tempfile.mkdtemp(prefix="plexor-prof-"))
os.environ.setdefault("PLEXOR_LOG_LEVEL", "warning")

from http_load import _request_body, _request_head  # noqa: E402 - same requests as the load test


def _headers(port: int, tool: str, era: str, body: bytes) -> list[tuple[bytes, bytes]]:
    raw = _request_head(port, tool, era) + str(len(body)).encode()
    out = []
    for line in raw.decode().split("\r\n")[1:]:
        key, _, value = line.partition(":")
        out.append((key.strip().lower().encode(), value.strip().encode()))
    return out


async def _lifespan(app) -> None:
    """Run the app's lifespan startup (plexor starts its kernel there) and leave it running."""
    queue: asyncio.Queue = asyncio.Queue()
    started = asyncio.Event()

    async def receive():
        return await queue.get()

    async def send(message):
        if message["type"] == "lifespan.startup.complete":
            started.set()
        elif message["type"] == "lifespan.startup.failed":
            raise SystemExit(message.get("message"))

    asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send))
    await queue.put({"type": "lifespan.startup"})
    await started.wait()


async def _call(app, tool: str, era: str, request_id: int, text: str) -> None:
    body = _request_body(tool, era, request_id, text)
    done = asyncio.Event()
    sent = False
    chunks: list[bytes] = []
    status = 0

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
             "headers": _headers(8000, tool, era, body), "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8000), "state": {}}
    await app(scope, receive, send)
    raw = b"".join(chunks)
    if status != 200:
        raise SystemExit(f"HTTP {status}: {raw[:300]!r}")
    if raw.startswith(b"{"):
        msg = json.loads(raw)
    else:
        msg = next(json.loads(line[5:]) for line in raw.decode().splitlines() if line.startswith("data:"))
    if (msg.get("result") or {}).get("structuredContent", {}).get("text") != text:
        raise SystemExit(f"wrong reply: {msg}")


async def _measure(app, tool: str, era: str, calls: int, concurrency: int,
                   profiler: cProfile.Profile | None) -> tuple[float, float]:
    """CPU and GC microseconds per call (after a warm-up), ``concurrency`` calls in flight."""
    import gc

    for i in range(200):
        await _call(app, tool, era, i, f"w{i}")
    per = max(1, calls // concurrency)
    gc_time = [0.0, 0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_time[1] = time.perf_counter()
        else:
            gc_time[0] += time.perf_counter() - gc_time[1]

    async def worker(w: int) -> None:
        for i in range(per):
            await _call(app, tool, era, i, f"c{w}-{i}")

    gc.callbacks.append(on_gc)
    if profiler:
        profiler.enable()
    cpu = time.process_time()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    cpu = time.process_time() - cpu
    if profiler:
        profiler.disable()
    gc.callbacks.remove(on_gc)
    n = per * concurrency
    return cpu / n * 1e6, gc_time[0] / n * 1e6


# name: (what it is, the tool called)
CONFIGS = {
    "sdk": ("bare SDK low-level Server, its async echo", "echo"),
    "plexor": ("plexor as shipped, test_echo (a plain function: run in a worker thread)", "test_echo"),
    "async": ("plexor as shipped, bench_echo (a coroutine, like the anchor's tool)", "bench_echo"),
    "no-timeout": ("test_echo, without the request-timeout middleware (transports._timeout_middleware)",
                   "test_echo"),
    "no-guidance": ("test_echo, without the guidance middleware (server.build_server)", "test_echo"),
    "no-boundary": ("test_echo, without the SDK's RequestStateBoundary middleware", "test_echo"),
    "no-middlewares": ("test_echo, without those three middlewares", "test_echo"),
    "inline-sync": ("test_echo called inline, not in a worker thread (as with blocking=False)", "test_echo"),
    "executor-hop": ("test_echo in a thread via loop.run_in_executor (4-thread pool), not anyio's", "test_echo"),
    "sdk-handler": ("the anchor's tools/call handler in place of plexor's (no kernel.call_tool)", "test_echo"),
    "bare": ("the anchor's handler and none of the three middlewares", "test_echo"),
}
BASIC = ("sdk", "plexor", "async")
_DROP = {"no-timeout": ["_timeout_middleware"], "no-guidance": ["guidance_middleware"],
         "no-boundary": ["RequestStateBoundary"],
         "no-middlewares": ["_timeout_middleware", "guidance_middleware", "RequestStateBoundary"]}
_DROP["bare"] = _DROP["no-middlewares"]


def sdk_app():
    spec = importlib.util.spec_from_file_location("http_anchor", HERE / "anchors" / "http_anchor.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build_app()


def plexor_app(name: str = "plexor"):
    """Plexor's HTTP app, every installed plugin loaded, with the layer ``name`` names taken away (CONFIGS)."""
    import mcp_types as types
    from mcp.server.lowlevel.server import HandlerEntry

    from plexor.core.kernel import Kernel
    from plexor.transports import HttpOptions, build_http_app

    kernel = Kernel()
    kernel.load()
    app = build_http_app(kernel, HttpOptions(stateless=True))
    server = _find_server(app)
    if name in _DROP:
        server.middleware[:] = [m for m in server.middleware if not any(_is(m, n) for n in _DROP[name])]
    if name == "executor-hop":  # patched for the whole process: kernel._invoke looks it up at each call
        import concurrent.futures

        import anyio.to_thread

        pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="plexor-tool")

        async def run_sync(func, *args, **kwargs):
            return await asyncio.get_running_loop().run_in_executor(pool, func, *args)

        anyio.to_thread.run_sync = run_sync
    if name == "inline-sync":
        kernel.registry.tools["test_echo"].blocking = False
    if name in ("sdk-handler", "bare"):
        async def call_tool(ctx, params):
            text = (params.arguments or {}).get("text", "")
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                        structured_content={"text": text})

        entry = server._request_handlers["tools/call"]
        server._request_handlers["tools/call"] = HandlerEntry(entry.params_type, call_tool)
    return app


def _is(middleware, name: str) -> bool:
    return name in (getattr(middleware, "__qualname__", "") or type(middleware).__qualname__)


def _find_server(app):
    while not hasattr(app, "router") and hasattr(app, "app"):  # plexor's own ASGI wrappers
        app = app.app
    for route in app.router.routes:
        manager = getattr(getattr(route, "app", None), "session_manager", None)
        if manager is not None:
            return manager.app
    raise SystemExit("no Streamable HTTP route in the app")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--era", default="2026-07-28")
    ap.add_argument("--ablations", action="store_true", help="also measure plexor with each layer taken away")
    ap.add_argument("--configs", help="comma-separated configurations instead, e.g. sdk,async,inline-sync")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each configuration, interleaved")
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() once the app has started (every app)")
    ap.add_argument("--profile", choices=CONFIGS, help="cProfile one configuration in this process")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--dump", help="with --profile: also write the raw cProfile stats to this file")
    ap.add_argument("--callers", help="with --profile: also print who calls the functions matching this pattern")
    ap.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)  # one configuration, in this process
    args = ap.parse_args()

    if args.one or args.profile:
        name = args.profile or args.one

        async def run_one() -> None:
            app = sdk_app() if name == "sdk" else plexor_app(name)
            await _lifespan(app)
            if args.gc_freeze:
                import gc

                gc.collect()
                gc.freeze()
            prof = cProfile.Profile() if args.profile else None
            us, gc_us = await _measure(app, CONFIGS[name][1], args.era, args.calls, args.concurrency, prof)
            print(json.dumps({"us": us, "gc_us": gc_us}), flush=True)
            if prof:
                print(f"{name}: {us:.0f} us CPU per call under the profiler (which inflates it)")
                stats = pstats.Stats(prof)
                if args.dump:
                    stats.dump_stats(args.dump)
                stats.sort_stats("tottime").print_stats(args.top)
                stats.sort_stats("cumulative").print_stats(args.top)
                if args.callers:
                    stats.print_callers(args.callers)
                    stats.print_callees(args.callers)

        asyncio.run(run_one())
        return

    import statistics
    import subprocess

    if args.configs:
        names = args.configs.split(",")
    else:
        names = [*BASIC, *(k for k in CONFIGS if k not in BASIC)] if args.ablations else list(BASIC)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    print(f"era {args.era}, {args.calls} calls, {args.concurrency} in flight, in process (no uvicorn, no sockets), "
          f"each configuration in its own process, {args.repeat} interleaved runs"
          f"{', gc.freeze() after start' if args.gc_freeze else ''}; medians", flush=True)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(args.repeat):
        for name in names:
            cmd = [sys.executable, __file__, "--one", name, "--era", args.era, "--calls", str(args.calls),
                   "--concurrency", str(args.concurrency)] + (["--gc-freeze"] if args.gc_freeze else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    base = statistics.median(r["us"] for r in runs["sdk"]) if "sdk" in runs else None
    print(f"{'config':<15} {'CPU/call':>9} {'min-max':>11} {'vs sdk':>7} {'GC/call':>8}")
    for name in names:
        us = [r["us"] for r in runs[name]]
        med = statistics.median(us)
        versus = f"{med - base:+6.0f}" if base is not None else "-"
        print(f"{name:<15} {med:6.0f} us {min(us):>5.0f}-{max(us):<5.0f} {versus:>7} "
              f"{statistics.median(r['gc_us'] for r in runs[name]):5.0f} us  {CONFIGS[name][0]}")


if __name__ == "__main__":
    main()
