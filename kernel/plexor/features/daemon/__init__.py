"""The shared local daemon and ``plexor connect``, the ``daemon`` built-in plugin (:mod:`plexor.features.daemon.plugin`).

``plexor serve --transport http --daemon`` starts one background server per data directory and plugin set
(:mod:`plexor.features.daemon.process`: its registry, liveness and stopping); ``plexor connect``
(:mod:`plexor.features.daemon.command`) is what MCP clients launch instead of ``plexor serve``: a stdio MCP
server (:mod:`plexor.features.daemon.relay`) relaying every request, tasks included, to that daemon through the
SDK's client (:mod:`plexor.features.daemon.upstream`), and passing questions of a call on
(:mod:`plexor.features.daemon.asking`). The two are one feature because neither is any use without the other.

The package imports none of its modules.
"""
