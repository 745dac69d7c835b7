"""Tools through a real MCP client: schemas, validation, results, events, errors and guidance."""

from __future__ import annotations

import json
from typing import Annotated, Literal, TypedDict

import anyio
import pydantic
import pytest
from conftest import make_plugin, tools_plugin
from mcp_types import PaginatedRequestParams

from plexor import Context, Data, Guidance, Header, Log, NotFound, Progress, Result

pytestmark = pytest.mark.anyio


class Sum(TypedDict):
    total: int


def add(a: int, b: int = 2) -> Sum:
    """Add two numbers.

    :param a: the first number.
    :param b: the second number.
    """
    return {"total": a + b}


async def shout(text: str, style: Literal["upper", "lower"] = "upper") -> dict:
    """Change the case of a text.

    Args:
        text: what to change.
        style: upper or lower.
    """
    return {"text": text.upper() if style == "upper" else text.lower()}


def words(text: str) -> list[str]:
    """Split a text into words."""
    return text.split()


async def count(n: int, ctx: Context):
    """Count to n, reporting progress."""
    for i in range(1, n + 1):
        yield Progress(i, n, f"at {i}")
        yield Log("info", f"counted {i}")
        yield Data({"seen": [i]})
    yield Guidance("counting is done")


def drawing() -> Result:
    """Draw a box."""
    return Result({"width": 3}, text="+-+\n| |\n+-+")


def fails() -> dict:
    """Always fails."""
    raise KeyError("secret-internal-key")


def lookup(name: str) -> dict:
    """Look a thing up."""
    raise NotFound(f"no thing named {name!r}", "List things with demo_list first.")


def demo_plugin(**extra):
    return tools_plugin("demo", add=add, shout=shout, words=words, count=count, drawing=drawing, fails=fails,
                        lookup=lookup, **extra)


