"""Tasks through `plexor connect`, in both eras: real `plexor connect` processes relaying to a real daemon, driven by
the SDK's client. A task started through the relay is polled and its result fetched; the daemon's tool profile
decides a task's tool through the relay exactly as it does for a client of the daemon itself."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import pytest
from conftest import relay_site
from mcp.shared.exceptions import MCPError

from plexor.features.daemon.process import read_registry, registry_path
from plexor.features.tasks.client import TasksClient, task_request

pytestmark = pytest.mark.anyio

JOBS = """
import anyio
from plexor import Context, Elicit, Result, hookimpl


@hookimpl
def plexor_register_tools(register, settings):
    async def work(ctx: Context, seconds: float = 0.5, label: str = "") -> Result:
        '''Work a while, reporting progress.'''
        for step in range(5):
            await anyio.sleep(seconds / 5)
            await ctx.progress(step + 1, 5, f"working on {label}")
        return Result({"label": label}, text=f"done {label}")

    async def secret(seconds: float = 0.5) -> str:
        '''Outside the profile.'''
        await anyio.sleep(seconds)
        return "the secret"

    async def confirm(ctx: Context, what: str) -> Result:
        '''Ask before doing it.'''
        got = await ctx.ask(ok=Elicit(f"Really {what}?", {"ok": bool}))
        return Result({"ok": (got["ok"].get("content") or {}).get("ok")}, text=f"{what}: {got['ok']['action']}")

    register(work, task="optional")
    register(confirm, task="optional")
    register(secret, task="optional")
"""

NOTES = """
from plexor import hookimpl


@hookimpl
def plexor_register_prompts(register, settings):
    def brief() -> str:
        '''A prompt of a plugin that the profile "worker" does not admit.'''
        return "the brief"

    register(brief)
"""


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with relay_site(tmp_path_factory.mktemp("connect-tasks"), ["fakejobs_work"],
                    {"fakejobs": JOBS, "fakenotes": NOTES}) as environ:
        yield environ


def _connect(env: dict[str, str], *args: str, **options: Any) -> Any:
    from mcp import Client, StdioServerParameters

    return Client(StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect", *args], env=env), **options)


@contextlib.asynccontextmanager
async def _direct(env: dict[str, str], **options: Any) -> Any:
    """A client of the daemon itself, with the relay's token and profile header."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    info = read_registry(registry_path(env))
    assert info is not None, "the daemon is started by plexor connect first"
    headers = {"Authorization": f"Bearer {info['token']}", "Plexor-Profile": "worker"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(info["url"], http_client=http), **options) as client:
        yield client


