"""The server's features, shipped with the kernel as built-in plugins of the server-extension hooks
(:mod:`plexor.extending`): each is a plugin, loaded and listed like any other (``plexor plugins``)
and turned off with ``PLEXOR_DISABLE``.

- ``tasks`` (:mod:`plexor.features.tasks.plugin`): long-running calls as MCP tasks;
- ``auth`` (:mod:`plexor.features.auth.plugin`): OAuth, scopes, tool profiles and audit;
- ``telemetry`` (:mod:`plexor.features.telemetry.plugin`): OpenTelemetry and ``/metrics``;
- ``bus`` (:mod:`plexor.features.bus`): notifications and event streams shared between processes, through
  the kernel's own database (:mod:`plexor.features.state`, which the tasks feature keeps its tasks in too);
- ``install`` (:mod:`plexor.features.install.plugin`): ``plexor install``, ``uninstall`` and ``bundle``;
- ``daemon`` (:mod:`plexor.features.daemon.plugin`): the shared daemon and ``plexor connect``, its stdio relay;
- ``card`` (:mod:`plexor.features.card`): the server card, a route;
- ``direct`` (:mod:`plexor.features.direct.plugin`): a stateless POST answered in the request's own task.

Each feature's machinery lives in its package beside its plugin module (``features/tasks/``,
``features/auth/``, ...), so what is a feature and what is the kernel proper can be read off the tree:
everything under ``plexor/features`` is a feature, the rest of ``plexor`` is the kernel
(``bench/kernel_size.py`` measures the kernel proper that way).

The plugin modules import only ``plexor`` and the standard library when loaded, as every plugin must;
the machinery they switch on is imported when a server is built.
"""
