"""Test-only plugin: what the MCP conformance suite calls (namespace ``test``, scheme ``test://``).

Loaded from ``tests/conformance/site`` on ``PYTHONPATH`` (a path-based entry
point), never installed. Also gives the hardening tests a slow tool.
"""

from __future__ import annotations

import anyio

from plexor import Context, Result, hookimpl
from plexor.events import Log, Progress

PLEXOR_NAMESPACE = "test"


@hookimpl
def plexor_register_tools(register, settings):
    register(simple_text)
    register(tool_with_progress)
    register(tool_with_logging)
    register(error_handling)
    register(slow)
    register(echo)


@hookimpl
def plexor_register_resources(register, settings):
    register("test://static-text", static_text, name="static-text", mime_type="text/plain",
             description="A static text resource.")
    register("test://static-binary", static_binary, name="static-binary", mime_type="image/png",
             description="A static binary resource.")


@hookimpl
def plexor_register_resource_templates(register, settings):
    register("test://template/{id}/data", template_data, name="template-data", mime_type="application/json",
             description="A resource template with one parameter.", complete={"id": lambda v: [x for x in ("1", "2", "42") if x.startswith(v)]})


@hookimpl
def plexor_register_prompts(register, settings):
    register(simple_prompt)
    register(prompt_with_arguments)


def simple_text() -> Result:
    """Return a fixed text."""
    return Result({"text": "This is a simple text response for testing."}, text="This is a simple text response for testing.")


async def tool_with_progress(ctx: Context):
    """Report progress 0, 50, 100 of 100, then finish."""
    for step in (0, 50, 100):
        yield Progress(step, 100, f"step {step}")
        await anyio.sleep(0.05)
    yield Result({"done": True}, text="Progress complete.")


async def tool_with_logging(ctx: Context):
    """Send three log notifications while working."""
    yield Log("info", "Tool execution started")
    await anyio.sleep(0.05)
    yield Log("info", "Tool processing data")
    await anyio.sleep(0.05)
    yield Log("info", "Tool execution completed")
    yield Result({"done": True}, text="Logging complete.")


def error_handling() -> dict:
    """Always fail, to test error results."""
    raise RuntimeError("This tool intentionally returns an error for testing")


async def slow(seconds: float = 1.0) -> dict:
    """Sleep ``seconds`` then return; for shutdown and timeout tests.

    :param seconds: how long to sleep.
    """
    await anyio.sleep(seconds)
    return {"slept": seconds}


def echo(text: str) -> dict:
    """Return ``text`` unchanged.

    :param text: anything.
    """
    return {"text": text}


def static_text() -> str:
    return "This is the content of the static text resource."


def static_binary() -> bytes:
    import base64

    return base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def template_data(id: str) -> dict:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


def simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments.

    :param arg1: first argument.
    :param arg2: second argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
