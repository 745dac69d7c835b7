"""`plexor serve` on stdio under a supervisor: whatever stdin it is given, it never hangs and never crashes.

systemd, `docker run` without -i and cron give a process /dev/null; `cmd <&-` closes stdin; nohup
can leave it open for writing only. Nothing can speak MCP there, so serve exits 0 at once with one
line saying so (and that a service wants `--transport http`); a pipe that ends before a client
spoke ends it too, and a regular file of messages is still answered.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conformance.serving import fixture_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file descriptors")

SERVE = [sys.executable, "-m", "plexor", "serve"]
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "file", "version": "1"}}})
HTTP_HINT = "to run it as a service, use `plexor serve --transport http`"


def _env(home):
    return fixture_env(home, PLEXOR_PLUGINS="example", PLEXOR_LOG_LEVEL="warning")


def _notes(stderr: str) -> list[str]:
    """The plain lines of stderr (JSON log lines aside)."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("{")]


def _check(done: subprocess.CompletedProcess[str], why: str) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert _notes(done.stderr) == [f"plexor serve: stdin {why}: nothing to serve on stdio. MCP clients launch "
                                   f"`plexor serve` with a pipe on stdin; {HTTP_HINT}."], done.stderr
    assert done.stdout == ""


def test_stdin_on_dev_null_ends_at_once(tmp_path):
    done = subprocess.run(SERVE, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=_env(tmp_path),
                          timeout=60)
    _check(done, "is /dev/null")


def test_stdin_closed_ends_at_once(tmp_path):
    # `plexor serve <&-`: fd 0 does not exist in the child at all
    done = subprocess.run(["bash", "-c", 'exec "$@" <&-', "bash", *SERVE], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=60)
    _check(done, "is closed")


def test_stdin_open_for_writing_only_ends_at_once(tmp_path):
    # nohup's stand-in for a terminal: a descriptor that cannot be read
    done = subprocess.run(["bash", "-c", 'exec "$@" 0>/dev/null', "bash", *SERVE], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=60)
    _check(done, "is not open for reading")


def test_stdin_an_empty_regular_file_ends_at_once(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with empty.open("rb") as fh:
        done = subprocess.run(SERVE, stdin=fh, capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    _check(done, "is an empty file")


def test_stdin_a_pipe_already_at_eof_ends_with_a_note(tmp_path):
    done = subprocess.run(SERVE, input="", capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert _notes(done.stderr) == ["plexor serve: stdin ended before a client sent anything; nothing was served."]
    assert done.stdout == ""


def test_stdin_a_regular_file_of_messages_is_answered_then_ends(tmp_path):
    requests = tmp_path / "requests.jsonl"
    requests.write_text(INITIALIZE + "\n", encoding="utf-8")
    with requests.open("rb") as fh:
        done = subprocess.run(SERVE, stdin=fh, capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"]
    assert "Traceback" not in done.stderr and _notes(done.stderr) == []


def test_the_check_reads_descriptor_zero_not_a_cached_sys_stdin(tmp_path):
    """A script that swapped sys.stdin for None (as `<&-` leaves it) gets the note, not an AttributeError."""
    code = "import sys; sys.stdin = None; sys.argv = ['plexor', 'serve']; from plexor.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=_env(tmp_path), timeout=60)
    _check(done, "is /dev/null")
