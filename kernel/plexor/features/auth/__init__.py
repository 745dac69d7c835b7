"""Authorization over HTTP: an OAuth 2.1 resource server, scopes per plugin and tool, tool profiles, audit.

``docs/security.md`` is the user's guide. The pieces:

- :mod:`plexor.features.auth.config`: ``[plexor.auth]`` and ``[plexor.profiles.NAME]`` of ``plexor.toml``;
- :mod:`plexor.features.auth.jwks`: JWT validation against the issuer's JWKS (PyJWT), or
  :mod:`plexor.features.auth.introspection`: RFC 7662 introspection; both on :mod:`plexor.features.auth.tokens`;
- :mod:`plexor.features.auth.scopes`: the scopes each tool, resource and prompt needs; a connection's ``Access``;
- :mod:`plexor.features.auth.guard`: the ASGI guard (401/403, protected resource metadata);
- :mod:`plexor.features.auth.decide`: what a request targets, and the one decision on it;
- :mod:`plexor.features.auth.layer`: the SDK server's authorization layer, which also filters lists;
- :mod:`plexor.features.auth.search`: ``plexor_find_tools``, for a profile that says ``search = true``;
- :mod:`plexor.features.auth.audit`: one JSON line per decision.

:func:`protect` wires them into an HTTP app (the ``auth`` plugin, :mod:`plexor.features.auth.plugin`, calls it
from its ``plexor_asgi_wrapper`` hook, which ``plexor.serving.http.build_http_app`` applies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from plexor.features.auth.config import AuthConfig, Profile, auth_config, profiles_config

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from starlette.types import ASGIApp, Receive, Scope, Send

    from plexor.core.kernel import Kernel
    from plexor.features.auth.layer import Middleware

__all__ = ["AuthConfig", "Profile", "auth_config", "load", "profiles_config", "protect", "stdio_layer", "stdio_scopes"]


class Layers(Protocol):
    """The server's request path (:class:`plexor.serving.layers.RequestPath`), where the authorization layer goes."""

    def add(self, position: str, layer: Middleware, name: str | None = None) -> None: ...


@runtime_checkable
class Served(Protocol):
    """The SDK server being protected (:class:`plexor.serving.server.PlexorServer`)."""

    @property
    def path(self) -> Layers: ...


def load(kernel: Kernel, *, issuer: str | None = None, resource: str | None = None) -> tuple[AuthConfig, dict[str, Profile]]:
    """The kernel's ``[plexor.auth]`` and ``[plexor.profiles]`` (the built-in plugin's settings), checked."""
    rec = kernel.records.get("plexor")
    settings = rec.settings if rec is not None else None
    auth = settings.get("auth") if settings is not None else None
    profiles = settings.get("profiles") if settings is not None else None
    where = f"[plexor.auth] of {kernel.paths.config_file}"
    return (auth_config(auth, issuer=issuer, resource=resource, where=where),
            profiles_config(profiles, f"[plexor.profiles] of {kernel.paths.config_file}"))


def protect(app: ASGIApp, kernel: Kernel, server: Served, *, token: str | None, max_body: int, issuer: str | None = None,
            resource: str | None = None, profile: str | None = None) -> tuple[ASGIApp, bool]:
    """``app`` behind the access guard when OAuth or profiles are configured; (app, whether OAuth is on).

    With OAuth off the static token (if any) stays the caller's job (``BearerAuth``); with OAuth on
    the guard accepts the static token too, as a caller with every scope.
    """
    from plexor.features.auth.guard import AccessGuard
    from plexor.features.auth.introspection import IntrospectionVerifier
    from plexor.features.auth.jwks import JwtVerifier
    from plexor.features.auth.layer import access_middleware
    from plexor.features.auth.scopes import ScopePolicy
    from plexor.features.auth.tokens import Verifier

    config, profiles = load(kernel, issuer=issuer, resource=resource)
    if not config.enabled and not profiles:
        if profile is not None:
            from plexor.errors import ConfigError

            raise ConfigError(f"--profile {profile} names a profile, but none are configured",
                              f"Add [plexor.profiles.{profile}] tools = [...] to {kernel.paths.config_file}.")
        return NoProfiles(app), False
    if profile is not None and profile not in profiles:
        from plexor.errors import ConfigError

        raise ConfigError(f"--profile {profile} is not a configured profile",
                          f"Use one of: {', '.join(sorted(profiles)) or 'none'} (the [plexor.profiles] of {kernel.paths.config_file}).")
    policy = ScopePolicy(kernel, config.scopes)
    server.path.add("authorization", access_middleware(policy))  # before tasks (plexor.serving.layers)
    verifier: Verifier | None = None
    if config.enabled:
        verifier = IntrospectionVerifier(config) if config.introspection_endpoint else JwtVerifier(config)
    guard = AccessGuard(app, policy, config, profiles, verifier=verifier, static_token=token if config.enabled else None,
                        max_body=max_body, default_profile=profile)
    return guard, config.enabled


class NoProfiles:
    """In front of a server with no profiles: a request naming one (``Plexor-Profile``, ``/mcp/NAME``; e.g. from
    ``plexor connect --profile``) is answered 404 ``unknown_profile``, never served with every tool."""

    def __init__(self, app: ASGIApp) -> None:
        from plexor.features.auth.guard import PROFILE_HEADER

        self.app = app
        self.header = PROFILE_HEADER  # looked up once, not imported on every request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            name = path[5:] if path.startswith("/mcp/") and path.count("/") == 2 and len(path) > 5 else None
            if not name:
                header = self.header
                for k, v in scope.get("headers") or ():  # the first Plexor-Profile header, if any
                    if k == header:
                        name = v.decode("latin-1").strip()
                        break
            if name:
                from plexor.features.auth.guard import unknown_profile

                await unknown_profile(send, name, {})
                return
        await self.app(scope, receive, send)


def stdio_layer(kernel: Kernel, profile: Profile) -> Middleware:
    """The authorization layer of the stdio client of ``serve --profile``: the same as HTTP's, with that
    profile and the operator's ``[plexor.auth.scopes]`` (which ``scope:SCOPE`` entries of a profile match against)."""
    from plexor.features.auth.layer import access_middleware
    from plexor.features.auth.scopes import Access, ScopePolicy

    policy = ScopePolicy(kernel, stdio_scopes(kernel.paths.config_file))
    return access_middleware(policy, every=Access(policy, profile=profile))


def stdio_scopes(config_file: Path | str) -> dict[str, tuple[str, ...]]:
    """``[plexor.auth.scopes]`` read from the file (under stdio the kernel loads its plugins, and settings, later)."""
    from pathlib import Path

    from plexor.core.config import load_config_file

    section = load_config_file(Path(config_file)).get("plexor")
    table = section.get("auth") if isinstance(section, dict) else None
    return auth_config(table, where=f"[plexor.auth] of {config_file}").scopes
