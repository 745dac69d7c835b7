"""The template plugin: one tool, one resource. Copy this file to start your own plugin."""

from __future__ import annotations

from plexor import InvalidArgument, hookimpl

PLEXOR_NAMESPACE = "example"


@hookimpl
def plexor_add_config(config):
    config.add("greeting", str, "Hello", help="the word `example_greet` starts with")


@hookimpl
def plexor_register_tools(register, settings):
    def greet(name: str, times: int = 1) -> dict:
        """Greet someone by name. Use it to check that Plexor and its plugins answer.

        :param name: who to greet.
        :param times: how many times to repeat the greeting, 1 to 10.
        """
        if not 1 <= times <= 10:
            raise InvalidArgument(f"times = {times} is out of range", "Pass a number from 1 to 10.")
        return {"greeting": " ".join([f"{settings.greeting}, {name}!"] * times)}

    # Quick and pure: run it inline instead of in a worker thread.
    register(greet, annotations={"readOnlyHint": True, "idempotentHint": True}, blocking=False)


@hookimpl
def plexor_register_resources(register, settings):
    register("example://about", lambda: {"plugin": "example", "greeting": settings.greeting},
             name="about", description="What this plugin is and how it is configured.")
