"""What plugins register, and the registrar callables they register it with.

Each plugin registers into a staging :class:`Registry` of its own; the kernel
merges it into the shared one only when every hook of that plugin succeeded
and nothing clashes, so a failing plugin leaves no half-registered tools.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plexor.apps import register_app, tool_meta
from plexor.core.dispatch import Target, target
from plexor.core.specs import PromptSpec, ResourceSpec, TemplateMatcher, TemplateSpec, ToolSpec, parse_template
from plexor.errors import PluginError
from plexor.hints import Cache, check_cache, icons_of
from plexor.limits import declared_timeout
from plexor.protocols import F, Icons
from plexor.schema import analyse, parse_docstring

if TYPE_CHECKING:  # pragma: no cover
    from peewee import Database, Model

__all__ = ["ModelRegistrar", "PromptRegistrar", "Registry", "ResourceRegistrar", "TemplateRegistrar", "ToolRegistrar"]

_METHOD = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # an RFC 6749 scope-token
ANNOTATION_KEYS = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


@dataclass
class Registry:
    """Everything registered, by plugin; the kernel keeps one merged instance."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)
    resources: dict[str, ResourceSpec] = field(default_factory=dict)
    listers: list[tuple[str, Target]] = field(default_factory=list)
    templates: dict[str, TemplateSpec] = field(default_factory=dict)
    prompts: dict[str, PromptSpec] = field(default_factory=dict)
    schemes: dict[str, str] = field(default_factory=dict)  # uri scheme -> plugin
    namespaces: dict[str, str] = field(default_factory=dict)  # tool namespace -> plugin
    models: list[type[Model]] = field(default_factory=list)
    migrations: dict[int, Callable[[Database], object]] = field(default_factory=dict)
    lister_cache: dict[str, list[Cache | None]] = field(default_factory=dict)  # plugin -> its listers' Cache hints (or None)

    def clashes(self, other: Registry) -> list[tuple[str, str, str]]:
        """``(what, name, owner_plugin)`` for every name ``other`` claims that this one already has."""
        found: list[tuple[str, str, str]] = []
        for name in other.tools:
            if name in self.tools:
                found.append(("tool", name, self.tools[name].plugin))
        for scheme, owner in other.schemes.items():
            if scheme in self.schemes and self.schemes[scheme] != owner:
                found.append(("URI scheme", scheme, self.schemes[scheme]))
        found += [("resource", uri, self.resources[uri].plugin) for uri in other.resources if uri in self.resources]
        for name in other.prompts:
            if name in self.prompts:
                found.append(("prompt", name, self.prompts[name].plugin))
        tables = {m._meta.table_name: m for m in self.models}
        for model in other.models:
            if model._meta.table_name in tables:
                found.append(("table", model._meta.table_name, getattr(tables[model._meta.table_name], "_plexor_plugin", "?")))
        return found

    def merge(self, other: Registry) -> None:
        self.tools.update(other.tools)
        self.resources.update(other.resources)
        self.listers.extend(other.listers)
        self.templates.update(other.templates)
        self.prompts.update(other.prompts)
        self.schemes.update(other.schemes)
        self.namespaces.update(other.namespaces)
        self.models.extend(other.models)
        self.lister_cache.update(other.lister_cache)

    def remove_plugin(self, plugin: str) -> None:
        self.tools = {k: v for k, v in self.tools.items() if v.plugin != plugin}
        self.resources = {k: v for k, v in self.resources.items() if v.plugin != plugin}
        self.listers = [(p, f) for p, f in self.listers if p != plugin]
        self.templates = {k: v for k, v in self.templates.items() if v.plugin != plugin}
        self.prompts = {k: v for k, v in self.prompts.items() if v.plugin != plugin}
        self.schemes = {k: v for k, v in self.schemes.items() if v != plugin}
        self.namespaces = {k: v for k, v in self.namespaces.items() if v != plugin}
        self.models = [m for m in self.models if getattr(m, "_plexor_plugin", None) != plugin]
        self.lister_cache.pop(plugin, None)


