"""`plexor connect` under a supervisor: with a stdin no client can use, it ends at once, starting no daemon.

The relay is what MCP clients launch instead of `plexor serve`; given /dev/null, a closed stdin or one
open for writing only, it says so in one line and exits 0, as `serve` does (tests/test_serve_stdin.py),
instead of starting the shared daemon for a client that cannot come.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conformance.serving import fixture_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file descriptors")

CONNECT = [sys.executable, "-m", "plexor", "connect"]


def _run(home, argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          env=fixture_env(home, PLEXOR_PLUGINS="example"), **kwargs)


@pytest.mark.parametrize(("how", "why"), [
    ("devnull", "is /dev/null"), ("closed", "is closed"), ("write-only", "is not open for reading")])
def test_connect_with_no_possible_client_ends_at_once_and_starts_no_daemon(tmp_path, how, why):
    home = tmp_path / "home"
    if how == "devnull":
        done = _run(home, CONNECT, stdin=subprocess.DEVNULL)
    else:
        redirect = "<&-" if how == "closed" else "0>/dev/null"
        done = _run(home, ["bash", "-c", f'exec "$@" {redirect}', "bash", *CONNECT])
    assert done.returncode == 0, done.stderr
    notes = [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith("{")]
    assert notes == [f"plexor connect: stdin {why}: nothing to relay on stdio. MCP clients launch `plexor connect` "
                     "with a pipe on stdin; to run the shared server as a service, use `plexor serve --transport http`."]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not list(home.rglob("daemon*.json")), "no daemon was started for a client that cannot come"