async def raw(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request the SDK's typed 2025-11-25 API lacks (its tools/call refuses a CreateTaskResult)."""
    return await client.session._dispatcher.send_raw_request(method, params, {})


async def _refusal(client: Any, method: str, params: dict[str, Any]) -> Any:
    try:
        if client.protocol_version != "2026-07-28":
            return await raw(client, method, params)
        return await task_request(client.session, method, params)
    except MCPError as exc:
        return ("error", exc.error.code, exc.error.message)


async def test_a_legacy_task_through_connect_is_polled_listed_and_its_result_fetched(env):
    async with _connect(env, mode="legacy") as client:
        caps = client.session.server_capabilities
        assert caps.tasks is not None and caps.tasks.requests.tools.call is not None and caps.tasks.cancel is not None
        support = {t.name: t.execution.task_support if t.execution else None for t in (await client.list_tools()).tools}
        assert support["fakejobs_work"] == "optional"
        created = await raw(client, "tools/call", {"name": "fakejobs_work", "arguments": {"label": "a"},
                                                                    "task": {"ttl": 60_000}})
        task = created["task"]
        assert task["status"] == "working" and task["ttl"] == 60_000
        got = await raw(client, "tasks/get", {"taskId": task["taskId"]})
        assert got["taskId"] == task["taskId"] and got["status"] in ("working", "completed")
        result = await raw(client, "tasks/result", {"taskId": task["taskId"]})  # waits for the end
        assert result["content"][0]["text"] == "done a" and result["structuredContent"] == {"label": "a"}
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        listed = await raw(client, "tasks/list", {})
        assert task["taskId"] in [t["taskId"] for t in listed["tasks"]]
        long = (await raw(client, "tools/call", {"name": "fakejobs_work", "arguments": {"seconds": 9},
                                                                  "task": {}}))["task"]
        cancelled = await raw(client, "tasks/cancel", {"taskId": long["taskId"]})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == long["taskId"]
        with pytest.raises(MCPError) as update:  # 2026-07-28's method: refused in this era, as by the daemon
            await raw(client, "tasks/update", {"taskId": task["taskId"], "inputResponses": {}})
        assert update.value.error.code == -32601


async def test_a_modern_task_through_connect_runs_to_its_result(env):
    ext = TasksClient()
    async with _connect(env, mode="auto", extensions=[ext]) as client:
        assert client.protocol_version == "2026-07-28"
        assert "io.modelcontextprotocol/tasks" in (client.session.server_capabilities.extensions or {})
        result = await client.call_tool("fakejobs_work", {"label": "m"})
        assert result.content[0].text == "done m" and result.structured_content == {"label": "m"}
        assert ext.seen and ext.seen[-1]["status"] == "completed"
        assert any(t["status"] == "working" for t in ext.seen)
        created = await client.session.call_tool("fakejobs_work", {"seconds": 9}, allow_claimed=True)
        fields = created.model_extra or {}
        assert created.result_type == "task" and fields["status"] == "working"
        task = await task_request(client.session, "tasks/get", {"taskId": fields["taskId"]})
        assert task["taskId"] == fields["taskId"] and task["status"] == "working"
        assert (await task_request(client.session, "tasks/cancel", {"taskId": fields["taskId"]}))["resultType"] == "complete"
        assert (await task_request(client.session, "tasks/get", {"taskId": fields["taskId"]}))["status"] == "cancelled"
        with pytest.raises(MCPError) as listed:  # removed in 2026-07-28: the daemon says so through the relay
            await task_request(client.session, "tasks/list", {})
        assert listed.value.error.code == -32601


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_task_outside_the_profile_is_refused_through_connect_as_directly(env, mode):
    call = {"name": "fakejobs_secret", "arguments": {"seconds": 0.5}}
    if mode == "legacy":
        call["task"] = {}
    async with _connect(env, "--profile", "worker", mode=mode, extensions=[TasksClient()]) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        assert tools == ["fakejobs_work"]
        relayed = await _refusal(client, "tools/call", call)
    async with _direct(env, mode=mode, extensions=[TasksClient()]) as client:
        direct = await _refusal(client, "tools/call", call)
    assert "task" not in str(direct)[:30] and "the secret" not in str(direct)  # refused, not run
    assert "taskId" not in str(relayed)
    if isinstance(direct, dict):  # a tool error result: the same text
        assert relayed["isError"] is direct["isError"] is True and relayed["content"] == direct["content"]
    else:
        assert relayed == direct


async def test_a_legacy_task_s_question_reaches_the_client_through_tasks_result(env):
    import mcp_types as types

    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with _connect(env, mode="legacy", elicitation_callback=on_elicit) as client:
        task = (await raw(client, "tools/call", {"name": "fakejobs_confirm", "arguments": {"what": "drop"},
                                                 "task": {}}))["task"]
        result = await raw(client, "tasks/result", {"taskId": task["taskId"]})
    assert asked == ["Really drop?"]
    assert result["structuredContent"] == {"ok": True} and result["content"][0]["text"] == "drop: accept"


async def test_a_refusal_of_the_daemon_is_passed_on_without_cutting_a_call_in_flight(env):
    """The daemon's own errors are answers, not a lost connection: a refusal whose text speaks of "this connection"
    (and plexor's -32000, which shares its code with the SDK's "Connection closed") is passed on as is, and the
    relay does not reconnect, which would cut the calls in flight on its connections."""
    import anyio

    async with _connect(env, "--profile", "worker", mode="legacy") as client:
        pid = read_registry(registry_path(env))["pid"]
        done: dict[str, Any] = {}

        async def work() -> None:
            done["work"] = await client.call_tool("fakejobs_work", {"seconds": 1.5, "label": "kept"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(work)
            await anyio.sleep(0.4)  # the call is in flight on the relay's connection
            relayed = await _refusal(client, "prompts/get", {"name": "fakenotes_brief"})
    async with _direct(env, mode="legacy") as client:
        direct = await _refusal(client, "prompts/get", {"name": "fakenotes_brief"})
    assert relayed == direct and "not available to this connection" in relayed[2]
    assert not done["work"].is_error and done["work"].structured_content == {"label": "kept"}
    assert read_registry(registry_path(env))["pid"] == pid
