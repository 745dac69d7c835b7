"""Durable tasks: real `plexor serve --transport http` processes sharing the kernel's database.

A task started on one server is answered by another (same SQLite data directory, or the same
PostgreSQL with no shared disk at all), by a server started after the first one stopped, and
survives the death (kill -9) of the process that ran it: failed with advice, or run again
elsewhere when the tool is idempotent. Both eras: 2026-07-28 raw requests on the wire, the SDK
client for 2025-11-25.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from conformance.serving import Served, healthz, modern_post, serve_http
from mcp.client import Client

from plexor.errors import StorageError
from plexor.features.state import open_state

TASKS = "io.modelcontextprotocol/tasks"
CAPS = {"extensions": {TASKS: {}}}
ENV = {"PLEXOR_PLUGINS": "conformance-slow"}
PG = "postgresql://postgres@127.0.0.1:5432/test"


def _pg_up() -> bool:
    try:
        open_state(Path("/nonexistent"), PG).close()
        return True
    except StorageError:
        return False


def start(served: Served, tool: str, seconds: float) -> str:
    status, reply = modern_post(served, "tools/call", {"name": tool, "arguments": {"seconds": seconds, "label": "x"}},
                                caps=CAPS, name=tool)
    assert status == 200 and reply["result"]["resultType"] == "task", reply
    return str(reply["result"]["taskId"])


def get(served: Served, task_id: str) -> dict[str, Any]:
    status, reply = modern_post(served, "tasks/get", {"taskId": task_id}, caps=CAPS, name=task_id)
    assert status == 200 and "result" in reply, reply
    return dict(reply["result"])


def running(served: Served, calls: int, timeout: float = 30.0) -> None:
    """Until ``served``'s /healthz counts ``calls`` calls in flight: its tasks are running, not just accepted."""
    deadline = time.monotonic() + timeout
    while (inflight := healthz(served)["kernel"]["inflight"]) < calls:
        assert time.monotonic() < deadline, f"{inflight} of {calls} calls running after {timeout} s"
        time.sleep(0.02)


