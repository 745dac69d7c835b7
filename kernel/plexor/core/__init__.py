"""The kernel's core: lifecycle, loading, the request pipeline, registry, guidance, config and storage.

Nothing here is plugin API (plugins import only ``plexor``). Embedders and
tests start a kernel with :class:`plexor.core.kernel.Kernel`.
"""
