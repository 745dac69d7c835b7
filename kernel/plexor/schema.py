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

import hashlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from plexor.errors import PluginError
from plexor.portable import JSONObject, JSONText, portable
from plexor.signature import Signature

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pydantic
    from pydantic.fields import FieldInfo

__all__ = ["JSONObject", "JSONText", "analyse", "parse_docstring", "portable", "schema_hash"]

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


def schema_hash(*schemas: object) -> str:
    """A short, stable hash of JSON schemas (changes whenever a schema does)."""
    blob = json.dumps(schemas, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _is_context(annotation: object) -> bool:
    """:class:`plexor.Context` or a subclass (it carries the marker, so schemas need not import the context)."""
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "Context"
    return isinstance(annotation, type) and getattr(annotation, "__plexor_context__", False) is True


def context_params(func: Callable[..., object]) -> tuple[str, ...]:
    """Names of ``func``'s parameters annotated :class:`plexor.Context` (the kernel fills them in)."""
    return tuple(name for name, p in inspect.signature(func).parameters.items() if _is_context(p.annotation))


def _strip_titles(schema: Mapping[str, object]) -> dict[str, object]:
    """``schema`` without the "title" pydantic puts on every property: models read descriptions, so
    the titles only cost tokens."""
    return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}


def _untitled(node: object) -> object:
    if isinstance(node, dict):
        return _strip_titles(node)
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node


def analyse(
    func: Callable[..., object],
    *,
    output_schema: dict[str, object] | None = None,
    input_schema: dict[str, object] | None = None,
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
    try:
        hints: dict[str, object] = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to raw annotations
        hints = dict(getattr(func, "__annotations__", {}))
    description, param_docs = parse_docstring(inspect.getdoc(func))
    params = _parameters(func, hints, param_docs, strict)
    model, schema, accepts = _model(func, hints, params)
    wraps = False
    if output_schema is None:
        output_schema, wraps = _output_schema(hints.get("return", inspect.Parameter.empty))
    elif output_schema.get("type") != "object":
        output_schema = {"type": "object", "properties": {"result": output_schema}, "required": ["result"]}
        wraps = True
    return Signature(description, schema, tuple(params.context), tuple(params.names), model, output_schema, wraps,
                     defaults=params.defaults, strict=strict, accepts=accepts)


@dataclass
class _Parameters:
    """A function's parameters as :func:`analyse` sorts them."""

    fields: dict[str, tuple[object, FieldInfo]] = field(default_factory=dict)  # for pydantic.create_model
    defaults: dict[str, object] = field(default_factory=dict)  # parameters whose null means "the default"
    context: list[str] = field(default_factory=list)  # the Context parameters, filled in by the kernel
    names: list[str] = field(default_factory=list)  # the others, in order


def _parameters(func: Callable[..., object], hints: Mapping[str, object], param_docs: Mapping[str, str],
                strict: bool) -> _Parameters:
    import pydantic

    out = _Parameters()
    for name, param in inspect.signature(func).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise PluginError(
                f"{getattr(func, '__qualname__', func)!r} takes *{name}; tools need named, typed parameters",
                "Replace *args/**kwargs with explicit parameters.",
            )
        ann = hints.get(name, param.annotation)
        if _is_context(ann) or _is_context(param.annotation):
            out.context.append(name)
            continue
        if ann is inspect.Parameter.empty:
            ann = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        if strict and default is not ... and not _admits_none(ann):
            # null means "not given", so the default: strict-mode converters make every property
            # required and nullable, and send null for one the model leaves out. The schema still
            # says the plain type (portable() keeps null out of optional properties).
            out.defaults[name] = default
            ann = typing.Optional[ann]  # noqa: UP045 - ann may be a string or special form
        out.fields[name] = (ann, pydantic.Field(default, description=param_docs.get(name)))
        out.names.append(name)
    return out


def _model(func: Callable[..., object], hints: Mapping[str, object], params: _Parameters,
           ) -> tuple[type[pydantic.BaseModel] | None, dict[str, object], dict[str, object] | None]:
    """The arguments' model, the schema advertised and the schema accepted (``None``: the advertised one)."""
    if not params.fields:
        return None, {"type": "object", "properties": {}}, None
    import pydantic

    model: type[pydantic.BaseModel] = pydantic.create_model(  # type: ignore[call-overload]
        f"{getattr(func, '__name__', 'tool')}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **params.fields,
    )
    generated = _strip_titles(model.model_json_schema())
    schema = portable(generated)
    accepts = portable(generated, narrow=False)
    for each in (schema, accepts):
        each.pop("additionalProperties", None)
        each.setdefault("properties", {})
    _mark_headers(func, hints, params.names, schema)
    return model, schema, accepts


def _admits_none(ann: object) -> bool:
    if ann is Any or ann is None or ann is type(None) or ann is object:
        return True
    if typing.get_origin(ann) is Annotated:
        return _admits_none(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return any(_admits_none(a) for a in typing.get_args(ann))
    if typing.get_origin(ann) is typing.Literal:
        return None in typing.get_args(ann)
    return False


def _mark_headers(func: Callable[..., object], hints: Mapping[str, object], names: list[str],
                  schema: dict[str, object]) -> None:
    """Add ``x-mcp-header`` to parameters annotated ``Annotated[T, plexor.Header(name)]``."""
    from plexor.params import Header

    seen: dict[str, str] = {}
    for name in names:
        ann = hints.get(name)
        for meta in getattr(ann, "__metadata__", ()):
            if not isinstance(meta, Header):
                continue
            props = schema["properties"]
            prop = props.get(name) if isinstance(props, dict) else None
            if not isinstance(prop, dict) or prop.get("type") not in ("string", "number", "integer", "boolean"):
                raise PluginError(f"{getattr(func, '__qualname__', func)!r}: parameter {name!r} is mirrored into a header "
                                  f"but is not a string, number, integer or boolean",
                                  "Use Header(...) only on parameters of a primitive type (Optional is not allowed either).")
            if meta.name.lower() in seen:
                raise PluginError(f"{getattr(func, '__qualname__', func)!r}: parameters {seen[meta.name.lower()]!r} and "
                                  f"{name!r} both use the header Mcp-Param-{meta.name}", "Give each parameter its own header name.")
            seen[meta.name.lower()] = name
            prop["x-mcp-header"] = meta.name


def _from_json_schema(func: Callable[..., object], schema: dict[str, object],
                      output_schema: dict[str, object] | None) -> Signature:
    from jsonschema import validators

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
    props = schema.get("properties")
    names = tuple(props) if isinstance(props, Mapping) else ()
    return Signature(description, schema, context, names, None, output_schema, wraps,
                     json_validator=cls(schema))


def _output_schema(ret: Any) -> tuple[dict[str, object] | None, bool]:
    # ``ret`` is the return annotation: a class, a special form (a union, a generic alias) or a string.
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


def _is_iterator(ret: object) -> bool:
    import collections.abc as cabc

    origin = typing.get_origin(ret) or ret
    return isinstance(origin, type) and issubclass(
        origin, (cabc.AsyncIterator, cabc.AsyncIterable, cabc.Iterator, cabc.Generator)
    )
