"""The notification seam (plexor.notify): publish from any thread, delivery on the subscriber's loop,
and the kernel's own publishes (plugin ready, PluginHandle.resource_updated)."""

from __future__ import annotations

import threading

import anyio
import pytest
from conftest import make_plugin

from plexor.notify import Event, InProcess, Notifier

pytestmark = pytest.mark.anyio


async def test_publish_from_a_thread_is_delivered_on_the_subscribers_loop():
    notifier = Notifier()
    got: list[tuple[Event, int]] = []
    notifier.subscribe(lambda e: got.append((e, threading.get_ident())))
    loop_thread = threading.get_ident()
    await anyio.to_thread.run_sync(lambda: notifier.publish("resources/updated", {"uri": "x://1"}))
    with anyio.fail_after(5):
        while not got:
            await anyio.sleep(0.01)
    assert got == [(Event("resources/updated", {"uri": "x://1"}), loop_thread)]


def test_unknown_kinds_are_refused_and_unsubscribe_stops_delivery():
    notifier = Notifier(InProcess())
    got: list[Event] = []
    stop = notifier.subscribe(got.append)
    with pytest.raises(ValueError, match="unknown notification kind 'tools/changed'"):
        notifier.publish("tools/changed")
    notifier.publish("tools/list_changed")
    stop()
    notifier.publish("prompts/list_changed")
    assert got == [Event("tools/list_changed", {})]


def test_a_raising_subscriber_does_not_stop_the_others():
    notifier = Notifier()
    got: list[str] = []
    notifier.subscribe(lambda e: 1 / 0)
    notifier.subscribe(lambda e: got.append(e.kind))
    notifier.publish("resources/list_changed")
    assert got == ["resources/list_changed"]


async def test_plugin_ready_and_resource_updated_go_through_the_kernels_notifier(plexor):
    from plexor import PluginHandle

    handles: list[PluginHandle] = []

    def resources(register, settings):
        register("n://index", lambda: {})
        register.lister(lambda: [{"uri": "n://index", "name": "index"}])

    def startup(plugin):
        handles.append(plugin)

    plugin = make_plugin("n", plexor_register_resources=resources, plexor_startup=startup)
    from plexor.core.kernel import Kernel

    kernel = Kernel([("n", plugin)], load_entry_points=False, environ=plexor.environ())
    got: list[Event] = []
    kernel.notifier.subscribe(got.append)
    await kernel.start()
    try:
        assert Event("resources/list_changed", {}) in got  # n became ready: its lister's resources appear
        got.clear()
        await anyio.to_thread.run_sync(handles[0].resource_updated, "n://index")
        handles[0].resource_list_changed()
        with anyio.fail_after(5):
            while len(got) < 2:  # the thread's event is handed to this loop
                await anyio.sleep(0.01)
        assert got == [Event("resources/updated", {"uri": "n://index"}), Event("resources/list_changed", {})]
        with pytest.raises(ValueError, match="non-empty string"):
            handles[0].resource_updated("")
    finally:
        await kernel.stop()
