"""The server over real transports: stdio (SDK client and raw bytes), Streamable HTTP and SSE."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import anyio
import pytest
from conftest import install_fake_dist

pytestmark = pytest.mark.anyio

SLOW = """
import anyio
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    async def nap(seconds: float) -> dict:
        '''Sleep, then answer.'''
        await anyio.sleep(seconds)
        return {"slept": seconds}
    register(nap)
"""

NOISY = """
import sys
print("a stray print at import", flush=True)
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def chatty() -> dict:
        '''Prints to stdout, which must never reach the protocol stream.'''
        print("stray print in a tool", flush=True)
        return {"ok": True}
    register(chatty)
"""


def _env(home, site=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PLEXOR_HOME"] = str(home)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_stdio_serves_a_real_client_in_both_protocol_eras(plexor):
    for mode in ("legacy", "auto"):
        async with plexor.stdio_client(mode=mode) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "plexor_health" in tools
            health = await client.call_tool("plexor_health", {})
            assert health.structured_content["pid"] != os.getpid()
            # plexor_health answers while other plugins are still starting; the kernel gets to ready.
            with anyio.fail_after(30):
                while health.structured_content["kernel"]["state"] != "ready":
                    assert health.structured_content["kernel"]["state"] == "starting"
                    await anyio.sleep(0.1)
                    health = await client.call_tool("plexor_health", {})


async def test_stdio_keeps_serving_when_a_plugin_import_raises(plexor, site_dir):
    install_fake_dist(site_dir, "plexor-fakebroken", "fakebroken", "plexor_fakebroken", "raise RuntimeError('boom at import')")
    install_fake_dist(site_dir, "plexor-fakeslow", "fakeslow", "plexor_fakeslow", SLOW)
    async with plexor.stdio_client(env={"PYTHONPATH": str(site_dir)}) as client:
        r = await client.call_tool("fakeslow_nap", {"seconds": 0})
        assert r.structured_content == {"slept": 0}
        health = (await client.call_tool("plexor_health", {})).structured_content
        broken = next(p for p in health["plugins"] if p["name"] == "fakebroken")
        assert broken["state"] == "failed" and "boom at import" in broken["error"]
        bad = await client.call_tool("nosuch_tool", {})
        assert bad.is_error
        again = await client.call_tool("fakeslow_nap", {"seconds": 0})
        assert not again.is_error


def _rpc(proc, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def test_stdout_carries_nothing_but_json_rpc(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakenoisy", "fakenoisy", "plexor_fakenoisy", NOISY)
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(plexor_home, site_dir))
    _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakenoisy_chatty", "arguments": {}}})
    _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "plexor_nope", "arguments": {}}})
    _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"})
    messages = []
    while len([m for m in messages if "id" in m]) < 4:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()[-2000:]
        messages.append(json.loads(line))  # every line is JSON
    out, err = proc.communicate(timeout=30)  # closes stdin: EOF ends the server
    messages.extend(json.loads(line) for line in out.decode().splitlines() if line.strip())
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[2]["result"]["structuredContent"] == {"ok": True}
    assert by_id[3]["result"]["isError"] is True and "Did you mean" in by_id[3]["result"]["content"][0]["text"]
    assert by_id[4]["error"]["code"] == -32601
    assert b"stray print" in err  # diverted to stderr, not lost and not on the protocol stream
    assert proc.returncode == 0


def test_sigterm_lets_the_in_flight_call_finish(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakeslow", "fakeslow", "plexor_fakeslow", SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(plexor_home, site_dir))
    _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    first = proc.stdout.readline()
    assert json.loads(first)["id"] == 1
    # tools/list waits for the plugins to load, so the call below is really in flight when SIGTERM comes
    # (a signal during loading is test_sigterm_while_plugins_load_answers_the_waiting_call)
    _rpc(proc, {"jsonrpc": "2.0", "id": "loaded", "method": "tools/list"})
    _read_until(proc, "loaded", timeout=60)
    _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakeslow_nap", "arguments": {"seconds": 1.0}}})
    time.sleep(0.4)
    proc.send_signal(signal.SIGTERM)
    reply = json.loads(proc.stdout.readline())
    while "id" not in reply:  # notifications may come first (installed plugins becoming ready: list_changed)
        reply = json.loads(proc.stdout.readline())
    assert reply["id"] == 2 and reply["result"]["structuredContent"] == {"slept": 1.0}
    proc.wait(timeout=15)
    err = proc.stderr.read().decode()
    assert '"event": "signal"' in err and '"event": "kernel_stopped"' in err


def test_sigterm_stops_a_call_that_outlives_the_grace_period_and_answers_it(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakeslow", "fakeslow", "plexor_fakeslow", SLOW)
    proc = _raw_stdio(plexor_home, site_dir, "--grace", "1")
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": "loaded", "method": "tools/list"})  # loaded: the call below really runs
        _read_until(proc, "loaded", timeout=60)
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "fakeslow_nap", "arguments": {"seconds": 60}}})
        time.sleep(0.4)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        reply = _read_until(proc, 2, timeout=20)
        assert reply["result"]["isError"] is True, reply
        error = reply["result"]["structuredContent"]["error"]
        assert error["message"] == ("the server shut down while this call ran: it outlived the grace period and was "
                                    "stopped") and "Call it again" in error["guidance"], error
        assert proc.wait(timeout=15) == 0 and time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


SLOW_IMPORT = """
import os
import time
# a plugin whose import lasts until the test lets it finish (the file FAKEHEAVY_GO appears; at most a minute)
deadline = time.monotonic() + 60
while not os.path.exists(os.environ["FAKEHEAVY_GO"]) and time.monotonic() < deadline:
    time.sleep(0.02)
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def hello() -> dict:
        '''Say hello.'''
        return {"hello": True}
    register(hello)
