"""The limits hold through every other way in: a plugin's own protocol method, and tasks through `plexor connect`.

The authorization tests (``test_auth_seams``, ``test_auth_ways_in``) aim at every new way in; these aim the
limits of a plain ``tools/call`` (``docs/security.md#limits``) at the same ways in, each beside the plain call it
stands for, against a real ``plexor serve`` / ``plexor connect`` and the SDK's own client, in both eras:

1. a plugin's own method (``plexor_protocol_methods``): a body over ``--max-body`` (413), nesting past
   ``PLEXOR_MAX_NESTING``, a request id or progress token past ``PLEXOR_MAX_ECHOED_LENGTH``, a run past
   ``--request-timeout`` (cancelled, answered naming the limit), the in-flight count that draining waits for;
   and on stdio the nesting limit and the line length;
2. a task through ``plexor connect``: the run-time limit (the task ends failed naming it, and ``tasks/get``
   and ``tasks/result`` say so), its arguments' size, and the bytes of a caller's stored tasks.

The ``limited`` test plugin (written to a site folder here) has a tool and a method of the same body: each waits
the seconds it is asked and notes its start, its end or its cancellation in a file, so every refusal is also
checked where it matters: nothing ran, or what ran was cancelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth.support import client, raw
from conformance.serving import INIT, MCP_HEADERS, Served, fixture_env, healthz, serve_http
from conftest import install_fake_dist
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

ERAS = ["2025-11-25", "2026-07-28"]
TOKEN = "limits-seams-token"
LIMITED = '''
import json

import anyio
from plexor import hookimpl

PLEXOR_NAMESPACE = "limited"
_record = {}


def _note(event, **args):
    if _record.get("path"):
        with open(_record["path"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, **args}) + "\\n")


async def _wait(kind, seconds, label):
    _note("start", kind=kind, label=label)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _note("cancelled", kind=kind, label=label)
        raise
    _note("done", kind=kind, label=label)
    return {"label": label, "text": label}


@hookimpl
def plexor_add_config(config):
    config.add("record", str, None, help="file every start, end and cancellation is appended to")


@hookimpl
def plexor_register_tools(register, settings):
    _record["path"] = settings.get("record")

    async def wait(seconds: float = 0.0, label: str = "", text: str = "") -> dict:
        """Wait ``seconds``, then answer with ``label``."""
        return await _wait("tool", seconds, label)

    register(wait, task="optional")


@hookimpl
def plexor_protocol_methods(setup):
    from mcp_types import RequestParams

    from plexor.extending import ProtocolMethod

    class WaitParams(RequestParams):
        seconds: float = 0.0
        label: str = ""
        text: str = ""
        deep: object = None

    async def wait(ctx, params):
        return await _wait("method", params.seconds, params.label)

    return [ProtocolMethod("limited/wait", WaitParams, wait)]
'''


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _site(tmp: Path) -> dict[str, str]:
    """The ``limited`` plugin installed in a site folder under ``tmp``; the environment that loads it alone."""
    home, site = tmp / "home", tmp / "site"
    (home / "config").mkdir(parents=True)
    site.mkdir()
    (home / "config" / "plexor.toml").write_text(f"[limited]\nrecord = {json.dumps(str(tmp / 'record.jsonl'))}\n")
    install_fake_dist(site, "plexor-limited", "limited", "plexor_limited", LIMITED)
    env = fixture_env(home, PLEXOR_PLUGINS="limited", PLEXOR_LOG_LEVEL="info")
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    return env


def _events(tmp: Path, label: str) -> list[str]:
    """What the ``limited`` plugin noted of the call labelled ``label``: ``"tool:start"``, ``"method:cancelled"``, ..."""
    path = tmp / "record.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [f"{e['kind']}:{e['event']}" for e in lines if e["label"] == label]


def _until(what: str, check: Any, seconds: float = 20.0) -> Any:
    """Poll ``check()`` until it is true (an event to wait for, with a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)
    return found


