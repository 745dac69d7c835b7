"""Test-only plugin: what the MCP conformance suite calls (namespace ``test``, scheme ``test://``).

Loaded from ``tests/conformance/site`` on ``PYTHONPATH`` (a path-based entry
point), never installed. Also gives the hardening tests a slow tool. Its sibling
``json_schema.py`` (plugin ``conformance-json``) holds ``json_schema_2020_12_tool``.
"""

from __future__ import annotations

from typing import Annotated

import anyio

from plexor import Context, Elicit, Header, ListRoots, Result, Sample, audio, hookimpl, image
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
    # multi-round requests (SEP-2322, 2026-07-28)
    register(input_required_result_elicitation)
    register(input_required_result_sampling)
    register(input_required_result_list_roots)
    register(input_required_result_request_state)
    register(input_required_result_multiple_inputs)
    register(input_required_result_multi_round)
    register(input_required_result_tampered_state)
    register(input_required_result_capabilities)
    register(missing_capability)
    # a parameter mirrored into an HTTP header (SEP-2243)
    register(header_echo)
    # multi-round first, then a task (SEP-2322 + SEP-2663): see plexor_conformance_fixture.tasks for the others
    register(tool_with_task, task="required", detach="manual")
    # list_changed on subscriptions/listen (SEP-2575): each trigger really withdraws or re-offers one
    register(volatile)
    register(trigger_tool_change)
    register(trigger_prompt_change)


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
    register(input_required_result_prompt)
    register(volatile_prompt)


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
# ctx.sample / ctx.elicit send the request mid-call on 2025-11-25 sessions and
# end the round with an InputRequiredResult on 2026-07-28 (see plexor.asking).


async def sampling(ctx: Context, prompt: str) -> Result:
    """Ask the client's LLM to complete ``prompt`` (sampling/createMessage).

    :param prompt: the text to send.
    """
    reply = await ctx.sample(prompt, max_tokens=100)
    content = reply["content"]
    text = content.get("text") if isinstance(content, dict) else None
    text = text or str(content)
    return Result({"response": text}, text=f"LLM response: {text}")


async def _elicit(ctx: Context, message: str, schema: dict) -> Result:
    reply = await ctx.elicit(message, schema)
    action, content = reply["action"], reply.get("content")
    return Result({"action": action, "content": content},
                  text=f"Elicitation completed: action={action}, content={content}")


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


# -- multi-round requests (SEP-2322) -------------------------------------------

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def input_required_result_elicitation(ctx: Context) -> Result:
    """Ask the user's name, then greet them."""
    got = await ctx.ask(user_name=Elicit("What is your name?", NAME_FORM))
    name = (got["user_name"].get("content") or {}).get("name", "stranger")
    return Result({"name": name}, text=f"Hello, {name}!")


async def input_required_result_sampling(ctx: Context) -> Result:
    """Ask the client's model a question and return its answer."""
    got = await ctx.ask(capital_question=Sample("What is the capital of France?", max_tokens=100))
    text = got["capital_question"]["content"].get("text", "")
    return Result({"answer": text}, text=f"The model said: {text}")


async def input_required_result_list_roots(ctx: Context) -> Result:
    """List the client's roots."""
    got = await ctx.ask(client_roots=ListRoots())
    uris = [r["uri"] for r in got["client_roots"]["roots"]]
    return Result({"roots": uris}, text="Client roots: " + ", ".join(uris))


async def input_required_result_request_state(ctx: Context) -> Result:
    """Confirm, carrying a value minted in round 1 through requestState."""
    if ctx.round == 1:
        ctx.state["minted"] = "round-1"
    got = await ctx.ask(confirm=Elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}))
    ok = ctx.state.get("minted") == "round-1"
    return Result({"confirmed": got["confirm"].get("content"), "state": ok},
                  text=("state-ok" if ok else "state-missing") + f": confirmed in round {ctx.round}")


