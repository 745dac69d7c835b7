"""The shared local daemon and `plexor connect`, as real processes with the fixture plugin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conformance.serving import fixture_env
from mcp.shared.exceptions import MCPError

from plexor import __version__
from plexor.features.daemon.process import (
    _alive,
    daemon_health,
    ensure_daemon,
    read_registry,
    registry_path,
    stop_daemon,
    write_registry,
)

pytestmark = pytest.mark.anyio
DAEMON_SITE = Path(__file__).resolve().parent / "daemon_site"


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    yield home
    info = read_registry(registry_path(fixture_env(home)))
    if info is not None and _alive(info):
        stop_daemon(info, wait=10)


@pytest.fixture
def relayed(home):
    """The fixture plugins and ``relayed`` (tests/daemon_site), whose slow tools count their runs in a file."""
    env = fixture_env(home, PLEXOR_PLUGINS="conformance,relayed")
    env["PYTHONPATH"] = os.pathsep.join([str(DAEMON_SITE), env["PYTHONPATH"]])
    yield env
    info = read_registry(registry_path(env))
    if info is not None and _alive(info):
        stop_daemon(info, wait=10)


def _registry(home):
    return read_registry(registry_path(fixture_env(home)))


def _connect(home, mode="legacy", env=None, **callbacks):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"],
                                   env=env or fixture_env(home))
    return Client(params, mode=mode, **callbacks)


def test_serve_daemon_starts_once_and_writes_the_registry(home):
    run = lambda: subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--daemon"],  # noqa: E731
                                 env=fixture_env(home), capture_output=True, text=True, timeout=90)
    first = run()
    assert first.returncode == 0, first.stderr
    printed = json.loads(first.stdout)
    assert "token" not in printed
    info = _registry(home)
    assert info["pid"] == printed["pid"] and info["host"] == "127.0.0.1" and info["version"] == __version__
    assert len(info["token"]) >= 32
    assert oct((registry_path(fixture_env(home))).stat().st_mode & 0o777) == "0o600"
    health = daemon_health(info)
    assert health["pid"] == info["pid"] and health["kernel"]["state"] == "ready"
    assert daemon_health({**info, "token": "wrong"}) is None  # the token is required
    second = run()
    assert second.returncode == 0 and json.loads(second.stdout)["pid"] == info["pid"]  # reused, not restarted


async def test_two_connect_clients_share_one_daemon(home):
    async with _connect(home) as a, _connect(home) as b:
        ha = (await a.call_tool("plexor_health", {})).structured_content
        hb = (await b.call_tool("plexor_health", {})).structured_content
        assert ha["pid"] == hb["pid"] == _registry(home)["pid"]
        assert ha["version"] == __version__
        tools = {t.name for t in (await a.list_tools()).tools}
        assert {"test_echo", "test_slow", "plexor_health"} <= tools
        assert (await b.call_tool("test_echo", {"text": "shared"})).structured_content == {"text": "shared"}
        text = (await a.read_resource("test://static-text")).contents[0].text
        assert text == "This is the content of the static text resource."
        prompt = await b.get_prompt("test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        assert "arg1='x'" in prompt.messages[0].content.text
        bad = await a.call_tool("test_nope", {})
        assert bad.is_error and "test_" in bad.content[0].text  # the daemon's guidance comes through
        caps = a.server_capabilities
        assert caps.tools is not None
        assert caps.tools.list_changed  # the daemon's list changes are passed on (tests/test_connect_notifications.py)


async def test_killing_the_daemon_mid_session_costs_only_a_delay(home):
    async with _connect(home) as client:
        before = (await client.call_tool("plexor_health", {})).structured_content["pid"]
        os.kill(before, signal.SIGKILL)
        started = time.monotonic()
        r = await client.call_tool("test_echo", {"text": "still here"})
        assert not r.is_error and r.structured_content == {"text": "still here"}
        after = (await client.call_tool("plexor_health", {})).structured_content["pid"]
        assert after != before and _registry(home)["pid"] == after
        assert time.monotonic() - started < 60


async def _killed_mid_call(client, runs, call):
    """Run ``call()`` and SIGKILL the daemon while it runs (once the call has written its line to ``runs``);
    the answer, and the killed daemon's pid."""
    pid = (await client.call_tool("plexor_health", {})).structured_content["pid"]
    result = {}

    async def run():
        result["r"] = await call()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        deadline = time.monotonic() + 30
        while not runs.exists() and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        assert runs.exists(), "the call never ran"
        os.kill(pid, signal.SIGKILL)
    return result["r"], pid