async def test_input_schema_comes_from_signature_and_docstring(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["demo_add"].input_schema
        assert schema["type"] == "object"
        assert schema["properties"]["a"] == {"type": "integer", "description": "the first number."}
        assert schema["properties"]["b"]["default"] == 2
        assert schema["required"] == ["a"]
        assert tools["demo_add"].description.startswith("Add two numbers.")
        assert ":param" not in tools["demo_add"].description
        assert tools["demo_shout"].input_schema["properties"]["style"]["enum"] == ["upper", "lower"]
        assert tools["demo_shout"].input_schema["properties"]["text"]["description"] == "what to change."
        assert "ctx" not in tools["demo_count"].input_schema["properties"]
        assert tools["demo_add"].output_schema["properties"]["total"]["type"] == "integer"


async def test_results_carry_structured_content_text_and_meta(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_add", {"a": 40})
        assert not r.is_error
        assert r.structured_content == {"total": 42}
        assert json.loads(r.content[0].text) == {"total": 42}
        assert r.meta["plexor/provenance"] == "plexor/demo/add"
        assert len(r.meta["plexor/schemaHash"]) == 16
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["demo_add"].meta["plexor/schemaHash"] == r.meta["plexor/schemaHash"]


async def test_non_object_results_are_wrapped_and_custom_text_kept(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_words", {"text": "a b c"})
        assert r.structured_content == {"result": ["a", "b", "c"]}
        d = await client.call_tool("demo_drawing", {})
        assert d.content[0].text == "+-+\n| |\n+-+"
        assert d.structured_content == {"width": 3}


async def test_dotted_name_resolves_to_the_same_tool(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo.add", {"a": 1, "b": 1})
        assert r.structured_content == {"total": 2}


async def test_the_method_alone_resolves_when_exactly_one_plugin_has_it(plexor):
    other = tools_plugin("other", add=add)
    async with plexor.client([("demo", demo_plugin()), ("other", other)]) as client:
        r = await client.call_tool("shout", {"text": "Hi", "style": "lower"})  # only demo has shout
        assert not r.is_error and r.structured_content == {"text": "hi"}
        ambiguous = await client.call_tool("add", {"a": 1, "b": 1})  # demo_add and other_add: which one?
        assert ambiguous.is_error
        assert "demo_add" in ambiguous.content[0].text and "other_add" in ambiguous.content[0].text


async def test_async_tool(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_shout", {"text": "Hi", "style": "lower"})
        assert r.structured_content == {"text": "hi"}


async def test_async_generator_events_map_to_progress_logs_data_and_guidance(plexor):
    logs: list = []
    progress: list = []

    async def on_log(params):
        logs.append(params.data)

    async def on_progress(p, total, message):
        progress.append((p, total, message))

    async with plexor.client([("demo", demo_plugin())], logging_callback=on_log) as client:
        r = await client.call_tool("demo_count", {"n": 3}, progress_callback=on_progress)
        assert r.structured_content == {"seen": [1, 2, 3]}
        assert "Guidance: counting is done" in r.content[0].text
        assert progress == [(1, 3, "at 1"), (2, 3, "at 2"), (3, 3, "at 3")]
        assert logs == ["counted 1", "counted 2", "counted 3"]


async def test_unknown_tool_gets_did_you_mean_and_namespaces(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_ad", {"a": 1})
        assert r.is_error
        text = r.content[0].text
        assert "unknown tool 'demo_ad'" in text and "'demo_add'" in text
        r2 = await client.call_tool("nosuch_tool", {})
        assert r2.is_error
        assert "no namespace 'nosuch'" in r2.content[0].text
        assert "Namespaces: demo, plexor" in r2.content[0].text


async def test_bad_arguments_say_which_what_and_given(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_add", {"a": "many"})
        assert r.is_error
        text = r.content[0].text
        assert "argument 'a'" in text and "'many'" in text and "integer" in text
        assert "Accepted arguments: a (integer, required); b (integer)" in text
        missing = await client.call_tool("demo_add", {})
        assert "argument 'a' is required" in missing.content[0].text
        extra = await client.call_tool("demo_add", {"a": 1, "bb": 2})
        assert "unknown argument: 'bb' (did you mean 'b'?)" in extra.content[0].text
        enum = await client.call_tool("demo_shout", {"text": "x", "style": "title"})
        assert "'upper' or 'lower'" in enum.content[0].text


async def test_plugin_exception_becomes_guidance_without_traceback(plexor, capfd):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_fails", {})
        assert r.is_error
        text = r.content[0].text
        assert "Traceback" not in text and 'File "' not in text
        assert "demo_fails failed: KeyError" in text
        assert "request id" in text
        assert r.structured_content["error"]["type"] == "error"
    err = capfd.readouterr().err
    assert "Traceback" in err and "secret-internal-key" in err  # it went to the log instead


async def test_plugin_error_guidance_hook_explains_its_own_errors(plexor):
    def guidance(exception, context):
        if isinstance(exception, KeyError):
            return f"The key store is empty; run `plexor demo seed` first ({context['tool']})."
        return None

    def register(register, settings):
        register(fails)
        register(add)

    plugin = make_plugin("demo", plexor_register_tools=register, plexor_error_guidance=guidance)
    async with plexor.client([("demo", plugin)]) as client:
        r = await client.call_tool("demo_fails", {})
        assert "run `plexor demo seed` first (demo_fails)" in r.content[0].text


async def test_guidance_errors_raised_by_tools_pass_through(plexor):
    async with plexor.client([("demo", demo_plugin())]) as client:
        r = await client.call_tool("demo_lookup", {"name": "x"})
        assert r.is_error
        assert r.content[0].text == "no thing named 'x'\nList things with demo_list first."
        assert r.structured_content["error"]["type"] == "not_found"


async def test_annotations_and_title_are_listed(plexor):
    def register(register, settings):
        register(add, title="Adder", annotations={"readOnlyHint": True, "idempotentHint": True})

    async with plexor.client([("demo", make_plugin("demo", plexor_register_tools=register))]) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "demo_add")
        assert tool.title == "Adder"
        assert tool.annotations.read_only_hint is True and tool.annotations.idempotent_hint is True


async def test_a_result_breaking_its_declared_output_schema_is_a_plugin_error(plexor):
    def register(register, settings):
        register(lambda: {"n": "not a number"}, name="liar",
                 output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})

    async with plexor.client([("demo", make_plugin("demo", plexor_register_tools=register))]) as client:
        r = await client.call_tool("demo_liar", {})
        assert r.is_error
        text = r.content[0].text
        assert "demo_liar returned data that does not match its declared output schema (n: 'not a number'" in text
        assert "bug in the plugin 'demo'" in text


class Point(pydantic.BaseModel):
    x: int
    y: int


def where_is() -> Point:
    """A pydantic model result."""
    return Point(x=1, y=2)


def nothing() -> None:
    """Returns nothing."""


def not_a_number() -> dict:
    """Returns NaN, which JSON cannot carry."""
    return {"v": float("nan"), "ok": 1.5}


async def test_model_none_and_nan_results_are_valid_for_the_client(plexor):
    plugin = tools_plugin("demo", where=where_is, nothing=nothing, nan=not_a_number)
    async with plexor.client([("demo", plugin)]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["demo_where"].output_schema["required"] == ["x", "y"]
        assert tools["demo_nothing"].output_schema is None
        point = await client.call_tool("demo_where", {})
        assert not point.is_error and point.structured_content == {"x": 1, "y": 2}
        none = await client.call_tool("demo_nothing", {})
        assert not none.is_error and none.structured_content == {}
        nan = await client.call_tool("demo_nan", {})
        assert nan.structured_content == {"v": None, "ok": 1.5}
        assert json.loads(nan.content[0].text) == {"v": None, "ok": 1.5}


async def test_tools_list_paginates(plexor):
    funcs = {f"t{i:03d}": (lambda i=i: {"i": i}) for i in range(620)}
    async with plexor.client([("many", tools_plugin("many", **funcs))]) as client:
        first = await client.session.list_tools()
        assert len(first.tools) == 500 and first.next_cursor
        second = await client.session.list_tools(params=PaginatedRequestParams(cursor=first.next_cursor))
        assert second.next_cursor is None
        names = [t.name for t in first.tools + second.tools]
        assert len(set(names)) == 622


async def test_a_bad_cursor_is_a_protocol_error_with_guidance(plexor):
    from mcp.shared.exceptions import MCPError

    async with plexor.client([("demo", demo_plugin())]) as client:
        with pytest.raises(MCPError, match="pass back the nextCursor"):
            await client.session.list_tools(params=PaginatedRequestParams(cursor="garbage!"))


async def test_tools_list_changed_is_sent_when_a_plugin_fails_at_startup(plexor):
    gate = anyio.Event()
    changed: list = []

    async def startup(plugin):
        await gate.wait()
        raise RuntimeError("lost its database")

    plugin = make_plugin("late", plexor_register_tools=lambda register, settings: register(add),
                         plexor_startup=startup)

    async def on_message(message):
        if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed" or \
                "ToolListChanged" in type(message).__name__:
            changed.append(message)

    from mcp import Client

    from plexor.core.kernel import Kernel
    from plexor.serving.server import build_server

    kernel = Kernel([("late", plugin)], load_entry_points=False, environ=plexor.environ())
    kernel.load()
    server = build_server(kernel)
    async with anyio.create_task_group() as tg:
        tg.start_soon(kernel.start)
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "late_add" in before
            gate.set()
            with anyio.fail_after(5):
                while not changed:
                    await anyio.sleep(0.02)
            after = {t.name for t in (await client.list_tools()).tools}
            assert "late_add" not in after
            r = await client.call_tool("late_add", {"a": 1})
            assert r.is_error and "not available" in r.content[0].text
    await kernel.stop()


async def test_sync_tools_run_off_the_event_loop(plexor):
    import threading

    main = threading.get_ident()

    def where() -> dict:
        return {"same_thread": threading.get_ident() == main}

    async with plexor.client([("demo", tools_plugin("demo", where=where))]) as client:
        r = await client.call_tool("demo_where", {})
        assert r.structured_content == {"same_thread": False}


async def test_modern_era_client_works_too(plexor):
    async with plexor.client([("demo", demo_plugin())], mode="auto") as client:
        r = await client.call_tool("demo_add", {"a": 2, "b": 3})
        assert r.structured_content == {"total": 5}
        assert client.protocol_version == "2026-07-28"


def picture() -> Result:
    """Draw a picture and describe it."""
    from plexor import embedded_resource, image

    return Result({"pixels": 1}, text="One red pixel:",
                  content=[image(b"\x89PNG\r\n\x1a\n"), embedded_resource("demo://pixel", text="red", mime_type="text/plain")])


def bad_block() -> Result:
    """Returns a malformed content block."""
    return Result({}, content=[{"type": "image"}])


async def test_results_can_carry_image_audio_and_resource_blocks(plexor):
    async with plexor.client([("demo", tools_plugin("demo", picture=picture, bad=bad_block))]) as client:
        r = await client.call_tool("demo_picture", {})
        assert [c.type for c in r.content] == ["text", "image", "resource"]
        assert r.content[0].text == "One red pixel:"
        assert r.content[1].data == "iVBORw0KGgo=" and r.content[1].mime_type == "image/png"
        assert r.content[2].resource.text == "red"
        assert r.structured_content == {"pixels": 1}
        bad = await client.call_tool("demo_bad", {})
        assert bad.is_error and "returned an invalid content block" in bad.content[0].text


async def test_a_hand_written_input_schema_is_advertised_and_enforced(plexor):
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"unit": {"enum": ["c", "f"]}},
        "properties": {"degrees": {"type": "number"}, "unit": {"$ref": "#/$defs/unit"}},
        "required": ["degrees"],
        "additionalProperties": False,
    }

    def convert(**arguments) -> dict:
        """Convert a temperature."""
        d = arguments["degrees"]
        return {"value": d * 9 / 5 + 32 if arguments.get("unit", "c") == "c" else (d - 32) * 5 / 9}

    def register(register, settings):
        register(convert, input_schema=schema)

    async with plexor.client([("temp", make_plugin("temp", plexor_register_tools=register))]) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "temp_convert")
        assert tool.input_schema == schema
        assert (await client.call_tool("temp_convert", {"degrees": 100})).structured_content == {"value": 212.0}
        bad = await client.call_tool("temp_convert", {"degrees": "hot", "unit": "k"})
        assert bad.is_error
        assert "argument 'degrees': 'hot' is not of type 'number'" in bad.content[0].text
        assert "argument 'unit': 'k' is not one of ['c', 'f']" in bad.content[0].text


async def test_close_stream_is_a_no_op_without_a_resumable_http_stream(plexor):
    async def long_call(ctx: Context) -> dict:
        """Frees the connection if the transport can."""
        return {"closed": await ctx.close_stream()}

    async with plexor.client([("demo", tools_plugin("demo", long=long_call))]) as client:
        assert (await client.call_tool("demo_long", {})).structured_content == {"closed": False}


async def test_a_parameter_can_be_mirrored_into_an_http_header(plexor_home):
    from conformance.serving import modern_post, serve_http
    from mcp import Client

    from plexor import PluginError
    from plexor.schema import analyse

    def route(region: Annotated[str, Header("Region")], n: int = 1) -> dict:
        """Route."""
        return {"region": region}

    schema = analyse(route).input_schema
    assert schema["properties"]["region"]["x-mcp-header"] == "Region" and "x-mcp-header" not in schema["properties"]["n"]
    for bad in ("", "Bad Name", "-x"):
        with pytest.raises(PluginError):
            Header(bad)

    def nested(where: Annotated[dict, Header("Where")]) -> dict:
        """Not a primitive."""
        return where

    with pytest.raises(PluginError, match="not a string, number, integer or boolean"):
        analyse(nested)
    call = {"name": "test_header_echo", "arguments": {"region": "eu-west"}}
    with serve_http(plexor_home) as served:
        async with Client(served.url, mode="auto") as client:  # the SDK client mirrors the header itself
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["test_header_echo"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
            r = await client.call_tool("test_header_echo", {"region": "eu-west"})
            assert r.structured_content == {"region": "eu-west"}
        status, ok = modern_post(served, "tools/call", call, name=call["name"], headers={"Mcp-Param-Region": "eu-west"})
        assert status == 200 and ok["result"]["structuredContent"] == {"region": "eu-west"}
        for headers in ({"Mcp-Param-Region": "us-east"}, {}):  # disagreeing, or missing while the body has it
            status, refused = modern_post(served, "tools/call", call, name=call["name"], headers=headers)
            assert status == 400 and refused["error"]["code"] == -32020, refused


async def test_scalars_are_strict_as_the_schema_says(plexor):
    def pick(key: str | int, times: int = 2, scale: float = 1.0, loud: bool = False, label: str = "x") -> dict:
        """Pick a key."""
        return {"key": key, "times": times, "scale": scale, "loud": loud, "label": label}

    async with plexor.client([("demo", tools_plugin("demo", pick=pick))]) as client:
        schema = next(t for t in (await client.list_tools()).tools if t.name == "demo_pick").input_schema
        assert schema["properties"]["times"]["type"] == "integer" and schema["required"] == ["key"]
        assert schema["properties"]["key"]["type"] == "string"  # advertised: one branch of the union it accepts
        for bad, said in [({"key": True}, "argument 'key' must be string or integer, got a boolean (true)"),
                          ({"key": None}, "argument 'key' must be string or integer, got null"),
                          ({"key": "a", "times": "3"}, "argument 'times' must be integer, got a string ('3')"),
                          ({"key": "a", "times": True}, "argument 'times' must be integer, got a boolean"),
                          ({"key": "a", "times": 2.5}, "argument 'times' must be integer, got a number (2.5)"),
                          ({"key": "a", "scale": "1.5"}, "argument 'scale' must be number"),
                          ({"key": "a", "loud": 1}, "argument 'loud' must be boolean, got a number (1)"),
                          ({"key": "a", "loud": "true"}, "argument 'loud' must be boolean, got a string"),
                          ({"key": "a", "label": 7}, "argument 'label' must be string, got a number (7)")]:
            r = await client.call_tool("demo_pick", bad)
            assert r.is_error and said in r.content[0].text, (bad, r.content[0].text)
            assert "Accepted arguments: key (string or integer, required); times (integer); scale (number)" \
                in r.content[0].text
        ok = await client.call_tool("demo_pick", {"key": 7, "times": 3.0, "scale": 2, "loud": None, "label": None})
        assert ok.structured_content == {"key": 7, "times": 3, "scale": 2.0, "loud": False, "label": "x"}


async def test_prompt_arguments_stay_strings_converted_as_before(plexor):
    """MCP sends every prompt argument as a string, so prompts are not held to the tools' strict scalars."""
    def prompts(register, settings):
        def repeat(word: str, n: int = 2) -> str:
            """Repeat a word."""
            return " ".join([word] * n)

        register(repeat)

    async with plexor.client([("demo", make_plugin("demo", plexor_register_prompts=prompts))]) as client:
        got = await client.get_prompt("demo_repeat", {"word": "hi", "n": "3"})
        assert got.messages[0].content.text == "hi hi hi"
        with pytest.raises(Exception, match="argument 'n'"):
            await client.get_prompt("demo_repeat", {"word": "hi", "n": "many"})
