"""What the kernel knows of a callable's parameters, and the validator of its arguments.

:func:`plexor.schema.analyse` builds a :class:`Signature` from a typed function (or a hand-written
JSON Schema); :meth:`Signature.validate` checks each call's arguments the way the advertised schema
says and words what it refuses for the model: which argument, what it must be, what came.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plexor.errors import InvalidArgument
from plexor.portable import _NULL, _json_kind

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pydantic
    from jsonschema.protocols import Validator
    from pydantic_core import ErrorDetails

__all__ = ["Signature", "properties", "required_names", "type_text"]

_JSON = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps with options builds one per call


@dataclass
class Signature:
    """What the kernel knows about a callable's parameters."""

    description: str
    input_schema: dict[str, object]
    context_params: tuple[str, ...]
    param_names: tuple[str, ...]
    model: type[pydantic.BaseModel] | None  # None when the function takes no arguments
    output_schema: dict[str, object] | None
    wraps_result: bool  # True when a non-object return value is placed under "result"
    json_validator: Validator | None = None  # for a hand-written input schema (jsonschema), instead of ``model``
    defaults: dict[str, object] = field(default_factory=dict)  # parameters whose null means "the default"
    strict: bool = True  # False for prompts: MCP sends their arguments as strings ("3" for an int)
    # What the validator accepts, unions and null included, where the advertised schema says less
    # (portable(): one plain type per property); errors are worded from it.
    accepts: dict[str, object] | None = None

    def validate(self, arguments: Mapping[str, object] | None) -> dict[str, object]:
        """Check ``arguments``; raise :class:`InvalidArgument` naming each bad one."""
        arguments = dict(arguments or {})
        if self.json_validator is not None:
            return self._validate_json(self.json_validator, arguments)
        unknown = [k for k in arguments if k not in self.param_names]
        if unknown:
            parts = []
            for k in unknown:
                near = difflib.get_close_matches(k, self.param_names, n=1)
                parts.append(f"{k!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
            raise InvalidArgument(
                f"unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(parts)}",
                _accepted(self),
                data={"unknown": unknown},
            )
        if self.model is None:
            return {}
        import pydantic

        if not self.strict:
            try:
                obj = self.model.model_validate(arguments)
            except pydantic.ValidationError as exc:
                problems = self._problems(exc, arguments)
                raise InvalidArgument("; ".join(problems), _accepted(self), data={"errors": problems}) from None
            return {name: getattr(obj, name) for name in self.param_names}
        try:
            # Strict: true is not 1, "5" is not 5. Python's strict mode is the fast path; what it
            # refuses is checked again as the JSON it came as (whose strict mode takes "2026-01-01"
            # for a date, an array for a tuple, 5.0 for an integer), and only that verdict counts.
            obj = self.model.model_validate(arguments, strict=True)
        except pydantic.ValidationError:
            try:
                obj = self._validate_as_json(self.model, arguments)
            except pydantic.ValidationError as exc:
                problems = self._problems(exc, arguments)
                raise InvalidArgument("; ".join(problems), _accepted(self), data={"errors": problems}) from None
        values = {name: getattr(obj, name) for name in self.param_names}
        for name, default in self.defaults.items():
            if values[name] is None:
                values[name] = copy.deepcopy(default)
        return values

    @staticmethod
    def _validate_as_json(model: type[pydantic.BaseModel], arguments: dict[str, object]) -> pydantic.BaseModel:
        import pydantic

        try:
            blob = _JSON.encode(arguments).encode()
        except (TypeError, ValueError):
            # An in-process caller passed Python objects, or a string holds an unpaired surrogate
            # (valid in a JSON text, not in UTF-8): checked as Python values, and the tool explains.
            return model.model_validate(arguments)
        try:
            return model.model_validate_json(blob, strict=True)
        except pydantic.ValidationError as exc:
            # 5.0 is an integer in JSON Schema; pydantic's strict mode says no.
            if not any(isinstance(e.get("input"), float) and e["input"].is_integer() for e in exc.errors()):
                raise
            return model.model_validate_json(_JSON.encode(_whole_floats(arguments)).encode(), strict=True)

    def _problems(self, exc: pydantic.ValidationError, arguments: dict[str, object]) -> list[str]:
        props = properties(self.accepts or self.input_schema)
        errors = exc.errors(include_url=False)
        by_top: dict[str, list[ErrorDetails]] = {}
        for err in errors:
            loc = err.get("loc", ())
            by_top.setdefault(str(loc[0]) if loc else "", []).append(err)
        problems: list[str] = []
        said: set[str] = set()  # top-level arguments of the wrong type: one line each
        for err in errors:
            loc = err.get("loc", ())
            where = ".".join(str(p) for p in loc) or "arguments"
            top = str(loc[0]) if loc else ""
            prop = props.get(top)
            if err.get("type") == "missing":
                problems.append(f"argument {where!r} is required")
            elif prop is not None and top in arguments and _wrong_type(by_top[top], prop):
                if top not in said:
                    said.add(top)
                    given = arguments[top]
                    problems.append(f"argument {top!r} must be {type_text(prop, top in self.defaults)}, "
                                    f"got {_json_kind(given)} ({_short(given)})")
            else:
                msg = str(err.get("msg", "")).removeprefix("Value error, ")
                problems.append(f"argument {where!r}: {msg}, got {_short(err.get('input'))}")
        return problems

    def _validate_json(self, validator: Validator, arguments: dict[str, object]) -> dict[str, object]:
        # null for an optional property means "not given" (strict-mode converters send it), even
        # where the hand-written schema would refuse it: the function never sees that key.
        needed = required_names(self.input_schema)
        props = properties(self.input_schema)
        arguments = {k: v for k, v in arguments.items()
                     if not (v is None and k not in needed and isinstance(props.get(k), dict)
                             and not validator.evolve(schema=props[k]).is_valid(None))}
        problems = []
        for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
            where = ".".join(str(p) for p in err.absolute_path)
            problems.append(f"argument {where!r}: {err.message}" if where else err.message)
        if problems:
            raise InvalidArgument("; ".join(problems), _accepted(self), data={"errors": problems})
        return arguments


def properties(schema: Mapping[str, object]) -> dict[str, Mapping[str, object]]:
    """An object schema's ``properties``, by name ({} when it declares none)."""
    props = schema.get("properties")
    return {str(k): v for k, v in props.items() if isinstance(v, Mapping)} if isinstance(props, Mapping) else {}


def required_names(schema: Mapping[str, object]) -> set[str]:
    """The names an object schema's ``required`` lists."""
    given = schema.get("required")
    return {str(name) for name in given} if isinstance(given, list | tuple) else set()


def _short(value: object) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _wrong_type(errors: list[ErrorDetails], prop: Mapping[str, object]) -> bool:
    """Whether these errors of one argument all say its value is of the wrong type (itself, not inside)."""
    if not all(str(e.get("type", "")).endswith("_type") for e in errors):
        return False
    if all(len(e.get("loc", ())) == 1 for e in errors):
        return True
    # pydantic tags each member of a union ("str", "int", ...): one error per member, one level down
    return ("anyOf" in prop or "oneOf" in prop) and all(
        len(e.get("loc", ())) == 2 and isinstance(e["loc"][1], str) for e in errors)


def _whole_floats(value: object) -> object:
    """5.0 is an integer in JSON Schema (and in JSON); pydantic's strict mode would refuse it as one."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_floats(v) for v in value]
    return value


def _accepted(sig: Signature) -> str:
    props = properties(sig.accepts or sig.input_schema)
    needed = required_names(sig.input_schema)
    if not props:
        return "This takes no arguments; call it with {}."
    parts = []
    for name, prop in props.items():
        parts.append(f"{name} ({type_text(prop, name in sig.defaults)}{', required' if name in needed else ''})")
    return "Accepted arguments: " + "; ".join(parts) + "."


def type_text(prop: Mapping[str, object], null_is_default: bool = False) -> str:
    """A JSON schema's type for people: ``integer``, ``"a" | "b"``, ``string or null``.

    With ``null_is_default`` (a parameter whose null only means "the default", as for any property
    with a non-null default), null is not named.
    """
    if null_is_default or prop.get("default") is not None:
        kinds, options = prop.get("type"), prop.get("anyOf")
        if isinstance(kinds, list):
            kept = [t for t in kinds if t != "null"]
            prop = {**prop, "type": kept[0] if len(kept) == 1 else kept}
        elif isinstance(options, list):
            prop = {**prop, "anyOf": [o for o in options if o != _NULL]}
    enum = prop.get("enum")
    if isinstance(enum, list):
        return " | ".join(json.dumps(v) for v in enum if not (null_is_default and v is None))
    if "const" in prop:
        return json.dumps(prop["const"])
    typ = prop.get("type")
    if prop.get("contentMediaType") == "application/json":  # a plexor.JSONObject
        typ = [("a JSON object as a string" if t == "string" else t) for t in (typ if isinstance(typ, list) else [typ])]
    if isinstance(typ, list):
        return " or ".join(map(str, typ))
    items = prop.get("items")
    if typ == "array" and isinstance(items, dict) and items:
        return f"list of {type_text(items)}"
    if typ:
        return str(typ)
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list) and options:
        return " or ".join(dict.fromkeys(type_text(o) if isinstance(o, Mapping) else "any value" for o in options))
    if "$ref" in prop:
        return "object"
    return "any value"
