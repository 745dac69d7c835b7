"""EdgeLake's queries run as tasks (2026-07-28 tasks extension) when the client can take them."""

from __future__ import annotations

from typing import Any

import pytest
from standin import StandIn

from plexor.features.tasks.client import TasksClient

pytestmark = pytest.mark.anyio


async def test_a_query_runs_as_a_task_and_its_status_names_what_it_asks(plexor: Any, plexor_config: Any,
                                                                          node: StandIn) -> None:
    plexor_config({"edgelake": {"nodes": [node.address], "retries": 1, "backoff": 0.01}})
    node.delays["sql "] = 0.5  # a query that takes a while: polled while it runs
    tasks = TasksClient(max_poll=0.02)
    async with plexor.client(installed=["edgelake"], mode="2026-07-28", extensions=[tasks]) as client:
        result = await client.call_tool("edgelake_query", {"database": "mydb", "table": "temperature",
                                                           "select": "device, value", "where": "device = 'dev1'",
                                                           "limit": 3})
        assert not result.is_error, result.content[0].text
        assert [r["value"] for r in result.structured_content["rows"]] == [18.24, 15.72, 15.58]
        assert tasks.seen and tasks.seen[-1]["status"] == "completed"
        working = [t.get("statusMessage") for t in tasks.seen if t["status"] == "working"]
        assert "query: asking network" in working, working
        polls = len(tasks.seen)
        status = await client.call_tool("edgelake_node_status", {})  # not a long query: a plain result
        assert not status.is_error and len(tasks.seen) == polls
    assert node.requests[0].command.startswith("sql mydb format = json")
