"""The template plugin: one tool, one resource, one service. Copy this file to start your own plugin.

It imports only ``plexor`` (the whole plugin API) and the standard library, and
every hook is typed with the names ``plexor`` exports.
"""

from __future__ import annotations

from typing import Any

from plexor import (
    ConfigSpec,
    Context,
    InvalidArgument,
    PluginHandle,
    ResourceRegistrar,
    Settings,
    ToolRegistrar,
    hookimpl,
)

PLEXOR_NAMESPACE = "example"


class Greeter:
    """What ``plexor_startup`` opens and tools use: here, just the configured greeting."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def greet(self, name: str, times: int) -> str:
        return " ".join([f"{self.greeting}, {name}!"] * times)


@hookimpl
def plexor_add_config(config: ConfigSpec) -> None:
    config.add("greeting", str, "Hello", help="the word `example_greet` starts with")


@hookimpl
def plexor_startup(plugin: PluginHandle) -> None:
    # Open what tools need (a client, an index, a connection) and provide it;
    # until then ctx.service(Greeter) answers "not ready" with guidance.
    plugin.provide(Greeter(plugin.settings["greeting"]))


@hookimpl
def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
    # Quick and pure: run it inline instead of in a worker thread.
    register(greet, annotations={"readOnlyHint": True, "idempotentHint": True}, blocking=False)


def greet(ctx: Context, name: str, times: int = 1) -> dict[str, str]:
    """Greet someone by name. Use it to check that Plexor and its plugins answer.

    :param name: who to greet.
    :param times: how many times to repeat the greeting, 1 to 10.
    """
    if not 1 <= times <= 10:
        raise InvalidArgument(f"times = {times} is out of range", "Pass a number from 1 to 10.")
    return {"greeting": ctx.service(Greeter).greet(name, times)}


@hookimpl
def plexor_register_resources(register: ResourceRegistrar, settings: Settings) -> None:
    def about() -> dict[str, Any]:
        return {"plugin": "example", "greeting": settings["greeting"]}

    register("example://about", about, name="about", description="What this plugin is and how it is configured.")