# ------------------------------------------------------------------------------------------------------------
# 1. a plugin's own method, over HTTP
@pytest.fixture(scope="module")
def served(tmp_path_factory: Any) -> Iterator[tuple[Served, Path]]:
    tmp = tmp_path_factory.mktemp("limits-seams")
    env = _site(tmp)
    env.update(PLEXOR_MAX_NESTING="20", PLEXOR_MAX_ECHOED_LENGTH="64", PLEXOR_OTEL="1")
    args = ("--token", TOKEN, "--max-body", "8192", "--request-timeout", "2")
    with serve_http(Path(env["PLEXOR_HOME"]), *args, env={k: v for k, v in env.items() if k.startswith(("PLEXOR_", "PYTHONPATH"))},
                    token=TOKEN) as px:
        yield px, tmp


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "plexor-tests", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def _headers(px: Served, era: str, method: str, name: str | None = None) -> dict[str, str]:
    """The headers of a request in ``era``: a 2025-11-25 session is opened first, as a client would."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": era}
    if era == "2025-11-25":
        opened = httpx.post(px.url, json=INIT, headers=headers, timeout=30)
        assert opened.status_code == 200, opened.text
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        httpx.post(px.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=30)
        return headers
    return {**headers, "Mcp-Method": method, **({"Mcp-Name": name} if name else {})}


def _wire(era: str, method: str, params: dict[str, Any], rid: int | str = 41) -> dict[str, Any]:
    if era != "2025-11-25":
        params = {**params, "_meta": {**META, **params.get("_meta", {})}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _both(label: str, **arguments: Any) -> list[tuple[str, dict[str, Any], str | None]]:
    """The plain call and the plugin's method it stands beside: (method, params, Mcp-Name)."""
    return [("tools/call", {"name": "limited_wait", "arguments": {"label": label, **arguments}}, "limited_wait"),
            ("limited/wait", {"label": label, **arguments}, None)]


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return dict(json.loads(data[-1]))
    return dict(response.json())


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_method_over_the_body_limit_gets_413_as_a_tool_call_does(served, era):
    px, tmp = served
    for method, params, name in _both(f"big-{era}", text="x" * 9000):
        r = httpx.post(px.url, json=_wire(era, method, params), headers=_headers(px, era, method, name), timeout=30)
        assert r.status_code == 413, (method, r.status_code, r.text[:300])
    assert _events(tmp, f"big-{era}") == []  # neither ran
    async with client(px.url, TOKEN, era) as c:  # the same, under the limit: answered
        assert (await raw(c, "limited/wait", {"label": f"small-{era}", "text": "x" * 100}, era=era))["label"] == f"small-{era}"
    assert _events(tmp, f"small-{era}") == ["method:start", "method:done"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_method_nested_past_the_limit_is_refused_before_it_runs(served, era):
    px, tmp = served
    for levels, refused in ((30, True), (15, False)):
        for method, params, name in _both(f"deep-{era}-{levels}"):
            body = _wire(era, method, {**params, "deep": "@"} if method != "tools/call"
                         else {**params, "arguments": {**params["arguments"], "text": "@"}})
            text = json.dumps(body).replace('"@"', "[" * levels + "]" * levels)
            r = httpx.post(px.url, content=text, headers=_headers(px, era, method, name), timeout=30)
            answer = _answer(r) if r.content else {}
            if refused:
                assert r.status_code == 400 and answer["id"] == 41, (method, r.status_code, r.text[:300])
                assert answer["error"]["code"] == -32600 and "nested deeper than 20 levels" in answer["error"]["message"]
                assert "PLEXOR_MAX_NESTING" in answer["error"]["message"], answer
            else:
                assert r.status_code == 200 and answer["id"] == 41, (method, r.status_code, r.text[:300])
    assert _events(tmp, f"deep-{era}-30") == []  # neither ran
    assert _events(tmp, f"deep-{era}-15") == ["method:start", "method:done"]  # the tool refuses a list for text


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_method_with_an_id_or_progress_token_past_the_limit_is_refused(served, era):
    px, tmp = served
    label = f"echo-{era}"
    for method, params, name in _both(label):
        for rid, meta in (("r" * 65, {}), (41, {"progressToken": "p" * 65})):
            body = _wire(era, method, {**params, "_meta": meta}, rid=rid)
            answer = _answer(httpx.post(px.url, json=body, headers=_headers(px, era, method, name), timeout=30))
            assert answer["error"]["code"] == -32600, (method, answer)
            assert "PLEXOR_MAX_ECHOED_LENGTH" in answer["error"]["message"], answer
    assert _events(tmp, label) == []
    async with client(px.url, TOKEN, era) as c:
        assert (await raw(c, "limited/wait", {"label": f"{label}-ok"}, era=era))["label"] == f"{label}-ok"


@pytest.mark.parametrize("era", ERAS)
async def test_a_plugins_method_past_the_request_time_limit_is_cancelled_naming_it(served, era):
    px, tmp = served
    label = f"slow-{era}"
    async with client(px.url, TOKEN, era) as c:
        started = time.monotonic()
        try:  # the plain call: an error result, or (2026-07-28, the tasks extension declared) a failed task
            plain = (await c.call_tool("limited_wait", {"seconds": 60, "label": f"{label}-tool"})).content[0].text
        except MCPError as failed:
            plain = failed.error.message
        assert "took longer than the server's limit of 2 s" in plain, plain
        with pytest.raises(MCPError) as cut:
            await raw(c, "limited/wait", {"seconds": 60, "label": label}, era=era)
        assert time.monotonic() - started < 20  # not the 60 s asked for
        message = cut.value.error.message
        assert "limited/wait took longer than the server's limit of 2 s" in message, message
        assert "--request-timeout" in message and "PLEXOR_REQUEST_TIMEOUT" in message, message
        assert cut.value.error.data == {"kind": "timeout", "limit_seconds": 2.0}, cut.value.error.data
        _until("the method's cancellation", lambda: _events(tmp, label) == ["method:start", "method:cancelled"])
        assert _events(tmp, f"{label}-tool") == ["tool:start", "tool:cancelled"]
        assert (await raw(c, "limited/wait", {"seconds": 0.1, "label": f"{label}-fast"}, era=era))["label"] == f"{label}-fast"
    assert healthz(px, TOKEN)["kernel"]["inflight"] == 0


@pytest.mark.parametrize("era", ERAS)
async def test_a_running_plugins_method_is_in_flight_as_a_tool_call_is(served, era):
    import functools

    import anyio

    px, tmp = served
    label = f"flight-{era}"
    async with client(px.url, TOKEN, era) as c, anyio.create_task_group() as group:
        for method, params, _name in _both(label, seconds=1.5):
            kind = "tool" if method == "tools/call" else "method"
            mine = lambda: [e for e in _events(tmp, label) if e.startswith(kind)]  # noqa: B023, E731
            group.start_soon(functools.partial(raw, c, method, params, era=era))
            await anyio.to_thread.run_sync(lambda: _until(f"the {kind} started", mine))  # noqa: B023
            assert healthz(px, TOKEN)["kernel"]["inflight"] == 1, (method, healthz(px, TOKEN))
            await anyio.to_thread.run_sync(lambda: _until(f"the {kind} ended", lambda: len(mine()) == 2))  # noqa: B023


@pytest.mark.parametrize("era", ERAS)
def test_while_draining_a_plugins_method_is_refused_as_a_tool_call_and_the_running_one_ends(tmp_path, era):
    import signal
    from concurrent.futures import ThreadPoolExecutor

    env = _site(tmp_path)
    label = f"drain-{era}"
    with serve_http(Path(env["PLEXOR_HOME"]), "--token", TOKEN, "--grace", "20", token=TOKEN,
                    env={k: v for k, v in env.items() if k.startswith(("PLEXOR_", "PYTHONPATH"))}) as px, \
            ThreadPoolExecutor(1) as pool:
        method, params, name = _both(label, seconds=3)[1]
        running = pool.submit(httpx.post, px.url, json=_wire(era, method, params), headers=_headers(px, era, method, name),
                              timeout=30)
        _until("the method started", lambda: _events(tmp_path, label) == ["method:start"])
        late = [(m, p, n, _headers(px, era, m, n)) for m, p, n in _both(f"{label}-late")]  # sessions opened before
        px.proc.send_signal(signal.SIGTERM)
        _until("draining", lambda: httpx.get(px.base + "/healthz", headers={"Authorization": f"Bearer {TOKEN}"},
                                             timeout=5).status_code == 503)
        for m, p, _n, headers in late:  # a new call of either kind is refused while the running one ends
            answer = _answer(httpx.post(px.url, json=_wire(era, m, p), headers=headers, timeout=30))
            refusal = answer["error"]["message"] if "error" in answer else json.dumps(answer["result"])
            assert "shutting down" in refusal, (m, answer)
        assert _answer(running.result())["result"]["label"] == label  # the drain waited for it
    assert _events(tmp_path, label) == ["method:start", "method:done"]
    assert _events(tmp_path, f"{label}-late") == []


# ------------------------------------------------------------------------------------------------------------
# 1b. a plugin's own method over stdio (no run-time limit there, for calls or tasks: docs/security.md#limits)
@pytest.mark.parametrize("era", ERAS)
def test_on_stdio_a_plugins_method_obeys_the_nesting_limit_and_the_line_length(tmp_path, era):
    import queue
    import threading

    env = {**_site(tmp_path), "PLEXOR_MAX_NESTING": "20"}
    handshake = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}] if era == "2025-11-25" else []
    deep = {"deep": "@", "label": "deep"}
    lines = [json.dumps(m) for m in handshake] + [
        json.dumps(_wire(era, "limited/wait", deep, rid=7)).replace('"@"', "[" * 30 + "]" * 30),
        json.dumps(_wire(era, "tools/call", {"name": "limited_wait", "arguments": {"label": "deep", "text": "@"}}, rid=8)
                   ).replace('"@"', "[" * 30 + "]" * 30),
        json.dumps(_wire(era, "limited/wait", {"label": "long", "text": "x" * (64 * 2**20)}, rid=9)),  # past 64 MiB
        json.dumps(_wire(era, "limited/wait", {"label": "after"}, rid=10))]
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    answers: list[dict[str, Any]] = []
    heard: queue.Queue[bytes] = queue.Queue()
    try:
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None and stdout is not None
        threading.Thread(target=lambda: [heard.put(line) for line in iter(stdout.readline, b"")], daemon=True).start()
        stdin.write(("\n".join(lines) + "\n").encode())  # the server reads as it comes: the pipe never fills
        stdin.flush()
        deadline = time.monotonic() + 60
        while not any(a.get("id") == 10 for a in answers):  # each line answered, over the same pipe
            try:
                message = json.loads(heard.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"the line after the long one was never answered: {answers}") from None
            if "id" in message:
                answers.append(message)
    finally:
        proc.kill()
        proc.wait()
    by_id = {a["id"]: a for a in answers}
    for rid in (7, 8):  # the method as the tool call: refused with its id, naming the limit and its setting
        assert by_id[rid]["error"]["code"] == -32600, by_id[rid]
        assert "nested deeper than 20 levels" in by_id[rid]["error"]["message"], by_id[rid]
        assert "PLEXOR_MAX_NESTING" in by_id[rid]["error"]["message"], by_id[rid]
    assert 9 not in by_id and by_id[None]["error"]["code"] == -32600, answers  # the long line: skipped, answered
    assert by_id[10]["result"]["label"] == "after", by_id[10]  # and the next line served
    assert _events(tmp_path, "deep") == [] and _events(tmp_path, "long") == []


