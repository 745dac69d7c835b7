"""Tasks through the real kernel and the SDK's own client (in-process), in both protocol eras.

2026-07-28: the SDK client with a small ``io.modelcontextprotocol/tasks`` client extension
(a result claim that polls ``tasks/get`` and answers input requests through ``tasks/update``),
as a client application would write it. 2025-11-25: the SDK client's session sends the
task requests its typed API does not have (``tools/call`` with ``task``, ``tasks/result``).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import make_plugin
from mcp.client import Client, advertise
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from plexor import AskError, Context, Elicit, Result
from plexor.core.kernel import Kernel
from plexor.features.tasks.client import TasksClient, task_request
from plexor.features.tasks.runner import tasks_of
from plexor.features.tasks.wire import TASKS_EXTENSION
from plexor.serving.server import build_server

ANY: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
pytestmark = pytest.mark.anyio


# -- the plugin under test --------------------------------------------------------------------
async def work(ctx: Context, seconds: float = 0.2, label: str = "") -> Result:
    """Work a while, reporting progress."""
    steps = max(1, int(seconds * 20))
    for step in range(steps):
        await anyio.sleep(seconds / steps)
        await ctx.progress(step + 1, steps, f"working on {label}")
    return Result({"label": label}, text=f"done {label}")


async def confirm(ctx: Context, what: str) -> Result:
    """Ask before doing it."""
    got = await ctx.ask(ok=Elicit(f"Really {what}?", {"ok": bool}))
    return Result({"ok": (got["ok"].get("content") or {}).get("ok")}, text=f"{what}: {got['ok']['action']}")


def boom() -> str:
    """Fail as a tool (after a moment: a call that ends at once is answered without a task)."""
    time.sleep(0.1)
    raise ValueError("no luck")


async def protocol_failure() -> str:
    """Fail at the protocol level."""
    await anyio.sleep(0.1)
    raise AskError("internal trouble", "Nothing to do.", rpc_code=-32603)


async def gather(ctx: Context) -> Result:
    """Ask first, in the request; then become a task."""
    got = await ctx.ask(who=Elicit("Who?", {"name": str}))
    name = got["who"]["content"]["name"]
    detached = await ctx.detach(f"working for {name}")
    await anyio.sleep(0.3)
    return Result({"name": name, "detached": detached}, text=f"done for {name}")


def quick() -> str:
    """A plain tool that never runs as a task."""
    return "quick"


async def instant(label: str = "") -> Result:
    """Done at once, reporting nothing."""
    return Result({"label": label}, text=f"done {label}")


def register_jobs(register: Any, settings: Any) -> None:
    register(work, task="optional")
    register(confirm, task="optional")
    register(boom, task="required")
    register(protocol_failure, task="optional")
    register(gather, task="optional", detach="manual")
    register(instant, task="optional")
    register(quick)


PLUGIN = make_plugin("jobs", "jobs", plexor_register_tools=register_jobs)


@pytest.fixture
async def kernel(tmp_path):
    k = Kernel([("jobs", PLUGIN)], load_entry_points=False, environ={"PLEXOR_HOME": str(tmp_path)})
    await k.start()
    yield k
    await k.stop()


async def request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await task_request(session, method, params)


async def get(session: Any, task_id: str) -> dict[str, Any]:
    return await request(session, "tasks/get", {"taskId": task_id})


async def _never(context: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("a task asks through tasks/get, not elicitation/create")


def modern(kernel: Kernel, *extensions: Any) -> Client:
    # The elicitation callback makes the client declare the capability; tasks never call it.
    return Client(build_server(kernel), mode="2026-07-28", extensions=list(extensions), elicitation_callback=_never)


# -- 2026-07-28 ------------------------------------------------------------------------------------
async def test_modern_task_runs_to_its_result_with_progress_in_the_status(kernel):
    ext = TasksClient()
    async with modern(kernel, ext) as client:
        result = await client.call_tool("jobs_work", {"seconds": 0.5, "label": "index"})
    assert result.content[0].text == "done index" and result.structured_content == {"label": "index"}
    working = [t for t in ext.seen if t["status"] == "working"]
    assert any("working on index (" in (t.get("statusMessage") or "") for t in working), ext.seen
    final = ext.seen[-1]
    assert final["status"] == "completed" and final["ttlMs"] == 3_600_000 and final["pollIntervalMs"] > 0
    assert "io.modelcontextprotocol/related-task" not in (final["result"].get("_meta") or {})


async def test_modern_create_result_is_flat_and_durable_at_once(kernel):
    async with modern(kernel, TasksClient()) as client:
        created = await client.session.call_tool("jobs_work", {"seconds": 5}, allow_claimed=True)
        fields = created.model_extra or {}
        assert created.result_type == "task" and "task" not in fields and fields["status"] == "working"
        assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs"} <= set(fields) and "requestState" not in fields
        task = await get(client.session, fields["taskId"])  # durably created: found at once
        assert task["taskId"] == fields["taskId"] and task["resultType"] == "complete"
        ack = await request(client.session, "tasks/cancel", {"taskId": fields["taskId"]})
        assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
        assert (await get(client.session, fields["taskId"]))["status"] == "cancelled"
        assert await request(client.session, "tasks/cancel", {"taskId": fields["taskId"]})  # idempotent ack
    assert fields["taskId"] not in tasks_of(kernel).running  # the coroutine was stopped, not left running


async def test_modern_call_that_ends_at_once_is_answered_without_a_task(kernel):
    ext = TasksClient()
    async with modern(kernel, ext) as client:
        for _ in range(5):  # answered directly when it ends within 20 ms (a very busy machine may take longer)
            before = len(ext.seen)
            result = await client.call_tool("jobs_instant", {"label": "now"})
            if len(ext.seen) == before:
                break
        assert result.content[0].text == "done now" and len(ext.seen) == before
        reporting = await client.call_tool("jobs_work", {"seconds": 0, "label": "r"})  # progress: a task at once
    assert reporting.content[0].text == "done r" and ext.seen and ext.seen[-1]["status"] == "completed"
    stored = tasks_of(kernel).store.state.query("SELECT task_id FROM plexor_tasks")
    # The direct answer stored no task; the reporting call (and any call that outlasted the window) did.
    assert {r[0] for r in stored} == {t["taskId"] for t in ext.seen} and ext.seen[-1]["taskId"] in {r[0] for r in stored}


async def test_modern_input_required_then_update_resumes(kernel):
    ext = TasksClient(answer=lambda req: {"action": "accept", "content": {"ok": True}})
    async with modern(kernel, ext) as client:
        result = await client.call_tool("jobs_confirm", {"what": "delete"})
    asked = [t for t in ext.seen if t["status"] == "input_required"]
    assert asked and asked[0]["inputRequests"]["ok"]["method"] == "elicitation/create"
    assert result.content[0].text == "delete: accept" and result.structured_content == {"ok": True}


async def test_modern_bad_answer_is_refused_and_unknown_keys_ignored(kernel):
    async with modern(kernel, TasksClient()) as client:
        created = await client.session.call_tool("jobs_confirm", {"what": "x"}, allow_claimed=True)
        task_id = (created.model_extra or {})["taskId"]
        for _ in range(100):
            if (await get(client.session, task_id))["status"] == "input_required":
                break
            await anyio.sleep(0.02)
        assert await request(client.session, "tasks/update", {"taskId": task_id, "inputResponses": {"nope": {}}})
        with pytest.raises(MCPError) as bad:
            await request(client.session, "tasks/update", {"taskId": task_id, "inputResponses": {"ok": {"action": "maybe"}}})
        assert bad.value.error.code == -32602 and "inputResponses['ok']" in bad.value.error.message
        assert (await get(client.session, task_id))["status"] == "input_required"
        await request(client.session, "tasks/cancel", {"taskId": task_id})


async def test_modern_tool_error_completes_and_protocol_error_fails(kernel):
    async with modern(kernel, TasksClient()) as client:
        ids = []
        for name in ("jobs_boom", "jobs_protocol_failure"):
            created = await client.session.call_tool(name, {}, allow_claimed=True)
            ids.append((created.model_extra or {})["taskId"])
        finals = []
        for task_id in ids:
            for _ in range(200):
                task = await get(client.session, task_id)
                if task["status"] not in ("working", "input_required"):
                    finals.append(task)
                    break
                await anyio.sleep(0.02)
    assert finals[0]["status"] == "completed" and finals[0]["result"]["isError"] is True
    assert "no luck" in finals[0]["result"]["content"][0]["text"]
    assert finals[1]["status"] == "failed" and finals[1]["error"]["code"] == -32603 and "result" not in finals[1]
    assert "internal trouble" in finals[1]["error"]["message"]


async def test_modern_gates_without_the_extension(kernel):
    async with modern(kernel) as client:  # no tasks extension declared
        plain = await client.call_tool("jobs_work", {"seconds": 0})  # optional: runs as a plain call
        assert plain.content[0].text == "done "
        with pytest.raises(MCPError) as required:
            await client.call_tool("jobs_boom", {})
        assert required.value.error.code == -32021
        assert required.value.error.data["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            with pytest.raises(MCPError) as gated:
                await request(client.session, method, {"taskId": "x", "inputResponses": {}})
            assert gated.value.error.code == -32021, method
    async with modern(kernel, advertise(TASKS_EXTENSION, {})) as client:
        for method in ("tasks/result", "tasks/list"):
            with pytest.raises(MCPError) as removed:
                await request(client.session, method, {"taskId": "x"})
            assert removed.value.error.code == -32601
        with pytest.raises(MCPError) as unknown:
            await get(client.session, "no-such-task")
        assert unknown.value.error.code == -32602 and "Task not found" in unknown.value.error.message
        with pytest.raises(MCPError) as missing:
            await request(client.session, "tasks/get", {})
        assert missing.value.error.code == -32602 and "taskId" in missing.value.error.message
        sync = await client.session.call_tool("jobs_quick", {}, allow_claimed=True)  # forbidden: never a task
        assert sync.structured_content == {"result": "quick"} and sync.result_type == "complete"


async def test_modern_manual_detach_asks_in_the_request_then_becomes_a_task(kernel):
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ann"})

    ext = TasksClient()
    server = build_server(kernel)
    async with Client(server, mode="2026-07-28", extensions=[ext], elicitation_callback=on_elicit) as client:
        result = await client.call_tool("jobs_gather", {})  # round 1: InputRequiredResult; round 2: a task
    assert asked == ["Who?"] and result.structured_content == {"name": "Ann", "detached": True}
    assert ext.seen and {t["status"] for t in ext.seen} <= {"working", "completed"}
    assert any(t.get("statusMessage") == "working for Ann" for t in ext.seen), ext.seen
    async with Client(server, mode="2026-07-28", elicitation_callback=on_elicit) as client:  # no tasks extension
        plain = await client.call_tool("jobs_gather", {})
    assert plain.structured_content == {"name": "Ann", "detached": False}


# -- 2025-11-25 --------------------------------------------------------------------------------------
async def raw(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request the SDK's typed 2025-11-25 API lacks (its tools/call refuses a CreateTaskResult)."""
    return await client.session._dispatcher.send_raw_request(method, params, {})