# a tool declared readOnlyHint or idempotentHint, named in each form the kernel accepts
@pytest.mark.parametrize("name", ["relayed_peek", "relayed.touch", "peek"])
async def test_a_call_in_flight_when_the_daemon_dies_is_retried_once(relayed, tmp_path, name):
    runs = tmp_path / "runs.txt"
    async with _connect(None, env=relayed) as client:
        r, pid = await _killed_mid_call(client, runs, lambda: client.call_tool(name, {"path": str(runs), "seconds": 1.5}))
        assert not r.is_error and r.structured_content == {"text": "run", "slept": 1.5}
        assert runs.read_text().splitlines() == ["run", "run"]  # run once more, on the restarted daemon
        assert (await client.call_tool("plexor_health", {})).structured_content["pid"] != pid


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_not_safe_to_repeat_in_flight_when_the_daemon_dies_is_answered_once(relayed, tmp_path, mode):
    """An unannotated tool may have taken effect: it is not run again, and the client is told how to go on."""
    runs = tmp_path / "runs.txt"
    async with _connect(None, mode, env=relayed) as client:
        r, pid = await _killed_mid_call(client, runs, lambda: client.call_tool(
            "relayed_append", {"path": str(runs), "text": "first", "seconds": 1.5}))
        assert r.is_error
        error = r.structured_content["error"]
        assert error["type"] == "interrupted" and error["details"] == {"tool": "relayed_append"}
        text = r.content[0].text
        assert text.startswith(error["message"]) and error["guidance"] in text
        assert "stopped while" in text and "may or may not have taken effect" in text
        assert "Check whether the call took effect" in text and "call it again" in text
        assert runs.read_text().splitlines() == ["first"]
        # the next call runs on the restarted daemon, once
        again = await client.call_tool("relayed_append", {"path": str(runs), "text": "second"})
        assert not again.is_error and again.structured_content == {"text": "second", "slept": 0.0}
        assert (await client.call_tool("plexor_health", {})).structured_content["pid"] != pid
    assert runs.read_text().splitlines() == ["first", "second"]


async def test_a_task_call_not_safe_to_repeat_in_flight_when_the_daemon_dies_is_answered_once(relayed, tmp_path):
    """A 2025-11-25 tools/call with a task parameter (which makes a task) is sent again only as the call would be."""
    runs = tmp_path / "runs.txt"
    call = {"name": "relayed.job", "arguments": {"path": str(runs), "text": "first", "seconds": 1.5}, "task": {"ttl": 60_000}}
    async with _connect(None, env=relayed) as client:
        # sent as is: the SDK's typed 2025-11-25 tools/call takes no task parameter
        r, pid = await _killed_mid_call(client, runs, lambda: client.session._dispatcher.send_raw_request("tools/call", call, {}))
        assert r["isError"] is True and "task" not in r
        assert r["structuredContent"]["error"]["type"] == "interrupted"
        assert "may or may not have taken effect" in r["content"][0]["text"]
        again = await client.call_tool("relayed_job", {"path": str(runs), "text": "second"})
        assert not again.is_error
        assert (await client.call_tool("plexor_health", {})).structured_content["pid"] != pid
    assert runs.read_text().splitlines() == ["first", "second"]


