"""One pipeline for every request, the plugin handle, and checked hooks.

Each "still running at stop" test drives a real MCP client against a real
kernel, starts a request whose function blocks, stops the kernel while it
runs, and checks that the shutdown hook (and the closing of storage) came
only after the request finished and that the client got its answer.
"""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import pytest
from conftest import install_fake_dist, make_plugin

from plexor import Context, NotReady, PluginHandle

pytestmark = pytest.mark.anyio


def _slow_plugin(events: list[str], release: anyio.Event, started: anyio.Event):
    async def wait() -> None:
        started.set()
        await release.wait()

    async def slow_prompt(topic: str) -> str:
        """A prompt that takes its time."""
        await wait()
        events.append("prompt done")
        return f"Tell me about {topic}."

    async def read_slow(item_id: str) -> dict:
        await wait()
        events.append("read done")
        return {"id": item_id}

    async def complete_id(prefix: str) -> list[str]:
        await wait()
        events.append("completion done")
        return [f"{prefix}1", f"{prefix}2"]

    def shutdown(plugin: PluginHandle) -> None:
        events.append("shutdown")

    return make_plugin(
        "slow",
        plexor_register_prompts=lambda register, settings: register(slow_prompt, name="topic"),
        plexor_register_resource_templates=lambda register, settings: register(
            "slow://item/{item_id}", read_slow, complete={"item_id": complete_id}),
        plexor_shutdown=shutdown,
    )


async def _stop_while_running(plexor, request) -> tuple[list[str], object]:
    events: list[str] = []
    release, started = anyio.Event(), anyio.Event()
    async with plexor.client([("slow", _slow_plugin(events, release, started))]) as client:
        kernel = client.kernel
        answer: dict[str, object] = {}

        async def ask() -> None:
            answer["value"] = await request(client)

        async def stop() -> None:
            await kernel.stop()
            events.append("stopped")

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await started.wait()
            tg.start_soon(stop)
            await anyio.sleep(0.2)
            assert "shutdown" not in events, "stop() ran shutdown hooks while a request was still running"
            assert kernel.state.value == "draining"
            release.set()
    return events, answer["value"]


async def test_a_prompt_still_running_at_stop_is_waited_for(plexor):
    events, got = await _stop_while_running(plexor, lambda c: c.get_prompt("slow_topic", {"topic": "owls"}))
    assert events == ["prompt done", "shutdown", "stopped"]
    assert got.messages[0].content.text == "Tell me about owls."


async def test_a_resource_read_still_running_at_stop_is_waited_for(plexor):
    events, got = await _stop_while_running(plexor, lambda c: c.read_resource("slow://item/7"))
    assert events == ["read done", "shutdown", "stopped"]
    assert got.contents[0].text == '{"id": "7"}'


async def test_a_completion_still_running_at_stop_is_waited_for(plexor):
    from mcp_types import ResourceTemplateReference

    ref = ResourceTemplateReference(type="ref/resource", uri="slow://item/{item_id}")
    events, got = await _stop_while_running(plexor, lambda c: c.complete(ref, {"name": "item_id", "value": "a"}))
    assert events == ["completion done", "shutdown", "stopped"]
    assert got.completion.values == ["a1", "a2"]


async def test_a_misspelt_hook_fails_its_plugin_with_did_you_mean(plexor):
    typo = make_plugin("typo", plexor_register_tool=lambda register, settings: None)
    async with plexor.kernel([("typo", typo)]) as kernel:
        rec = kernel.plugin("typo")
        assert rec.state.value == "failed"
        assert "plexor_register_tool matches no Plexor hook; did you mean plexor_register_tools?" in rec.error
        assert "Rename it to plexor_register_tools" in rec.error


async def test_a_0_1_startup_hook_taking_the_kernel_gets_migration_guidance(plexor):
    old = make_plugin("old", plexor_startup=lambda kernel: None)
    async with plexor.kernel([("old", old)]) as kernel:
        rec = kernel.plugin("old")
        assert rec.state.value == "failed"
        assert "does not match its hookspec" in rec.error and "take `plugin` (a PluginHandle)" in rec.error


