"""The types of what the registration hooks receive, as protocols.

Plugins annotate their hook implementations with these
(``register: plexor.ToolRegistrar``); the kernel's registrars satisfy them.
They describe the boundary only, so the kernel's classes behind them may
change without breaking a plugin's type checking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, overload

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.apps import ResourceCsp, ResourcePermissions

    from plexor.hints import Cache

__all__ = ["ModelRegistrar", "PromptRegistrar", "ResourceRegistrar", "TemplateRegistrar", "ToolRegistrar"]

F = TypeVar("F", bound=Callable[..., object])
# An icon: a data:image/ or https: URI, or an MCP Icon dict; or a list of them (see plexor.hints).
Icons = str | Mapping[str, object] | Sequence[str | Mapping[str, object]] | None


class ToolRegistrar(Protocol):
    """``register`` of ``plexor_register_tools``: ``register(func, name=None, ...)`` returns ``func``."""

    namespace: str

    def __call__(
        self,
        func: F,
        name: str | None = None,
        *,
        description: str | None = None,
        title: str | None = None,
        annotations: Mapping[str, object] | None = None,
        output_schema: Mapping[str, object] | None = None,
        ready_required: bool = True,
        blocking: bool | None = None,
        meta: Mapping[str, object] | None = None,
        input_schema: Mapping[str, object] | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        task: str = "forbidden",
        detach: str = "start",
        icons: Icons = None,
        cache: Cache | None = None,
        ui: str | None = None,
        visibility: Sequence[str] = ("model", "app"),
    ) -> F: ...


class ResourceRegistrar(Protocol):
    """``register`` of ``plexor_register_resources``: fixed URIs, and listers of dynamic ones."""

    def __call__(
        self,
        uri: str,
        reader: F,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str = "application/json",
        ready_required: bool = True,
        blocking: bool | None = None,
        icons: Icons = None,
        cache: Cache | None = None,
    ) -> F: ...

    def lister(self, func: F, *, blocking: bool | None = None, cache: Cache | None = None) -> F: ...

    def app(
        self,
        uri: str,
        reader: F,
        *,
        name: str | None = None,
        description: str | None = None,
        csp: Mapping[str, object] | ResourceCsp | None = None,
        permissions: Mapping[str, object] | ResourcePermissions | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        blocking: bool | None = None,
        cache: Cache | None = None,
    ) -> F: ...


class TemplateRegistrar(Protocol):
    """``register`` of ``plexor_register_resource_templates`` (RFC 6570 templates)."""

    def __call__(
        self,
        uri_template: str,
        reader: F,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str = "application/json",
        complete: Mapping[str, Callable[..., object]] | None = None,
        ready_required: bool = True,
        blocking: bool | None = None,
        icons: Icons = None,
        cache: Cache | None = None,
    ) -> F: ...


class PromptRegistrar(Protocol):
    """``register`` of ``plexor_register_prompts``."""

    def __call__(
        self, func: F, name: str | None = None, *, description: str | None = None, blocking: bool | None = None,
        icons: Icons = None,
    ) -> F: ...


class ModelRegistrar(Protocol):
    """``register`` of ``plexor_register_models``: peewee models and numbered migrations."""

    def __call__(self, *models: type) -> None: ...

    @overload
    def migration(self, version: int, func: F) -> F: ...

    @overload
    def migration(self, version: int, func: None = None) -> Callable[[F], F]: ...
