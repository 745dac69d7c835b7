"""Every transition of the lifecycle state machine, for the kernel and for plugins."""

from __future__ import annotations

import anyio
import pytest
from conftest import make_plugin, tools_plugin

from plexor.core.kernel import TRANSITIONS, Kernel, State

pytestmark = pytest.mark.anyio


def _kernel(plexor_home, *plugins, **env):
    return Kernel(list(plugins), load_entry_points=False, environ={"PLEXOR_HOME": str(plexor_home), **env})


async def test_kernel_walks_created_loading_starting_ready_draining_stopped(plexor_home):
    k = _kernel(plexor_home, ("p", tools_plugin("p", a=lambda: {})))
    assert k.state == State.CREATED
    k.load()
    assert k.state == State.LOADING
    await k.start()
    assert k.state == State.READY
    await k.stop()
    assert k.history == [("created", "loading"), ("loading", "starting"), ("starting", "ready"),
                         ("ready", "draining"), ("draining", "stopped")]
    assert k.records["p"].history == k.history


async def test_loaded_but_never_started_kernel_stops_from_loading(plexor_home):
    k = _kernel(plexor_home).load()
    await k.stop()
    assert k.history == [("created", "loading"), ("loading", "stopped")]
    assert k.records["plexor"].state == State.STOPPED


async def test_broken_config_file_fails_the_kernel_with_guidance(plexor_home):
    cfg = plexor_home / "config" / "plexor.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[arbor\nbroken = ", encoding="utf-8")
    k = _kernel(plexor_home)
    from plexor.errors import ConfigError

    with pytest.raises(ConfigError, match="is not valid TOML"):
        k.load()
    assert k.state == State.FAILED
    await k.stop()
    assert k.history[-1] == ("failed", "stopped")


async def test_plugin_failing_at_startup_goes_starting_to_failed(plexor_home):
    def boom(plugin):
        raise OSError("port in use")

    k = _kernel(plexor_home, ("bad", make_plugin("bad", plexor_startup=boom)))
    await k.start()
    rec = k.records["bad"]
    assert rec.history == [("created", "loading"), ("loading", "starting"), ("starting", "failed")]
    assert "startup failed: OSError: port in use" in rec.error
    assert k.state == State.READY
    await k.stop()
    assert rec.state == State.FAILED  # a failed plugin stays failed; stop only releases its storage


async def test_async_startup_and_shutdown_hooks_run(plexor_home):
    calls = []

    async def startup(plugin):
        await anyio.sleep(0)
        plugin.provide("open", as_type=str)
        calls.append("startup")

    async def shutdown(plugin):
        calls.append(("shutdown", plugin.withdraw(str)))

    k = _kernel(plexor_home, ("hooks", make_plugin("hooks", plexor_startup=startup, plexor_shutdown=shutdown)))
    await k.start()
    await k.stop()
    assert calls == ["startup", ("shutdown", "open")]


async def test_calls_to_a_plugin_still_starting_wait_for_it(plexor_home):
    release = anyio.Event()

    async def startup(plugin):
        await release.wait()

    plugin = make_plugin("slow", plexor_startup=startup,
                         plexor_register_tools=lambda register, settings: register(lambda: {"ok": 1}, name="go"))
    k = _kernel(plexor_home, ("slow", plugin)).load()
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.start)
        await anyio.sleep(0.05)
        assert k.records["slow"].state == State.STARTING

        async def later():
            await anyio.sleep(0.1)
            release.set()

        tg.start_soon(later)
        outcome = await k.call_tool("slow_go", {})
        assert not outcome.is_error and outcome.data == {"ok": 1}
    await k.stop()


async def test_a_plugin_that_never_finishes_starting_gets_not_ready_guidance(plexor_home):
    async def startup(plugin):
        await anyio.sleep(30)

    plugin = make_plugin("stuck", plexor_startup=startup,
                         plexor_register_tools=lambda register, settings: register(lambda: {}, name="go"))
    k = _kernel(plexor_home, ("stuck", plugin), PLEXOR_START_WAIT="0.2").load()
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.start)
        await anyio.sleep(0.05)
        outcome = await k.call_tool("stuck_go", {})
        assert outcome.is_error
        assert "stuck is still starting" in outcome.text and "Retry in a few seconds" in outcome.text
        tg.cancel_scope.cancel()


