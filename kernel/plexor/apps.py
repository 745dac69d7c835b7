"""MCP Apps (``io.modelcontextprotocol/ui``): interactive views that plugins attach to their tools.

A plugin registers a ``ui://`` resource holding one HTML document (``register.app`` in
``plexor_register_resources``) and links tools to it (``register(func, ui="ui://...")``). The
kernel then:

- serves the resource as ``text/html;profile=mcp-app`` with its ``_meta.ui`` (CSP domains,
  iframe permissions, border preference) on the listing and on every read;
- stamps ``_meta.ui = {"resourceUri", "visibility"}`` on each linked tool in ``tools/list``;
- advertises the extension in the server's capabilities only while some plugin offers an app;
- lists a tool whose visibility is ``["app"]`` only to clients that negotiated the extension (a
  host hides it from its model and lets the view call it); other clients never see it listed.

Everything else is unchanged: a client without the extension gets exactly the same text and
structured results. The wire names are the SDK's (:mod:`mcp.server.apps`); this module holds
them as constants so that loading plugins does not import the SDK, and a test checks they agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from plexor.errors import PluginError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from mcp.server.apps import ResourceCsp, ResourcePermissions
    from mcp_types import ServerCapabilities

    from plexor.hints import Cache

F = TypeVar("F", bound=Callable[..., object])

__all__ = ["APP_MIME_TYPE", "EXTENSION_ID", "client_supports_apps", "advertise_apps", "register_app", "resource_ui",
           "tool_meta", "tool_ui"]

EXTENSION_ID = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
VISIBILITIES = ("model", "app")
# _meta.ui.csp keys (lists of origins) and _meta.ui.permissions keys (empty objects), as the SDK's
# ResourceCsp / ResourcePermissions spell them on the wire.
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
PERMISSION_KEYS = ("camera", "microphone", "geolocation", "clipboardWrite")
_ORIGIN = re.compile(r"^(https?|wss?)://[A-Za-z0-9.*-]+(:[0-9]{1,5})?$")


def require_ui_uri(uri: str, what: str) -> None:
    if not isinstance(uri, str) or not uri.startswith("ui://") or len(uri) <= len("ui://"):
        raise PluginError(f"{what} names {uri!r}, which is not a ui:// URI",
                          "An app lives at a ui:// URI such as 'ui://myplugin/view.html'.")


def _wire(value: object, what: str) -> dict[str, object]:
    """A dict as given, or the SDK's pydantic model (``ResourceCsp``, ``ResourcePermissions``) dumped for the wire."""
    if isinstance(value, Mapping):
        return dict(value)
    from pydantic import BaseModel

    if not isinstance(value, BaseModel):
        raise PluginError(f"{what} is {value!r}", "Pass a dict (or the SDK's mcp.server.apps model).")
    return value.model_dump(by_alias=True, exclude_none=True)


def _csp(value: object, uri: str) -> dict[str, list[str]]:
    csp = _wire(value, f"the csp of app {uri!r}")
    out: dict[str, list[str]] = {}
    for key, origins in csp.items():
        if key not in CSP_KEYS:
            raise PluginError(f"app {uri!r} declares csp key {key!r}", f"Use only {list(CSP_KEYS)}.")
        if isinstance(origins, str) or not isinstance(origins, Iterable) or not all(
                isinstance(o, str) and _ORIGIN.match(o) for o in origins):
            raise PluginError(f"app {uri!r} declares csp {key}={origins!r}",
                              "Give a list of origins such as ['https://api.example.com'] (no paths, no quotes).")
        out[key] = list(origins)
    return out


def _permissions(value: object, uri: str) -> dict[str, dict[str, object]]:
    perms = _wire(value, f"the permissions of app {uri!r}")
    bad = sorted(set(perms) - set(PERMISSION_KEYS))
    if bad:
        raise PluginError(f"app {uri!r} asks for permissions {bad}", f"Use only {list(PERMISSION_KEYS)}.")
    odd = sorted(k for k, v in perms.items() if v and not isinstance(v, Mapping))
    if odd:
        raise PluginError(f"app {uri!r} declares permissions {odd} as {[perms[k] for k in odd]!r}",
                          "Give each permission an empty object, e.g. {'clipboardWrite': {}}.")
    return {k: dict(v) if isinstance(v, Mapping) else {} for k, v in perms.items()}


def resource_ui(uri: str, *, csp: Mapping[str, object] | ResourceCsp | None = None,
                permissions: Mapping[str, object] | ResourcePermissions | None = None, domain: str | None = None,
                prefers_border: bool | None = None) -> dict[str, object]:
    """The ``_meta.ui`` of an app resource, checked; an empty ``csp`` means the view may reach no origin.

    :param csp: the origins the view may reach, ``{"connectDomains": [...], "resourceDomains": [...],
        "frameDomains": [...], "baseUriDomains": [...]}`` or the SDK's ``ResourceCsp``; default: none at all.
    :param permissions: iframe permissions, ``{"clipboardWrite": {}}`` (``camera``, ``microphone``,
        ``geolocation`` too) or the SDK's ``ResourcePermissions``; default: none.
    :param domain: a dedicated origin for the view, where the host supports one.
    :param prefers_border: whether the host should draw a border around the view.
    """
    require_ui_uri(uri, "an app resource")
    ui: dict[str, object] = {"csp": _csp(csp or {}, uri)}
    if permissions:
        ui["permissions"] = _permissions(permissions, uri)
    if domain is not None:
        if not isinstance(domain, str) or not domain:
            raise PluginError(f"app {uri!r} declares domain={domain!r}", "Leave domain out, or give the host's origin for it.")
        ui["domain"] = domain
    if prefers_border is not None:
        ui["prefersBorder"] = bool(prefers_border)
    return ui


