"""The daemon's change notifications through `plexor connect`: real `plexor connect` processes relaying to a real
daemon, driven by the SDK's client in the 2025-11-25 era. A list the daemon changes reaches the end client as
`notifications/*/list_changed`; `resources/subscribe` is relayed (the daemon's profile decides it through the relay
exactly as it does for its own client) and `notifications/resources/updated` of a subscribed URI is passed on."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import relay_site
from mcp.shared.exceptions import MCPError

from plexor.features.daemon.process import read_registry, registry_path, stop_daemon

pytestmark = pytest.mark.anyio

LIVE = """
from plexor import Context, hookimpl

OFFERED = {"volatile": True, "volatile_prompt": True}


@hookimpl
def plexor_register_tools(register, settings):
    def volatile() -> str:
        '''A tool that toggle withdraws and offers again.'''
        return "still here"

    def toggle(ctx: Context, name: str) -> dict:
        '''Withdraw the tool or prompt `name` (volatile, volatile_prompt), or offer it again.'''
        OFFERED[name] = not OFFERED[name]
        ctx.plugin.offer(name, OFFERED[name])
        return {name: OFFERED[name]}

    def touch(ctx: Context, uri: str) -> dict:
        '''Say that the resource `uri` changed.'''
        ctx.plugin.resource_updated(uri)
        return {"touched": uri}

    def renew(ctx: Context) -> dict:
        '''Say that the resource list changed.'''
        ctx.plugin.resource_list_changed()
        return {"renewed": True}

    register(volatile)
    register(toggle)
    register(touch)
    register(renew)


@hookimpl
def plexor_register_prompts(register, settings):
    def volatile_prompt() -> str:
        '''A prompt that toggle withdraws and offers again.'''
        return "still here"

    register(volatile_prompt)


@hookimpl
def plexor_register_resources(register, settings):
    def note() -> str:
        return "a note"

    register("live://note", note, name="note", mime_type="text/plain")
"""

HIDDEN = """
from plexor import hookimpl


@hookimpl
def plexor_register_tools(register, settings):
    def peek() -> str:
        '''Outside the profile "worker".'''
        return "peeked"

    register(peek)


@hookimpl
def plexor_register_resources(register, settings):
    def secret() -> str:
        return "the secret"

    register("hidden://secret", secret, name="secret", mime_type="text/plain")
"""

DEADLINE = 20.0


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with relay_site(tmp_path_factory.mktemp("connect-notifications"), ["live_*"],
                    {"live": LIVE, "hidden": HIDDEN}) as environ:
        yield environ


@pytest.fixture
def own_env(env, tmp_path):
    """``env`` with a daemon of its own (a test that kills it)."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "plexor.toml").write_text('[plexor.profiles.worker]\ntools = ["live_*"]\n')
    environ = {**env, "PLEXOR_HOME": str(home)}
    yield environ
    info = read_registry(registry_path(environ))
    if info is not None:
        with contextlib.suppress(OSError):
            stop_daemon(info, wait=10)


class Heard:
    """The notifications an end client received, in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str | None]] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        uri = getattr(getattr(message, "params", None), "uri", None)
        self.messages.append((message.method, None if uri is None else str(uri)))

    def count(self, method: str, uri: str | None = None) -> int:
        return sum(1 for m, u in self.messages if m == method and (uri is None or u == uri))

    async def until(self, method: str, uri: str | None = None, *, more_than: int = 0) -> None:
        """Wait (polling, up to DEADLINE seconds) until more than ``more_than`` of ``method`` (for ``uri``) came."""
        with anyio.fail_after(DEADLINE):
            while self.count(method, uri) <= more_than:
                await anyio.sleep(0.02)


def _connect(env: dict[str, str], *args: str, **options: Any) -> Any:
    from mcp import Client, StdioServerParameters

    return Client(StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect", *args], env=env),
                  mode="legacy", **options)


@contextlib.asynccontextmanager
async def _direct(env: dict[str, str], profile: str | None = None, mode: str = "legacy", **options: Any) -> Any:
    """A client of the daemon itself (2025-11-25 unless ``mode`` says), with the relay's token (and profile header)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    info = read_registry(registry_path(env))
    assert info is not None, "the daemon is started by plexor connect first"
    headers = {"Authorization": f"Bearer {info['token']}", **({"Plexor-Profile": profile} if profile else {})}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(info["url"], http_client=http), mode=mode, **options) as client:
        yield client


