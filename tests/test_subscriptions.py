"""resources/subscribe and subscriptions/listen deliver PluginHandle.resource_updated; logging/setLevel
mutes ctx.log below the session's level. Through the SDK's client, in memory, in both eras."""

from __future__ import annotations

import warnings

import anyio
import mcp_types as types
import pytest
from conftest import make_plugin

from plexor import Context

pytestmark = pytest.mark.anyio


def feed_plugin():
    def tools(register, settings):
        def post(ctx: Context, feed: str) -> dict:
            """Add an entry to a feed (sync: runs in a worker thread)."""
            ctx.plugin.resource_updated(f"feed://{feed}")
            return {"feed": feed}

        async def chatter(ctx: Context) -> dict:
            """Log once at each level."""
            for level in ("debug", "info", "notice", "warning", "error"):
                await ctx.log(level, f"a {level} line")
            return {}

        register(post)
        register(chatter)

    def templates(register, settings):
        register("feed://{feed}", lambda feed: {"feed": feed})

    return make_plugin("feed", plexor_register_tools=tools, plexor_register_resource_templates=templates)


class Inbox:
    def __init__(self) -> None:
        self.updated: list[str] = []
        self.logs: list[str] = []

    async def __call__(self, message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            self.updated.append(str(root.params.uri))

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.level)


async def _first(sub):
    async for event in sub:
        yield event
        return


async def _until(check, seconds: float = 5.0) -> None:
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.02)


async def test_subscribed_session_hears_resource_updated_and_only_for_its_uris(plexor):
    inbox = Inbox()
    async with plexor.client([("feed", feed_plugin())], mode="legacy", message_handler=inbox) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource("feed://news")
            await client.call_tool("feed_post", {"feed": "sport"})
            await client.call_tool("feed_post", {"feed": "news"})
            await _until(lambda: inbox.updated)
            await client.unsubscribe_resource("feed://news")
            await client.call_tool("feed_post", {"feed": "news"})
            await client.send_ping()
            await anyio.sleep(0.2)
    assert inbox.updated == ["feed://news"]


async def test_modern_client_hears_resource_updated_on_its_listen_stream(plexor):
    async with plexor.client([("feed", feed_plugin())], mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=["feed://news"]) as sub:
            assert sub.honored.resource_subscriptions == ["feed://news"]
            await client.call_tool("feed_post", {"feed": "sport"})
            await client.call_tool("feed_post", {"feed": "news"})
            with anyio.fail_after(5):
                events = [event async for event in _first(sub)]
    assert [e.uri for e in events] == ["feed://news"]


async def test_set_level_mutes_log_lines_below_it_for_that_session(plexor):
    inbox = Inbox()
    async with plexor.client([("feed", feed_plugin())], mode="legacy", logging_callback=inbox.log) as client:
        await client.call_tool("feed_chatter", {})
        await _until(lambda: len(inbox.logs) >= 5)
        assert inbox.logs == ["debug", "info", "notice", "warning", "error"]  # no level set: everything
        inbox.logs.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.set_logging_level("warning")
            await client.call_tool("feed_chatter", {})
            await _until(lambda: len(inbox.logs) >= 2)
            await client.send_ping()
            await anyio.sleep(0.2)
    assert inbox.logs == ["warning", "error"]


async def test_modern_log_lines_follow_the_requests_log_level(plexor):
    inbox = Inbox()
    async with plexor.client([("feed", feed_plugin())], mode="auto", logging_callback=inbox.log,
                             log_level="notice") as client:
        await client.call_tool("feed_chatter", {})
        await _until(lambda: len(inbox.logs) >= 3)
    assert inbox.logs == ["notice", "warning", "error"]


def offering_plugin():
    def tools(register, settings):
        def switch(ctx: Context, on: bool) -> dict:
            """Offer or withdraw the tool `extra` and the prompt `hint`."""
            ctx.plugin.offer("extra", on)
            ctx.plugin.offer("feed_hint", on)
            return {"on": on}

        def extra() -> dict:
            """Sometimes offered."""
            return {"here": True}

        register(switch)
        register(extra)

    def prompts(register, settings):
        def hint() -> str:
            """Sometimes offered."""
            return "a hint"

        register(hint)

    return make_plugin("feed", plexor_register_tools=tools, plexor_register_prompts=prompts)


async def test_a_plugin_withdraws_and_offers_a_tool_and_clients_hear_it(plexor):
    heard: list[str] = []

    async def handler(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            heard.append(method)

    async with plexor.client([("feed", offering_plugin())], mode="legacy", message_handler=handler) as client:
        assert "feed_extra" in [t.name for t in (await client.list_tools()).tools]
        assert "feed_hint" in [p.name for p in (await client.list_prompts()).prompts]  # told only of lists it saw
        await client.call_tool("feed_switch", {"on": False})
        await _until(lambda: {"notifications/tools/list_changed", "notifications/prompts/list_changed"} <= set(heard))
        assert "feed_extra" not in [t.name for t in (await client.list_tools()).tools]
        assert "feed_hint" not in [p.name for p in (await client.list_prompts()).prompts]
        gone = await client.call_tool("feed_extra", {})
        assert gone.is_error and "not offered right now" in gone.content[0].text
        assert "List the tools again" in gone.content[0].text
        heard.clear()
        await client.call_tool("feed_switch", {"on": True})
        await _until(lambda: "notifications/tools/list_changed" in heard)
        assert "feed_extra" in [t.name for t in (await client.list_tools()).tools]
        assert (await client.call_tool("feed_extra", {})).structured_content == {"here": True}


async def test_a_session_hears_of_a_list_it_fetched_once_per_change_it_has_not_seen(plexor):
    """``*/list_changed`` only for a list the session fetched, and once until it fetches it again:
    unsolicited ones break mcp 1.x clients that are closing (tests/clients, the mcp 1.x sessions)."""
    heard: list[str] = []

    async def handler(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            heard.append(method)

    async with plexor.client([("feed", offering_plugin())], mode="legacy", message_handler=handler) as client:
        await client.list_tools()  # never the prompts
        await client.call_tool("feed_switch", {"on": False})
        await _until(lambda: "notifications/tools/list_changed" in heard)
        await client.call_tool("feed_switch", {"on": True})  # changed again, not fetched since: nothing new
        await client.list_tools()
        await client.call_tool("feed_switch", {"on": False})
        await _until(lambda: heard.count("notifications/tools/list_changed") >= 2)
        await client.list_tools()  # a round trip after the last notification was sent
    assert heard == ["notifications/tools/list_changed"] * 2, heard


async def test_a_modern_client_hears_offer_changes_on_its_listen_stream(plexor):
    async with plexor.client([("feed", offering_plugin())], mode="auto") as client:
        async with client.listen(tools_list_changed=True) as sub:
            await client.call_tool("feed_switch", {"on": False})
            events = [type(e).__name__ async for e in _first(sub)]
        tools = [t.name for t in (await client.list_tools()).tools]
    assert events == ["ToolsListChanged"] and "feed_extra" not in tools


async def test_offer_names_what_exists(plexor):
    from plexor import PluginHandle

    got: list[PluginHandle] = []
    plugin = make_plugin("feed", plexor_register_tools=lambda register, settings: register(lambda: {}, name="one"),
                         plexor_startup=lambda plugin: got.append(plugin))
    async with plexor.kernel([("feed", plugin)]):
        with pytest.raises(ValueError, match="has no tool or prompt named 'two'; it has feed_one"):
            got[0].offer("two", False)
