"""The ``install`` built-in plugin: ``plexor install``, ``plexor uninstall`` and ``plexor bundle``.

Each puts Plexor into an MCP client, so they come and go together: ``PLEXOR_DISABLE=install`` removes
all three (invoked, each says which variable removed it), for a machine whose client configuration is
managed elsewhere. The commands' modules are imported only when one of them runs, or when
``plexor --help`` is rendered (:func:`plexor.extending.plexor_cli_commands`).
"""

from __future__ import annotations

from plexor.hookspecs import hookimpl


@hookimpl
def plexor_cli_commands() -> dict[str, str]:
    return {"install": "plexor.features.install.clients:install_cmd",
            "uninstall": "plexor.features.install.clients:uninstall_cmd",
            "bundle": "plexor.features.install.bundle:bundle_cmd"}
