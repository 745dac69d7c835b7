"""Putting Plexor into an MCP client: ``plexor install``/``plexor uninstall <client>`` write the client's
configuration (:mod:`plexor.features.install.clients`) and ``plexor bundle`` builds the one-click MCP Bundle
for Claude Desktop (:mod:`plexor.features.install.bundle`). Served by the ``install`` built-in plugin
(:mod:`plexor.features.install.plugin`); ``PLEXOR_DISABLE=install`` removes the three commands.

The package imports none of its modules: the plugin names its commands by module path, and click loads them
when one runs.
"""
