"""Every tool of every installed plugin, through the model APIs' own converters.

An agent hands an MCP tool to a model through its SDK's converter: openai-agents makes the
schema strict (``MCPUtil.to_function_tool(..., convert_schemas_to_strict=True)``, which falls
back to a non-strict tool when ``ensure_strict_json_schema`` refuses the schema), and
google-genai turns it into a ``FunctionDeclaration`` (``mcp_to_gemini_tools``, the function its
``generate_content`` uses for MCP tools and sessions, through ``Schema.from_json_schema``). Both
run here, at the versions tox pins, over the tools a real MCP client lists: a tool whose schema
one of them refuses, crashes on, or strips a description from fails this test.

The converters are installed by the ``all`` tox env (which sets PLEXOR_REQUIRE_MODEL_CONVERTERS,
so they cannot go missing silently); elsewhere the tests skip when they are not installed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from importlib.metadata import entry_points
from typing import Any, Literal

import pydantic
import pytest

from plexor import JSONObject

pytestmark = [pytest.mark.anyio, pytest.mark.all_plugins]  # the converters and every plugin: the `all` env

SHIPPED = {"example", "arbor", "keyboard", "folder-search", "edgelake"}


def _need(module: str) -> Any:
    if os.environ.get("PLEXOR_REQUIRE_MODEL_CONVERTERS"):
        import importlib

        return importlib.import_module(module)  # fails, never skips, where tox installed them
    return pytest.importorskip(module)


def _installed() -> list[str]:
    return sorted({ep.name for ep in entry_points(group="plexor")})


async def _list_tools(plexor: Any) -> list[Any]:
    names = _installed()
    if os.environ.get("PLEXOR_REQUIRE_MODEL_CONVERTERS"):
        assert SHIPPED <= set(names), f"plugins missing from this environment: {SHIPPED - set(names)}"
    async with plexor.client(installed=names) as client:
        tools = []
        result = await client.list_tools()
        tools += result.tools
        while result.next_cursor:
            result = await client.list_tools(cursor=result.next_cursor)
            tools += result.tools
    assert len(tools) >= 2
    return tools


# ---------------------------------------------------------------------------------- descriptions
def _described(schema: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(path, description) of every property and array item of a JSON schema, at any depth."""
    found = []
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict):
            if prop.get("description"):
                found.append(((*path, name), prop["description"]))
            found += _described(prop, (*path, name))
    items = schema.get("items")
    if isinstance(items, dict):
        found += _described(items, (*path, "[]"))
    for option in schema.get("anyOf") or []:
        if isinstance(option, dict):
            found += [f for f in _described(option, path) if f not in found]
    return found


def _json_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    if not path:
        return schema
    head, rest = path[0], path[1:]
    if head == "[]" and isinstance(schema.get("items"), dict):
        return _json_at(schema["items"], rest)
    if head in (schema.get("properties") or {}):
        return _json_at(schema["properties"][head], rest)
    for option in schema.get("anyOf") or []:
        hit = _json_at(option, path)
        if hit is not None:
            return hit
    return None


def _gemini_at(schema: Any, path: tuple[str, ...]) -> Any:
    if schema is None or not path:
        return schema
    head, rest = path[0], path[1:]
    if head == "[]" and schema.items is not None:
        return _gemini_at(schema.items, rest)
    if schema.properties and head in schema.properties:
        return _gemini_at(schema.properties[head], rest)
    for option in schema.any_of or []:
        hit = _gemini_at(option, path)
        if hit is not None:
            return hit
    return None


def _lost(source: dict[str, Any], describe_at: Any) -> list[str]:
    return [f"{'.'.join(path)} ({text[:40]!r})" for path, text in _described(source) if describe_at(path) != text]


