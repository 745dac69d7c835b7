"""deploy/plexor.service and deploy/Containerfile, started the way systemd and a container engine start them.

No init system or container engine runs here, so each test reads the file, takes its exact command
lines (ExecStart/ExecStartPost; ENTRYPOINT + CMD and HEALTHCHECK) and environment (Environment=;
ENV), and runs them as the supervisor would: no terminal, stdin /dev/null, only that environment,
the health check polled until ready, then SIGTERM and a clean exit within the stop timeout. Only
what a machine provides is swapped in: the install prefix, the port, the state directory and the
token file. If the files drift (a flag renamed, the health check broken), these tests fail.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy" / "plexor.service"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
BIN = Path(sys.executable).parent
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOKEN = "s3rvice-t0ken-for-the-test"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="systemd and OCI containers are Linux")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unit_service_section(text: str) -> dict[str, list[str]]:
    """The [Service] section's settings, each key with all its values in order (Environment= repeats)."""
    out: dict[str, list[str]] = {}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service":
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def containerfile_instructions(text: str) -> dict[str, str]:
    """Each instruction's last value (line continuations joined), as an engine reads it."""
    out: dict[str, str] = {}
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out[word.upper()] = rest.strip()
    return out


def _swap_port(argv: list[str], port: int) -> list[str]:
    swapped = [a.replace(":8765/", f":{port}/") for a in argv]
    return [str(port) if i and argv[i - 1] == "--port" else a for i, a in enumerate(swapped)]


