"""folders_reindex runs as a task (2026-07-28 tasks extension) with its progress in the task's status."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from conftest import wait_ready

from plexor.features.tasks.client import TasksClient

INSTALLED = ["folder-search"]


@pytest.mark.anyio
async def test_reindex_runs_as_a_task_reporting_progress(plexor: Any, plexor_config: Any, corpus: Any) -> None:
    from plexor_folder_search.service import FolderService

    plexor_config({"folder-search": {"folders": [str(corpus)], "watch": False}})
    tasks = TasksClient(max_poll=0.005)
    gate = threading.Event()

    def progress_seen() -> list[str]:
        messages = [t.get("statusMessage") or "" for t in tasks.seen if t["status"] == "working"]
        return [m for m in messages if "(" in m and "/" in m]  # "<what> (done/total)" from the progress

    async def open_gate_when_seen() -> None:
        while not progress_seen():
            await anyio.sleep(0.005)
        gate.set()

    async with plexor.client(installed=INSTALLED, mode="2026-07-28", extensions=[tasks]) as client:
        await wait_ready(client)
        service = client.kernel.plugin("folder-search").handle.service(FolderService)
        index_folder = service.index_folder
        held: list[bool] = []

        def holding(st: Any, progress: Any = None, **options: Any) -> Any:  # options: force
            # The reindex's first progress report with a total waits (in the indexing thread) until a poll has shown it,
            # so the reindex can never end between two polls, however fast the machine.
            def hold(done: int, total: int, message: str) -> None:
                assert progress is not None
                progress(done, total, message)
                if total and not held:
                    held.append(gate.wait(timeout=60))
            return index_folder(st, progress=hold, **options)

        service.index_folder = holding  # type: ignore[method-assign]
        async with anyio.create_task_group() as group:
            group.start_soon(open_gate_when_seen)
            result = await client.call_tool("folders_reindex", {"force": True})
            group.cancel_scope.cancel()
        assert not result.is_error, result.content[0].text
    assert held == [True], "no poll showed the reindex's progress within 60 s"
    assert tasks.seen[-1]["status"] == "completed"
    assert progress_seen(), [t.get("statusMessage") for t in tasks.seen]
