"""Markers for tool parameters, used inside ``typing.Annotated``.

Standard library only: plugin modules import these at load time.
"""

from __future__ import annotations

import re

from plexor.errors import PluginError

__all__ = ["Header"]

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*\Z")


class Header:
    """Mirror a tool argument into the ``Mcp-Param-<name>`` HTTP header (SEP-2243, 2026-07-28).

    ``region: Annotated[str, Header("Region")]`` adds ``"x-mcp-header": "Region"`` to the
    parameter's input schema. 2026-07-28 clients then send the argument's value in that header
    too, so proxies and load balancers can route on it without reading the body; the server
    refuses a request whose header and body disagree. Only for string, number, integer or
    boolean parameters.
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise PluginError(f"Header name {name!r} is not a valid HTTP header suffix",
                              "Use letters, digits and dashes, starting with a letter or digit, e.g. Header(\"Region\").")
        self.name = name

    def __repr__(self) -> str:
        return f"Header({self.name!r})"