async def test_background_warm_up_gates_tools_with_progress_until_warmed(plexor):
    def startup(plugin):
        plugin.warming(0.4, "still indexing")

    def register(register, settings):
        register(lambda: {"hits": []}, name="search")
        register(lambda: {"partial": True}, name="peek", ready_required=False)

    plugin = make_plugin("index", plexor_startup=startup, plexor_register_tools=register)
    async with plexor.client([("index", plugin)]) as client:
        rec = client.kernel.records["index"]
        assert rec.state == State.STARTING
        gated = await client.call_tool("index_search", {})
        assert gated.is_error
        assert gated.content[0].text == "index is still indexing, 40% done\nRetry in a few seconds."
        open_ = await client.call_tool("index_peek", {})
        assert open_.structured_content == {"partial": True}
        health = await client.call_tool("plexor_health", {})
        entry = next(p for p in health.structured_content["plugins"] if p["name"] == "index")
        assert (entry["state"], entry["ready"], entry["progress"]) == ("starting", False, 0.4)
        rec.warmed()
        assert rec.state == State.READY
        ok = await client.call_tool("index_search", {})
        assert ok.structured_content == {"hits": []}


async def test_draining_refuses_new_calls_and_in_flight_calls_finish(plexor_home):
    started = anyio.Event()
    finished = []

    async def slow() -> dict:
        started.set()
        await anyio.sleep(0.3)
        finished.append(True)
        return {"done": True}

    k = _kernel(plexor_home, ("s", tools_plugin("s", slow=slow, quick=lambda: {})))
    await k.start()
    results = {}
    async with anyio.create_task_group() as tg:
        async def run_slow():
            results["slow"] = await k.call_tool("s_slow", {})

        tg.start_soon(run_slow)
        await started.wait()
        tg.start_soon(k.stop)
        await anyio.sleep(0.05)
        assert k.state == State.DRAINING
        refused = await k.call_tool("s_quick", {})
        assert refused.is_error and "shutting down" in refused.text
    assert results["slow"].data == {"done": True} and finished == [True]
    assert k.state == State.STOPPED


async def test_shutdown_hook_failure_is_logged_and_stop_completes(plexor_home):
    def bad_shutdown(plugin):
        raise RuntimeError("cannot flush")

    k = _kernel(plexor_home, ("b", make_plugin("b", plexor_shutdown=bad_shutdown)))
    await k.start()
    await k.stop()
    assert k.state == State.STOPPED and k.records["b"].state == State.STOPPED


async def test_illegal_transitions_are_refused():
    k = Kernel(load_entry_points=False, environ={"PLEXOR_HOME": "/nonexistent"})
    with pytest.raises(RuntimeError, match="illegal transition created -> ready"):
        k.move_to(State.READY)
    # The table itself: stopped is final, and nothing returns to created.
    assert TRANSITIONS[State.STOPPED] == frozenset()
    assert all(State.CREATED not in targets for targets in TRANSITIONS.values())


async def test_disabled_plugins_never_start(plexor_home):
    k = _kernel(plexor_home, ("off", tools_plugin("off", a=lambda: {})), PLEXOR_DISABLE="off")
    await k.start()
    assert k.records["off"].history == [("created", "disabled")]
    await k.stop()
    assert k.records["off"].state == State.DISABLED


async def test_a_drain_during_startup_goes_starting_to_draining(plexor_home):
    release = anyio.Event()

    async def startup(plugin):
        await release.wait()

    k = _kernel(plexor_home, ("slow", make_plugin("slow", plexor_startup=startup)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.start)
        await anyio.sleep(0.05)
        await k.drain(1)
        assert k.state == State.DRAINING and k.records["slow"].state == State.DRAINING
        release.set()
    await k.stop()
    assert k.history == [("created", "loading"), ("loading", "starting"), ("starting", "draining"),
                         ("draining", "stopped")]
    assert k.records["slow"].history[-2:] == [("starting", "draining"), ("draining", "stopped")]


async def test_a_startup_failure_after_the_drain_began_goes_draining_to_failed(plexor_home):
    release = anyio.Event()

    async def startup(plugin):
        await release.wait()
        raise RuntimeError("too late")

    k = _kernel(plexor_home, ("late", make_plugin("late", plexor_startup=startup)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.start)
        await anyio.sleep(0.05)
        await k.drain(1)
        release.set()
    assert k.records["late"].history[-1] == ("draining", "failed")
    await k.stop()
    assert k.records["late"].state == State.FAILED


async def test_every_transition_in_the_table_is_exercised_somewhere():
    # The table lists only moves the kernel makes; each is asserted by a test in this file,
    # test_plugins.py (disabled, failed at loading) or test_transports.py (created -> stopped on EOF).
    moves = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    assert moves == {
        ("created", "loading"), ("created", "failed"), ("created", "disabled"), ("created", "stopped"),
        ("loading", "starting"), ("loading", "failed"), ("loading", "stopped"),
        ("starting", "ready"), ("starting", "failed"), ("starting", "draining"),
        ("ready", "draining"), ("draining", "stopped"), ("draining", "failed"), ("failed", "stopped"),
    }
