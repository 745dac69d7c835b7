"""Test-only plugin: what the MCP conformance suite calls (namespace ``test``, scheme ``test://``).

Loaded from ``tests/conformance/site`` on ``PYTHONPATH`` (a path-based entry
point), never installed. Also gives the hardening tests a slow tool. Its sibling
``json_schema.py`` (plugin ``conformance-json``) holds ``json_schema_2020_12_tool``.
"""

from __future__ import annotations

import anyio

from plexor import Context, Result, audio, hookimpl, image
from plexor import embedded_resource as embedded_resource_block
from plexor.events import Log, Progress

PLEXOR_NAMESPACE = "test"


@hookimpl
def plexor_register_tools(register, settings):
    register(simple_text)
    register(tool_with_progress)
    register(tool_with_logging)
    register(reconnection)
    register(error_handling)
    register(slow)
    register(echo)
    register(sampling)
    register(image_content)
    register(audio_content)
    register(embedded_resource)
    register(multiple_content_types)
    register(elicitation)
    register(elicitation_sep1034_defaults)
    register(elicitation_sep1330_enums)


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
    register(prompt_with_embedded_resource)
    register(prompt_with_image)


def simple_text() -> Result:
    """Return a fixed text."""
    return Result({"text": "This is a simple text response for testing."}, text="This is a simple text response for testing.")


async def tool_with_progress(ctx: Context):
    """Report progress 0, 50, 100 of 100, then finish."""
    for step in (0, 50, 100):
        yield Progress(step, 100, f"step {step}")
        await anyio.sleep(0.05)
    yield Result({"done": True}, text="Progress complete.")


async def reconnection(ctx: Context) -> dict:
    """Close this call's SSE stream mid-call, then answer; the client must reconnect to get it (SEP-1699)."""
    await anyio.sleep(0.05)
    await ctx.close_stream()
    await anyio.sleep(0.2)
    return {"reconnected": True}


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


# -- server-to-client requests ------------------------------------------------
# The kernel's Context has no public sampling/elicitation API yet; the fixture
# reaches the SDK session it wraps (reported to the kernel owner).


def _session(ctx: Context):
    session = getattr(ctx, "_session", None)
    if session is None:
        raise RuntimeError("no client session: call this tool over MCP")
    return session


async def sampling(ctx: Context, prompt: str) -> Result:
    """Ask the client's LLM to complete ``prompt`` (sampling/createMessage).

    :param prompt: the text to send.
    """
    import mcp_types as types

    reply = await _session(ctx).create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100, related_request_id=ctx.request_id,
    )
    content = reply.content
    text = getattr(content, "text", None) or str(content)
    return Result({"response": text}, text=f"LLM response: {text}")


async def _elicit(ctx: Context, message: str, schema: dict) -> Result:
    reply = await _session(ctx).elicit_form(message, schema, related_request_id=ctx.request_id)
    return Result({"action": reply.action, "content": reply.content},
                  text=f"Elicitation completed: action={reply.action}, content={reply.content}")


async def elicitation(ctx: Context, message: str) -> Result:
    """Ask the user for a username and email (elicitation/create).

    :param message: the question shown to the user.
    """
    return await _elicit(ctx, message, {"type": "object", "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"}}, "required": ["username", "email"]})


async def elicitation_sep1034_defaults(ctx: Context) -> Result:
    """Elicit a form whose fields all carry defaults (SEP-1034)."""
    return await _elicit(ctx, "Please review and update the form fields with defaults", {"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True}}})


async def elicitation_sep1330_enums(ctx: Context) -> Result:
    """Elicit a form with every enum variant (SEP-1330)."""
    return await _elicit(ctx, "Please select options from the enum fields", {"type": "object", "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
            {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options",
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"}]}}}})


# -- content other than text ---------------------------------------------------
# Result(content=[...]) adds MCP content blocks after the text item; the data
# stays in structuredContent. A prompt message may carry a content block under "content".

PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WAV_EMPTY = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
EMBEDDED_URI = "test://embedded-resource"
EMBEDDED_TEXT = "This is an embedded resource content."


def image_content() -> Result:
    """Return a 1x1 PNG as an image content block."""
    return Result({"mimeType": "image/png"}, text="A 1x1 PNG image.", content=[image(PNG_1PX, "image/png")])


def audio_content() -> Result:
    """Return a tiny WAV as an audio content block."""
    return Result({"mimeType": "audio/wav"}, text="A short WAV clip.", content=[audio(WAV_EMPTY, "audio/wav")])


def embedded_resource() -> Result:
    """Return an embedded text resource block."""
    return Result({"uri": EMBEDDED_URI}, text=f"Embedded resource {EMBEDDED_URI}.",
                  content=[embedded_resource_block(EMBEDDED_URI, text=EMBEDDED_TEXT, mime_type="text/plain")])


def multiple_content_types() -> Result:
    """Return a text, an image and an embedded resource block together."""
    return Result({"items": ["text", "image", "resource"]}, text="Multiple content types test:",
                  content=[image(PNG_1PX, "image/png"),
                           embedded_resource_block(EMBEDDED_URI, text=EMBEDDED_TEXT, mime_type="text/plain")])


def prompt_with_embedded_resource(resourceUri: str) -> list:  # noqa: N803 - the suite's argument name
    """A prompt that embeds a resource.

    :param resourceUri: the URI to embed.
    """
    return [{"role": "user", "content": {"type": "resource", "resource": {
                "uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
            {"role": "user", "text": "Please process the embedded resource above."}]


def prompt_with_image() -> list:
    """A prompt that includes an image."""
    return [{"role": "user", "content": {"type": "image", "data": PNG_1PX, "mimeType": "image/png"}},
            {"role": "user", "text": "Please analyze the image above."}]