def wait_end(served: Served, task_id: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = get(served, task_id)
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not end within {timeout} s: {task}")


async def legacy(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2025-11-25 request through the SDK client (its typed API has no tasks)."""
    async with Client(url, mode="legacy") as client:
        return await client.session._dispatcher.send_raw_request(method, params, {})


def both_backends() -> list[Any]:
    return ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(not _pg_up(), reason="no PostgreSQL on 5432"))]


def homes(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> tuple[Path, Path, dict[str, str]]:
    """Two servers' homes: one shared data directory for SQLite; separate ones (no shared disk) for PostgreSQL,
    in a schema of the test's own (plexor_postgres, plexor.testing), so tests running at once share no table."""
    if backend == "sqlite":
        return tmp_path / "shared", tmp_path / "shared", dict(ENV)
    return tmp_path / "host-a", tmp_path / "host-b", {**ENV, "PLEXOR_DATABASE_URL": request.getfixturevalue("plexor_postgres")}


@pytest.mark.parametrize("backend", both_backends())
def test_a_task_started_on_one_server_is_answered_by_another_in_both_eras(tmp_path, backend, request):
    home_a, home_b, env = homes(tmp_path, backend, request)
    with serve_http(home_a, env=env) as a, serve_http(home_b, env=env) as b:
        task_id = start(a, "slow_compute", 1.0)
        first = get(b, task_id)  # durably created: the other server knows it at once
        assert first["status"] == "working" and first["taskId"] == task_id
        done = wait_end(b, task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Computed x in 1 s."
        # 2025-11-25: created on B, its result fetched (waiting) on A, listed on A.
        created = anyio.run(legacy, b.url, "tools/call",
                            {"name": "slow_compute", "arguments": {"seconds": 0.5}, "task": {"ttl": 120_000}})
        legacy_id = created["task"]["taskId"]
        result = anyio.run(legacy, a.url, "tasks/result", {"taskId": legacy_id})
        assert result["structuredContent"] == {"label": "", "seconds": 0.5}
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": legacy_id}
        listed: list[str] = []
        cursor: dict[str, Any] = {}
        while True:  # paged (the PostgreSQL database may hold other runs' tasks too)
            page = anyio.run(legacy, a.url, "tasks/list", cursor)
            listed += [t["taskId"] for t in page["tasks"]]
            if "nextCursor" not in page:
                break
            cursor = {"cursor": page["nextCursor"]}
        assert legacy_id in listed


def test_a_restarted_server_answers_for_tasks_of_the_previous_one(tmp_path):
    home = tmp_path / "home"
    with serve_http(home, env=ENV) as first:
        task_id = start(first, "slow_compute", 0.2)
        assert wait_end(first, task_id)["status"] == "completed"
    with serve_http(home, env=ENV) as second:
        assert second.proc.pid != first.proc.pid
        again = get(second, task_id)
        assert again["status"] == "completed" and again["result"]["structuredContent"]["label"] == "x"


@pytest.mark.parametrize("backend", both_backends())
def test_a_task_whose_worker_is_killed_ends_failed_with_advice(tmp_path, backend, request):
    home_a, home_b, env = homes(tmp_path, backend, request)
    with serve_http(home_b, env=env) as b:
        with serve_http(home_a, env=env) as a:
            task_id = start(a, "slow_compute", 60)
            running(a, 1)
            a.proc.kill()  # kill -9: no drain, no goodbye
            a.proc.wait()
            t0 = time.monotonic()
            failed = wait_end(b, task_id, timeout=20)
        assert failed["status"] == "failed", failed
        assert failed["error"]["data"]["type"] == "worker_died" and failed["error"]["data"]["pid"] == a.proc.pid
        assert "stopped before it finished" in failed["statusMessage"] and "Call the tool again" in failed["statusMessage"]
        assert time.monotonic() - t0 < 15  # found by its dead process here, or by its lease (10 s) on another host


@pytest.mark.parametrize("backend", both_backends())
def test_an_idempotent_task_whose_worker_is_killed_is_run_again_elsewhere(tmp_path, backend, request):
    home_a, home_b, env = homes(tmp_path, backend, request)
    with serve_http(home_b, env=env) as b:
        with serve_http(home_a, env=env) as a:
            task_id = start(a, "slow_rerun", 1.5)
            running(a, 1)
            a.proc.kill()
            a.proc.wait()
            done = wait_end(b, task_id, timeout=30)
        assert done["status"] == "completed", done
        assert done["result"]["content"][0]["text"] == "Computed x in 1.5 s."


def test_expired_tasks_are_deleted_by_the_sweep(tmp_path):
    from plexor.features.tasks.store import TaskStore

    async def run_one(url: str) -> str:
        # One connection for both requests: the result is fetched well within the second the task lives.
        async with Client(url, mode="legacy") as client:
            send = client.session._dispatcher.send_raw_request
            created = await send("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0},
                                                "task": {"ttl": 1000}}, {})
            await send("tasks/result", {"taskId": created["task"]["taskId"]}, {})
        return str(created["task"]["taskId"])

    with serve_http(tmp_path / "home", env=ENV) as served:
        task_id = anyio.run(run_one, served.url)
    state = open_state(tmp_path / "home" / "data")
    try:
        store = TaskStore(state)
        task = store.get(task_id)
        assert task is not None and task.expires_at is not None
        time.sleep(max(0.0, task.expires_at - time.time()) + 0.05)  # until its time to live has passed
        assert store.get(task_id) is not None
        assert store.sweep(time.time()) >= 1 and store.get(task_id) is None
    finally:
        state.close()


def test_a_drained_server_settles_its_running_tasks_for_the_others(tmp_path):
    import signal

    home = tmp_path / "shared"
    with serve_http(home, env=ENV) as b:
        with serve_http(home, "--grace", "0.5", env=ENV) as a:
            plain = start(a, "slow_compute", 60)
            again = start(a, "slow_rerun", 3)
            running(a, 2)
            a.proc.send_signal(signal.SIGTERM)  # a rolling restart: drain, then exit
            assert a.proc.wait(30) in (0, -signal.SIGTERM)  # it ends as the signal says, after its drain
            stopped = get(b, plain)
            assert stopped["status"] == "failed" and stopped["error"]["data"]["type"] == "server_stopped", stopped
            assert "call the tool again" in stopped["statusMessage"]
            rerun = wait_end(b, again, timeout=30)  # idempotent: released by A, run again by B
            assert rerun["status"] == "completed" and rerun["result"]["structuredContent"]["seconds"] == 3


def test_the_daemon_answers_for_a_task_another_process_started(tmp_path):
    from conformance.serving import fixture_env

    from plexor.features.daemon.process import ensure_daemon, stop_daemon

    home = tmp_path / "home"
    with serve_http(home, env=ENV) as first:
        task_id = start(first, "slow_compute", 0.3)
        assert wait_end(first, task_id)["status"] == "completed"
    info = ensure_daemon(fixture_env(home, **ENV), wait=90)  # the shared daemon, its own token, same data dir
    try:
        status, reply = modern_post(Served(None, info["port"], home / "x"), "tasks/get",  # type: ignore[arg-type]
                                    {"taskId": task_id}, caps=CAPS, name=task_id,
                                    headers={"Authorization": f"Bearer {info['token']}"})
        assert status == 200 and reply["result"]["status"] == "completed", reply
        assert reply["result"]["result"]["structuredContent"]["label"] == "x"
    finally:
        stop_daemon(info, wait=30)