async def test_a_daemon_of_another_version_is_replaced(home):
    async with _connect(home) as client:
        old = (await client.call_tool("plexor_health", {})).structured_content["pid"]
    info = _registry(home)
    write_registry(registry_path(fixture_env(home)), {**info, "version": "0.0.1"})  # pretend an older Plexor wrote it
    async with _connect(home) as client:
        new = (await client.call_tool("plexor_health", {})).structured_content
    assert new["pid"] != old and new["version"] == __version__
    deadline = time.monotonic() + 30
    while _alive(info) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not _alive(info) and _gone(old)


def test_connect_reports_a_daemon_that_cannot_start(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "plexor.toml").write_text("this is = = not toml", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--daemon"],
                       env=fixture_env(home), capture_output=True, text=True, timeout=90)
    assert r.returncode == 1
    assert "daemon" in r.stderr and "daemon.log" in r.stderr


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_that_asks_the_client_works_through_connect(home, mode):
    from test_asking import Answers

    answers = Answers(name="Eve")
    async with _connect(home, mode, **answers.callbacks()) as client:
        r = await client.call_tool("test_input_required_result_multiple_inputs", {})
        assert not r.is_error, r.content
        assert r.structured_content == {"name": "Eve", "greeting": "Lovely.", "roots": ["file:///work"]}
        two = await client.call_tool("test_input_required_result_multi_round", {})
        assert "Eve likes teal (round 3)" in two.content[0].text
        prompt = await client.get_prompt("test_input_required_result_prompt", {})
        assert prompt.messages[0].content.text == "Use this context: interns"
    assert sorted(answers.asked) == sorted(["What is your name?", "Generate a greeting", "roots", "Step 1: What is your name?",
                                            "Step 2: What is your favorite color?", "What context should the prompt use?"])


async def test_connect_tells_a_client_without_the_capability(home):
    async with _connect(home) as client:  # declares nothing
        r = await client.call_tool("test_input_required_result_elicitation", {})
        assert r.is_error and "did not declare the elicitation capability" in r.content[0].text
        assert r.content[0].text.count("Use a client that supports elicitation") == 1
    async with _connect(home, "auto") as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("test_input_required_result_elicitation", {})
        assert err.value.error.code == -32021
        assert err.value.error.data["requiredCapabilities"] == {"elicitation": {"form": {}}}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_daemon_sees_what_the_end_client_can_answer(home, mode):
    from test_asking import Answers

    answers = Answers()
    sampling_only = {"sampling_callback": answers.sample}
    async with _connect(home, mode, **sampling_only) as client:
        # The tool asks only what the client declared: through the relay, that is the end client's set.
        r = await client.call_tool("test_input_required_result_capabilities", {})
        assert r.structured_content == {"asked": ["summary"]}, r.content
        assert (await client.call_tool("test_echo", {"text": "x"})).structured_content == {"text": "x"}
    assert answers.asked == ["Summarise the day in one line."]


