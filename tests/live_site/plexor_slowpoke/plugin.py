"""A plugin that warms up in the background for PLEXOR_SLOWPOKE_DELAY seconds (default 2) and then
lists PLEXOR_SLOWPOKE_COUNT resources (default 40): a client that lists at connect sees none of
them at first. With PLEXOR_SLOWPOKE_GO set to a path, it warms up until that file exists instead (at
most a minute): the test says when, after it saw what it needed to see first. With PLEXOR_SLOWPOKE_FAIL
set, its startup hook fails after the delay (or the file) instead. ``slowpoke_touch(n)`` announces that
``slow://item/<n>`` changed."""

from __future__ import annotations

import os
import threading
import time

from plexor import Context, PluginHandle, hookimpl

PLEXOR_ICON = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="


def _count() -> int:
    return int(os.environ.get("PLEXOR_SLOWPOKE_COUNT", "40"))


@hookimpl
def plexor_register_tools(register):
    def touch(ctx: Context, n: int) -> dict:
        """Announce that slow://item/<n> changed."""
        ctx.plugin.resource_updated(f"slow://item/{n}")
        return {"touched": n}

    register(touch)


@hookimpl
def plexor_register_resources(register):
    def items(ctx: Context) -> list[dict]:
        return [{"uri": f"slow://item/{i}", "name": f"item {i}"} for i in range(_count())]

    register.lister(items)


@hookimpl
def plexor_register_resource_templates(register):
    def item(n: str) -> dict:
        return {"n": n}

    register("slow://item/{n}", item, name="item")


@hookimpl
def plexor_register_prompts(register):
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello {name}"

    register(greet)


def _wait() -> None:
    """The warm-up: until the file PLEXOR_SLOWPOKE_GO exists (at most a minute), or PLEXOR_SLOWPOKE_DELAY s."""
    go = os.environ.get("PLEXOR_SLOWPOKE_GO")
    if not go:
        time.sleep(float(os.environ.get("PLEXOR_SLOWPOKE_DELAY", "2")))
        return
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)


@hookimpl
def plexor_startup(plugin: PluginHandle) -> None:
    if os.environ.get("PLEXOR_SLOWPOKE_FAIL"):
        _wait()
        raise RuntimeError("slowpoke was told to fail")
    plugin.warming(0.0, "warming up")

    def warm() -> None:
        _wait()
        plugin.warmed()

    threading.Thread(target=warm, daemon=True).start()
