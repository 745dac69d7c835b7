"""Live lists: a client that lists once at connect and honours list_changed ends with the full list.

The ``slowpoke`` plugin (tests/live_site) warms up in the background until the test lets it finish (a
file appears) before its lister offers 40 resources, so a list sent right after connecting sees none of
them; the switch to
``ready`` must be announced (``notifications/resources/list_changed`` on 2025-11-25 sessions, a
``subscriptions/listen`` event from 2026-07-28 on) and the list sent again is complete. Real
processes, the SDK's client, stdio and Streamable HTTP.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from conformance.serving import SITE, serve_http
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

LIVE_SITE = Path(__file__).resolve().parent / "live_site"
FULL = 40


def live_env(home: Path, delay: float = 4.0, go: Path | None = None) -> dict[str, str]:
    """The slowpoke plugin warming up for ``delay`` s, or until the file ``go`` exists when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS="slowpoke", PLEXOR_LOG_LEVEL="warning",
               PLEXOR_SLOWPOKE_DELAY=str(delay), PLEXOR_SLOWPOKE_COUNT=str(FULL),
               PYTHONPATH=os.pathsep.join(p for p in (str(LIVE_SITE), str(SITE), env.get("PYTHONPATH", "")) if p))
    if go is not None:
        env["PLEXOR_SLOWPOKE_GO"] = str(go)
    return env


class Watcher:
    """What a well-behaved client does: list at connect, list again whenever told the list changed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ServerNotification | types.ResourceListChangedNotification
                      | types.ToolListChangedNotification | types.PromptListChangedNotification):
            method = getattr(getattr(message, "root", message), "method", "")
            self.seen.append(method)
            if method == "notifications/resources/list_changed":
                self.changed.set()


async def _list_then_follow(client: Client, watcher: Watcher, go: Path) -> tuple[int, int]:
    first = len((await client.list_resources()).resources)
    go.touch()  # the plugin may finish warming up now
    with anyio.fail_after(30):
        await watcher.changed.wait()
    after = len((await client.list_resources()).resources)
    return first, after


async def test_stdio_client_listing_at_connect_ends_with_the_full_list(tmp_path):
    watcher, go = Watcher(), tmp_path / "go"
    params = StdioServerParameters(command=os.sys.executable, args=["-m", "plexor", "serve"],
                                   env=live_env(tmp_path, go=go))
    async with Client(params, mode="legacy", message_handler=watcher) as client:
        first, after = await _list_then_follow(client, watcher, go)
        tools = [t.name for t in (await client.list_tools()).tools]
    assert first < FULL, "the plugin was ready before the first list: the test proves nothing"
    assert after == FULL
    assert "slowpoke_touch" in tools
    # Its tools and prompts were listed while it started (calls got "still starting" guidance): unchanged.
    assert "notifications/tools/list_changed" not in watcher.seen


async def test_a_plugin_that_fails_while_starting_takes_its_tools_away_and_says_so(tmp_path):
    watcher, go = Watcher(), tmp_path / "go"
    env = {**live_env(tmp_path, go=go), "PLEXOR_SLOWPOKE_FAIL": "1"}
    params = StdioServerParameters(command=os.sys.executable, args=["-m", "plexor", "serve"], env=env)
    async with Client(params, mode="legacy", message_handler=watcher) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        # a session hears that a list changed only when it fetched that list (plexor.serving.lists)
        prompts_before = [p.name for p in (await client.list_prompts()).prompts]
        go.touch()  # the plugin's startup may fail now
        with anyio.fail_after(30):
            while "notifications/tools/list_changed" not in watcher.seen:
                await anyio.sleep(0.05)
        after = [t.name for t in (await client.list_tools()).tools]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert "slowpoke_touch" in before and "slowpoke_touch" not in after and "plexor_health" in after
    assert "slowpoke_greet" in prompts_before
    assert "notifications/prompts/list_changed" in watcher.seen and "slowpoke_greet" not in prompts
    assert watcher.seen.count("notifications/tools/list_changed") == 1  # one change, said once


async def test_http_client_listing_at_connect_ends_with_the_full_list(tmp_path):
    watcher, go = Watcher(), tmp_path / "go"
    env = live_env(tmp_path, go=go)
    with serve_http(tmp_path, env=env) as served:
        async with Client(served.url, mode="legacy", message_handler=watcher) as client:
            first, after = await _list_then_follow(client, watcher, go)
    assert first < FULL and after == FULL


async def test_http_modern_client_hears_it_on_subscriptions_listen(tmp_path):
    go = tmp_path / "go"
    env = live_env(tmp_path, go=go)
    with serve_http(tmp_path, env=env) as served:
        async with Client(served.url, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            caps = client.server_capabilities
            assert caps.resources.list_changed and caps.tools.list_changed and caps.prompts.list_changed
            assert caps.resources.subscribe
            async with client.listen(resources_list_changed=True, tools_list_changed=True) as sub:
                first = len((await client.list_resources()).resources)
                go.touch()  # the plugin may finish warming up now
                with anyio.fail_after(30):
                    async for event in sub:
                        if type(event).__name__ == "ResourcesListChanged":
                            break
                after = len((await client.list_resources()).resources)
    assert first < FULL and after == FULL


async def test_stdio_modern_client_hears_it_on_subscriptions_listen(tmp_path):
    go = tmp_path / "go"
    params = StdioServerParameters(command=os.sys.executable, args=["-m", "plexor", "serve"],
                                   env=live_env(tmp_path, go=go))
    async with Client(params, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resources_list_changed=True) as sub:
            first = len((await client.list_resources()).resources)
            go.touch()  # the plugin may finish warming up now
            with anyio.fail_after(30):
                async for _event in sub:
                    break
            after = len((await client.list_resources()).resources)
    assert first < FULL and after == FULL


async def test_discover_says_list_changed_truthfully(tmp_path):
    from conformance.serving import modern_post

    with serve_http(tmp_path, env=live_env(tmp_path, delay=0)) as served:
        status, reply = modern_post(served, "server/discover", {})
    assert status == 200
    caps = reply["result"]["capabilities"]
    assert caps["tools"]["listChanged"] is True and caps["prompts"]["listChanged"] is True
    assert caps["resources"] == {"subscribe": True, "listChanged": True}


async def test_an_open_listen_stream_does_not_hold_the_server_at_sigterm(tmp_path):
    import signal
    import time

    with serve_http(tmp_path, env=live_env(tmp_path, delay=0)) as served:
        ended: list[str] = []
        listening = anyio.Event()  # set once the server acknowledged the stream (or the client failed before)

        async def hold() -> None:
            try:
                async with Client(served.url, mode="auto") as client, client.listen(tools_list_changed=True) as sub:
                    listening.set()
                    async for _event in sub:
                        pass
                    ended.append("graceful")  # the stream's final frame: the server closed it on purpose
            except Exception as exc:  # noqa: BLE001 - the connection going away afterwards
                ended.append(type(exc).__name__)
                listening.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            with anyio.fail_after(30):
                await listening.wait()
            assert not ended, f"the listen stream ended before SIGTERM: {ended}"
            started = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            while served.proc.poll() is None and time.monotonic() - started < 20:
                await anyio.sleep(0.05)
            took = time.monotonic() - started
            with anyio.fail_after(10):
                while not ended:
                    await anyio.sleep(0.05)
    assert took < 5, f"the server took {took:.1f} s to exit with a listen stream open"
    assert ended[0] == "graceful"