def _gone(pid, wait=10.0):
    """The process has ended (checked the POSIX way, independently of the daemon's liveness lock)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return True  # ended; only its parent's wait is missing
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.05)
    return False


def _started(home, **extra):
    info = ensure_daemon(fixture_env(home, PLEXOR_LOG_LEVEL="info", **extra), wait=90)
    registry = registry_path(fixture_env(home))
    alive = registry.with_name(f"{registry.stem}-{info['pid']}.alive")
    assert info["alive"] == str(alive) and alive.exists()
    assert _alive(info)
    return info, alive


@pytest.mark.skipif(not os.path.exists("/proc"), reason="checks processes through /proc")
def test_the_daemon_is_stopped_by_a_request_it_drains_for(home):
    info, alive = _started(home)
    stop_daemon(info, wait=30)
    assert not _alive(info) and _gone(info["pid"])
    assert not alive.exists() and not alive.with_suffix(".stop").exists()
    assert _registry(home) is None  # the daemon removed its registry on its way out
    log = (home / "logs" / "daemon.log").read_text()
    assert '"signal": "SIGTERM"' in log and '"action": "draining"' in log  # the graceful path, not a kill


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="freezes the daemon with SIGSTOP")
def test_a_daemon_that_does_not_answer_the_request_is_terminated(home):
    info, alive = _started(home)
    os.kill(info["pid"], signal.SIGSTOP)  # frozen: it cannot see the request
    started = time.monotonic()
    stop_daemon(info, wait=1)
    assert not _alive(info) and _gone(info["pid"]) and time.monotonic() - started < 15
    assert not alive.exists() and not alive.with_suffix(".stop").exists()


def test_a_killed_daemon_is_not_alive_and_its_lock_file_goes(home):
    info, alive = _started(home)
    os.kill(info["pid"], signal.SIGKILL)
    assert _gone(info["pid"])
    deadline = time.monotonic() + 10
    while _alive(info) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(info) and not alive.exists()
    again = ensure_daemon(fixture_env(home), wait=90)  # the next start replaces it
    assert again["pid"] != info["pid"] and _alive(again)


def test_a_registry_without_a_lock_file_is_alive_while_it_answers(home):
    info, _ = _started(home)
    older = {k: v for k, v in info.items() if k != "alive"}  # as a daemon of an older Plexor wrote it
    assert _alive(older)
    assert not _alive({**older, "port": 9, "token": "x"})  # nothing answers there


async def test_a_client_asking_for_other_plugins_gets_a_daemon_of_its_own(home):
    """A second `plexor connect` asking for more plugins than the running daemon's got that daemon's
    tools (29 instead of 57); now each plugin set has its daemon, and the same set shares one."""
    from mcp import Client, StdioServerParameters

    more = fixture_env(home, PLEXOR_PLUGINS="example, conformance")  # order and spaces do not matter

    def connect(env):
        return Client(StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=env),
                      mode="legacy")

    try:
        async with _connect(home) as few, connect(more) as many, connect(fixture_env(home)) as same:
            few_tools = {t.name for t in (await few.list_tools()).tools}
            many_tools = {t.name for t in (await many.list_tools()).tools}
            assert "test_echo" in few_tools and not any(t.startswith("example_") for t in few_tools)
            assert few_tools < many_tools and any(t.startswith("example_") for t in many_tools)
            pids = [(await c.call_tool("plexor_health", {})).structured_content["pid"] for c in (few, many, same)]
            assert pids[0] == pids[2] != pids[1]
            assert (await many.call_tool("test_echo", {"text": "mine"})).structured_content == {"text": "mine"}
        mine, theirs = read_registry(registry_path(more)), _registry(home)
        assert mine["pid"] == pids[1] and theirs["pid"] == pids[0]
        assert mine["plugins"] == "plugins=conformance,example;disable=" and theirs["plugins"] == "plugins=conformance;disable="
        assert registry_path(more) != registry_path(fixture_env(home))
    finally:
        info = read_registry(registry_path(more))
        if info is not None and _alive(info):
            stop_daemon(info, wait=10)


async def test_a_registry_naming_other_plugins_is_replaced(home):
    async with _connect(home) as client:
        old = (await client.call_tool("plexor_health", {})).structured_content["pid"]
    info = _registry(home)
    # As a daemon of another plugin set behind the same registry (an older Plexor kept one for all).
    write_registry(registry_path(fixture_env(home)), {**info, "plugins": "plugins=other;disable="})
    async with _connect(home) as client:
        new = (await client.call_tool("plexor_health", {})).structured_content
        assert "test_echo" in {t.name for t in (await client.list_tools()).tools}
    assert new["pid"] != old and _registry(home)["plugins"] == "plugins=conformance;disable="
    deadline = time.monotonic() + 30
    while _alive(info) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not _alive(info)
