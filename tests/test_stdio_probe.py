"""stdio through a real ``plexor serve`` process: the ``server/discover`` probe and its fallback, and a client
that leaves without reading its reply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from conftest import install_fake_dist

DISCOVER = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {}}}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}

# A plugin whose import lasts until the test lets it finish (the file FAKESLOWLOAD_GO appears; at most a
# minute) and then leaves a mark: what was answered before the test let it finish did not wait for the plugins.
SLOW_IMPORT = """
import os
import time
deadline = time.monotonic() + 60
while not os.path.exists(os.environ["FAKESLOWLOAD_GO"]) and time.monotonic() < deadline:
    time.sleep(0.02)
open(os.environ["FAKESLOWLOAD_MARK"], "w").close()
from plexor import hookimpl

@hookimpl
def plexor_register_tools(register, settings):
    def hello() -> dict:
        '''Say hello.'''
        return {"hello": True}
    register(hello)
"""


def _env(home, site=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PLEXOR_HOME"] = str(home)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _serve(home, site=None, **env):
    return subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(home, site, **env))


def _line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _replies(proc, ids: set, timeout: float = 30.0) -> list[dict]:
    """Every reply (messages with an id) read from stdout until all of ``ids`` have one."""
    deadline = time.monotonic() + timeout
    got: list[dict] = []
    while not ids <= {m["id"] for m in got}:
        assert time.monotonic() < deadline, f"no replies for {ids - {m['id'] for m in got}} within {timeout} s"
        line = proc.stdout.readline()
        assert line, "the server closed stdout: " + proc.stderr.read().decode()[-2000:]
        message = json.loads(line)
        if "id" in message:
            got.append(message)
    return got


def test_a_discover_probe_given_up_for_initialize_is_served_in_the_handshake_era(plexor_home):
    """The Vercel AI SDK's transcript: server/discover, then (no answer within 1 s) initialize on the same pipe.

    Both lines are written before the server reads anything, as when the client's probe timed out while the
    server was still starting: the discover gets one clear error, initialize opens a handshake session."""
    proc = _serve(plexor_home)
    try:
        proc.stdin.write(_line(DISCOVER) + _line(INITIALIZE))
        proc.stdin.flush()
        first = _replies(proc, {0, 1})
        proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"})
                         + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        proc.stdin.flush()
        later = _replies(proc, {2})
        out, err = proc.communicate(timeout=30)
        rest = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
        replies = first + later + [m for m in rest if "id" in m]
        assert sorted(m["id"] for m in replies) == [0, 1, 2]  # every id exactly one reply
        by_id = {m["id"]: m for m in replies}
        probe = by_id[0]["error"]
        assert probe["code"] == -32600
        assert "fallen back to the initialize handshake" in probe["message"] and "server/discover" in probe["message"]
        assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
        assert "plexor_health" in {t["name"] for t in by_id[2]["result"]["tools"]}
        assert b'"event": "discover_abandoned"' in err
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_discover_probe_alone_opens_the_2026_era_before_plugins_load(plexor_home, site_dir, tmp_path):
    """A modern client's server/discover is answered at once, not after the plugins finished loading."""
    mark, go = tmp_path / "loaded", tmp_path / "go"
    install_fake_dist(site_dir, "plexor-fakeslowload", "fakeslowload", "plexor_fakeslowload", SLOW_IMPORT)
    proc = _serve(plexor_home, site_dir, PLEXOR_PLUGINS="fakeslowload", FAKESLOWLOAD_MARK=str(mark),
                  FAKESLOWLOAD_GO=str(go))
    try:
        proc.stdin.write(_line(DISCOVER))
        proc.stdin.flush()
        (reply,) = _replies(proc, {0})  # the plugin's import cannot finish before `go` exists
        assert not mark.exists(), "server/discover waited for the plugins to load"
        assert "2026-07-28" in reply["result"]["supportedVersions"]
        go.touch()
        # The connection is in the 2026-07-28 era: a request with the envelope is served (after loading).
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "fakeslowload_hello", "arguments": {}, "_meta": DISCOVER["params"]["_meta"]}}))
        proc.stdin.flush()
        (call,) = _replies(proc, {1})
        assert call["result"]["structuredContent"] == {"hello": True}
        assert mark.exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_client_that_closes_the_pipe_before_reading_its_reply_ends_the_server_quietly(plexor_home):
    """initialize, then the client closes the read end of stdout, then stdin: exit 0, no traceback."""
    proc = _serve(plexor_home)
    proc.stdin.write(_line(INITIALIZE))
    proc.stdin.flush()
    proc.stdout.close()  # the reply has nowhere to go
    seen = []
    try:
        # Until the server has tried to write the reply (it logs that once) or has ended.
        for raw in proc.stderr:
            seen.append(raw.decode())
            if '"event": "stdout_closed"' in seen[-1]:
                break
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(seen) + proc.stderr.read().decode()
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "ExceptionGroup" not in err and "ConnectionResetError" not in err, err[-3000:]
    assert err.count('"event": "stdout_closed"') == 1, err[-3000:]
    assert '"event": "kernel_stopped"' in err