def _check_parameters(func: Callable[..., object], full: str) -> None:
    """The cheap part of signature checking, done at registration."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError) as exc:
        raise PluginError(f"tool {full!r}: cannot read the signature of {func!r}: {exc}", "Register a plain function.") from exc
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise PluginError(
                f"tool {full!r} takes *{param.name}; tools need named, typed parameters",
                "Replace *args/**kwargs with explicit parameters.",
            )


class _Registrar:
    def __init__(self, registry: Registry, plugin: str, namespace: str = "", separator: str = "_") -> None:
        self._registry = registry
        self._plugin = plugin
        self.namespace = namespace  # tools' and prompts' names are namespace + separator + method
        self.separator = separator

    def _claim_scheme(self, uri: str) -> None:
        m = _SCHEME.match(uri)
        if not m:
            raise PluginError(
                f"plugin {self._plugin!r} registered {uri!r}, which has no URI scheme",
                "Use a URI such as 'myplugin://thing/{id}'.",
            )
        if m.group(1).lower() != "ui":  # every plugin's MCP App lives under ui://: whole URIs may not clash
            self._registry.schemes[m.group(1).lower()] = self._plugin


class ToolRegistrar(_Registrar):
    """``register(func, name=None, ...)`` as passed to ``plexor_register_tools``."""

    def __call__(
        self, func: F, name: str | None = None, *, description: str | None = None, title: str | None = None,
        annotations: Mapping[str, object] | None = None, output_schema: dict[str, object] | None = None,
        ready_required: bool = True, blocking: bool | None = None, meta: Mapping[str, object] | None = None,
        input_schema: dict[str, object] | None = None, scopes: list[str] | tuple[str, ...] | None = None,
        task: str = "forbidden", detach: str = "start", icons: Icons = None, cache: Cache | None = None,
        ui: str | None = None, visibility: str | Sequence[str] = ("model", "app"), timeout: float | None = None,
    ) -> F:
        """Register ``func`` as the tool ``<namespace>_<name>`` (``name`` defaults to the function's).

        :param annotations: MCP tool hints: readOnlyHint, destructiveHint, idempotentHint, openWorldHint.
        :param output_schema: JSON schema of the structured result; derived from the return type otherwise.
        :param ready_required: when False the tool also answers while the plugin is still warming up.
        :param blocking: run a sync function in a worker thread (default True for sync functions).
        :param input_schema: a hand-written JSON Schema for the arguments, instead of the one derived
            from the signature; it is enforced with jsonschema and the function may take ``**kwargs``.
        :param scopes: OAuth scopes a caller's token needs (all of them); default ``<plugin>:read`` for a
            tool annotated ``readOnlyHint``, ``<plugin>:write`` otherwise; ``[]``: any valid token.
        :param icons: the tool's icons (see :mod:`plexor.hints`); default: the plugin's ``PLEXOR_ICON``.
        :param cache: a :class:`plexor.Cache` for its entry in ``tools/list``.
        :param task: whether a client may run it as a task (``tasks/*``): "forbidden", "optional", "required".
        :param detach: "start" (a task from its first line) or "manual" (a plain call until ``ctx.detach()``).
        :param ui: the ``ui://`` URI of an MCP App (``register.app``) that shows this tool's results.
        :param visibility: ``["model", "app"]`` (default), ``["model"]``, or ``["app"]`` (see :mod:`plexor.apps`).
        :param timeout: seconds a call or task of it may run when longer than the server's ``--request-timeout``.
        """
        method, full = self._tool_name(func, name)
        ann = _checked_options(full, func, annotations, scopes, task, detach, input_schema)
        meta = tool_meta(full, meta, ui, visibility)
        self._registry.tools[full] = ToolSpec(
            name=full, namespace=self.namespace, method=method, plugin=self._plugin, func=func,
            description=description or parse_docstring(inspect.getdoc(func))[0] or f"{full} (no description)",
            title=title, annotations=ann, target=target(func, blocking), ready_required=ready_required,
            meta=meta, declared_output_schema=output_schema, declared_input_schema=input_schema,
            scopes=None if scopes is None else tuple(scopes), task=task, detach=detach,
            icons=icons_of(icons, f"tool {full!r}"), cache=check_cache(cache, f"tool {full!r}"),
            timeout=declared_timeout(timeout, f"tool {full!r}"),
        )
        self._registry.namespaces[self.namespace] = self._plugin
        return func

    def _tool_name(self, func: Callable[..., object], name: str | None) -> tuple[str, str]:
        """The tool's method and full name (``<namespace><separator><method>``), checked, and not registered yet."""
        method: str = name or getattr(func, "__name__", None) or ""
        prefix = self.namespace + self.separator
        if method.startswith(prefix):
            method = method[len(prefix) :]
        full = f"{self.namespace}{self.separator}{method}"
        if not _METHOD.match(method) or not _METHOD.match(full):
            raise PluginError(f"plugin {self._plugin!r} registered a tool named {full!r}",
                              "Tool names are letters, digits, '_' and '-' only, 64 characters at most.")
        if full in self._registry.tools:
            raise PluginError(f"plugin {self._plugin!r} registered the tool {full!r} twice", "Register each name once.")
        return method, full


def _checked_options(full: str, func: Callable[..., object], annotations: Mapping[str, object] | None,
                     scopes: list[str] | tuple[str, ...] | None, task: str, detach: str,
                     input_schema: Mapping[str, object] | None) -> dict[str, object]:
    """A tool's declared annotations, scopes, task support and parameters checked; its annotations as a new dict."""
    ann = dict(annotations or {})
    bad = set(ann) - ANNOTATION_KEYS
    if bad:
        raise PluginError(f"tool {full!r} has unknown annotations {sorted(bad)}", f"Use only {sorted(ANNOTATION_KEYS)}.")
    if scopes is not None and (isinstance(scopes, str) or not all(isinstance(x, str) and _SCOPE.match(x) for x in scopes)):
        raise PluginError(f"tool {full!r} declares scopes={scopes!r}",
                          "Pass a list of scope names such as ['arbor:write'] (no spaces, quotes or backslashes).")
    if task not in ("forbidden", "optional", "required") or detach not in ("start", "manual"):
        raise PluginError(f"tool {full!r} declares task={task!r}, detach={detach!r}",
                          "Use task='forbidden', 'optional' or 'required', and detach='start' or 'manual'.")
    if input_schema is None:
        _check_parameters(func, full)
    return ann


class ResourceRegistrar(_Registrar):
    """``register(uri, reader, ...)`` and ``register.lister(func)`` for ``plexor_register_resources``."""

    def __call__(
        self, uri: str, reader: F, *, name: str | None = None, description: str | None = None,
        mime_type: str = "application/json", ready_required: bool = True, blocking: bool | None = None,
        icons: Icons = None, cache: Cache | None = None,
    ) -> F:
        """Register a fixed resource; ``reader()`` returns a dict/list (JSON), str (text) or bytes (blob).

        :param blocking: ``False`` runs a quick sync reader on the event loop instead of a worker thread.
        :param icons: its icons (see :mod:`plexor.hints`); default: the plugin's ``PLEXOR_ICON``.
        :param cache: a :class:`plexor.Cache`: how long a read stays fresh (``resources/read`` hint).
        """
        self._claim_scheme(uri)
        if uri in self._registry.resources:
            raise PluginError(f"plugin {self._plugin!r} registered the resource {uri!r} twice", "Register each once.")
        self._registry.resources[uri] = ResourceSpec(
            uri, self._plugin, reader, name or uri, description or inspect.getdoc(reader), mime_type,
            target(reader, blocking), ready_required, icons_of(icons, f"resource {uri!r}"),
            check_cache(cache, f"resource {uri!r}"),
        )
        return reader

    # register.app(uri, reader, ...): an MCP App, one HTML page at a ui:// uri (plexor.apps.register_app documents it)
    app = register_app

    def lister(self, func: F, *, blocking: bool | None = None, cache: Cache | None = None) -> F:
        """Register a function returning the dynamic resources that exist now.

        It returns an iterable of dicts ``{"uri", "name", "description"?, "mime_type"?}``
        (sync or async); each URI must be readable through one of the plugin's templates.

        :param cache: a :class:`plexor.Cache`: how long what it lists stays right (``resources/list``
            hint); call ``plugin.resource_list_changed()`` when it changes sooner.
        """
        self._registry.lister_cache.setdefault(self._plugin, []).append(check_cache(cache, "resource lister"))
        self._registry.listers.append((self._plugin, target(func, blocking)))
        return func


class TemplateRegistrar(_Registrar):
    """``register(uri_template, reader, ...)`` for ``plexor_register_resource_templates``."""

    def __call__(
        self, uri_template: str, reader: F, *, name: str | None = None, description: str | None = None,
        mime_type: str = "application/json", complete: Mapping[str, Callable[..., object]] | None = None,
        ready_required: bool = True, blocking: bool | None = None, icons: Icons = None, cache: Cache | None = None,
    ) -> F:
        """Register an RFC 6570 template; ``reader(**variables)`` reads one matching URI.

        :param complete: per variable, a function ``(prefix) -> list[str]`` for completion/complete;
            it may also take a parameter annotated ``Context`` (to reach the plugin database).
        :param blocking: ``False`` runs quick sync readers and completion functions on the event loop.
        :param icons: its icons (see :mod:`plexor.hints`); default: the plugin's ``PLEXOR_ICON``.
        :param cache: a :class:`plexor.Cache`: how long a read of a matching URI stays fresh.
        """
        self._claim_scheme(uri_template)
        matcher = TemplateMatcher(uri_template) if DEFER_TEMPLATES else parse_template(uri_template)
        if uri_template in self._registry.templates:
            raise PluginError(f"plugin {self._plugin!r} registered {uri_template!r} twice", "Register each once.")
        self._registry.templates[uri_template] = TemplateSpec(
            uri_template, self._plugin, reader, name or uri_template, description or inspect.getdoc(reader),
            mime_type, target(reader, blocking), matcher,
            {arg: target(func, blocking) for arg, func in (complete or {}).items()}, ready_required,
            icons_of(icons, f"template {uri_template!r}"), check_cache(cache, f"template {uri_template!r}"),
        )
        return reader


class PromptRegistrar(_Registrar):
    """``register(func, name=None, description=None)`` for ``plexor_register_prompts``."""

    def __call__(
        self, func: F, name: str | None = None, *, description: str | None = None,
        blocking: bool | None = None, icons: Icons = None,
    ) -> F:
        """Register a prompt; its parameters are the prompt's arguments; it returns str or messages."""
        method = name or func.__name__
        prefix = self.namespace + self.separator
        full = method if method.startswith(prefix) else f"{prefix}{method}"
        if full in self._registry.prompts:
            raise PluginError(f"plugin {self._plugin!r} registered the prompt {full!r} twice", "Register each once.")
        sig = analyse(func, strict=False)  # MCP sends prompt arguments as strings
        self._registry.prompts[full] = PromptSpec(
            full, self._plugin, func, sig, description or sig.description or full, target(func, blocking),
            icons_of(icons, f"prompt {full!r}"),
        )
        return func


class ModelRegistrar(_Registrar):
    """``register(*models)`` and ``register.migration(version, func)`` for ``plexor_register_models``."""

    def __call__(self, *models: type) -> None:
        """Register peewee model classes; the kernel binds them to this plugin's database."""
        try:
            import peewee
        except ImportError as exc:  # pragma: no cover - peewee is a kernel dependency
            raise PluginError("peewee is not installed", "pip install peewee") from exc
        for model in models:
            if not (isinstance(model, type) and issubclass(model, peewee.Model)):
                raise PluginError(
                    f"plugin {self._plugin!r} registered {model!r}, which is not a peewee Model class",
                    "Pass subclasses of peewee.Model.",
                )
            setattr(model, "_plexor_plugin", self._plugin)  # noqa: B010 - peewee models have no slot for it
            self._registry.models.append(model)

    def migration(self, version: int, func: Callable[[Database], object] | None = None) -> Callable[..., object]:
        """Declare schema migration ``version`` (1, 2, ...); ``func(database)`` runs it once, in order.

        Without any migration the kernel creates the registered tables as version 1.
        Usable as a decorator: ``@register.migration(2)``.
        """
        if not isinstance(version, int) or version < 1:
            raise PluginError(f"migration version {version!r} must be a positive integer", "Number them 1, 2, 3...")

        def add(f: Callable[[Database], object]) -> Callable[[Database], object]:
            if version in self._registry.migrations:
                raise PluginError(f"migration {version} of {self._plugin!r} is declared twice", "Number them uniquely.")
            self._registry.migrations[version] = f
            return f

        return add(func) if func is not None else add


DEFER_TEMPLATES = False  # the CLI's listings set it: parsing imports the MCP SDK, which they do not need