"""


def test_sigterm_while_plugins_load_answers_the_waiting_call(plexor_home, site_dir, tmp_path):
    go = tmp_path / "go"
    install_fake_dist(site_dir, "plexor-fakeheavy", "fakeheavy", "plexor_fakeheavy", SLOW_IMPORT)
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env=_env(plexor_home, site_dir, PLEXOR_PLUGINS="fakeheavy", FAKEHEAVY_GO=str(go)))
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert json.loads(proc.stdout.readline())["id"] == 1
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakeheavy_hello", "arguments": {}}})
        # The ping is read after the call, so its answer says the call was received; the plugin is still
        # importing (it cannot finish before `go` exists): the call waits for loading.
        _rpc(proc, {"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert _read_until(proc, "after", timeout=30)["result"] == {}
        proc.send_signal(signal.SIGTERM)
        reply = _read_until(proc, 2, timeout=10)
        assert reply["error"]["code"] == -32000
        assert "shutting down" in reply["error"]["message"] and "reconnect" in reply["error"]["message"]
        go.touch()  # the import may end now, and with it the process
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _http_server(home, *args, site=None):
    """`plexor serve` on a free port: yields (process, port), and stops it afterwards."""
    proc, port = _start_http(home, *args, site=site)
    try:
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _start_http(home, *args, site=None):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--port", str(port), *args],
                            stderr=subprocess.PIPE, env=_env(home, site))
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not start: " + proc.stderr.read().decode()[-2000:])


async def test_streamable_http_stateful_and_stateless(plexor_home):
    from mcp import Client

    for extra in ((), ("--stateless",)):
        with _http_server(plexor_home, "--transport", "http", *extra) as (proc, port):
            for mode in ("legacy", "auto"):
                async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                    r = await client.call_tool("plexor_health", {})
                    assert r.structured_content["kernel"]["state"] == "ready"
                    assert r.structured_content["pid"] == proc.pid


async def test_http_refuses_a_foreign_origin(plexor_home):
    import httpx

    with _http_server(plexor_home, "--transport", "http") as (_proc, port):
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx.AsyncClient() as http:
            foreign = await http.post(f"http://127.0.0.1:{port}/mcp", json=body,
                                      headers={**headers, "Origin": "http://evil.example"})
            assert foreign.status_code == 403
            bad_host = await http.post(f"http://127.0.0.1:{port}/mcp", json=body,
                                       headers={**headers, "Host": "evil.example"})
            assert bad_host.status_code == 421


async def test_legacy_sse_transport(plexor_home):
    from mcp import Client
    from mcp.client.sse import sse_client

    with _http_server(plexor_home, "--transport", "sse") as (_proc, port):
        async with Client(sse_client(f"http://127.0.0.1:{port}/sse"), mode="legacy") as client:
            r = await client.call_tool("plexor_health", {})
            assert r.structured_content["kernel"]["state"] == "ready"


async def test_stdin_eof_stops_the_server_cleanly(plexor_home):
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(plexor_home))
    proc.stdin.close()
    with anyio.fail_after(20):
        while proc.poll() is None:
            await anyio.sleep(0.05)
    assert proc.returncode == 0
    assert b'"event": "kernel_stopped"' in proc.stderr.read()


BLOCKING = """
import time
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def block(seconds: float) -> dict:
        '''Block a worker thread, then answer.'''
        time.sleep(seconds)
        return {"blocked": seconds}
    register(block)
"""

HANGING_SHUTDOWN = """
import os
import time
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def hello() -> dict:
        '''Say hello.'''
        return {"hello": True}
    register(hello)

@hookimpl
def plexor_shutdown(plugin):
    os.write(2, b"shutdown hook hangs now\\n")
    time.sleep(600)
