"""Plexor: an MCP server built as a microkernel; everything usable comes from plugins.

This package's namespace is the whole plugin API: plugins import from
``plexor`` only (plus the standard library) at load time, never from its
modules. A plugin sees the kernel through one object, its
:class:`PluginHandle`::

    from plexor import Context, PluginHandle, Settings, ToolRegistrar, hookimpl

    @hookimpl
    def plexor_register_tools(register: ToolRegistrar, settings: Settings) -> None:
        register(hello)

    @hookimpl
    def plexor_startup(plugin: PluginHandle) -> None:
        plugin.log.info("hello_ready", data_dir=str(plugin.data_dir))

    def hello(name: str) -> dict[str, str]:
        \"\"\"Greet someone by name.\"\"\"
        return {"greeting": f"Hello, {name}!"}

This module stays cheap to import: every name is loaded on first use
(``plexor --help`` imports none of them), and the MCP SDK, peewee and
structlog are loaded by the kernel only when it needs them.
"""

from __future__ import annotations

from plexor.version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (its import costs `plexor --help` time)
if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    from plexor.asking import AskError, Elicit, ElicitURL, ListRoots, Sample
    from plexor.context import Context
    from plexor.errors import (
        ConfigError,
        InvalidArgument,
        NotFound,
        NotReady,
        PlexorError,
        PluginError,
        StorageError,
    )
    from plexor.events import Data, Guidance, Log, Progress, Result, audio, embedded_resource, image
    from plexor.features.telemetry import span
    from plexor.handle import PluginHandle
    from plexor.hints import Cache
    from plexor.params import Header
    from plexor.protocols import (
        ModelRegistrar,
        PromptRegistrar,
        ResourceRegistrar,
        TemplateRegistrar,
        ToolRegistrar,
    )
    from plexor.schema import JSONObject
    from plexor.settings import ConfigSpec, Settings

    hookimpl: pluggy.HookimplMarker
    """Decorator marking a plugin function as the implementation of a ``plexor_*`` hook."""


def __getattr__(name: str) -> object:
    # ``hookimpl`` (plexor.hookspecs) is loaded on first use: pluggy (and importlib.metadata behind it)
    # is not needed to answer an MCP handshake, so `import plexor` stays cheap.
    if name == "hookimpl":
        from plexor.hookspecs import hookimpl

        globals()["hookimpl"] = hookimpl
        return hookimpl
    if name in _LAZY:  # loaded on first use: `plexor --help` needs none of them
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'plexor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_LAZY = {
    "AskError": "plexor.asking", "Elicit": "plexor.asking", "ElicitURL": "plexor.asking", "ListRoots": "plexor.asking", "Sample": "plexor.asking",
    "Header": "plexor.params", "JSONObject": "plexor.schema", "ConfigSpec": "plexor.settings", "Settings": "plexor.settings",
    "span": "plexor.features.telemetry", "Context": "plexor.context",
    **dict.fromkeys(("ConfigError", "InvalidArgument", "NotFound", "NotReady", "PlexorError", "PluginError",
                     "StorageError"), "plexor.errors"),
    **dict.fromkeys(("Data", "Guidance", "Log", "Progress", "Result", "audio", "embedded_resource", "image"),
                    "plexor.events"),
    "PluginHandle": "plexor.handle", "Cache": "plexor.hints",
    **dict.fromkeys(("ModelRegistrar", "PromptRegistrar", "ResourceRegistrar", "TemplateRegistrar",
                     "ToolRegistrar"), "plexor.protocols"),
}

__all__ = [
    "AskError",
    "Cache",
    "ConfigError",
    "ConfigSpec",
    "Context",
    "Data",
    "Elicit",
    "ElicitURL",
    "Guidance",
    "Header",
    "InvalidArgument",
    "JSONObject",
    "ListRoots",
    "Log",
    "ModelRegistrar",
    "NotFound",
    "NotReady",
    "PlexorError",
    "PluginError",
    "PluginHandle",
    "Progress",
    "PromptRegistrar",
    "ResourceRegistrar",
    "Result",
    "Sample",
    "Settings",
    "StorageError",
    "TemplateRegistrar",
    "ToolRegistrar",
    "__version__",
    "audio",
    "embedded_resource",
    "hookimpl",
    "image",
    "span",
]
