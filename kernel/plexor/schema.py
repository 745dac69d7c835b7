"""From a typed Python function to a JSON input schema and an argument validator.

The signature gives the types and defaults; the docstring gives the tool's
description and each parameter's (``:param name:`` or Google ``Args:`` style).
Parameters annotated with :class:`plexor.Context` are injected, never exposed.

The schemas are *portable*: model APIs convert MCP tool schemas with their own
converters (OpenAI's strict mode, Google's SDK), and each refuses or mangles
some valid JSON Schema. So the generated schema has no ``$ref`` (``$defs`` are
inlined), no boolean ``additionalProperties`` on objects that declare their
properties (Google's converter crashes on it; OpenAI's strict conversion closes
objects itself, and the validator refuses unknown properties anyway), and
optional parameters declared with their plain type, left out of ``required``
(a type list or a nullable ``anyOf`` breaks semantic-kernel, autogen, dspy,
anthropic's ``transform_schema``, LangChain.js and Ollama: docs/authoring.md).
Every optional parameter also accepts ``null``, meaning "not given" (its
default): strict-mode converters make every property required and nullable,
and null is how a model in that mode leaves one out.
Scalars are strict: arguments are checked as JSON (a boolean is not an integer,
``"5"`` is not a number), the way the advertised schema says.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from plexor.errors import InvalidArgument, PluginError
from plexor.portable import _NULL, JSONObject, JSONText, _json_kind, portable

__all__ = ["JSONObject", "JSONText", "Signature", "analyse", "parse_docstring", "portable", "schema_hash"]

_PARAM_RST = re.compile(r"^\s*:param\s+(?:[^:]+\s)?(\w+)\s*:\s*(.*)$")
_GOOGLE_HEAD = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_ITEM = re.compile(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$|^\s*:(returns?|raises?|rtype)\b")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description and per-parameter help."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    mode = "desc"
    for line in lines:
        m = _PARAM_RST.match(line)
        if m:
            current, mode = m.group(1), "param"
            params[current] = m.group(2).strip()
            continue
        if _GOOGLE_HEAD.match(line):
            mode, current = "google", None
            continue
        if _SECTION.match(line):
            mode, current = "other", None
            continue
        if mode == "google":
            g = _GOOGLE_ITEM.match(line)
            if g and (len(line) - len(line.lstrip())) <= 4:
                current = g.group(1)
                params[current] = g.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
            continue
        if mode == "param":
            if current and line.strip() and line[:1].isspace():
                params[current] += " " + line.strip()
                continue
            if not line.strip():
                current = None
                continue
            mode = "desc"
        if mode == "desc":
            desc.append(line)
    return "\n".join(desc).strip(), params


def schema_hash(*schemas: Any) -> str:
    """A short, stable hash of JSON schemas (changes whenever a schema does)."""
    blob = json.dumps(schemas, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _is_context(annotation: Any) -> bool:
    """:class:`plexor.Context` or a subclass (it carries the marker, so schemas need not import the context)."""
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "Context"
    return isinstance(annotation, type) and getattr(annotation, "__plexor_context__", False) is True


def context_params(func: Callable[..., Any]) -> tuple[str, ...]:
    """Names of ``func``'s parameters annotated :class:`plexor.Context` (the kernel fills them in)."""
    return tuple(name for name, p in inspect.signature(func).parameters.items() if _is_context(p.annotation))


def _strip_titles(node: Any) -> Any:
    # pydantic puts a "title" on every property; models read descriptions, so
    # the titles only cost tokens.
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


_JSON = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps with options builds one per call