async def _subscribe(client: Any, uri: str) -> Any:
    try:
        return await client.session.send_request(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
                                                 types.EmptyResult)
    except MCPError as exc:
        return ("error", exc.error.code, exc.error.message, exc.error.data)


async def test_list_changes_of_the_daemon_reach_a_legacy_client_through_connect(env):
    heard = Heard()
    async with _connect(env, message_handler=heard) as client:
        caps = client.session.server_capabilities
        assert caps.tools.list_changed is True and caps.prompts.list_changed is True
        assert caps.resources.list_changed is True
        before = {t.name for t in (await client.list_tools()).tools}
        assert "live_volatile" in before
        assert (await client.call_tool("live_toggle", {"name": "volatile"})).structured_content == {"volatile": False}
        await heard.until("notifications/tools/list_changed")
        assert "live_volatile" not in {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("live_toggle", {"name": "volatile"})
        await heard.until("notifications/tools/list_changed", more_than=1)
        assert "live_volatile" in {t.name for t in (await client.list_tools()).tools}

        await client.call_tool("live_toggle", {"name": "volatile_prompt"})
        await heard.until("notifications/prompts/list_changed")
        assert "live_volatile_prompt" not in {p.name for p in (await client.list_prompts()).prompts}
        await client.call_tool("live_toggle", {"name": "volatile_prompt"})
        await heard.until("notifications/prompts/list_changed", more_than=1)

        await client.call_tool("live_renew", {})
        await heard.until("notifications/resources/list_changed")


async def test_a_subscribed_resource_s_updates_reach_a_legacy_client_through_connect(env):
    heard = Heard()
    async with _connect(env, message_handler=heard) as client:
        assert client.session.server_capabilities.resources.subscribe is True
        assert await _subscribe(client, "live://note") == types.EmptyResult()
        await client.call_tool("live_touch", {"uri": "live://other"})  # not subscribed: not passed on
        await client.call_tool("live_touch", {"uri": "live://note"})
        await heard.until("notifications/resources/updated", "live://note")
        assert heard.count("notifications/resources/updated", "live://other") == 0

        await client.session.send_request(
            types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri="live://note")), types.EmptyResult)
        await client.call_tool("live_touch", {"uri": "live://note"})
        assert await _subscribe(client, "hidden://secret") == types.EmptyResult()  # no profile: visible
        await client.call_tool("live_touch", {"uri": "hidden://secret"})
        await heard.until("notifications/resources/updated", "hidden://secret")
        # the update of the unsubscribed URI was published before this one, and did not come
        assert heard.count("notifications/resources/updated", "live://note") == 1


async def test_a_subscription_outside_the_profile_is_refused_through_connect_as_directly(env):
    heard = Heard()
    async with _connect(env, "--profile", "worker", message_handler=heard) as client:
        assert sorted(r.uri for r in (await client.list_resources()).resources) == ["live://note"]
        relayed = await _subscribe(client, "hidden://secret")
        assert await _subscribe(client, "live://note") == types.EmptyResult()
        await client.call_tool("live_touch", {"uri": "hidden://secret"})  # refused: never heard
        await client.call_tool("live_touch", {"uri": "live://note"})
        await heard.until("notifications/resources/updated", "live://note")
        assert heard.count("notifications/resources/updated", "hidden://secret") == 0
    async with _direct(env, "worker") as client:
        direct = await _subscribe(client, "hidden://secret")
    assert relayed == direct
    assert relayed[0] == "error" and relayed[1] == types.INVALID_PARAMS and "resources/subscribe refused" in relayed[2]


async def test_after_the_daemon_is_restarted_its_changes_and_updates_still_reach_the_client(own_env):
    """The relay's listen stream is opened again on the restarted daemon, the end client is told every list may have
    changed, and its subscriptions are held by the new daemon too."""
    heard = Heard()
    async with _connect(own_env, message_handler=heard) as client:
        assert await _subscribe(client, "live://note") == types.EmptyResult()
        before = read_registry(registry_path(own_env))["pid"]
        os.kill(before, signal.SIGKILL)
        assert "live_volatile" in {t.name for t in (await client.list_tools()).tools}  # the relay restarts it
        assert read_registry(registry_path(own_env))["pid"] != before
        for method in ("tools", "prompts", "resources"):
            await heard.until(f"notifications/{method}/list_changed")
        told = heard.count("notifications/tools/list_changed")
        await client.call_tool("live_toggle", {"name": "volatile"})
        await heard.until("notifications/tools/list_changed", more_than=told)
        await client.call_tool("live_touch", {"uri": "live://note"})
        await heard.until("notifications/resources/updated", "live://note")


