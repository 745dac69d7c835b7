"""What the kernel keeps for each registered tool, resource, template and prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plexor.core.dispatch import Target
from plexor.errors import PluginError
from plexor.schema import analyse, schema_hash
from plexor.signature import Signature

if TYPE_CHECKING:  # pragma: no cover
    from jsonschema.protocols import Validator
    from mcp.shared.uri_template import UriTemplate

    from plexor.hints import Cache

__all__ = ["MethodSpec", "PromptSpec", "ResourceSpec", "TemplateMatcher", "TemplateSpec", "ToolSpec", "parse_template"]


@dataclass(frozen=True)
class MethodSpec:
    """A JSON-RPC method a plugin added to the server (``plexor_protocol_methods``): who answers it and
    what a caller needs. ``scopes`` ``None``: the plugin's ``<plugin>:write`` (a method may do anything,
    so it is treated as a tool that writes); ``()``: none, the method checks its caller itself (as the
    ``tasks`` feature's ``tasks/*`` do, by owner)."""

    method: str
    plugin: str
    scopes: tuple[str, ...] | None = None


@dataclass
class ToolSpec:
    name: str
    namespace: str
    method: str
    plugin: str
    func: Callable[..., object]
    description: str
    title: str | None
    annotations: dict[str, object]
    target: Target
    ready_required: bool
    meta: dict[str, object] = field(default_factory=dict)
    declared_output_schema: dict[str, object] | None = None
    _signature: Signature | None = None
    _schema_hash: str | None = None
    output_validator: Validator | None = None
    declared_input_schema: dict[str, object] | None = None
    scopes: tuple[str, ...] | None = None  # OAuth scopes a caller needs; None: derived (plexor.features.auth.scopes)
    task: str = "forbidden"  # task execution (plexor.features.tasks): "forbidden", "optional" or "required"
    detach: str = "start"  # when a task call becomes a task: "start", or "manual" (at ctx.detach())
    icons: list[dict[str, object]] | None = None  # MCP Icon dicts (plexor.hints); None: the plugin's PLEXOR_ICON
    cache: Cache | None = None  # for its tools/list entry; None: no hint
    withdrawn: bool = False  # PluginHandle.offer(name, False): not listed, and a call says so
    timeout: float | None = None  # seconds a call or task of it may run when longer than the server's limit

    @property
    def signature(self) -> Signature:
        """Schemas and validator, derived on first use.

        Building them (pydantic) is the costliest part of registration, so it
        waits until the plugin starts or a client lists tools: loading stays
        cheap and the handshake is not delayed by it.
        """
        if self._signature is None:
            self._signature = analyse(self.func, output_schema=self.declared_output_schema,
                                      input_schema=self.declared_input_schema)
        return self._signature

    @property
    def schema_hash(self) -> str:
        if self._schema_hash is None:
            self._schema_hash = schema_hash(self.signature.input_schema, self.signature.output_schema)
        return self._schema_hash

    @property
    def provenance(self) -> str:
        return f"plexor/{self.plugin}/{self.method}"


@dataclass
class ResourceSpec:
    uri: str
    plugin: str
    reader: Callable[..., object]
    name: str
    description: str | None
    mime_type: str
    target: Target
    ready_required: bool = True
    icons: list[dict[str, object]] | None = None
    cache: Cache | None = None  # for reads and its resources/list entry
    meta: dict[str, object] | None = None  # its _meta on listings and reads (an MCP App's "ui", plexor.apps)


@dataclass
class TemplateSpec:
    uri_template: str
    plugin: str
    reader: Callable[..., object]
    name: str
    description: str | None
    mime_type: str
    target: Target
    matcher: UriTemplate | TemplateMatcher
    complete: dict[str, Target] = field(default_factory=dict)
    ready_required: bool = True
    icons: list[dict[str, object]] | None = None
    cache: Cache | None = None  # for reads of matching URIs and its templates/list entry


@dataclass
class PromptSpec:
    name: str
    plugin: str
    func: Callable[..., object]
    signature: Signature
    description: str
    target: Target
    icons: list[dict[str, object]] | None = None
    withdrawn: bool = False  # PluginHandle.offer(name, False)


def parse_template(uri_template: str) -> UriTemplate:
    from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

    try:
        return UriTemplate.parse(uri_template)
    except InvalidUriTemplate as exc:
        raise PluginError(f"invalid URI template {uri_template!r}: {exc}", "See RFC 6570 for the syntax.") from exc


class TemplateMatcher:
    """Parses its template on the first match (a kernel that only lists never imports the SDK)."""

    def __init__(self, uri_template: str) -> None:
        self.uri_template = uri_template
        self._parsed: UriTemplate | None = None

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        if self._parsed is None:
            self._parsed = parse_template(self.uri_template)
        return self._parsed.match(uri)