async def test_legacy_capabilities_execution_and_the_task_lifecycle(kernel):
    async with Client(build_server(kernel), mode="legacy") as client:
        caps = client.session.server_capabilities
        assert caps.tasks is not None and caps.tasks.requests.tools.call is not None and caps.tasks.cancel is not None
        support = {t.name: t.execution.task_support if t.execution else None for t in (await client.list_tools()).tools}
        assert support["jobs_work"] == "optional" and support["jobs_boom"] == "required" and support["jobs_quick"] is None
        created = await raw(client, "tools/call", {"name": "jobs_work", "arguments": {"seconds": 0.3, "label": "a"},
                                                   "task": {"ttl": 60_000}})
        task = created["task"]
        assert task["status"] == "working" and task["ttl"] == 60_000 and "ttlMs" not in task
        got = await raw(client, "tasks/get", {"taskId": task["taskId"]})
        assert got["taskId"] == task["taskId"] and "result" not in got
        result = await raw(client, "tasks/result", {"taskId": task["taskId"]})  # waits for the end
        assert result["content"][0]["text"] == "done a"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        listed = await raw(client, "tasks/list", {})
        assert [t["taskId"] for t in listed["tasks"]] == [task["taskId"]] and listed["tasks"][0]["status"] == "completed"
        with pytest.raises(MCPError) as terminal:
            await raw(client, "tasks/cancel", {"taskId": task["taskId"]})
        assert terminal.value.error.code == -32602 and "already ended" in terminal.value.error.message
        long = (await raw(client, "tools/call", {"name": "jobs_work", "arguments": {"seconds": 9}, "task": {}}))["task"]
        cancelled = await raw(client, "tasks/cancel", {"taskId": long["taskId"]})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == long["taskId"]
        with pytest.raises(MCPError) as forbidden:
            await raw(client, "tools/call", {"name": "jobs_quick", "arguments": {}, "task": {}})
        assert forbidden.value.error.code == -32601 and "without the task parameter" in forbidden.value.error.message
        with pytest.raises(MCPError) as required:
            await client.call_tool("jobs_boom", {})
        assert required.value.error.code == -32601 and "runs only as a task" in required.value.error.message
        with pytest.raises(MCPError) as update:
            await raw(client, "tasks/update", {"taskId": task["taskId"], "inputResponses": {}})
        assert update.value.error.code == -32601


