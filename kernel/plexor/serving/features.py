"""What serving asks of the built-in feature plugins (:data:`plexor.extending.FEATURES`): that a security
feature fails closed, and who the caller is.

- :func:`refuse_unguarded`: ``[plexor.auth]``, a ``[plexor.profiles]`` table, ``--profile`` or
  ``--auth-issuer`` with the ``auth`` plugin disabled or broken is a configuration error; the server
  never starts open where its operator asked for it closed.
- :class:`CallerPrincipal`: the ``plexor_principal`` hook asked once per HTTP request, its answer kept
  in the ASGI scope for every per-caller limit and task owner (:func:`plexor.limits.principal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from plexor.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp, Receive, Scope, Send

    from plexor.core.base import KernelBase
    from plexor.core.kernel import Kernel

__all__ = ["PRINCIPAL_KEY", "CallerPrincipal", "refuse_unguarded"]

PRINCIPAL_KEY = "plexor.principal"  # where CallerPrincipal keeps the plexor_principal answer in the scope


def refuse_unguarded(kernel: Kernel, profile: str | None = None, issuer: str | None = None) -> None:
    """Raise :class:`ConfigError` when authorization is configured but the ``auth`` plugin will not enforce it."""
    from plexor.core.records import State

    kernel.register_features()
    record = kernel.records.get("auth")
    broken = record is not None and record.state is State.FAILED
    if kernel.pm.get_plugin("auth") is not None and not broken:
        return
    tables = kernel.config_tables()
    if not tables:  # not loaded yet (stdio): read the file, as the CLI does before the handshake
        from plexor.core.config import load_config_file

        tables = load_config_file(kernel.paths.config_file)
    table = tables.get("plexor")
    section: Mapping[str, object] = table if isinstance(table, dict) else {}
    asked = [what for what, present in (
        (f"[plexor.auth] in {kernel.paths.config_file}", bool(section.get("auth"))),
        (f"[plexor.profiles] in {kernel.paths.config_file}", bool(section.get("profiles"))),
        (f"--profile {profile}", profile is not None), (f"--auth-issuer {issuer}", issuer is not None)) if present]
    if not asked:
        return
    why = (f"failed to load ({record.error})" if broken and record is not None
           else "disabled (PLEXOR_DISABLE names auth)")
    raise ConfigError(f"{' and '.join(asked)} asks for authorization, but the auth plugin is {why}; "
                      "the server does not start without the protection it was configured with",
                      "Take auth out of PLEXOR_DISABLE, or remove the authorization settings if this server "
                      "is meant to be open.")


class CallerPrincipal:
    """ASGI: asks ``plexor_principal`` once per HTTP request and keeps the answer in ``scope``.

    The first answer that is not ``None`` wins, in pluggy's call order, as for any ``firstresult`` hook. A hook
    that raises refuses the request (``500`` naming its plugin): the caller is never served as somebody else."""

    def __init__(self, app: ASGIApp, kernel: KernelBase) -> None:
        self.app = app
        self.impls = [(impl.plugin_name, impl.function, impl.argnames) for impl in
                      reversed(kernel.pm.hook.plexor_principal.get_hookimpls())]
        self.kernel = kernel

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.impls and scope["type"] == "http":
            given = {"scope": scope, "kernel": self.kernel}
            for plugin, function, names in self.impls:
                try:
                    found = function(*(given[name] for name in names))
                except Exception as exc:  # noqa: BLE001 - a plugin's hook: refuse this request, keep serving
                    await self._refuse(plugin, exc, send)
                    return
                if found is not None:
                    scope[PRINCIPAL_KEY] = found
                    break
            else:
                scope[PRINCIPAL_KEY] = None
        await self.app(scope, receive, send)

    async def _refuse(self, plugin: str, exc: Exception, send: Send) -> None:
        import traceback

        from plexor.serving.guard import refuse_http

        self.kernel.log.error("principal_failed", plugin=plugin, error=f"{type(exc).__name__}: {exc}",
                              traceback="".join(traceback.format_exception(exc)))
        await refuse_http(send, 500, "principal_failed", f"the plugin {plugin!r} could not tell who is calling "
                          f"({type(exc).__name__}: {exc}), so the request was not served",
                          "Retry; if it keeps failing, the server's operator should check the plugin (its traceback "
                          "is in the server log).")
