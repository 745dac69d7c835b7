"""Tool schemas every model API's converter accepts, and free-form objects as JSON text.

Model APIs convert MCP tool schemas with their own converters (OpenAI's strict mode through
openai-agents, Google's SDK), and each refuses or mangles some valid JSON Schema: see
docs/authoring.md, "Schemas every model API accepts". :func:`portable` rewrites what pydantic
generates into the shape both keep; :data:`JSONObject` types a free-form object parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic_core import CoreSchema

__all__ = ["JSONObject", "JSONText", "one_branch", "plain", "portable"]


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


class JSONText:
    """Marker: a free-form JSON object that travels as a string of JSON text.

    Used as ``plexor.JSONObject`` (``Annotated[dict[str, Any], JSONText()]``). The
    schema says ``{"type": "string", "contentMediaType": "application/json"}``, which
    every model API accepts, where an open object (``additionalProperties: true``)
    is refused by OpenAI's strict mode and crashes Google's converter. The tool
    receives a dict: the kernel parses the text and refuses anything but an object.
    An object sent as an object is accepted too, so clients that did so keep working.
    """

    def __repr__(self) -> str:
        return "JSONText()"

    def __get_pydantic_core_schema__(self, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_parse_json_object, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, object]:
        return {"type": "string", "contentMediaType": "application/json"}


def _parse_json_object(value: object) -> dict[str, object]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise ValueError('must be a JSON object written as a string, e.g. "{\\"title\\": \\"Notes\\"}"')
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"is not valid JSON ({getattr(exc, 'msg', exc)} at character {getattr(exc, 'pos', 0)}); "
                         'write a JSON object as a string, e.g. "{\\"title\\": \\"Notes\\"}"') from None
    if not isinstance(parsed, dict):
        raise ValueError(f"must encode a JSON object ({{...}}), not {_json_kind(parsed)}")
    return parsed


JSONObject = Annotated[dict[str, Any], JSONText()]
"""A free-form JSON object parameter, advertised as a JSON-encoded string (see :class:`JSONText`)."""

_NULL = {"type": "null"}
_NOT_SCHEMAS = frozenset({"default", "enum", "const", "examples", "required"})


def portable(schema: Mapping[str, object], *, narrow: bool = True) -> dict[str, object]:
    """Rewrite a generated JSON schema into the shape every model API's converter keeps.

    ``$ref`` to ``$defs`` are inlined (a recursive one is kept, with its ``$defs``);
    ``additionalProperties: false`` is dropped from objects that list their
    properties; ``anyOf: [T, null]`` becomes ``type: [T, "null"]`` when T is a plain
    typed schema, and otherwise T gets the description too.

    With ``narrow`` (what is advertised), every property reads as one plain type, because
    several converters cannot read a type list or an ``anyOf`` (docs/authoring.md measures
    them): a property left out of ``required`` loses ``null`` (leaving it out already says
    "not given"), and a union advertises one of its branches, which the tool accepts like
    any other: a value or a list of values (``str | list[str]``) is a list, a choice of
    scalars (``str | int``) a string when it may be one. Without ``narrow``, the whole
    accepted type is kept (the kernel words its errors from it).
    """
    given = schema.get("$defs")
    defs: Mapping[str, object] = given if isinstance(given, Mapping) else {}
    kept: set[str] = set()
    out = _rewrite_object({k: v for k, v in schema.items() if k != "$defs"}, defs, (), kept)
    if kept:
        out["$defs"] = {name: _rewrite(defs[name], defs, (name,), kept) for name in defs}
    return _narrow_object(out) if narrow else dict(out)


def _narrow(node: object) -> object:
    if isinstance(node, list):
        return [_narrow(v) for v in node]
    return _narrow_object(node) if isinstance(node, dict) else node


def _narrow_object(node: Mapping[str, object]) -> dict[str, object]:
    out = {k: (v if k in _NOT_SCHEMAS or k == "properties" else _narrow(v)) for k, v in node.items()}
    props, needed = out.get("properties"), out.get("required")
    if isinstance(props, dict):
        required = set(needed) if isinstance(needed, list | tuple) else set()
        out["properties"] = {name: _narrow(prop if name in required else plain(prop)) for name, prop in props.items()}
    return _item_described_above(one_branch(out))


def _item_described_above(node: dict[str, object]) -> dict[str, object]:
    """An array of objects says what one item is in its own description, not the item's: autogen
    rebuilds an object item as a model of its own and drops the description beside it."""
    items = node.get("items")
    if node.get("type") != "array" or not isinstance(items, dict) or items.get("type") != "object" \
            or not isinstance(items.get("description"), str):
        return node
    said = node.get("description")
    each = f"Each item: {items['description']}"
    return {**node, "items": {k: v for k, v in items.items() if k != "description"},
            "description": f"{said} {each}" if isinstance(said, str) and said else each}


def _rewrite(node: object, defs: Mapping[str, object], seen: tuple[str, ...], kept: set[str]) -> object:
    if isinstance(node, list):
        return [_rewrite(v, defs, seen, kept) for v in node]
    return _rewrite_object(node, defs, seen, kept) if isinstance(node, dict) else node


def _rewrite_object(node: Mapping[str, object], defs: Mapping[str, object], seen: tuple[str, ...],
                    kept: set[str]) -> dict[str, object]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
        name = ref[8:]
        inner = defs[name]
        if name in seen or not isinstance(inner, Mapping):  # recursive (or no schema): cannot be inlined
            kept.add(name)
            return dict(node)
        return {**_rewrite_object(inner, defs, (*seen, name), kept),
                **{k: _rewrite(v, defs, seen, kept) for k, v in node.items() if k != "$ref"}}
    out = {k: (v if k in _NOT_SCHEMAS else _rewrite(v, defs, seen, kept)) for k, v in node.items()}
    if out.get("additionalProperties") is False and out.get("properties"):
        del out["additionalProperties"]
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and _NULL in options:
        other = options[0] if options[1] == _NULL else options[1]
        rest = {k: v for k, v in out.items() if k != "anyOf"}
        if isinstance(other, dict) and isinstance(other.get("type"), str) and not {"anyOf", "enum", "const"} & set(other):
            return {**other, **rest, "type": [other["type"], "null"]}
        if isinstance(other, dict) and "description" in rest:
            other = {**other, "description": rest["description"]}
        return {**rest, "anyOf": [other, _NULL]}
    return out


def plain(prop: object) -> object:
    """An optional property's schema without ``null``: ``type: [T, "null"]`` becomes ``type: T``, and
    ``anyOf: [S, null]`` becomes S (with the property's description, default and other keys). It says
    ``"nullable": true`` instead: smolagents reads every input without it as required, and the
    others ignore it (null is "not given" to the kernel)."""
    if not isinstance(prop, dict):
        return prop
    out = {**prop, "nullable": True}  # "default": null stays too: dspy reads a property without a default as required
    typ = out.get("type")
    if isinstance(typ, list) and "null" in typ:
        rest = [t for t in typ if t != "null"]
        if rest:
            out["type"] = rest[0] if len(rest) == 1 else rest
    enum = out.get("enum")
    if isinstance(enum, list) and None in enum and len(enum) > 1:
        out["enum"] = [v for v in enum if v is not None]
    options = out.get("anyOf")
    if isinstance(options, list) and _NULL in options:
        rest = [o for o in options if o != _NULL]
        if len(rest) == 1 and isinstance(rest[0], dict):
            del out["anyOf"]
            return plain({**rest[0], **out})  # an enum, an object: their own keys, and ours
        if rest:
            out["anyOf"] = rest
    return out


_SCALARS = ("string", "number", "integer", "boolean")


def one_branch(prop: dict[str, object]) -> dict[str, object]:
    """A union without ``null`` as one of its branches: ``[T, list of T]`` as the list, a choice of
    plain scalars as its string (else number, else the first). Every other union is kept."""
    options = prop.get("anyOf")
    branches = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
    if len(branches) < 2 or branches != options or _NULL in branches:
        return prop
    chosen: dict[str, object] | None = None
    if len(branches) == 2:
        for one, other in (branches, branches[::-1]):
            if one.get("type") == "array" and one.get("items") == other:
                chosen = one
    if chosen is None and all(o.get("type") in _SCALARS and set(o) <= {"type", "format"} for o in branches):
        types = [o["type"] for o in branches]
        pick = next((t for t in ("string", "number") if t in types), types[0])
        chosen = next(o for o in branches if o["type"] == pick)
    if chosen is None:
        return prop
    out = {**chosen, **{k: v for k, v in prop.items() if k != "anyOf"}}
    if chosen.get("type") == "array" and "default" in out and not isinstance(out["default"], list):
        out["default"] = [out["default"]]  # "*" as the list it stands for, so the default fits the type
    return out