# ------------------------------------------------------------------------------------ converters
def _openai_strict(tool: Any) -> tuple[bool, dict[str, Any], str]:
    """openai-agents' own MCP conversion; (strict?, the schema it would send, why not strict)."""
    _need("agents")
    from agents.mcp import MCPServerStdio
    from agents.mcp.util import MCPUtil

    server = MCPServerStdio(params={"command": "plexor", "args": ["serve"]}, name="plexor")  # never started
    why: list[str] = []

    class _Why(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            why.append(record.getMessage())

    handler = _Why(level=logging.DEBUG)
    logger = logging.getLogger("openai.agents")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        function_tool = MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return function_tool.strict_json_schema, function_tool.params_json_schema, "; ".join(why)


def _gemini(tool: Any) -> Any:
    """google-genai's MCP conversion: the FunctionDeclaration Gemini would get."""
    _need("google.genai")
    from google.genai import _mcp_utils

    (converted,) = _mcp_utils.mcp_to_gemini_tools([tool])
    (declaration,) = converted.function_declarations
    return declaration


# ------------------------------------------------------------------------------------------ tests
async def test_every_tool_converts_strictly_for_openai_agents(plexor):
    failures, passed, described = [], 0, 0
    tools = await _list_tools(plexor)  # every one: a tool without parameters cannot be strict (see below)
    for tool in tools:
        strict, schema, why = _openai_strict(tool)
        lost = _lost(tool.input_schema, lambda path, schema=schema: (_json_at(schema, path) or {}).get("description"))
        described += len(_described(tool.input_schema))
        if not strict:
            failures.append(f"{tool.name}: not strict ({why})")
        elif lost:
            failures.append(f"{tool.name}: descriptions lost: {', '.join(lost)}")
        else:
            passed += 1
    assert not failures, "\n".join(failures)
    assert passed == len(tools) and described > len(tools)


async def test_every_tool_converts_for_google_genai_keeping_every_description(plexor):
    failures, passed = [], 0
    tools = await _list_tools(plexor)
    for tool in tools:
        try:
            declaration = _gemini(tool)
        except Exception as exc:  # noqa: BLE001 - the converter's crash is the finding
            failures.append(f"{tool.name}: {type(exc).__name__}: {exc}")
            continue
        lost = _lost(tool.input_schema, lambda path, d=declaration: getattr(_gemini_at(d.parameters, path), "description",
                                                                              None))
        if declaration.description != tool.description:
            lost.append("the tool's description")
        if lost:
            failures.append(f"{tool.name}: descriptions lost: {', '.join(lost)}")
        else:
            passed += 1
    assert not failures, "\n".join(failures)
    assert passed == len(tools)


async def test_no_shipped_tool_is_parameterless(plexor):
    """Every tool declares at least one property: the one shape both converters accept.

    A tool without parameters is ``{"type": "object", "properties": {}}``, which openai-agents
    cannot make strict (the test below shows why no other schema helps): give it an optional
    parameter a model would use, e.g. ``plexor_health(plugin=None)``.
    """
    bare = [t.name for t in await _list_tools(plexor) if not t.input_schema.get("properties")]
    assert not bare, f"tools without parameters (not strict for OpenAI): {bare}"


def test_an_object_without_properties_is_where_the_two_converters_disagree():
    """No schema without properties satisfies both converters at these versions.

    openai-agents makes a schema strict only if an object without properties says
    ``additionalProperties: false``; google-genai's converter crashes on any boolean
    ``additionalProperties`` and takes every tool of the agent down with it. An open empty object
    (what a parameterless tool is advertised as) stays non-strict, and a schema-valued
    ``additionalProperties`` is refused by strict conversion too. So the kernel cannot make a
    parameterless tool portable by rewriting its schema; the author gives it a parameter. This
    test fails as soon as either converter changes, so the advice gets revisited.
    """
    from mcp.types import Tool

    def tool(**extra: Any) -> Tool:
        return Tool(name="t", description="d", input_schema={"type": "object", "properties": {}, **extra})

    assert _gemini(tool()).parameters is not None
    assert _openai_strict(tool())[0] is False, "openai-agents now makes an open empty object strict"
    assert _openai_strict(tool(additionalProperties={"not": {}}))[0] is False
    assert _openai_strict(tool(additionalProperties=False))[0] is True, \
        "openai-agents no longer needs additionalProperties: false"
    with pytest.raises(AttributeError, match="'bool' object has no attribute 'items'"):
        _gemini(tool(additionalProperties=False))  # when this stops raising, a closed empty object is portable
    one = Tool(name="t", description="d",
               input_schema={"type": "object", "properties": {"plugin": {"type": ["string", "null"], "default": None,
                                                                         "description": "only this plugin"}}})
    assert _openai_strict(one)[0] is True and _gemini(one).parameters.properties["plugin"].description


def test_the_converters_are_the_pinned_versions():
    from importlib.metadata import version

    _need("agents")
    _need("google.genai")
    tox = open(os.path.join(os.path.dirname(__file__), os.pardir, "tox.ini"), encoding="utf-8").read()
    for dist in ("openai-agents", "google-genai"):
        assert f"{dist}=={version(dist)}" in tox, f"{dist} {version(dist)} is not the version tox.ini pins"


# ------------------------------------------------------------------- what the schemas promise
async def test_scalars_are_strict_and_null_means_the_default(plexor):
    if "keyboard" not in _installed():
        pytest.skip("plexor-keyboard is not installed")
    async with plexor.client(installed=["keyboard"]) as client:
        refused = await client.call_tool("keyboard_lookup_keycode", {"key_name": True})
        assert refused.is_error
        text = refused.content[0].text
        assert "argument 'key_name' must be string or integer, got a boolean (true)" in text
        assert "Accepted arguments: key_name (string or integer, required)" in text
        for bad in ({"key_name": "tab", "fuzzy": "yes"}, {"key_name": "tab", "fuzzy": 1}):
            r = await client.call_tool("keyboard_lookup_keycode", bad)
            assert r.is_error and "argument 'fuzzy' must be boolean" in r.content[0].text, bad
        ok = await client.call_tool("keyboard_lookup_keycode", {"key_name": "tab", "fuzzy": None, "layout": None})
        assert not ok.is_error and ok.structured_content["key"]["code"] == 48
        by_code = await client.call_tool("keyboard_lookup_keycode", {"key_name": 48.0})  # 48.0 is an integer in JSON
        assert not by_code.is_error, by_code.content[0].text


async def test_free_form_metadata_travels_as_json_text(plexor):
    if "arbor" not in _installed():
        pytest.skip("plexor-arbor is not installed")
    async with plexor.client(installed=["arbor"]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        prop = tools["arbor_tree_create"].input_schema["properties"]["metadata"]
        assert prop["type"] == "string" and prop["contentMediaType"] == "application/json"
        assert "metadata" not in tools["arbor_tree_create"].input_schema.get("required", [])
        as_text = await client.call_tool("arbor_tree_create", {"metadata": json.dumps({"title": "Trip", "n": [1]})})
        assert as_text.structured_content["metadata"] == {"title": "Trip", "n": [1]}
        tree = as_text.structured_content["id"]
        # an object is still accepted: clients written before the schema changed keep working
        as_object = await client.call_tool("arbor_tree_update_metadata",
                                           {"tree_id": tree, "metadata": {"title": "Trip 2"}, "merge": True})
        assert as_object.structured_content["metadata"] == {"title": "Trip 2", "n": [1]}
        node = await client.call_tool("arbor_node_create_external", {
            "tree_id": tree, "handle": {"source": "file", "identifier": "a.txt", "metadata": '{"lines": 3}'}})
        assert not node.is_error, node.content[0].text
        assert node.structured_content["data"]["handle"]["metadata"] == {"lines": 3}
        unversioned = await client.call_tool("arbor_node_create_external", {  # how a strict-mode model leaves keys out
            "tree_id": tree, "handle": {"source": "file", "identifier": "b.txt", "source_version": None, "metadata": None}})
        assert unversioned.structured_content["data"]["handle"] == {
            "source": "file", "identifier": "b.txt", "source_version": None, "metadata": {}}, unversioned.content[0].text
        for bad, said in (('{"title": ', "is not valid JSON"), ("[1, 2]", "must encode a JSON object"),
                          (5, "must be a JSON object written as a string")):
            r = await client.call_tool("arbor_tree_create", {"metadata": bad})
            assert r.is_error and "argument 'metadata'" in r.content[0].text and said in r.content[0].text, bad


class _Point(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    x: int = pydantic.Field(description="across")


def _shape(points: list[_Point], key: str | int, kind: Literal["a", "b"] = "a", where: _Point | None = None,
           note: str | None = None, size: int = 3, extra: JSONObject | None = None,
           names: str | list[str] = "*") -> dict[str, Any]:
    """Shape things.

    :param points: the points.
    :param key: a name or a code.
    :param names: which.
    :param kind: which kind.
    :param where: an anchor.
    :param note: a note.
    :param size: how big.
    :param extra: anything else.
    """
    return {}


def test_generated_schemas_are_portable():
    from plexor.schema import analyse

    sig = analyse(_shape)
    schema = sig.input_schema
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and "additionalProperties" not in text
    props = schema["properties"]
    assert props["points"]["items"]["properties"]["x"] == {"description": "across", "type": "integer"}
    assert props["kind"] == {"default": "a", "description": "which kind.", "enum": ["a", "b"], "type": "string",
                             "nullable": True}
    # optional parameters: their plain type, left out of required, "nullable" (null and unions confuse
    # converters; smolagents reads an input without "nullable" as required)
    assert props["note"] == {"type": "string", "default": None, "description": "a note.", "nullable": True}
    assert props["size"] == {"type": "integer", "default": 3, "description": "how big.", "nullable": True}
    assert props["where"]["type"] == "object" and props["where"]["description"] == "an anchor."
    assert props["where"]["properties"]["x"] == {"description": "across", "type": "integer"}
    assert props["extra"]["type"] == "string" and props["extra"]["contentMediaType"] == "application/json"
    assert props["names"] == {"type": "array", "items": {"type": "string"}, "default": ["*"], "description": "which.",
                              "nullable": True}
    assert props["key"] == {"type": "string", "description": "a name or a code."}
    assert schema["required"] == ["points", "key"]
    # null is "not given" for every optional parameter, a choice included (strict-mode converters send it)
    got = sig.validate({"points": [{"x": 1}], "key": 5, "size": None, "extra": '{"k": 1}', "kind": None,
                        "names": None, "note": None, "where": None})
    assert got["size"] == 3 and got["extra"] == {"k": 1} and got["kind"] == "a" and got["names"] == "*"
    assert got["note"] is None and got["where"] is None and got["key"] == 5  # the union is still accepted whole
    assert sig.validate({"points": [], "key": "a", "names": "b"})["names"] == "b"
    assert sig.validate({"points": [{"x": 2.0}], "key": "a"})["points"][0].x == 2
    for bad in ({"points": [{"x": True}], "key": "a"}, {"points": [{"x": "1"}], "key": "a"},
                {"points": [], "key": "a", "size": "3"}, {"points": [], "key": "a", "note": 5},
                {"points": [], "key": "a", "kind": "c"}, {"points": [], "key": True}, {"points": [], "key": None}):
        with pytest.raises(Exception, match="argument"):
            sig.validate(bad)
    before = copy.deepcopy(schema)
    analyse(_shape)
    assert schema == before


class _Key(pydantic.BaseModel):
    """One sort key."""

    model_config = pydantic.ConfigDict(extra="forbid")
    column: str = pydantic.Field(description="a column")


def _sort(order: list[_Key], then: list[_Key] | None = None) -> dict[str, Any]:
    """Sort.

    :param order: sort keys.
    """
    return {}


def test_an_array_item_is_described_in_the_arrays_description():
    """autogen rebuilds an object item as a model of its own and drops the description beside it (its
    loss report, tests/clients/test_frameworks.py): the array's description says what one item is."""
    from plexor.schema import analyse

    sig = analyse(_sort)
    props = sig.input_schema["properties"]
    assert props["order"]["description"] == "sort keys. Each item: One sort key."
    assert props["then"]["description"] == "Each item: One sort key."  # an array without a description of its own
    for prop in props.values():
        assert "description" not in prop["items"]
        assert prop["items"]["properties"]["column"] == {"description": "a column", "type": "string"}
    assert sig.validate({"order": [{"column": "a"}], "then": None})["order"][0].column == "a"
    with pytest.raises(Exception, match="argument"):
        sig.validate({"order": [{"column": 5}]})
