"""Tool parameters: their types, and the checked text each value puts into a command."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plexor_edgelake import command as cmd
from plexor_edgelake import values

__all__ = ["PARAM_TYPES", "ParamDef"]

PARAM_TYPES = {
    "identifier": "a plain identifier (letters, digits, _)",
    "identifier_list": "a list of plain identifiers",
    "string": "a value, sent between double quotes",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "enum": "one of the listed choices",
    "sql_condition": "a SQL condition",
    "select_list": "columns or expressions to select",
    "order_by": "a list of {column, direction}",
    "edgelake_condition": "a policy condition",
    "bring": "a bring clause",
    "policy_types": "a policy type, or a list of them",
    "destination": "network, local, or nodes as IP:Port",
    "words": "plain words (a help topic or command)",
}

@dataclass
class ParamDef:
    name: str
    type: str
    description: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    wildcard: bool = False

    def render(self, value: Any) -> str | None:
        """The text placed into a command for ``value`` (validated); ``None`` when absent."""
        if value is None or (isinstance(value, (str, list)) and len(value) == 0 and not self.required):
            return None
        if type(value) is not str:
            return _RENDER[self.type](self, value)  # type: ignore[no-any-return]
        # Checking a value is pure (same declaration, same text: same result or same refusal), and
        # tools are called with the same values again and again: remember the accepted ones.
        key = (self.type, self.name, self.wildcard, value)
        text = _RENDERED.get(key)
        if text is None:
            text = _RENDER[self.type](self, value)
            if len(_RENDERED) >= 4096:
                _RENDERED.clear()
            _RENDERED[key] = text
        return text  # type: ignore[no-any-return]


_RENDERED: dict[tuple[str, str, bool, str], Any] = {}


_RENDER: dict[str, Any] = {
    "identifier": lambda p, v: cmd.identifier(p.name, v, wildcard=p.wildcard),
    "identifier_list": lambda p, v: cmd.identifier_list(p.name, v),
    "string": lambda p, v: cmd.quoted_value(p.name, v),
    "integer": lambda p, v: str(v),
    "number": lambda p, v: str(v),
    "boolean": lambda p, v: "true" if v else "false",
    "enum": lambda p, v: str(v),
    "sql_condition": lambda p, v: cmd.sql_condition(p.name, v),
    "select_list": lambda p, v: cmd.select_list(p.name, v),
    "order_by": lambda p, v: cmd.order_by(p.name, v),
    "edgelake_condition": lambda p, v: cmd.edgelake_condition(p.name, v),
    "bring": lambda p, v: cmd.bring_clause(p.name, v),
    "policy_types": lambda p, v: values.policy_types(p.name, v),
    "destination": lambda p, v: values.destination(p.name, v),
    "words": lambda p, v: values.words(p.name, v),
}
