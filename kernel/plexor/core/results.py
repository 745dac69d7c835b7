"""Shaping what a function returned into what goes on the wire.

A tool's value becomes an :class:`Outcome` (``structuredContent``, the text
item, extra content blocks, ``_meta``); a reader's value becomes resource
contents; a prompt's value becomes messages. Output schemas are enforced here,
before anything is sent.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable, Sequence
from typing import cast

from plexor.core.specs import ToolSpec
from plexor.errors import PlexorError, PluginError
from plexor.events import Result

__all__ = ["Outcome", "resource_contents", "prompt_messages", "to_json", "tool_outcome"]


@dataclasses.dataclass
class Outcome:
    """The result of one tool call, before it is put on the wire."""

    data: dict[str, object] | None
    text: str
    is_error: bool
    meta: dict[str, object]
    error: PlexorError | None = None
    content: list[dict[str, object]] = dataclasses.field(default_factory=list)

    def wire(self) -> dict[str, object]:
        """The ``CallToolResult`` as JSON (``_meta`` too): what ``tools/call`` answers and a task keeps."""
        out: dict[str, object] = {"content": [{"type": "text", "text": self.text}, *self.content], "isError": self.is_error}
        if self.data is not None:
            out["structuredContent"] = self.data
        if m := self.meta:  # as plain JSON (keys are str); all-str values (a tool's own) need no JSON round trip
            out["_meta"] = dict(m) if all(type(v) is str for v in m.values()) else json.loads(json.dumps(m, default=str))
        return out


def _jsonable(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def to_json(value: object) -> object:
    """Round-trip through JSON so the result is plain JSON types."""
    return json.loads(json.dumps(value, default=_jsonable, ensure_ascii=False))


def tool_outcome(spec: ToolSpec, value: object) -> Outcome:
    """A tool's return value (or its generator's folded :class:`Result`) as a successful Outcome."""
    advice: list[str] = []
    text: str | None = None
    extra: list[dict[str, object]] = []
    if isinstance(value, Result):
        advice.extend(value.guidance)
        text = value.text
        extra = _check_blocks(spec, value.content)
        value = value.data
    if not isinstance(value, (dict, list, str, int, float, bool, type(None))):
        value = _jsonable(value)  # a pydantic model or dataclass becomes its dict before any wrapping
    body: dict[str, object] = value if isinstance(value, dict) and not spec.signature.wraps_result else (
        {"result": value} if value is not None else {})
    # one dumps in the common case; a second pass only for non-JSON types (datetimes, dataclasses...) converted
    converted: list[bool] = []

    def default(obj: object) -> object:
        converted.append(True)
        return _jsonable(obj)

    try:
        dumped = json.dumps(body, default=default, ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or infinity: not JSON; send null, as structuredContent would
        converted.append(True)
        dumped = json.dumps(_finite(body), default=default, ensure_ascii=False)
    data: dict[str, object] = json.loads(dumped) if converted else body
    if spec.signature.output_schema is not None:
        _check_output(spec, data)
    if text is None:
        text = dumped
    if advice:
        text = text + "\n\n" + "\n".join(f"Guidance: {a}" for a in advice)
    meta: dict[str, object] = {"plexor/provenance": spec.provenance, "plexor/schemaHash": spec.schema_hash}
    return Outcome(data, text, False, meta, content=extra)


def resource_contents(uri: str, mime_type: str, value: object) -> list[dict[str, str]]:
    """A reader's value as ``[{"uri", "mime_type", "text"|"blob"}]``: bytes are a blob, str is text, else JSON.

    A reader that picks its MIME type per read returns :func:`plexor.embedded_resource` (text or blob).
    """
    if isinstance(value, dict) and value.get("type") == "resource" and isinstance(value.get("resource"), dict):
        inner = value["resource"]
        body = {"blob": inner["blob"]} if "blob" in inner else {"text": inner.get("text", "")}
        return [{"uri": uri, "mime_type": inner.get("mimeType") or mime_type, **body}]
    if isinstance(value, bytes):
        import base64

        return [{"uri": uri, "mime_type": mime_type, "blob": base64.b64encode(value).decode()}]
    if isinstance(value, str):
        return [{"uri": uri, "mime_type": mime_type, "text": value}]
    return [{"uri": uri, "mime_type": mime_type, "text": json.dumps(to_json(value), ensure_ascii=False)}]


def prompt_messages(value: object) -> list[dict[str, object]]:
    """A prompt's value (a string or a list of messages) as ``[{"role", "text"}]``."""
    if isinstance(value, str):
        return [{"role": "user", "text": value}]
    return [m if isinstance(m, dict) else {"role": "user", "text": str(m)} for m in cast("Iterable[object]", value)]


_BLOCKS = {"text": ("text",), "image": ("data", "mimeType"), "audio": ("data", "mimeType"),
           "resource": ("resource",), "resource_link": ("uri", "name")}


def _check_blocks(spec: ToolSpec, blocks: Sequence[object]) -> list[dict[str, object]]:
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or kind not in _BLOCKS or any(k not in block for k in _BLOCKS[kind]):
            raise PluginError(
                f"{spec.name} returned an invalid content block: {str(block)[:120]}",
                f"This is a bug in the plugin {spec.plugin!r}: use plexor.image(), plexor.audio() or "
                "plexor.embedded_resource(), or an MCP content-block dict.",
            )
    return [block for block in blocks if isinstance(block, dict)]  # each one is, past the loop


def _finite(value: object) -> object:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _check_output(spec: ToolSpec, data: object) -> None:
    """Refuse a result that breaks the tool's declared output schema (clients would reject it)."""
    validator = spec.output_validator
    if validator is None:
        from jsonschema import validators

        cls = validators.validator_for(spec.signature.output_schema)
        validator = spec.output_validator = cls(spec.signature.output_schema)
    error = next(iter(validator.iter_errors(data)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the result"
        raise PluginError(
            f"{spec.name} returned data that does not match its declared output schema ({where}: {error.message})",
            f"This is a bug in the plugin {spec.plugin!r}; nothing was sent. Report it to the plugin's author.",
        )
