"""folders_reindex runs as a task (2026-07-28 tasks extension) with its progress in the task's status."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import wait_ready

from plexor.tasks.client import TasksClient

INSTALLED = ["folder-search"]


@pytest.mark.anyio
async def test_reindex_runs_as_a_task_reporting_progress(plexor: Any, plexor_config: Any, corpus: Any) -> None:
    # Enough files that the reindex outlasts several polls (with the small corpus alone it could end
    # between two, leaving no progress to see on a fast machine).
    for i in range(300):
        (corpus / f"note-{i:03d}.md").write_text(f"# Note {i}\n\nThe kettle log entry number {i} about tea.\n")
    plexor_config({"folder-search": {"folders": [str(corpus)], "watch": False}})
    tasks = TasksClient(max_poll=0.005)
    async with plexor.client(installed=INSTALLED, mode="2026-07-28", extensions=[tasks]) as client:
        await wait_ready(client)
        result = await client.call_tool("folders_reindex", {"force": True})
        assert not result.is_error, result.content[0].text
    assert tasks.seen[-1]["status"] == "completed"
    messages = [t.get("statusMessage") or "" for t in tasks.seen if t["status"] == "working"]
    assert any("(" in m and "/" in m for m in messages), messages  # "<what> (done/total)" from the progress
