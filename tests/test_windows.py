"""Windows-safe code paths, checked here by hiding what Windows lacks.

Each test runs a subprocess whose first lines make the POSIX-only modules unimportable
(fcntl, termios, resource, pwd, grp, tty, pty) and make asyncio's ``add_signal_handler``
raise ``NotImplementedError``, as Windows' event loops do.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import plexor

WINDOWS_LIKE = r"""
import sys
POSIX_ONLY = {"fcntl", "termios", "resource", "pwd", "grp", "tty", "pty"}

KERNEL = __KERNEL__


class _Hide:
    # Only the kernel's own imports are refused: libraries such as the MCP SDK choose by
    # sys.platform, which still says POSIX here.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in POSIX_ONLY:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename.startswith(KERNEL):
            raise ImportError(f"No module named {name!r} (hidden: Windows has none)")
        return None

for _name in list(sys.modules):
    if _name.split(".")[0] in POSIX_ONLY:
        del sys.modules[_name]
sys.meta_path.insert(0, _Hide())

import asyncio.base_events, asyncio.unix_events

def _no_signals(self, *args, **kwargs):
    raise NotImplementedError("add_signal_handler (hidden: Windows' loops have none)")

asyncio.base_events.BaseEventLoop.add_signal_handler = _no_signals
asyncio.unix_events._UnixSelectorEventLoop.add_signal_handler = _no_signals
""".replace("__KERNEL__", repr(os.path.dirname(plexor.__file__)))

IMPORT_ALL = WINDOWS_LIKE + r"""
import importlib, pkgutil, traceback
import plexor

failed = []
names = [m.name for m in pkgutil.walk_packages(plexor.__path__, "plexor.") if m.name != "plexor.__main__"]
for name in names:
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])

from pathlib import Path
import tempfile
from plexor.features.daemon.process import _lock
with _lock(Path(tempfile.mkdtemp()) / "daemon.json"):
    pass
print(json.dumps({"imported": len(names), "failed": failed}))
""".replace("import importlib,", "import json, importlib,")

SERVE = WINDOWS_LIKE + r"""
import runpy
sys.argv = ["plexor", "serve"]
runpy.run_module("plexor", run_name="__main__")
"""


# The daemon's liveness and stopping, with what Windows lacks taken away from the kernel: no os.kill
# but with SIGTERM (which on Windows is TerminateProcess: here it kills at once, as that does), no
# SIGKILL, no os.killpg/os.waitpid/os.getpgid/os.setsid. Installed as sitecustomize, so the daemon
# started by the code under test runs under the same rules.
NO_POSIX_PROCESS_CALLS = WINDOWS_LIKE + r"""
import os, signal

TERMINATED = []
_REAL_KILL, _SIGKILL, SIGSTOP = os.kill, signal.SIGKILL, signal.SIGSTOP


def _from_kernel():
    frame = sys._getframe(2)
    return frame is not None and frame.f_code.co_filename.startswith(KERNEL)


def _kill(pid, sig):
    if _from_kernel():
        if sig != signal.SIGTERM:
            raise OSError(f"os.kill({pid}, {sig!r}) (hidden: Windows sends only CTRL_C/CTRL_BREAK or terminates)")
        TERMINATED.append(pid)
        return _REAL_KILL(pid, _SIGKILL)  # TerminateProcess: the process ends at once
    return _REAL_KILL(pid, sig)


def _hidden(name):
    real = getattr(os, name)

    def call(*args, **kwargs):
        if _from_kernel():
            raise AttributeError(f"os.{name} (hidden: Windows has none)")
        return real(*args, **kwargs)

    return call


os.kill = _kill
for _name in ("killpg", "waitpid", "getpgid", "setsid"):
    setattr(os, _name, _hidden(_name))
del signal.SIGKILL
"""

DAEMON = r"""
import json, os, sys
import sitecustomize as rules
from plexor.features.daemon.process import _alive, ensure_daemon, stop_daemon

