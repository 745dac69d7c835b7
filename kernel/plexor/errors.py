"""Exceptions that carry guidance.

Every failure that reaches a client says what went wrong *and* what to do next.
Plugins raise these (or their own subclasses) from tools and resource readers;
the kernel turns them into ``isError`` tool results or JSON-RPC errors whose
text ends with the guidance.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ConfigError",
    "InvalidArgument",
    "NotFound",
    "NotReady",
    "PlexorError",
    "PluginError",
    "StorageError",
]


class PlexorError(Exception):
    """An error with advice attached.

    :param message: what went wrong, one sentence, naming the offending value.
    :param guidance: what the caller should do next (retry, pass another value, fix config).
    :param data: optional JSON-able details placed in the structured error payload.
    """

    code = "error"
    #: The exit code of a command that ends with this error (``plexor --help``, README "Exit codes"):
    #: 1 the operation failed or found nothing; 2 the input or the configuration must change.
    exit_code = 1

    def __init__(self, message: str, guidance: str | None = None, *, data: Mapping[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.guidance = guidance
        self.data: dict[str, object] = dict(data or {})

    def render(self) -> str:
        """The text a model or a person reads: the problem, then the advice."""
        if self.guidance:
            return f"{self.message}\n{self.guidance}"
        return self.message

    def payload(self) -> dict[str, object]:
        """A JSON object describing the error (placed in ``structuredContent``)."""
        out: dict[str, object] = {"type": self.code, "message": self.message}
        if self.guidance:
            out["guidance"] = self.guidance
        if self.data:
            out["details"] = self.data
        return out


class InvalidArgument(PlexorError):
    """An argument was missing, of the wrong type, or outside the allowed values."""

    code = "invalid_argument"
    exit_code = 2


class NotFound(PlexorError):
    """A tool, resource, tree, node, file or other named thing does not exist."""

    code = "not_found"


class NotReady(PlexorError):
    """The plugin is still starting or warming up; the caller should retry shortly."""

    code = "not_ready"


class StorageError(PlexorError):
    """The plugin's database could not be opened, read or written."""

    code = "storage_error"


class ConfigError(PlexorError):
    """A configuration value is invalid; the message names the key and where it came from."""

    code = "config_error"
    exit_code = 2


class PluginError(PlexorError):
    """A plugin could not be loaded or registered something invalid."""

    code = "plugin_error"
