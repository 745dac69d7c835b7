"""The authorization boundary under stdio: ``plexor serve --profile NAME`` binds every kind of request.

No tokens: the profile alone (``health``, which admits only ``plexor_health``) decides, in both eras,
through the same SDK layer as HTTP. The ``ledger`` test plugin records every call it receives, so
each refusal is also checked where it matters: nothing reached the plugin. A tool outside the
profile, plain and as a task; a prompt of a plugin outside it, dotted and bare, and its completion;
a resource read, subscribed to, and listened to (2026-07-28 ``subscriptions/listen``); a plugin's
own protocol method.
"""

from __future__ import annotations

from typing import Any

import pytest
from auth.support import ledger_stdio, raw

pytestmark = pytest.mark.anyio

ERAS = ["2025-11-25", "2026-07-28"]
REFUSED = "not available to this connection"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def served(tmp_path):
    """What starts ``plexor serve --profile health`` over stdio, and the file the ledger records calls in."""
    return ledger_stdio(tmp_path / "home", "serve", "--profile", "health")


def _client(params: Any, era: str) -> Any:
    from mcp import Client

    from plexor.features.tasks.client import TasksClient

    mode = "legacy" if era == "2025-11-25" else era
    return Client(params, mode=mode, extensions=[] if era == "2025-11-25" else [TasksClient()])


def _nothing_reached(record: Any) -> None:
    assert not record.exists() or record.read_text() == "", record.read_text()


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_and_a_plugins_method_outside_the_profile_are_refused_plain_and_as_a_task(served, era):
    from mcp.shared.exceptions import MCPError

    params, record = served
    async with _client(params, era) as c:
        assert not (await c.call_tool("plexor_health", {})).is_error  # the control: what the profile admits runs
        for name in ("ledger_post", "ledger.post", "post"):
            plain = await c.call_tool(name, {"amount": 1})
            assert plain.is_error and "not in this connection's profile 'health'" in plain.content[0].text, plain
            task = {"task": {"ttl": 60_000}} if era == "2025-11-25" else {}  # 2026-07-28: the tasks extension's _meta
            answer = await raw(c, "tools/call", {"name": name, "arguments": {"amount": 2}, **task}, era=era)
            assert "task" not in answer and answer.get("resultType") != "task", answer  # no task was made
            assert answer["isError"] is True and "not in this connection's profile" in answer["content"][0]["text"]
        for method in ("ledger/export", "ledger/peek"):
            with pytest.raises(MCPError) as refused:
                await raw(c, method, {"account": "m"}, era=era)
            assert REFUSED in refused.value.error.message, refused.value.error.message
    _nothing_reached(record)


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_and_a_resource_outside_the_profile_are_refused_in_every_form(served, era):
    from mcp.shared.exceptions import MCPError

    params, record = served
    async with _client(params, era) as c:
        for name in ("ledger_summary", "ledger.summary", "summary"):
            with pytest.raises(MCPError) as refused:
                await c.get_prompt(name)
            assert REFUSED in refused.value.error.message
            with pytest.raises(MCPError) as refused:
                await raw(c, "completion/complete", {"ref": {"type": "ref/prompt", "name": name},
                                                     "argument": {"name": "account", "value": "m"}}, era=era)
            assert REFUSED in refused.value.error.message
        with pytest.raises(MCPError) as refused:
            await c.read_resource("ledger://entries")
        assert REFUSED in refused.value.error.message
        with pytest.raises(MCPError) as refused:
            if era == "2025-11-25":
                await raw(c, "resources/subscribe", {"uri": "ledger://entries"}, era=era)
            else:
                async with c.listen(resource_subscriptions=["ledger://entries"]):
                    pass
        assert REFUSED in refused.value.error.message
    _nothing_reached(record)
