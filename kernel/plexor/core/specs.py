"""What the kernel keeps for each registered tool, resource, template and prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from plexor.core.dispatch import Target
from plexor.schema import analyse, schema_hash
from plexor.signature import Signature

__all__ = ["PromptSpec", "ResourceSpec", "TemplateSpec", "ToolSpec"]


@dataclass
class ToolSpec:
    name: str
    namespace: str
    method: str
    plugin: str
    func: Callable[..., Any]
    description: str
    title: str | None
    annotations: dict[str, Any]
    target: Target
    ready_required: bool
    meta: dict[str, Any] = field(default_factory=dict)
    declared_output_schema: dict[str, Any] | None = None
    _signature: Signature | None = None
    _schema_hash: str | None = None
    output_validator: Any = None
    declared_input_schema: dict[str, Any] | None = None
    scopes: tuple[str, ...] | None = None  # OAuth scopes a caller needs; None: derived (plexor.auth.scopes)
    task: str = "forbidden"  # task execution (plexor.tasks): "forbidden", "optional" or "required"
    detach: str = "start"  # when a task call becomes a task: "start", or "manual" (at ctx.detach())
    icons: list[dict[str, Any]] | None = None  # MCP Icon dicts (plexor.hints); None: the plugin's PLEXOR_ICON
    cache: Any = None  # plexor.hints.Cache for its tools/list entry; None: no hint
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
    reader: Callable[..., Any]
    name: str
    description: str | None
    mime_type: str
    target: Target
    ready_required: bool = True
    icons: list[dict[str, Any]] | None = None
    cache: Any = None  # plexor.hints.Cache for reads and its resources/list entry
    meta: dict[str, Any] | None = None  # its _meta on listings and reads (an MCP App's "ui", plexor.apps)


@dataclass
class TemplateSpec:
    uri_template: str
    plugin: str
    reader: Callable[..., Any]
    name: str
    description: str | None
    mime_type: str
    target: Target
    matcher: Any
    complete: dict[str, Target] = field(default_factory=dict)
    ready_required: bool = True
    icons: list[dict[str, Any]] | None = None
    cache: Any = None  # plexor.hints.Cache for reads of matching URIs and its templates/list entry


@dataclass
class PromptSpec:
    name: str
    plugin: str
    func: Callable[..., Any]
    signature: Signature
    description: str
    target: Target
    icons: list[dict[str, Any]] | None = None
    withdrawn: bool = False  # PluginHandle.offer(name, False)
