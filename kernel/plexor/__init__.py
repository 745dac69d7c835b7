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

import pluggy

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
from plexor.events import Data, Guidance, Log, Progress, Result

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("plexor")
"""Decorator marking a plugin function as the implementation of a ``plexor_*`` hook."""

__all__ = [
    "ConfigError",
    "Context",
    "Data",
    "Guidance",
    "InvalidArgument",
    "Log",
    "NotFound",
    "NotReady",
    "PlexorError",
    "PluginError",
    "Progress",
    "Result",
    "StorageError",
    "__version__",
    "hookimpl",
]
