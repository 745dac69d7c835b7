"""What the real-client interop tests share: a Plexor server over HTTP in a subprocess, the data the
plugins need (a folder of notes, a stand-in EdgeLake node) and which plugins are installed.

Used by ``tests/test_inspector.py`` and ``tests/integration/`` (``tests/`` is on ``sys.path`` through
``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# The plugins the issue names (plexor_health comes with the kernel), and their import names.
PLUGINS = {"arbor": "plexor_arbor", "keyboard": "plexor_keyboard", "folder-search": "plexor_folder_search",
           "edgelake": "plexor_edgelake", "example": "plexor_example"}


def installed(plugin: str) -> bool:
    return importlib.util.find_spec(PLUGINS[plugin]) is not None


def missing(*plugins: str) -> list[str]:
    return [p for p in plugins if not installed(p)]


async def wait_indexed(client: Any, seconds: float = 30) -> dict[str, Any]:
    """Wait until folder-search reports ``ready`` with the two notes of :func:`write_notes` indexed."""
    import anyio

    with anyio.fail_after(seconds):
        while True:
            info = (await client.call_tool("folders_get_server_info", {})).structured_content
            if info["state"] == "ready" and info["totals"]["documents"] >= 2:
                return info
            await anyio.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any ``PLEXOR_*`` variable, plus ``PLEXOR_HOME`` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env["PLEXOR_HOME"] = str(home)
    env["PLEXOR_LOG_LEVEL"] = "warning"
    env.update(extra)
    return env


class HttpServer:
    """``python -m plexor serve --transport http`` on a free 127.0.0.1 port, ready when constructed."""

    def __init__(self, env: dict[str, str], *args: str, log: Path, timeout: float = 30) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--host", "127.0.0.1",
             "--port", str(self.port), *args],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self.stop()
                raise AssertionError(f"plexor serve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as r:
                    if json.load(r)["kernel"]["state"] == "ready":
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"plexor serve was not ready in {timeout} s:\n{self.log_text()}")
            time.sleep(0.1)

    def log_text(self) -> str:
        self._log_file.flush()
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()


@contextmanager
def http_server(env: dict[str, str], *args: str, log: Path) -> Iterator[HttpServer]:
    server = HttpServer(env, *args, log=log)
    try:
        yield server
    finally:
        server.stop()


def write_notes(folder: Path) -> Path:
    """A folder of two Markdown notes for folder-search."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kettle.md").write_text("# Tea\n\nBoil the kettle, then steep green tea for two minutes.\n",
                                      encoding="utf-8")
    (folder / "bikes.md").write_text("# Bicycles\n\nPump the tyres before a long ride.\n", encoding="utf-8")
    return folder


def index_folders(env: dict[str, str]) -> str:
    """``plexor folder-search index`` (every configured folder), as a user would run it; returns its output."""
    done = subprocess.run([sys.executable, "-m", "plexor", "folder-search", "index"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


# A reply recorded from a real EdgeLake node (plugins/edgelake/tests/data/responses.txt).
STATUS_COMMAND = "get status where format = json"
STATUS_REPLY = {"assigned_name": "el-test@127.0.0.1:32048", "status": "running", "profiling": False}


class _NodeHandler(BaseHTTPRequestHandler):
    """Answers ``get status where format = json`` like a node; every other command with the node's error 2."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        command = (self.headers.get("command") or "").strip()
        self.server.commands.append(command)  # type: ignore[attr-defined]
        if command == STATUS_COMMAND:
            status, reason, body = 200, "OK", json.dumps(STATUS_REPLY).encode()
        else:
            status, body = 400, b""
            reason = json.dumps({"method": self.command.lower(), "node": "127.0.0.1", "err_code": 2,
                                 "err_text": "Error Command Structure"})
        self.send_response(status, reason)
        self.send_header("Content-Type", "text/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@contextmanager
def edgelake_node() -> Iterator[ThreadingHTTPServer]:
    """A stand-in EdgeLake node on 127.0.0.1 (``server.address`` is ``host:port``; ``server.commands``
    lists the commands it received)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NodeHandler)
    server.daemon_threads = True
    server.commands = []  # type: ignore[attr-defined]
    server.address = f"127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
