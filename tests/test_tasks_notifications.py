"""Task status notifications (``notifications/tasks``, SEP-2663) on ``subscriptions/listen`` streams (SEP-2575),
2026-07-28: through the real kernel and the SDK's own client, in one process and across two server processes
on one SQLite data directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import make_plugin
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from plexor import Context, Elicit, Result
from plexor.core.kernel import Kernel
from plexor.features.tasks.client import TasksClient, listen_tasks, task_request
from plexor.serving.server import build_server

pytestmark = pytest.mark.anyio
SITE = str(Path(__file__).resolve().parent / "multihost" / "site")


async def slow(ctx: Context, seconds: float = 0.6, label: str = "") -> Result:
    """Work a while (no progress: only status changes make notifications)."""
    await anyio.sleep(seconds)
    return Result({"label": label}, text=f"done {label}")


async def confirm(ctx: Context, what: str) -> Result:
    """Ask, then finish after a moment."""
    got = await ctx.ask(ok=Elicit(f"Really {what}?", {"ok": bool}))
    await anyio.sleep(0.3)
    return Result({"ok": (got["ok"].get("content") or {}).get("ok")}, text=f"{what}: {got['ok']['action']}")


def register_jobs(register: Any, settings: Any) -> None:
    register(slow, task="optional")
    register(confirm, task="optional")


PLUGIN = make_plugin("jobs", "jobs", plexor_register_tools=register_jobs)


@pytest.fixture
async def kernel(tmp_path):
    k = Kernel([("jobs", PLUGIN)], load_entry_points=False, environ={"PLEXOR_HOME": str(tmp_path)})
    await k.start()
    yield k
    await k.stop()


class Messages:
    """The client's message handler: keeps the listen acknowledgements."""

    def __init__(self) -> None:
        self.acks: list[dict[str, Any]] = []

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            self.acks.append(message.params.notifications.model_dump(by_alias=True, exclude_none=True))