# ------------------------------------------------------------------------------------------------------------
# 2. tasks through `plexor connect`, beside the same task sent to the daemon directly
MODES = ["legacy", "auto"]  # the end client's era: 2025-11-25, or 2026-07-28 with the tasks extension


@contextlib.contextmanager
def _daemon_env(tmp: Path, **limits: str) -> Iterator[dict[str, str]]:
    """The environment of ``plexor connect`` (its daemon inherits the limits); the daemon is stopped at the end."""
    from conftest import daemon_stopped

    with daemon_stopped({**_site(tmp), **limits}) as env:
        yield env


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: Any) -> Iterator[tuple[dict[str, str], Path]]:
    tmp = tmp_path_factory.mktemp("limits-connect")
    with _daemon_env(tmp, PLEXOR_REQUEST_TIMEOUT="2", PLEXOR_MAX_TASK_ARGUMENTS_BYTES="4096") as env:
        yield env, tmp


def _connect(env: dict[str, str], mode: str) -> Any:
    from mcp import Client, StdioServerParameters

    from plexor.features.tasks.client import TasksClient

    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=env)
    return Client(params, mode=mode, extensions=[] if mode == "legacy" else [TasksClient()])


@contextlib.asynccontextmanager
async def _direct(env: dict[str, str], mode: str) -> Any:
    """A client of the daemon itself (started by ``plexor connect`` first), with its token."""
    from plexor.features.daemon.process import read_registry, registry_path

    info = read_registry(registry_path(env))
    assert info is not None, "the daemon is started by plexor connect first"
    async with client(info["url"], info["token"], "2025-11-25" if mode == "legacy" else "2026-07-28") as c:
        yield c