@pytest.mark.parametrize("limit", ["PLEXOR_MAX_SUBSCRIPTIONS", "PLEXOR_MAX_URI_LENGTH"])
async def test_a_subscription_past_the_daemon_s_limits_is_refused_through_connect_as_directly(own_env, limit):
    env = {**own_env, limit: "1" if limit == "PLEXOR_MAX_SUBSCRIPTIONS" else "12"}  # "live://note" is 11 characters
    async with _connect(env) as client:
        assert await _subscribe(client, "live://note") == types.EmptyResult()
        relayed = await _subscribe(client, "live://note/2")
    async with _direct(env) as client:
        assert await _subscribe(client, "live://note") == types.EmptyResult()
        direct = await _subscribe(client, "live://note/2")
    assert relayed == direct and relayed[0] == "error" and relayed[1] == types.INVALID_PARAMS
    assert limit in relayed[2]


# -- a 2026-07-28 end client: subscriptions/listen relayed ------------------------------------------------------------
def _modern(env: dict[str, str], *args: str) -> Any:
    from mcp import Client, StdioServerParameters

    return Client(StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect", *args], env=env),
                  mode="auto")  # probes server/discover, so the relay's capabilities are known


async def _next(stream: Any) -> Any:
    with anyio.fail_after(DEADLINE):
        return await stream.__anext__()


async def _until(stream: Any, wanted: Any) -> None:
    """Read the stream until ``wanted`` comes (a list change of a plugin becoming ready may come first; an update of
    a resource never subscribed may not)."""
    from mcp.shared.subscriptions import ResourceUpdated

    while (event := await _next(stream)) != wanted:
        assert not isinstance(event, ResourceUpdated), event


async def _listen_refusal(client: Any, **wanted: Any) -> Any:
    try:
        async with client.listen(**wanted):
            return "listening"
    except MCPError as exc:
        return ("error", exc.error.code, exc.error.message, exc.error.data)


async def test_a_modern_client_s_listen_stream_is_relayed(env):
    from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

    async with _modern(env) as client:
        assert client.protocol_version == "2026-07-28"
        caps = client.server_capabilities
        assert caps.tools.list_changed is True and caps.resources.subscribe is True
        async with client.listen(tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True,
                                 resource_subscriptions=["live://note"]) as stream:
            assert stream.honored.tools_list_changed and stream.honored.resource_subscriptions == ["live://note"]
            await client.call_tool("live_toggle", {"name": "volatile"})
            await _until(stream, ToolsListChanged())
            await client.call_tool("live_toggle", {"name": "volatile"})
            await _until(stream, ToolsListChanged())
            await client.call_tool("live_toggle", {"name": "volatile_prompt"})
            await _until(stream, PromptsListChanged())
            await client.call_tool("live_toggle", {"name": "volatile_prompt"})
            await _until(stream, PromptsListChanged())
            await client.call_tool("live_renew", {})
            await _until(stream, ResourcesListChanged())
            await client.call_tool("live_touch", {"uri": "live://other"})  # not subscribed: never comes
            await client.call_tool("live_touch", {"uri": "live://note"})
            await _until(stream, ResourceUpdated(uri="live://note"))


async def test_a_listen_stream_outside_the_profile_is_refused_through_connect_as_directly(env):
    from mcp.shared.subscriptions import ResourceUpdated

    wanted = {"tools_list_changed": True, "resource_subscriptions": ["live://note", "hidden://secret"]}
    async with _modern(env, "--profile", "worker") as client:
        relayed = await _listen_refusal(client, **wanted)
        async with client.listen(tools_list_changed=True, resource_subscriptions=["live://note"]) as stream:
            await client.call_tool("live_touch", {"uri": "live://note"})
            await _until(stream, ResourceUpdated(uri="live://note"))  # inside the profile: heard
    async with _direct(env, "worker", mode="auto") as client:
        direct = await _listen_refusal(client, **wanted)
    assert relayed == direct and relayed[0] == "error" and "subscriptions/listen refused" in relayed[2]


