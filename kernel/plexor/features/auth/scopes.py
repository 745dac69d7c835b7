"""Which scopes each tool, resource and prompt needs, and what one connection may see and call.

A tool needs what its plugin declared (``register(..., scopes=[...])``), else ``<plugin>:read`` when
it is annotated ``readOnlyHint`` and ``<plugin>:write`` otherwise; an operator's
``[plexor.auth.scopes]`` (tool names or globs) wins over both. Resources, templates and prompts
need ``<plugin>:read``. A token holding ``<plugin>:write`` holds ``<plugin>:read`` too.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from plexor.core.kernel import Kernel
from plexor.core.specs import MethodSpec, ToolSpec
from plexor.features.auth.config import Profile

if TYPE_CHECKING:  # pragma: no cover
    from starlette.authentication import AuthCredentials

__all__ = ["Access", "ScopePolicy", "Who", "granted_scopes"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def granted_scopes(scopes: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """The scopes a token holds, with ``X:write`` also granting ``X:read``."""
    out = set(scopes)
    out.update(s[:-6] + ":read" for s in scopes if s.endswith(":write"))
    return frozenset(out)


class Who(TypedDict):
    """Who a connection is, for the audit log."""

    subject: str | None
    client: str | None
    issuer: str | None
    token_id: str | None
    profile: str | None


class ScopePolicy:
    """The scopes needed, looked up per name (cached until the registry changes)."""

    def __init__(self, kernel: Kernel, overrides: dict[str, tuple[str, ...]]) -> None:
        self.kernel = kernel
        self.exact = {k: v for k, v in overrides.items() if not any(c in k for c in "*?[")}
        self.globs = [(k, v) for k, v in overrides.items() if k not in self.exact]
        self._tools: dict[str, tuple[str, ...]] = {}
        kernel.on_change(lambda kind: self._tools.clear())

    def tool(self, spec: ToolSpec) -> tuple[str, ...]:
        found = self._tools.get(spec.name)
        if found is None:
            found = self._tools[spec.name] = self._tool(spec)
        return found

    def _tool(self, spec: ToolSpec) -> tuple[str, ...]:
        if spec.name in self.exact:
            return self.exact[spec.name]
        for pattern, needed in self.globs:
            if fnmatch.fnmatchcase(spec.name, pattern):
                return needed
        if spec.scopes is not None:
            return spec.scopes
        return (f"{spec.plugin}:read",) if spec.annotations.get("readOnlyHint") else (f"{spec.plugin}:write",)

    def plugin_of_uri(self, uri: str) -> str | None:
        """The plugin serving ``uri``, as the kernel resolves it when reading (``Kernel.resource_plugin``)."""
        return self.kernel.resource_plugin(uri) if _SCHEME.match(uri) else None

    def method(self, spec: MethodSpec) -> tuple[str, ...]:
        """What a plugin's own protocol method needs: ``[plexor.auth.scopes]`` by method name, its declared
        scopes, else its plugin's write scope (an undeclared method may write)."""
        if spec.method in self.exact:
            return self.exact[spec.method]
        return spec.scopes if spec.scopes is not None else (f"{spec.plugin}:write",)

    def plugin_scopes(self, plugin: str | None) -> tuple[str, ...]:
        return () if plugin is None else (f"{plugin}:read",)

    def every_scope(self) -> list[str]:
        """Every scope some tool, resource or prompt needs (the metadata's ``scopes_supported``)."""
        found: set[str] = set()
        for spec in self.kernel.registry.tools.values():
            found.update(self.tool(spec))
        plugins = {s.plugin for s in self.kernel.registry.resources.values()}
        plugins.update(s.plugin for s in self.kernel.registry.templates.values())
        plugins.update(s.plugin for s in self.kernel.registry.prompts.values())
        plugins.update(self.kernel.registry.schemes.values())
        found.update(f"{p}:read" for p in plugins)
        for method in self.kernel.protocol_methods.values():
            found.update(self.method(method))
        return sorted(found)


@dataclass
class Access:
    """What one request's connection may see and call: its token's scopes (None: unrestricted) and profile."""

    policy: ScopePolicy
    scopes: frozenset[str] | None = None
    profile: Profile | None = None
    subject: str | None = None
    principal: str = ""  # who owns what this caller makes (tasks): "" is the local user (see plexor.features.auth.guard)
    client: str | None = None
    issuer: str | None = None
    token_id: str | None = None
    claims: dict[str, object] | None = None
    credentials: AuthCredentials | None = None  # the token's (the SDK reads scope["auth"])

    @property
    def restricted(self) -> bool:
        return self.scopes is not None or self.profile is not None

    def missing(self, needed: tuple[str, ...]) -> tuple[str, ...]:
        if self.scopes is None:
            return ()
        return tuple(s for s in needed if s not in self.scopes)

    def tool_visible(self, spec: ToolSpec) -> bool:
        needed = self.policy.tool(spec)
        if self.missing(needed):
            return False
        return self.profile is None or self.profile.admits(spec.name, spec.plugin, needed)

    def tool_callable(self, spec: ToolSpec) -> bool:
        """Listed, or (with a searchable profile) found by plexor_find_tools within the token's scopes."""
        if self.profile is not None and self.profile.search:
            return not self.missing(self.policy.tool(spec))
        return self.tool_visible(spec)

    def plugin_visible(self, plugin: str | None) -> bool:
        """Resources and prompts of ``plugin``: its read scope, and (with a profile) one of its tools admitted."""
        if plugin is None:
            return True
        if self.missing(self.policy.plugin_scopes(plugin)):
            return False
        if self.profile is None:
            return True
        profile = self.profile
        return any(profile.admits(s.name, s.plugin, self.policy.tool(s))
                   for s in self.policy.kernel.registry.tools.values() if s.plugin == plugin) \
            or f"plugin:{plugin}" in profile.tools

    def who(self) -> Who:
        return {"subject": self.subject, "client": self.client, "issuer": self.issuer, "token_id": self.token_id,
                "profile": self.profile.name if self.profile else None}