out = {}
info = ensure_daemon(dict(os.environ), wait=90)
out["graceful"] = {"pid": info["pid"], "alive_at_start": _alive(info)}
stop_daemon(info, wait=30)
out["graceful"]["alive_after_stop"] = _alive(info)
out["terminated_gracefully"] = list(rules.TERMINATED)
info = ensure_daemon(dict(os.environ), wait=90)
rules._REAL_KILL(info["pid"], rules.SIGSTOP)  # the test freezes it: the stop request goes unanswered
stop_daemon(info, wait=1)
out["forced"] = {"pid": info["pid"], "alive_after_stop": _alive(info)}
out["terminated"] = list(rules.TERMINATED)
print(json.dumps(out))
"""


def _gone(pid, wait=10.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not os.path.exists("/proc") or not hasattr(signal, "SIGSTOP"),
                    reason="simulates Windows on Linux (SIGSTOP, /proc)")
def test_daemon_liveness_and_stopping_without_posix_process_calls(plexor_home, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sitecustomize.py").write_text(NO_POSIX_PROCESS_CALLS, encoding="utf-8")
    env = _env(plexor_home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(rules), env.get("PYTHONPATH", "")) if p)
    try:
        out = subprocess.run([sys.executable, "-c", DAEMON], env=env, capture_output=True, text=True, timeout=300)
    finally:  # whatever happened, no daemon (running or frozen) outlives the test
        for alive in (plexor_home / "data").glob("daemon-*.alive"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(alive.stem.split("-", 1)[1]), signal.SIGKILL)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    graceful, forced = report["graceful"], report["forced"]
    assert graceful["alive_at_start"] and not graceful["alive_after_stop"] and _gone(graceful["pid"])
    assert report["terminated_gracefully"] == []  # stopped by its own request: nothing was terminated
    log = (plexor_home / "logs" / "daemon.log").read_text()
    assert log.count('"signal": "SIGTERM"') == 1 and '"action": "draining"' in log
    assert not forced["alive_after_stop"] and _gone(forced["pid"])
    assert report["terminated"] == [forced["pid"]]  # the frozen one: terminated, as TerminateProcess would
    assert "hidden" not in log and "Traceback" not in log
    leftovers = sorted(p.name for p in (plexor_home / "data").iterdir() if p.suffix in (".alive", ".stop"))
    assert leftovers == []


def test_the_daemon_starts_detached_on_each_system():
    from plexor.features.daemon.process import _detached

    # Windows: its own process group (the starting console's Ctrl+C does not reach it), no window.
    assert _detached(True) == {"creationflags": 0x200 | 0x08000000}
    assert _detached(False) == {"start_new_session": True}


def _env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS="", PLEXOR_LOG_LEVEL="info")
    return env


def test_every_kernel_module_imports_without_posix_modules(plexor_home):
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL], env=_env(plexor_home), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["imported"] > 40 and report["failed"] == []


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGTERM")
def test_stdio_serving_stops_on_a_signal_without_add_signal_handler(plexor_home):
    proc = subprocess.Popen([sys.executable, "-c", SERVE], env=_env(plexor_home), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        proc.stdin.write((json.dumps(init) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 1 and "serverInfo" in answer["result"]
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
                         b'{"name": "plexor_health", "arguments": {}}}\n')
        proc.stdin.flush()
        health = json.loads(proc.stdout.readline())
        assert health["id"] == 2 and not health["result"].get("isError")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)  # stdin stays open: only the signal can end it
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert '"signal": "SIGTERM"' in err.decode()
    assert "NotImplementedError" not in err.decode()


def test_task_worker_liveness_sends_no_signal_on_windows(monkeypatch):
    """On Windows os.kill(pid, 0) is CTRL_C_EVENT, not a probe: the task store must not call it there."""
    from plexor.features.tasks import store

    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(store.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(store.os, "name", "nt")
    assert store._alive(os.getpid()) is True  # unknown here: the task's lease settles a dead worker
    assert sent == []
    monkeypatch.undo()
    assert store._alive(os.getpid()) is True  # on POSIX the probe runs and finds this process
