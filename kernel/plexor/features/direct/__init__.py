"""The ``direct`` built-in feature: a stateless POST to ``/mcp`` answered in the request's own task
(:mod:`plexor.features.direct.entry`), by the SDK's own rules; its plugin is :mod:`plexor.features.direct.plugin`."""