async def _send(c: Any, mode: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from plexor.features.tasks.client import task_request

    if mode == "legacy":  # the SDK's typed 2025-11-25 API takes no CreateTaskResult
        return dict(await c.session._dispatcher.send_raw_request(method, params, {}))
    return await task_request(c.session, method, params)


async def _task(c: Any, mode: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A task of ``limited_wait`` made through ``c``: its fields (``taskId``, ``status``, ...)."""
    params: dict[str, Any] = {"name": "limited_wait", "arguments": arguments}
    if mode == "legacy":
        return dict((await _send(c, mode, "tools/call", {**params, "task": {"ttl": 600_000}}))["task"])
    created = await _send(c, mode, "tools/call", params)
    assert created.get("resultType") == "task", created
    return created


async def _ended(c: Any, mode: str, task_id: str) -> dict[str, Any]:
    """``tasks/get`` polled until the task is no longer working (with a deadline)."""
    import anyio

    deadline = time.monotonic() + 20
    while (task := await _send(c, mode, "tasks/get", {"taskId": task_id}))["status"] == "working":
        assert time.monotonic() < deadline, task
        await anyio.sleep(0.1)
    return task


@pytest.mark.parametrize("mode", MODES)
async def test_a_task_through_connect_past_the_run_time_limit_ends_failed_naming_it_as_directly(relayed, mode):
    env, tmp = relayed
    label = f"overrun-{mode}"
    started = time.monotonic()
    async with _connect(env, mode) as c:
        task = await _ended(c, mode, (await _task(c, mode, {"seconds": 60, "label": label}))["taskId"])
        if mode == "legacy":  # tasks/result answers the failure the call would have been
            with pytest.raises(MCPError) as result:
                await _send(c, mode, "tasks/result", {"taskId": task["taskId"]})
            assert "limit of 2 s" in result.value.error.message, result.value.error
        else:  # the 2026-07-28 task carries its error, and the SDK's client raises it for a plain call
            assert task["error"]["data"] == {"type": "timeout", "limit_seconds": 2.0}, task
            with pytest.raises(MCPError) as plain:
                await c.call_tool("limited_wait", {"seconds": 60, "label": f"{label}-plain"})
            assert "limit of 2 s" in plain.value.error.message, plain.value.error
    assert time.monotonic() - started < 30  # not the 60 s asked for
    assert task["status"] == "failed", task
    message = task["statusMessage"]
    assert "limit of 2 s" in message and "--request-timeout" in message and "PLEXOR_REQUEST_TIMEOUT" in message, task
    assert _events(tmp, label) == ["tool:start", "tool:cancelled"]
    async with _direct(env, mode) as c:  # the same task sent to the daemon itself: the same end, in the same words
        direct = await _ended(c, mode, (await _task(c, mode, {"seconds": 60, "label": f"{label}-direct"}))["taskId"])
    assert (direct["status"], direct["statusMessage"]) == ("failed", message)


@pytest.mark.parametrize("mode", MODES)
async def test_a_task_through_connect_with_oversized_arguments_is_refused_as_directly(relayed, mode):
    env, tmp = relayed
    label = f"big-{mode}"
    refusals = []
    async with _connect(env, mode) as c:
        with pytest.raises(MCPError) as relayed_refusal:
            await _task(c, mode, {"label": label, "text": "x" * 5000})
        refusals.append(relayed_refusal.value.error)
        small = await _ended(c, mode, (await _task(c, mode, {"seconds": 0.5, "label": f"{label}-small", "text": "x" * 100}))["taskId"])
        assert small["status"] == "completed", small
    async with _direct(env, mode) as c:
        with pytest.raises(MCPError) as direct_refusal:
            await _task(c, mode, {"label": label, "text": "x" * 5000})
        refusals.append(direct_refusal.value.error)
    assert refusals[0].code == refusals[1].code == -32602 and refusals[0].message == refusals[1].message, refusals
    assert "PLEXOR_MAX_TASK_ARGUMENTS_BYTES" in refusals[0].message, refusals
    assert _events(tmp, label) == []  # never ran


@pytest.mark.parametrize("mode", MODES)
async def test_the_bytes_of_tasks_kept_through_connect_are_capped_per_caller(tmp_path, mode):
    with _daemon_env(tmp_path, PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER="8192") as env:
        async with _connect(env, mode) as c:
            running = [await _task(c, mode, {"seconds": 60, "label": "€" * 1000}) for _ in range(2)]  # ~3 KB each
            with pytest.raises(MCPError) as refused:
                await _task(c, mode, {"seconds": 60, "label": "€" * 1000})
            assert refused.value.error.code == -32600, refused.value.error
            assert "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in refused.value.error.message, refused.value.error
            for task in running:  # still kept (cancelled) until they expire
                await _send(c, mode, "tasks/cancel", {"taskId": task["taskId"]})
            grown = await _task(c, mode, {"seconds": 0.5, "label": "y" * 700})  # admitted; its result passes
            grown = await _ended(c, mode, grown["taskId"])
            assert grown["status"] == "failed", grown
            assert "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in grown["statusMessage"], grown
            if mode == "legacy":
                with pytest.raises(MCPError) as result:
                    await _send(c, mode, "tasks/result", {"taskId": grown["taskId"]})
                assert "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in result.value.error.message, result.value.error
            else:
                assert "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER" in grown["error"]["message"], grown