async def test_services_are_typed_and_say_not_ready_until_provided(plexor):
    class Index:
        def size(self) -> int:
            return 3

    class BigIndex(Index):
        def size(self) -> int:
            return 30

    handles: list[PluginHandle] = []

    def startup(plugin: PluginHandle) -> None:
        handles.append(plugin)
        plugin.warming(0.25, "loading the index")

    def register(register, settings):
        def size(ctx: Context) -> dict:
            """How big the index is."""
            return {"size": ctx.service(Index).size()}

        register(size, ready_required=False)

    async with plexor.client([("idx", make_plugin("idx", plexor_startup=startup,
                                                  plexor_register_tools=register))]) as client:
        early = await client.call_tool("idx_size", {})
        assert early.is_error
        assert early.content[0].text == "idx is loading the index, 25% done\nRetry in a few seconds."
        plugin = handles[0]
        assert plugin.name == "idx" and plugin.data_dir.name == "idx" and plugin.settings is not None
        plugin.provide(BigIndex(), as_type=Index)
        plugin.warmed()
        assert (await client.call_tool("idx_size", {})).structured_content == {"size": 30}
        assert isinstance(plugin.withdraw(Index), BigIndex)
        with pytest.raises(NotReady):
            plugin.service(Index)


async def test_a_subclass_provided_as_itself_serves_lookups_by_its_base(plexor_home):
    from plexor.core.kernel import Kernel

    class Base:
        pass

    class Impl(Base):
        pass

    kernel = Kernel([("s", make_plugin("s", plexor_startup=lambda plugin: plugin.provide(Impl())))],
                    load_entry_points=False, environ={"PLEXOR_HOME": str(plexor_home)})
    await kernel.start()
    try:
        assert isinstance(kernel.plugin("s").handle.service(Base), Impl)
    finally:
        await kernel.stop()


CLI_PLUGIN = """
import click
from plexor import hookimpl

@hookimpl
def plexor_add_config(config):
    config.add("greeting", str, "Hello")

@hookimpl
def plexor_register_models(register):
    import peewee

    class Visit(peewee.Model):
        name = peewee.CharField()

        class Meta:
            table_name = "fakehandle_visit"

    register(Visit)

@hookimpl
def plexor_register_commands(cli, plugin):
    @cli.command("fakehandle")
    @click.argument("name")
    def visit(name):
        '''Record a visit in the plugin's database and greet.'''
        db = plugin.database
        db.execute_sql("INSERT INTO fakehandle_visit (name) VALUES (?)", (name,))
        count = db.execute_sql("SELECT count(*) FROM fakehandle_visit").fetchone()[0]
        click.echo(f"{plugin.settings['greeting']} {name} (visit {count}, {plugin.data_dir.name})")
"""


def test_plugin_commands_get_settings_and_database_through_the_handle(plexor_home, site_dir):
    install_fake_dist(site_dir, "plexor-fakehandle", "fakehandle", "plexor_fakehandle", CLI_PLUGIN)
    (plexor_home / "config").mkdir(parents=True, exist_ok=True)
    (plexor_home / "config" / "plexor.toml").write_text('[fakehandle]\ngreeting = "Hi"\n')
    env = {**os.environ, "PLEXOR_HOME": str(plexor_home), "PYTHONPATH": str(site_dir)}
    for expected in ("Hi Ada (visit 1, fakehandle)", "Hi Ada (visit 2, fakehandle)"):
        out = subprocess.run([sys.executable, "-m", "plexor", "fakehandle", "Ada"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected
    env["PLEXOR_FAKEHANDLE_GREETING"] = "Hey"
    out = subprocess.run([sys.executable, "-m", "plexor", "fakehandle", "Bo"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "Hey Bo (visit 3, fakehandle)"


async def test_provided_services_are_closed_at_shutdown_newest_first_after_the_hook(plexor_home):
    from plexor.core.kernel import Kernel

    events: list[str] = []

    class Pool:
        async def aclose(self) -> None:
            events.append("pool closed")

    class Watcher:
        def stop(self) -> None:
            events.append("watcher stopped")

    class Kept:
        def stop(self) -> None:
            events.append("kept stopped")  # withdrawn: its close is the plugin's to call

    def startup(plugin: PluginHandle) -> None:
        pool, watcher, kept = Pool(), Watcher(), Kept()
        plugin.provide(pool, close=pool.aclose)
        plugin.provide(watcher, close=watcher.stop)
        plugin.provide(kept, close=kept.stop)
        assert plugin.withdraw(Kept) is kept

    def shutdown(plugin: PluginHandle) -> None:
        events.append("shutdown hook")
        assert isinstance(plugin.service(Pool), Pool)  # still there for the hook

    kernel = Kernel([("svc", make_plugin("svc", plexor_startup=startup, plexor_shutdown=shutdown))],
                    load_entry_points=False, environ={"PLEXOR_HOME": str(plexor_home)})
    await kernel.start()
    await kernel.stop()
    assert events == ["shutdown hook", "watcher stopped", "pool closed"]
    with pytest.raises(NotReady):
        kernel.plugin("svc").handle.service(Pool)
