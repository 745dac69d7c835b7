"""The server's features, shipped with the kernel as built-in plugins of the server-extension hooks
(:mod:`plexor.extending`): each module here is a plugin module, loaded and listed like any other
(``plexor plugins``) and turned off with ``PLEXOR_DISABLE``.

- :mod:`plexor.features.tasks`: long-running calls as MCP tasks (the machinery: :mod:`plexor.tasks`);
- :mod:`plexor.features.auth`: OAuth, scopes, tool profiles and audit (:mod:`plexor.auth`);
- :mod:`plexor.features.telemetry`: OpenTelemetry and ``/metrics`` (:mod:`plexor.telemetry`);
- :mod:`plexor.features.bus`: notifications and event streams shared between processes (:mod:`plexor.state`).

These modules import only ``plexor`` and the standard library when loaded, as every plugin must;
the machinery they switch on is imported when a server is built.
"""