async def input_required_result_multiple_inputs(ctx: Context) -> Result:
    """Ask for a name, a greeting and the roots in one round."""
    got = await ctx.ask(
        user_name=Elicit("What is your name?", NAME_FORM),
        greeting=Sample("Generate a greeting", max_tokens=50),
        client_roots=ListRoots(),
    )
    name = (got["user_name"].get("content") or {}).get("name")
    return Result({"name": name, "greeting": got["greeting"]["content"].get("text"),
                   "roots": [r["uri"] for r in got["client_roots"]["roots"]]}, text=f"All three answers received for {name}.")


async def input_required_result_multi_round(ctx: Context) -> Result:
    """Ask two questions, one round each."""
    first = await ctx.ask(step1=Elicit("Step 1: What is your name?", NAME_FORM))
    second = await ctx.ask(step2=Elicit("Step 2: What is your favorite color?",
                                        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}))
    name = first["step1"]["content"]["name"]
    color = second["step2"]["content"]["color"]
    return Result({"name": name, "color": color}, text=f"{name} likes {color} (round {ctx.round}).")


async def input_required_result_tampered_state(ctx: Context) -> Result:
    """Ask for confirmation; the requestState is sealed, so an altered one is refused."""
    ctx.state["issued"] = True
    got = await ctx.ask(confirm=Elicit("Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}))
    return Result({"confirmed": got["confirm"].get("content")}, text="Confirmed.")


async def input_required_result_capabilities(ctx: Context) -> Result:
    """Ask only what the client declared it can answer."""
    questions: dict = {}
    if ctx.can_ask("elicitation"):
        questions["user_name"] = Elicit("What is your name?", NAME_FORM)
    if ctx.can_ask("sampling"):
        questions["summary"] = Sample("Summarise the day in one line.", max_tokens=30)
    if ctx.can_ask("roots"):
        questions["client_roots"] = ListRoots()
    got = await ctx.ask(**questions) if questions else {}
    return Result({"asked": sorted(got)}, text="Asked: " + (", ".join(sorted(got)) or "nothing"))


async def tool_with_task(ctx: Context) -> Result:
    """Ask the user's name in the request, then greet them from a task."""
    got = await ctx.ask(user_name=Elicit("What is your name?", NAME_FORM))
    name = (got["user_name"].get("content") or {}).get("name", "stranger")
    await ctx.detach(f"preparing a greeting for {name}")
    await anyio.sleep(0.3)
    return Result({"name": name}, text=f"Hello, {name}! (from a task)")


async def missing_capability(ctx: Context) -> Result:
    """Needs sampling; a client that did not declare it gets -32021."""
    got = await ctx.ask(probe=Sample("Say OK.", max_tokens=5))
    return Result({"reply": got["probe"]["content"].get("text")}, text="Sampled.")


async def input_required_result_prompt(ctx: Context) -> list:
    """A prompt that asks the user for context first."""
    got = await ctx.ask(user_context=Elicit("What context should the prompt use?",
                                            {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}))
    context = (got["user_context"].get("content") or {}).get("context", "")
    return [{"role": "user", "text": f"Use this context: {context}"}]


def header_echo(region: Annotated[str, Header("Region")]) -> dict:
    """Echo ``region``, which 2026-07-28 clients also send as the Mcp-Param-Region header.

    :param region: any text; routed on by proxies.
    """
    return {"region": region}


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


_OFFERED = {"volatile": True, "volatile_prompt": True}


def volatile() -> str:
    """A tool that test_trigger_tool_change withdraws and offers again."""
    return "still here"


def volatile_prompt() -> str:
    """A prompt that test_trigger_prompt_change withdraws and offers again."""
    return "still here"


def _toggle(ctx: Context, name: str) -> dict:
    _OFFERED[name] = not _OFFERED[name]
    ctx.plugin.offer(name, _OFFERED[name])
    return {name: "offered" if _OFFERED[name] else "withdrawn"}


def trigger_tool_change(ctx: Context) -> dict:
    """Withdraw test_volatile (or offer it again): the tool list changes, list_changed follows."""
    return _toggle(ctx, "volatile")


def trigger_prompt_change(ctx: Context) -> dict:
    """Withdraw test_volatile_prompt (or offer it again): the prompt list changes."""
    return _toggle(ctx, "volatile_prompt")