async def test_a_listen_stream_past_the_daemon_s_limits_is_refused_through_connect_as_directly(own_env):
    env = {**own_env, "PLEXOR_MAX_SUBSCRIPTIONS": "1"}
    wanted = {"resource_subscriptions": ["live://note", "live://note/2"]}
    async with _modern(env) as client:
        relayed = await _listen_refusal(client, **wanted)
    async with _direct(env, mode="auto") as client:
        direct = await _listen_refusal(client, **wanted)
    assert relayed == direct and relayed[0] == "error" and "PLEXOR_MAX_SUBSCRIPTIONS" in relayed[2]


async def test_a_modern_listen_stream_lost_with_the_daemon_is_reported_lost_and_can_be_opened_again(own_env):
    from mcp.client.subscriptions import SubscriptionLost
    from mcp.shared.subscriptions import ToolsListChanged

    async with _modern(own_env) as client:
        async with client.listen(tools_list_changed=True) as stream:
            before = read_registry(registry_path(own_env))["pid"]
            os.kill(before, signal.SIGKILL)
            with pytest.raises(SubscriptionLost), anyio.fail_after(DEADLINE):
                await stream.__anext__()
        async with client.listen(tools_list_changed=True) as stream:  # the relay finds the daemon gone: restarts it
            assert read_registry(registry_path(own_env))["pid"] != before
            await client.call_tool("live_toggle", {"name": "volatile"})
            await _until(stream, ToolsListChanged())


async def test_a_modern_listen_naming_task_ids_is_acknowledged_without_them_through_connect(env):
    """The tasks extension's status notifications are not passed on: the relay's acknowledgement leaves taskIds out
    (what a server does not honor), and the rest of the stream works."""
    from mcp import Client, StdioServerParameters

    from plexor.features.tasks.client import TasksClient, listen_tasks

    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        heard.append(message)

    params = StdioServerParameters(command=sys.executable, args=["-m", "plexor", "connect"], env=env)
    async with Client(params, mode="auto", extensions=[TasksClient()], message_handler=on_message) as client:
        async with listen_tasks(client.session, ["no-such-task"], toolsListChanged=True):
            with anyio.fail_after(DEADLINE):
                while not any(isinstance(m, types.SubscriptionsAcknowledgedNotification) for m in heard):
                    await anyio.sleep(0.02)
            ack = next(m for m in heard if isinstance(m, types.SubscriptionsAcknowledgedNotification))
            assert ack.params.notifications.tools_list_changed is True
            assert "taskIds" not in ack.params.notifications.model_dump(by_alias=True, exclude_none=True)
            await client.call_tool("live_toggle", {"name": "volatile"})
            with anyio.fail_after(DEADLINE):
                while not any(isinstance(m, types.ToolListChangedNotification) for m in heard):
                    await anyio.sleep(0.02)


async def test_a_relay_follows_a_daemon_another_relay_restarted(own_env):
    """A relay that makes no request itself still hears the daemon that another relay started after the first died."""
    heard = Heard()
    async with _connect(own_env, message_handler=heard) as quiet, _connect(own_env) as busy:
        assert await _subscribe(quiet, "live://note") == types.EmptyResult()
        await busy.list_tools()
        before = read_registry(registry_path(own_env))["pid"]
        os.kill(before, signal.SIGKILL)
        await busy.list_tools()  # this relay restarts the daemon
        assert read_registry(registry_path(own_env))["pid"] != before
        await heard.until("notifications/tools/list_changed")  # the quiet relay listens on the new daemon
        told = heard.count("notifications/tools/list_changed")
        await busy.call_tool("live_toggle", {"name": "volatile"})
        await heard.until("notifications/tools/list_changed", more_than=told)
        await busy.call_tool("live_touch", {"uri": "live://note"})
        await heard.until("notifications/resources/updated", "live://note")


async def test_a_first_request_of_a_new_kind_after_the_daemon_died_restarts_it(own_env):
    """The relay keeps a client to the daemon per set of capabilities, made on first use (a 2025-11-25 one with
    its handshake): a request needing a new one after the daemon died finds (or restarts) the daemon, as a
    request on an existing client does, instead of failing once with "cannot reach the Plexor daemon"."""
    async with _connect(own_env) as client:
        before = read_registry(registry_path(own_env))["pid"]
        os.kill(before, signal.SIGKILL)
        # a 2025-11-25 client's tools/list goes up on the relay's 2025-11-25 connection, not opened yet
        assert "live_touch" in {t.name for t in (await client.list_tools()).tools}
        assert read_registry(registry_path(own_env))["pid"] != before