async def test_legacy_questions_travel_through_tasks_result(kernel):
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with Client(build_server(kernel), mode="legacy", elicitation_callback=on_elicit) as client:
        task = (await raw(client, "tools/call", {"name": "jobs_confirm", "arguments": {"what": "drop"}, "task": {}}))["task"]
        for _ in range(100):
            if (await raw(client, "tasks/get", {"taskId": task["taskId"]}))["status"] == "input_required":
                break
            await anyio.sleep(0.02)
        else:
            pytest.fail("the task never asked")
        result = await raw(client, "tasks/result", {"taskId": task["taskId"]})
    assert asked == ["Really drop?"] and result["content"][0]["text"] == "drop: accept"


class StatusWatcher(ClientExtension):
    """Hears notifications/tasks/status (the SDK's 2025-11-25 tables leave it to a binding)."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.statuses: list[str] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams,
                                    handler=self.heard)]

    async def heard(self, params: types.TaskStatusNotificationParams) -> None:
        self.statuses.append(params.status)


async def test_legacy_status_notifications_reach_the_creating_connection(kernel):
    watcher = StatusWatcher()
    async with Client(build_server(kernel), mode="legacy", extensions=[watcher]) as client:
        task = (await raw(client, "tools/call", {"name": "jobs_work", "arguments": {"seconds": 0.1}, "task": {}}))["task"]
        await raw(client, "tasks/result", {"taskId": task["taskId"]})
        for _ in range(50):
            if watcher.statuses:
                break
            await anyio.sleep(0.02)
    assert watcher.statuses and watcher.statuses[-1] == "completed"


async def test_legacy_manual_detach_asks_over_the_session_then_becomes_a_task(kernel):
    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Bo"})

    async with Client(build_server(kernel), mode="legacy", elicitation_callback=on_elicit) as client:
        created = await raw(client, "tools/call", {"name": "jobs_gather", "arguments": {}, "task": {}})
        assert created["task"]["status"] == "working"
        result = await raw(client, "tasks/result", {"taskId": created["task"]["taskId"]})
    assert result["structuredContent"] == {"name": "Bo", "detached": True}


async def test_ttl_expiry_and_the_sweep(kernel):
    async with Client(build_server(kernel), mode="legacy") as client:
        task = (await raw(client, "tools/call", {"name": "jobs_work", "arguments": {"seconds": 0}, "task": {"ttl": 1000}}))["task"]
        assert task["ttl"] == 1000
        await raw(client, "tasks/result", {"taskId": task["taskId"]})
        await anyio.sleep(1.1)
        with pytest.raises(MCPError) as expired:
            await raw(client, "tasks/get", {"taskId": task["taskId"]})
        assert expired.value.error.code == -32602 and "expired" in expired.value.error.message
    manager = tasks_of(kernel)
    assert await manager.db(manager.store.sweep, time.time()) == 1
    assert await manager.db(manager.store.get, task["taskId"]) is None


async def test_a_bad_task_declaration_fails_its_plugin(tmp_path):
    def register_tools(register: Any, settings: Any) -> None:
        register(quick, task="sometimes")

    bad = make_plugin("bad", "bad", plexor_register_tools=register_tools)
    k = Kernel([("bad", bad)], load_entry_points=False, environ={"PLEXOR_HOME": str(tmp_path)}).load()
    assert k.plugin("bad").state.value == "failed"
    assert "task='sometimes'" in k.plugin("bad").error and "'optional'" in k.plugin("bad").error


def test_a_task_belongs_to_the_oauth_user_across_tokens_else_to_the_local_user():
    from types import SimpleNamespace

    from starlette.requests import Request

    from plexor.features.auth.guard import principal_of
    from plexor.features.tasks.wire import task_owner

    issuer = "https://issuer.example"

    def ctx(authorization: str | None, subject: str | None = None, client: str | None = "app", *,
            iss: str = issuer) -> Any:
        scope: dict[str, Any] = {"type": "http", "headers": [(b"authorization", authorization.encode())] if authorization else []}
        if authorization and subject is not False:
            token = authorization.split()[-1].encode()
            scope["plexor.access"] = SimpleNamespace(principal=principal_of(iss, subject, client, token))
        return SimpleNamespace(request=Request(scope))

    def static(authorization: str) -> Any:  # the guard leaves a static token's principal "" (the local user)
        return SimpleNamespace(request=Request({"type": "http", "headers": [(b"authorization", authorization.encode())]}))

    assert task_owner(SimpleNamespace(request=None)) == ""  # stdio: the local user
    assert task_owner(ctx("Bearer one", "alice")) == task_owner(ctx("Bearer two", "alice"))  # a refreshed token
    assert task_owner(ctx("Bearer one", "alice")) != task_owner(ctx("Bearer one", "bob"))
    assert task_owner(ctx("Bearer one", "alice")) != task_owner(ctx("Bearer one", "alice", iss="https://other.example"))
    assert task_owner(ctx("Bearer one", "alice")) != task_owner(ctx("Bearer one", "alice", "another-app"))
    assert task_owner(static("Bearer one")) == task_owner(static("Bearer two")) == ""  # a static token (the daemon's)
    assert task_owner(ctx("Bearer one", "static-token")) not in ("", task_owner(ctx("Bearer one", "alice")))  # no token names it
    no_subject = {task_owner(ctx("Bearer one", None)), task_owner(ctx("Bearer two", None)), task_owner(ctx("Bearer two", ""))}
    assert len(no_subject) == 2 and "" not in no_subject  # a token without a subject shares with nobody