@dataclass
class Signature:
    """What the kernel knows about a callable's parameters."""

    description: str
    input_schema: dict[str, Any]
    context_params: tuple[str, ...]
    param_names: tuple[str, ...]
    model: Any  # a pydantic model class, or None when the function takes no arguments
    output_schema: dict[str, Any] | None
    wraps_result: bool  # True when a non-object return value is placed under "result"
    json_validator: Any = None  # for a hand-written input schema (jsonschema), instead of ``model``
    defaults: dict[str, Any] = field(default_factory=dict)  # parameters whose null means "the default"
    strict: bool = True  # False for prompts: MCP sends their arguments as strings ("3" for an int)
    # What the validator accepts, unions and null included, where the advertised schema says less
    # (portable(): one plain type per property); errors are worded from it.
    accepts: dict[str, Any] | None = None

    def validate(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Check ``arguments``; raise :class:`InvalidArgument` naming each bad one."""
        arguments = dict(arguments or {})
        if self.json_validator is not None:
            return self._validate_json(arguments)
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
                obj = self._validate_as_json(arguments)
            except pydantic.ValidationError as exc:
                problems = self._problems(exc, arguments)
                raise InvalidArgument("; ".join(problems), _accepted(self), data={"errors": problems}) from None
        values = {name: getattr(obj, name) for name in self.param_names}
        for name, default in self.defaults.items():
            if values[name] is None:
                values[name] = copy.deepcopy(default)
        return values

    def _validate_as_json(self, arguments: dict[str, Any]) -> Any:
        import pydantic

        try:
            blob = _JSON.encode(arguments).encode()
        except (TypeError, ValueError):
            # An in-process caller passed Python objects, or a string holds an unpaired surrogate
            # (valid in a JSON text, not in UTF-8): checked as Python values, and the tool explains.
            return self.model.model_validate(arguments)
        try:
            return self.model.model_validate_json(blob, strict=True)
        except pydantic.ValidationError as exc:
            # 5.0 is an integer in JSON Schema; pydantic's strict mode says no.
            if not any(isinstance(e.get("input"), float) and e["input"].is_integer() for e in exc.errors()):
                raise
            return self.model.model_validate_json(_JSON.encode(_whole_floats(arguments)).encode(), strict=True)

    def _problems(self, exc: Any, arguments: dict[str, Any]) -> list[str]:
        props = (self.accepts or self.input_schema).get("properties", {})
        errors = exc.errors(include_url=False)
        by_top: dict[str, list[Any]] = {}
        for err in errors:
            loc = err.get("loc", ())
            by_top.setdefault(str(loc[0]) if loc else "", []).append(err)
        problems: list[str] = []
        said: set[str] = set()  # top-level arguments of the wrong type: one line each
        for err in errors:
            loc = err.get("loc", ())
            where = ".".join(str(p) for p in loc) or "arguments"
            top = str(loc[0]) if loc else ""
            if err.get("type") == "missing":
                problems.append(f"argument {where!r} is required")
            elif top in props and top in arguments and _wrong_type(by_top[top], props[top]):
                if top not in said:
                    said.add(top)
                    given = arguments[top]
                    problems.append(f"argument {top!r} must be {_type_text(props[top], top in self.defaults)}, "
                                    f"got {_json_kind(given)} ({_short(given)})")
            else:
                msg = str(err.get("msg", "")).removeprefix("Value error, ")
                problems.append(f"argument {where!r}: {msg}, got {_short(err.get('input'))}")
        return problems

    def _validate_json(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # null for an optional property means "not given" (strict-mode converters send it), even
        # where the hand-written schema would refuse it: the function never sees that key.
        required = set(self.input_schema.get("required") or ())
        props = self.input_schema.get("properties") or {}
        arguments = {k: v for k, v in arguments.items()
                     if not (v is None and k not in required and isinstance(props.get(k), dict)
                             and not self.json_validator.evolve(schema=props[k]).is_valid(None))}
        problems = []
        for err in sorted(self.json_validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
            where = ".".join(str(p) for p in err.absolute_path)
            problems.append(f"argument {where!r}: {err.message}" if where else err.message)
        if problems:
            raise InvalidArgument("; ".join(problems), _accepted(self), data={"errors": problems})
        return arguments


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _wrong_type(errors: list[Any], prop: dict[str, Any]) -> bool:
    """Whether these errors of one argument all say its value is of the wrong type (itself, not inside)."""
    if not all(str(e.get("type", "")).endswith("_type") for e in errors):
        return False
    if all(len(e.get("loc", ())) == 1 for e in errors):
        return True
    # pydantic tags each member of a union ("str", "int", ...): one error per member, one level down
    return ("anyOf" in prop or "oneOf" in prop) and all(
        len(e.get("loc", ())) == 2 and isinstance(e["loc"][1], str) for e in errors)


def _whole_floats(value: Any) -> Any:
    """5.0 is an integer in JSON Schema (and in JSON); pydantic's strict mode would refuse it as one."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_floats(v) for v in value]
    return value


def _accepted(sig: Signature) -> str:
    props = (sig.accepts or sig.input_schema).get("properties", {})
    required = set(sig.input_schema.get("required", []))
    if not props:
        return "This takes no arguments; call it with {}."
    parts = []
    for name, prop in props.items():
        parts.append(f"{name} ({_type_text(prop, name in sig.defaults)}{', required' if name in required else ''})")
    return "Accepted arguments: " + "; ".join(parts) + "."


def _type_text(prop: dict[str, Any], null_is_default: bool = False) -> str:
    """A JSON schema's type for people: ``integer``, ``"a" | "b"``, ``string or null``.

    With ``null_is_default`` (a parameter whose null only means "the default", as for any property
    with a non-null default), null is not named.
    """
    if null_is_default or prop.get("default") is not None:
        if isinstance(prop.get("type"), list):
            prop = {**prop, "type": [t for t in prop["type"] if t != "null"]}
            if len(prop["type"]) == 1:
                prop["type"] = prop["type"][0]
        elif isinstance(prop.get("anyOf"), list):
            prop = {**prop, "anyOf": [o for o in prop["anyOf"] if o != _NULL]}
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"] if not (null_is_default and v is None))
    if "const" in prop:
        return json.dumps(prop["const"])
    typ = prop.get("type")
    if prop.get("contentMediaType") == "application/json":  # a plexor.JSONObject
        typ = [("a JSON object as a string" if t == "string" else t) for t in (typ if isinstance(typ, list) else [typ])]
    if isinstance(typ, list):
        return " or ".join(typ)
    if typ == "array" and isinstance(prop.get("items"), dict) and prop["items"]:
        return f"list of {_type_text(prop['items'])}"
    if typ:
        return str(typ)
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        return " or ".join(dict.fromkeys(_type_text(o) for o in options))
    if "$ref" in prop:
        return "object"
    return "any value"


def analyse(
    func: Callable[..., Any],
    *,
    output_schema: dict[str, Any] | None = None,
    input_schema: dict[str, Any] | None = None,
    strict: bool = True,
) -> Signature:
    """Derive the input schema, validator and output schema of ``func``.

    With ``input_schema`` (a hand-written JSON Schema), that schema is advertised
    and enforced with jsonschema, and the arguments are passed as they came.
    ``strict=False`` (prompts, whose arguments MCP sends as strings) converts
    "3" to 3 and keeps defaults as they are (no null for the default).
    """
    if input_schema is not None:
        return _from_json_schema(func, input_schema, output_schema)
    import pydantic

    target = func
    sig = inspect.signature(target)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to raw annotations
        hints = dict(getattr(target, "__annotations__", {}))
    description, param_docs = parse_docstring(inspect.getdoc(target))
    fields: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    context: list[str] = []
    names: list[str] = []
    for name, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise PluginError(
                f"{getattr(func, '__qualname__', func)!r} takes *{name}; tools need named, typed parameters",
                "Replace *args/**kwargs with explicit parameters.",
            )
        ann = hints.get(name, param.annotation)
        if _is_context(ann) or _is_context(param.annotation):
            context.append(name)
            continue
        if ann is inspect.Parameter.empty:
            ann = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        if strict and default is not ... and not _admits_none(ann):
            # null means "not given", so the default: strict-mode converters make every property
            # required and nullable, and send null for one the model leaves out. The schema still
            # says the plain type (portable() keeps null out of optional properties).
            defaults[name] = default
            ann = typing.Optional[ann]  # noqa: UP045 - ann may be a string or special form
        fields[name] = (ann, pydantic.Field(default, description=param_docs.get(name)))
        names.append(name)
    model = None
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    accepts: dict[str, Any] | None = None
    if fields:
        model = pydantic.create_model(  # type: ignore[call-overload]
            f"{getattr(func, '__name__', 'tool')}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        generated = _strip_titles(model.model_json_schema())
        schema = portable(generated)
        accepts = portable(generated, narrow=False)
        for each in (schema, accepts):
            each.pop("additionalProperties", None)
            each.setdefault("properties", {})
        _mark_headers(func, hints, names, schema)
    wraps = False
    if output_schema is None:
        output_schema, wraps = _output_schema(hints.get("return", inspect.Parameter.empty))
    elif output_schema.get("type") != "object":
        output_schema = {"type": "object", "properties": {"result": output_schema}, "required": ["result"]}
        wraps = True
    return Signature(description, schema, tuple(context), tuple(names), model, output_schema, wraps,
                     defaults=defaults, strict=strict, accepts=accepts)


def _admits_none(ann: Any) -> bool:
    if ann is Any or ann is None or ann is type(None) or ann is object:
        return True
    if typing.get_origin(ann) is Annotated:
        return _admits_none(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return any(_admits_none(a) for a in typing.get_args(ann))
    if typing.get_origin(ann) is typing.Literal:
        return None in typing.get_args(ann)
    return False


def _mark_headers(func: Callable[..., Any], hints: dict[str, Any], names: list[str], schema: dict[str, Any]) -> None:
    """Add ``x-mcp-header`` to parameters annotated ``Annotated[T, plexor.Header(name)]``."""
    from plexor.params import Header

    seen: dict[str, str] = {}
    for name in names:
        ann = hints.get(name)
        for meta in getattr(ann, "__metadata__", ()):
            if not isinstance(meta, Header):
                continue
            prop = schema["properties"][name]
            if prop.get("type") not in ("string", "number", "integer", "boolean"):
                raise PluginError(f"{getattr(func, '__qualname__', func)!r}: parameter {name!r} is mirrored into a header "
                                  f"but is not a string, number, integer or boolean",
                                  "Use Header(...) only on parameters of a primitive type (Optional is not allowed either).")
            if meta.name.lower() in seen:
                raise PluginError(f"{getattr(func, '__qualname__', func)!r}: parameters {seen[meta.name.lower()]!r} and "
                                  f"{name!r} both use the header Mcp-Param-{meta.name}", "Give each parameter its own header name.")
            seen[meta.name.lower()] = name
            prop["x-mcp-header"] = meta.name


def _from_json_schema(func: Callable[..., Any], schema: dict[str, Any], output_schema: dict[str, Any] | None) -> Signature:
    from jsonschema import validators

    from plexor.errors import PluginError

    if schema.get("type") != "object":
        raise PluginError(f"the input schema of {getattr(func, '__name__', func)!r} must have type 'object'",
                          'Start it with {"type": "object", "properties": {...}}.')
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except Exception as exc:  # noqa: BLE001 - jsonschema's SchemaError
        raise PluginError(f"the input schema of {getattr(func, '__name__', func)!r} is not a valid JSON Schema: "
                          f"{getattr(exc, 'message', exc)}", "Fix the schema.") from exc
    description, _ = parse_docstring(inspect.getdoc(func))
    context = context_params(func)
    wraps = False
    if output_schema is not None and output_schema.get("type") != "object":
        output_schema = {"type": "object", "properties": {"result": output_schema}, "required": ["result"]}
        wraps = True
    return Signature(description, schema, context, tuple(schema.get("properties", {})), None, output_schema, wraps,
                     json_validator=cls(schema))


def _output_schema(ret: Any) -> tuple[dict[str, Any] | None, bool]:
    if ret is inspect.Parameter.empty or ret is None or ret is type(None) or ret is Any:
        return None, False
    origin = typing.get_origin(ret)
    if ret is dict or origin is dict or origin in (typing.Union,) or _is_iterator(ret):
        return None, False
    import pydantic

    if isinstance(ret, type) and typing.is_typeddict(ret):
        import typing_extensions

        if not typing_extensions.is_typeddict(ret) or type(ret).__module__ == "typing":
            # pydantic needs typing_extensions.TypedDict before Python 3.12; rebuild it as one.
            ret = typing_extensions.TypedDict(  # type: ignore[misc,operator,no-redef]
                ret.__name__, typing.get_type_hints(ret), total=ret.__total__
            )
        try:
            return _strip_titles(pydantic.TypeAdapter(ret).json_schema()), False
        except Exception:  # noqa: BLE001 - an undescribable return type gets no output schema
            return None, False
    if isinstance(ret, type) and issubclass(ret, pydantic.BaseModel):
        return _strip_titles(pydantic.TypeAdapter(ret).json_schema()), False
    if isinstance(ret, type) and ret.__module__ == "plexor.events":
        return None, False
    try:
        inner = _strip_titles(pydantic.TypeAdapter(ret).json_schema())
    except Exception:  # noqa: BLE001 - a return type pydantic cannot describe gets no output schema
        return None, False
    return {"type": "object", "properties": {"result": inner}, "required": ["result"]}, True


def _is_iterator(ret: Any) -> bool:
    import collections.abc as cabc

    origin = typing.get_origin(ret) or ret
    return isinstance(origin, type) and issubclass(
        origin, (cabc.AsyncIterator, cabc.AsyncIterable, cabc.Iterator, cabc.Generator)
    )