async def _never(context: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("a task asks through tasks/get, not elicitation/create")


def modern(target: Any, ext: TasksClient, messages: Messages) -> Client:
    return Client(target, mode="2026-07-28", extensions=[ext], elicitation_callback=_never, message_handler=messages)


async def start(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    created = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert created.result_type == "task", created
    return str((created.model_extra or {})["taskId"])


async def until(check: Any, seconds: float = 10.0) -> None:
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.02)


async def raw_listen(client: Client, notifications: dict[str, Any]) -> Any:
    """A subscriptions/listen request as sent (the era's _meta stamped by the session), for the refused ones."""
    data: dict[str, Any] = {"method": "subscriptions/listen", "params": {"notifications": notifications}}
    opts: Any = {}
    client.session._stamp(data, opts)
    return await client.session._dispatcher.send_raw_request(data["method"], data["params"], opts)


def statuses(ext: TasksClient, task_id: str) -> list[str]:
    return [t["status"] for t in ext.heard if t["taskId"] == task_id]


async def test_a_listen_stream_hears_its_task_from_working_to_completed(kernel):
    ext, messages = TasksClient(), Messages()
    async with modern(build_server(kernel), ext, messages) as client:
        task_id = await start(client, "jobs_slow", {"seconds": 0.6, "label": "a"})
        async with listen_tasks(client.session, [task_id]) as subscription:
            await until(lambda: "completed" in statuses(ext, task_id))
            assert messages.acks[-1] == {"taskIds": [task_id]}
        final = await task_request(client.session, "tasks/get", {"taskId": task_id})
    assert statuses(ext, task_id) == ["working", "completed"]
    working, completed = [t for t in ext.heard if t["taskId"] == task_id]
    # The stream's frames carry its subscription id; the states are what tasks/get answers.
    assert working["_meta"] == {"io.modelcontextprotocol/subscriptionId": subscription}
    assert {"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(working) and "result" not in working
    assert completed["result"]["structuredContent"] == {"label": "a"} and completed["result"]["isError"] is False
    assert {k: v for k, v in completed.items() if k != "_meta"} == {
        k: v for k, v in final.items() if k not in ("_meta", "resultType")}


async def test_input_required_then_working_then_completed(kernel):
    ext, messages = TasksClient(), Messages()
    async with modern(build_server(kernel), ext, messages) as client:
        task_id = await start(client, "jobs_confirm", {"what": "delete"})
        async with listen_tasks(client.session, [task_id]):
            await until(lambda: "input_required" in statuses(ext, task_id))
            asked = next(t for t in ext.heard if t["status"] == "input_required")
            assert asked["inputRequests"]["ok"]["method"] == "elicitation/create"
            await task_request(client.session, "tasks/update",
                               {"taskId": task_id, "inputResponses": {"ok": {"action": "accept", "content": {"ok": True}}}})
            await until(lambda: "completed" in statuses(ext, task_id))
    heard = statuses(ext, task_id)
    # The snapshot on listening may already be input_required (the tool asks at once); the rest follows in order.
    assert heard[-3:] == ["input_required", "working", "completed"] and heard[0] in ("working", "input_required")
    assert ext.heard[-1]["result"]["structuredContent"] == {"ok": True}


async def test_cancelled_tasks_and_ended_ones_are_heard_and_unknown_ids_not_honored(kernel):
    ext, messages = TasksClient(), Messages()
    async with modern(build_server(kernel), ext, messages) as client:
        long_id = await start(client, "jobs_slow", {"seconds": 30})
        done_id = await start(client, "jobs_slow", {"seconds": 0.1})
        while (await task_request(client.session, "tasks/get", {"taskId": done_id}))["status"] != "completed":
            await anyio.sleep(0.05)
        async with listen_tasks(client.session, [long_id, "no-such-task", done_id], toolsListChanged=True):
            await until(lambda: statuses(ext, long_id) == ["working"] and statuses(ext, done_id) == ["completed"])
            # Only tasks the caller may see are acknowledged (an unknown id is dropped), with the rest of the filter.
            assert messages.acks[-1] == {"toolsListChanged": True, "taskIds": [long_id, done_id]}
            await task_request(client.session, "tasks/cancel", {"taskId": long_id})
            await until(lambda: "cancelled" in statuses(ext, long_id))
    assert statuses(ext, long_id) == ["working", "cancelled"] and statuses(ext, done_id) == ["completed"]
    assert not any(t["taskId"] == "no-such-task" for t in ext.heard)


async def test_another_users_task_is_neither_acknowledged_nor_heard(kernel):
    from plexor.features.tasks.runner import tasks_of

    ext, messages = TasksClient(), Messages()
    async with modern(build_server(kernel), ext, messages) as client:
        # A task of another (OAuth) user, run by the kernel's own task machinery; this client is the local user.
        theirs = await tasks_of(kernel).create(tool="jobs_slow", arguments={"seconds": 0.3}, era="2026-07-28",
                                               owner="someone-else", capabilities={}, ttl_ms=None, idempotent=False)
        mine = await start(client, "jobs_slow", {"seconds": 0.3})
        async with listen_tasks(client.session, [theirs.task_id, mine]):
            await until(lambda: "completed" in statuses(ext, mine))
            while (await tasks_of(kernel).read(theirs.task_id)).status != "completed":
                await anyio.sleep(0.05)
            await anyio.sleep(0.2)
        assert messages.acks[-1] == {"taskIds": [mine]}
    assert statuses(ext, theirs.task_id) == [] and statuses(ext, mine) == ["working", "completed"]


async def test_a_stream_without_task_ids_hears_no_task_and_one_without_the_extension_is_refused(kernel):
    ext, messages = TasksClient(), Messages()
    async with modern(build_server(kernel), ext, messages) as client:
        async with client.listen(tools_list_changed=True):  # the SDK's own listen: no taskIds
            task_id = await start(client, "jobs_slow", {"seconds": 0.1})
            while (await task_request(client.session, "tasks/get", {"taskId": task_id}))["status"] == "working":
                await anyio.sleep(0.05)
            await anyio.sleep(0.2)
        assert ext.heard == []
        with pytest.raises(MCPError) as bad:
            await raw_listen(client, {"taskIds": "not-a-list"})
        assert bad.value.error.code == types.INVALID_PARAMS and "notifications.taskIds" in bad.value.error.message
    async with Client(build_server(kernel), mode="2026-07-28") as plain:  # no tasks extension declared
        with pytest.raises(MCPError) as refused:
            await raw_listen(plain, {"taskIds": [task_id]})
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


async def test_a_task_on_one_process_is_heard_by_a_stream_on_another(tmp_path):
    """Two real `plexor serve` processes on one SQLite data directory: the task runs on one, the listen
    stream is open on the other, and its status changes cross through the notifier's SQLite bus."""
    from conformance.serving import serve_http

    env = {"PLEXOR_PLUGINS": "multihost", "PYTHONPATH": SITE, "PLEXOR_EVENT_STORE": "shared"}
    ext_a, ext_b, messages = TasksClient(), TasksClient(), Messages()
    with serve_http(tmp_path, "--stateless", env=env) as a, serve_http(tmp_path, "--stateless", env=env) as b:
        async with modern(a.url, ext_a, messages) as runner, modern(b.url, ext_b, messages) as watcher:
            task_id = await start(runner, "multihost_slow", {"seconds": 1.5})
            async with listen_tasks(watcher.session, [task_id]):
                await until(lambda: "completed" in statuses(ext_b, task_id), 20)
    assert statuses(ext_b, task_id) == ["working", "completed"]
    assert ext_b.heard[-1]["result"]["structuredContent"]["pid"] == a.proc.pid != b.proc.pid
    assert ext_a.heard == []
