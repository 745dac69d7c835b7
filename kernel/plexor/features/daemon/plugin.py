"""The ``daemon`` built-in plugin: the shared background server and ``plexor connect``, which relays to it.

It adds the ``plexor connect`` command (:func:`plexor.extending.plexor_cli_commands`); ``plexor serve --daemon``
asks it too. ``PLEXOR_DISABLE=daemon`` removes both: every client then runs a ``plexor serve`` of its own.
"""

from __future__ import annotations

from plexor.hookspecs import hookimpl


@hookimpl
def plexor_cli_commands() -> dict[str, str]:
    return {"connect": "plexor.features.daemon.command:connect_cmd"}