def tool_ui(name: str, uri: str, visibility: str | Sequence[str]) -> dict[str, object]:
    """The ``_meta.ui`` of a tool linked to the app at ``uri``, checked."""
    require_ui_uri(uri, f"tool {name!r}")
    seen = [visibility] if isinstance(visibility, str) else list(visibility)
    if not seen or any(v not in VISIBILITIES for v in seen) or len(set(seen)) != len(seen):
        raise PluginError(f"tool {name!r} declares visibility={visibility!r}",
                          "Use ['model', 'app'] (the default), ['model'] or ['app'] (callable from the view only).")
    return {"resourceUri": uri, "visibility": seen}


def tool_meta(name: str, meta: Mapping[str, object] | None, ui: str | None,
              visibility: str | Sequence[str]) -> dict[str, object]:
    """A tool's ``_meta`` with its link to an app (``ui``) added; the ``ui`` key is the kernel's to write."""
    out = dict(meta or {})
    if "ui" in out:
        raise PluginError(f"tool {name!r} passes meta['ui']", "Pass ui='ui://...' and visibility= instead.")
    if ui is not None:
        out["ui"] = tool_ui(name, ui, visibility)
    return out


def app_only(meta: Mapping[str, object]) -> bool:
    ui = meta.get("ui")
    return isinstance(ui, Mapping) and list(ui.get("visibility") or ()) == ["app"]


def client_supports_apps(session: object) -> bool:
    """Whether the client behind ``session`` declared the extension with the app MIME type (either era)."""
    caps = getattr(session, "client_capabilities", None)
    extensions = getattr(caps, "extensions", None)
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    if not isinstance(settings, Mapping):
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list | tuple) and APP_MIME_TYPE in mime_types


class _Resource(Protocol):
    """A registered resource, as this module reads and stamps it (``plexor.core.specs.ResourceSpec``)."""

    mime_type: str
    meta: dict[str, object] | None


class _Tool(Protocol):
    """A registered tool, as this module reads it (``plexor.core.specs.ToolSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def plugin(self) -> str: ...

    @property
    def meta(self) -> Mapping[str, object]: ...


class _Registry(Protocol):
    """What is registered (``plexor.core.registry.Registry``)."""

    @property
    def resources(self) -> Mapping[str, _Resource]: ...

    @property
    def tools(self) -> Mapping[str, _Tool]: ...


class _Registrar(Protocol):
    """``register`` of ``plexor_register_resources`` (``plexor.core.registry.ResourceRegistrar``)."""

    @property
    def _registry(self) -> _Registry: ...

    def __call__(self, uri: str, reader: Callable[..., object], *, name: str | None = None,
                 description: str | None = None, mime_type: str = ..., ready_required: bool = True,
                 blocking: bool | None = None, cache: Cache | None = None) -> object: ...


def register_app(register: _Registrar, uri: str, reader: F, *, name: str | None = None, description: str | None = None,
                 csp: Mapping[str, object] | ResourceCsp | None = None,
                 permissions: Mapping[str, object] | ResourcePermissions | None = None, domain: str | None = None,
                 prefers_border: bool | None = None, blocking: bool | None = None,
                 cache: Cache | None = None) -> F:
    """``register.app(uri, reader, ...)`` of ``plexor_register_resources``: the page ``reader()`` returns,
    served as ``text/html;profile=mcp-app`` with ``_meta.ui`` on its listing and reads. It answers while
    the plugin warms up (a page is static). ``csp``, ``permissions``, ``domain`` and ``prefers_border``
    are :func:`resource_ui`'s; ``name``, ``description``, ``blocking`` and ``cache`` are ``register``'s.
    """
    ui = resource_ui(uri, csp=csp, permissions=permissions, domain=domain, prefers_border=prefers_border)
    register(uri, reader, name=name, description=description, mime_type=APP_MIME_TYPE, blocking=blocking,
             ready_required=False, cache=cache)
    register._registry.resources[uri].meta = {"ui": ui}
    return reader


def check_links(registry: _Registry, plugin: str, loaded: _Registry) -> None:
    """Refuse a tool of ``plugin`` linked to a ``ui://`` resource that neither it nor a loaded plugin registered."""
    apps = {uri for reg in (registry, loaded) for uri, spec in reg.resources.items() if spec.mime_type == APP_MIME_TYPE}
    for spec in registry.tools.values():
        ui = spec.meta.get("ui") if spec.plugin == plugin else None
        if isinstance(ui, Mapping) and ui.get("resourceUri") not in apps:
            raise PluginError(f"tool {spec.name!r} links to the app {ui.get('resourceUri')!r}, which is not registered",
                              "Register it in plexor_register_resources with register.app(uri, reader).")


def advertise_apps(capabilities: ServerCapabilities, resources: Iterable[_Resource]) -> None:
    """Advertise the extension in ``capabilities`` while some loaded plugin registers an app."""
    offered = any(spec.mime_type == APP_MIME_TYPE for spec in resources)
    extensions = dict(capabilities.extensions or {})
    if offered:
        extensions[EXTENSION_ID] = {}
    else:
        extensions.pop(EXTENSION_ID, None)
    capabilities.extensions = extensions or None
