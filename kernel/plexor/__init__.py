"""Plexor: an MCP server built as a microkernel; everything usable comes from plugins.

Plugin modules import from here only (plus the standard library) at load time::

    from plexor import hookimpl, Context, NotFound

    @hookimpl
    def plexor_register_tools(register, settings):
        register(hello)

    def hello(name: str) -> dict:
        \"\"\"Greet someone by name.\"\"\"
        return {"greeting": f"Hello, {name}!"}

This module stays cheap to import: the MCP SDK, peewee and structlog are
loaded by the kernel only when it needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plexor.asking import AskError, Elicit, ListRoots, Sample
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
from plexor.params import Header

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

    hookimpl: pluggy.HookimplMarker
    """Decorator marking a plugin function as the implementation of a ``plexor_*`` hook."""


def __getattr__(name: str) -> Any:
    # ``hookimpl`` is made on first use: pluggy (and importlib.metadata behind it)
    # is not needed to answer an MCP handshake, so `import plexor` stays cheap.
    if name == "hookimpl":
        import pluggy

        marker = pluggy.HookimplMarker("plexor")
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module 'plexor' has no attribute {name!r}")

__all__ = [
    "AskError",
    "ConfigError",
    "Context",
    "Data",
    "Elicit",
    "Guidance",
    "Header",
    "InvalidArgument",
    "ListRoots",
    "Log",
    "NotFound",
    "NotReady",
    "PlexorError",
    "PluginError",
    "Progress",
    "Result",
    "Sample",
    "StorageError",
    "__version__",
    "audio",
    "embedded_resource",
    "hookimpl",
    "image",
]
