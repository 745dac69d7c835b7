"""Test-only plugin: the suite's ``json_schema_2020_12_tool`` (namespace ``json``).

The conformance suite looks the tool up by that exact name, which cannot share
the ``test`` namespace of the main fixture, so it is a plugin of its own
(entry point ``conformance-json``). Its input schema is hand-written JSON
Schema 2020-12 ($schema, $defs with $anchor, $ref, allOf/anyOf, if/then/else,
additionalProperties false), exactly as the suite expects to see it in
tools/list; the kernel enforces it with jsonschema.
"""

from __future__ import annotations

from typing import Any

from plexor import hookimpl

PLEXOR_NAMESPACE = "json"

SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@hookimpl
def plexor_register_tools(register, settings):
    register(schema_2020_12_tool, input_schema=SCHEMA_2020_12)


def schema_2020_12_tool(**arguments: Any) -> dict:
    """Accept a contact (name, address, phone or email) checked against a JSON Schema 2020-12 and echo it back."""
    return {"received": arguments}
