"""``[plexor.auth]`` and ``[plexor.profiles.NAME]`` of ``plexor.toml``, checked into typed settings.

Both tables are settings of the built-in plugin (``plexor``), so the kernel reads and validates
them like any other plugin's; this module gives them meaning. Command-line options
(``--auth-issuer``, ``--resource-url``, ``--profile``) override the file.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from plexor.errors import ConfigError

__all__ = ["AuthConfig", "Profile", "auth_config", "profiles_config"]

_AUTH_KEYS = {
    "issuer": "the authorization server's issuer URL (required to switch OAuth on)",
    "resource": "this server's resource URL, the audience tokens must be issued for (e.g. https://mcp.example/mcp)",
    "jwks_uri": "where the signing keys are (default: discovered from the issuer's metadata)",
    "algorithms": "signature algorithms accepted (default RS256, PS256, ES256, EdDSA)",
    "leeway": "seconds of clock skew allowed on exp/nbf (default 30)",
    "scope_claim": "the claim holding the scopes (default: scope, then scp)",
    "profile_claim": "a claim naming the profile of the connection (default plexor_profile)",
    "challenge_scopes": "scopes asked for in a 401 (default: every scope the server knows)",
    "scopes": "a table: tool name or glob -> scopes it needs, overriding what the plugin declares",
    "introspection_endpoint": "RFC 7662 endpoint, for opaque (non-JWT) access tokens",
    "client_id": "this server's client id at the introspection endpoint",
    "client_secret": "this server's client secret at the introspection endpoint",
    "default_profile": "the profile of a connection that names none",
    "resource_name": "a human-readable name in the protected resource metadata",
    "documentation": "a URL of documentation, in the protected resource metadata",
}
DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")


@dataclass(frozen=True)
class AuthConfig:
    """What the resource server checks; ``issuer`` None: OAuth is off."""

    issuer: str | None = None
    resource: str | None = None
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway: float = 30.0
    scope_claim: str | None = None
    profile_claim: str = "plexor_profile"
    challenge_scopes: tuple[str, ...] | None = None
    scopes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    introspection_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    default_profile: str | None = None
    resource_name: str | None = None
    documentation: str | None = None

    @property
    def enabled(self) -> bool:
        return self.issuer is not None


@dataclass(frozen=True)
class Profile:
    """A named view of the tools: entries are tool names or globs, ``plugin:NAME`` or ``scope:SCOPE``."""

    name: str
    tools: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    search: bool = False  # plexor_find_tools: the model may find and call the token's other tools

    def admits(self, tool: str, plugin: str, scopes: tuple[str, ...]) -> bool:
        return self._matches(self.tools, tool, plugin, scopes) and not self._matches(self.exclude, tool, plugin, scopes)

    @staticmethod
    def _matches(entries: tuple[str, ...], tool: str, plugin: str, scopes: tuple[str, ...]) -> bool:
        for entry in entries:
            if entry.startswith("plugin:"):
                if entry[7:] == plugin:
                    return True
            elif entry.startswith("scope:"):
                if entry[6:] in scopes:
                    return True
            elif fnmatch.fnmatchcase(tool, entry):
                return True
        return False


def _text(table: Mapping[str, object], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} = {value!r} in {where} is not a non-empty string", f"Set {key} to {_AUTH_KEYS.get(key, 'a string')}.")
    return value.strip()


def _words(value: object, key: str, where: str) -> tuple[str, ...]:
    """A list of strings, or one space-separated string."""
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ConfigError(f"{key} = {value!r} in {where} is not a list of strings", f'Write {key} = ["a", "b"].')


def _url(value: str | None, key: str, where: str) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        raise ConfigError(f"{key} = {value!r} in {where} is not an http(s) URL", f"Set {key} to {_AUTH_KEYS[key]}.")
    return value


def auth_config(table: Mapping[str, object] | None, *, issuer: str | None = None, resource: str | None = None,
                where: str = "[plexor.auth] of plexor.toml") -> AuthConfig:
    """Check ``[plexor.auth]``; ``issuer``/``resource`` (command line) win over the file."""
    table = dict(table or {})
    unknown = sorted(set(table) - set(_AUTH_KEYS))
    if unknown:
        import difflib

        near = difflib.get_close_matches(unknown[0], list(_AUTH_KEYS), n=1)
        raise ConfigError(f"unknown key {unknown[0]!r} in {where}" + (f"; did you mean {near[0]!r}?" if near else ""),
                          f"Known keys: {', '.join(sorted(_AUTH_KEYS))}.")
    iss = _url(issuer or _text(table, "issuer", where), "issuer", where)
    res = _url(resource or _text(table, "resource", where), "resource", where)
    overrides: dict[str, tuple[str, ...]] = {}
    raw_scopes = table.get("scopes") or {}
    if not isinstance(raw_scopes, dict):
        raise ConfigError(f"scopes in {where} is not a table", 'Write [plexor.auth.scopes] "arbor_tree_delete" = ["arbor:admin"].')
    for pattern, needed in raw_scopes.items():
        overrides[str(pattern)] = _words(needed, f"scopes.{pattern}", where)
    leeway = table.get("leeway", 30.0)
    if isinstance(leeway, bool) or not isinstance(leeway, (int, float)) or leeway < 0:
        raise ConfigError(f"leeway = {leeway!r} in {where} is not a number of seconds", "Set leeway = 30 (or 0 for none).")
    cfg = AuthConfig(
        issuer=iss, resource=res, jwks_uri=_url(_text(table, "jwks_uri", where), "jwks_uri", where),
        algorithms=_words(table["algorithms"], "algorithms", where) if "algorithms" in table else DEFAULT_ALGORITHMS,
        leeway=float(leeway), scope_claim=_text(table, "scope_claim", where),
        profile_claim=_text(table, "profile_claim", where) or "plexor_profile",
        challenge_scopes=_words(table["challenge_scopes"], "challenge_scopes", where) if "challenge_scopes" in table else None,
        scopes=overrides,
        introspection_endpoint=_url(_text(table, "introspection_endpoint", where), "introspection_endpoint", where),
        client_id=_text(table, "client_id", where), client_secret=_text(table, "client_secret", where),
        default_profile=_text(table, "default_profile", where), resource_name=_text(table, "resource_name", where),
        documentation=_url(_text(table, "documentation", where), "documentation", where),
    )
    if "none" in {a.lower() for a in cfg.algorithms}:
        raise ConfigError(f"algorithms in {where} lists 'none'", "Unsigned tokens are never accepted: remove 'none'.")
    if cfg.enabled and cfg.resource is None:
        raise ConfigError(f"{where} sets an issuer but no resource",
                          "Set resource to this server's public URL of /mcp (tokens must name it as their audience), "
                          "or pass --resource-url.")
    if cfg.resource is not None and not cfg.enabled:
        raise ConfigError(f"{where} sets a resource but no issuer", "Set issuer to the authorization server's issuer URL, "
                          "or pass --auth-issuer.")
    return cfg


def profiles_config(table: Mapping[str, object] | None, where: str = "[plexor.profiles] of plexor.toml") -> dict[str, Profile]:
    """``[plexor.profiles.NAME] tools = [...]  exclude = [...]`` as profiles by name."""
    out: dict[str, Profile] = {}
    for name, body in dict(table or {}).items():
        if not isinstance(body, dict):
            raise ConfigError(f"profile {name!r} in {where} is not a table",
                              f'Write [plexor.profiles.{name}] tools = ["arbor_*", "plugin:keyboard"].')
        unknown = sorted(set(body) - {"tools", "exclude", "search"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r} in [plexor.profiles.{name}]",
                              "A profile has tools, exclude and search.")
        if not isinstance(body.get("search", False), bool):
            raise ConfigError(f"search = {body['search']!r} in [plexor.profiles.{name}] is not true or false",
                              "Write search = true to give the profile the plexor_find_tools tool.")
        if "tools" not in body:
            raise ConfigError(f"[plexor.profiles.{name}] has no tools",
                              'List what the profile shows: tools = ["arbor_*", "plugin:keyboard", "scope:arbor:read"].')
        out[str(name)] = Profile(str(name), _words(body["tools"], "tools", f"[plexor.profiles.{name}]"),
                                 _words(body.get("exclude", []), "exclude", f"[plexor.profiles.{name}]"),
                                 bool(body.get("search", False)))
    return out