def _post_initialize(port: int, token: str | None) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "svc", "version": "1"}}})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body.encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _healthy(health: list[str], env: dict[str, str], within: float) -> subprocess.CompletedProcess[str]:
    """Run the health check as an engine does (again while it fails, ``within`` seconds at most)."""
    deadline = time.monotonic() + within
    while True:
        done = subprocess.run(health, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if done.returncode == 0 or time.monotonic() > deadline:
            return done
        time.sleep(0.5)


def _supervise(argv: list[str], env: dict[str, str], health: list[str], port: int, stop_timeout: float,
               log: Path, start_period: float = 0.0) -> None:
    """Start ``argv`` as a supervisor would, run ``health`` until ready, check the token, SIGTERM, wait."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd="/")  # a new session: no controlling terminal
    try:
        ready = _healthy(health, env, start_period)
        assert ready.returncode == 0, (ready.stderr, log.read_text())
        assert _post_initialize(port, TOKEN) == 200
        assert _post_initialize(port, None) == 401, "the token file did not protect the server"
        proc.send_signal(signal.SIGTERM)
        # The server drains, stops the kernel, then ends by the signal it was sent (as uvicorn does): systemd
        # counts that as a clean stop, engines report 143. What matters is the drain ran and finished in time.
        assert proc.wait(timeout=stop_timeout) in (0, -signal.SIGTERM), log.read_text()
        assert '"event": "kernel_stopped"' in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    once = health[:health.index("--wait")] + health[health.index("--wait") + 2:] if "--wait" in health else health
    stopped = subprocess.run(once, env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 1, stopped.stderr  # nothing answers once it stopped
    assert "Traceback" not in log.read_text()


def test_the_systemd_unit_serves_checks_health_and_stops_on_sigterm(tmp_path):
    service = unit_service_section(UNIT.read_text(encoding="utf-8"))
    assert service["Type"] == ["exec"] and service["KillSignal"] == ["SIGTERM"]
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    source = service["LoadCredential"][0].split(":", 1)[0]
    (credentials / source).write_text(TOKEN + "\n", encoding="utf-8")
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "CREDENTIALS_DIRECTORY": str(credentials)}
    for assignment in service["Environment"]:
        key, _, value = assignment.partition("=")
        env[key] = value.replace("%d", str(credentials))
    assert env["PLEXOR_HOME"] == "/var/lib/plexor" and service["StateDirectory"] == ["plexor"]
    env["PLEXOR_HOME"] = str(tmp_path / "state")  # what StateDirectory= makes
    env["PLEXOR_PLUGINS"] = "example"  # the test's plugin set; the unit loads every installed plugin
    port = _free_port()

    def command(line: str) -> list[str]:
        argv = shlex.split(line)
        assert argv[0].startswith("/opt/plexor/bin/"), argv[0]
        return _swap_port([str(BIN / Path(argv[0]).name), *argv[1:]], port)

    start = command(service["ExecStart"][0])
    health = command(service["ExecStartPost"][0])
    assert health[1:3] == ["-m", "plexor.healthcheck"]
    stop_timeout = float(service["TimeoutStopSec"][0])
    grace = float(start[start.index("--grace") + 1])
    assert 2 * grace + 5 <= stop_timeout, "TimeoutStopSec must cover the drain and the stop (twice --grace)"
    _supervise(start, env, health, port, stop_timeout, tmp_path / "journal.log")


def _container(tmp_path: Path) -> tuple[list[str], dict[str, str], list[str], int, float]:
    found = containerfile_instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    assert found["STOPSIGNAL"] == "SIGTERM"
    env = {"PATH": os.pathsep.join([str(BIN), SYSTEM_PATH]), "LANG": "C.UTF-8"}
    env.update(dict(shlex.split(pair)[0].split("=", 1) for pair in re.findall(r"\S+=\S+", found["ENV"])))
    assert env["PLEXOR_HOME"] == "/var/lib/plexor" and found["VOLUME"] == "/var/lib/plexor"
    env["PLEXOR_HOME"] = str(tmp_path / "volume")
    secret = tmp_path / "secrets" / Path(env["PLEXOR_TOKEN_FILE"]).name
    assert env["PLEXOR_TOKEN_FILE"].startswith("/run/secrets/")
    env["PLEXOR_TOKEN_FILE"] = str(secret)
    env["PLEXOR_PLUGINS"] = "example"
    port = _free_port()
    argv = _swap_port(json.loads(found["ENTRYPOINT"]) + json.loads(found["CMD"]), port)
    health_spec = found["HEALTHCHECK"]
    health = _swap_port(json.loads(health_spec[health_spec.index(" CMD ") + 5:]), port)
    assert health[0] == "python"
    health[0] = sys.executable
    start_period = re.search(r"--start-period=(\d+)s", health_spec)
    assert start_period is not None
    return argv, env, health, port, float(start_period.group(1))


def test_the_container_entrypoint_serves_checks_health_and_stops_on_sigterm(tmp_path):
    argv, env, health, port, start_period = _container(tmp_path)
    secret = Path(env["PLEXOR_TOKEN_FILE"])
    secret.parent.mkdir()
    secret.write_text(TOKEN, encoding="utf-8")
    grace = float(argv[argv.index("--grace") + 1])
    assert grace < 10, "engines send SIGKILL 10 s after SIGTERM: --grace must end the drain before"
    _supervise(argv, env, health, port, 10.0, tmp_path / "container.log", start_period)


def test_the_container_without_its_token_secret_refuses_to_start(tmp_path):
    argv, env, *_ = _container(tmp_path)
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"cannot read the token file {env['PLEXOR_TOKEN_FILE']}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("content, extra, expected", [
    ("", {}, "must hold one token (no spaces); it holds nothing"),
    ("two words", {}, "it holds several words"),
    (TOKEN, {"PLEXOR_TOKEN": "another"}, "both a token (--token or PLEXOR_TOKEN) and a token file"),
], ids=["empty", "two-words", "both"])
def test_a_token_file_that_cannot_serve_is_a_usage_error(tmp_path, content, extra, expected):
    token_file = tmp_path / "token"
    token_file.write_text(content, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(tmp_path / "home"), PLEXOR_PLUGINS="", PLEXOR_TOKEN_FILE=str(token_file), **extra)
    done = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and expected in done.stderr, done.stderr