"""


def _raw_stdio(home, site, *args, **env):
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(home, site, **env))
    _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert json.loads(proc.stdout.readline())["id"] == 1
    return proc


def _read_until(proc, wanted_id, timeout=30.0):
    """Read stdout lines until the reply with ``wanted_id``; returns it (fails on EOF or timeout).

    The lines are read in a thread with plain ``readline``: selecting on the pipe would miss replies
    that arrived together, which the buffered reader already holds after the first line.
    """
    import threading

    found: dict[str, object] = {}

    def read() -> None:
        while True:
            line = proc.stdout.readline()
            if not line:
                found["eof"] = True
                return
            reply = json.loads(line)
            if reply.get("id") == wanted_id:
                found["reply"] = reply
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if "reply" in found:
        return found["reply"]
    assert "eof" not in found, "the server closed stdout"
    raise AssertionError(f"no reply with id {wanted_id!r} within {timeout} s")


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
def test_stdio_ping_answers_while_blocking_tools_fill_the_thread_pool(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakeblock", "fakeblock", "plexor_fakeblock", BLOCKING)
    proc = _raw_stdio(plexor_home, site_dir)
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": "warm", "method": "tools/call",
                    "params": {"name": "fakeblock_block", "arguments": {"seconds": 0}}})
        _read_until(proc, "warm")
        for i in range(60):  # more than anyio's 40 worker threads
            _rpc(proc, {"jsonrpc": "2.0", "id": f"b{i}", "method": "tools/call",
                        "params": {"name": "fakeblock_block", "arguments": {"seconds": 8}}})
        time.sleep(0.5)  # the calls are now holding every worker thread
        started = time.monotonic()
        _rpc(proc, {"jsonrpc": "2.0", "id": "p", "method": "ping"})
        assert _read_until(proc, "p", timeout=7)["result"] == {}
        assert time.monotonic() - started < 1.0
    finally:
        proc.kill()
        proc.wait()


def test_a_request_before_initialize_and_a_second_initialize_are_refused_clearly(plexor_home):
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(plexor_home))
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        early = _read_until(proc, 1)["error"]
        assert early["code"] == -32600 and "before the session was initialized" in early["message"]
        assert "send initialize first" in early["message"]
        init = {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        _rpc(proc, init)
        assert _read_until(proc, 2)["result"]["protocolVersion"] == "2025-11-25"
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _rpc(proc, {**init, "id": 3, "params": {**init["params"], "protocolVersion": "2025-06-18"}})
        again = _read_until(proc, 3)["error"]
        assert again["code"] == -32600 and "already initialized (protocol 2025-11-25)" in again["message"]
        _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        assert "tools" in _read_until(proc, 4)["result"]  # the session is unchanged
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.serial  # a bound of a second or so on wall-clock time: run alone (tests/conftest.py)
def test_a_second_sigterm_exits_at_once_while_a_shutdown_hook_hangs(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakehang", "fakehang", "plexor_fakehang", HANGING_SHUTDOWN)
    proc = _raw_stdio(plexor_home, site_dir, "--grace", "60", PLEXOR_START_WAIT="300")
    _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakehang_hello", "arguments": {}}})
    assert _read_until(proc, 2)["result"]["structuredContent"] == {"hello": True}
    proc.send_signal(signal.SIGTERM)
    seen = b""
    deadline = time.monotonic() + 20
    while b"shutdown hook hangs now" not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")[-2000:]
        seen += os.read(proc.stderr.fileno(), 65536)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=5)
    assert time.monotonic() - started < 2.0
    assert code == 128 + signal.SIGTERM
    assert b"exit_forced" in seen + proc.stderr.read()


def test_stdin_eof_ends_the_process_in_bounded_time_while_a_shutdown_hook_hangs(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakehang", "fakehang", "plexor_fakehang", HANGING_SHUTDOWN)
    proc = _raw_stdio(plexor_home, site_dir, "--grace", "1", PLEXOR_START_WAIT="300")
    _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fakehang_hello", "arguments": {}}})
    assert _read_until(proc, 2)["result"]["structuredContent"] == {"hello": True}
    started = time.monotonic()
    proc.stdin.close()
    code = proc.wait(timeout=30)
    elapsed = time.monotonic() - started
    err = proc.stderr.read()
    assert b"shutdown hook hangs now" in err and b"exit_forced" in err and b"stdin closed" in err
    assert code == 1 and elapsed < 2 * 1 + 5 + 3, elapsed  # 2 x grace + the margin, plus start-up slack


def test_plexor_connect_answers_every_request_with_a_readable_id(tmp_path):
    from conformance.serving import fixture_env

    from plexor.features.daemon.process import _alive, read_registry, registry_path, stop_daemon

    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "connect"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=fixture_env(home))
    try:
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert _read_until(proc, 1, timeout=60)["result"]["protocolVersion"] == "2025-11-25"
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":"s"}\n'
                         b'[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]\n')
        proc.stdin.flush()
        assert _read_until(proc, 2)["error"]["code"] == -32602
        assert _read_until(proc, 3)["error"]["code"] == -32600
    finally:
        proc.kill()
        proc.wait()
        info = read_registry(registry_path(fixture_env(home)))
        if info is not None and _alive(info):
            stop_daemon(info, wait=10)
