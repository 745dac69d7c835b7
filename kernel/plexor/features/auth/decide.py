"""One authorization decision for every request that names something: what it targets, and may the caller.

:func:`targets` reads a request's method and params and names what it reaches, through the
kernel's own name resolution (``Kernel.find_tool``, ``Kernel.find_prompt``,
``Kernel.resource_plugin``: the full, dotted and bare forms the kernel accepts), so no form of a
name can reach a plugin while a check looked at another. :func:`decide` gives the one answer,
scopes and profile together. The ASGI guard answers a missing scope with ``403`` (the status
line must say it, before the SDK streams anything); the SDK middleware, which every request
crosses before tasks are considered (``plexor.serving.layers``), enforces the whole decision.

The kinds: ``tools/call`` (plain or as a task), ``prompts/get``, ``resources/read``,
``resources/subscribe``, ``completion/complete`` (a prompt's or a template's), every URI
of a ``subscriptions/listen`` stream's ``resourceSubscriptions``, and every method a plugin added
(``plexor_protocol_methods``: the scopes it declares, else its plugin's write scope; the profile
must admit one of the plugin's tools).
"""

from __future__ import annotations

from dataclasses import dataclass

from plexor.core.specs import ToolSpec
from plexor.features.auth.scopes import Access, ScopePolicy

__all__ = ["DECIDED", "Decision", "Target", "decide", "decided", "targets"]

DECIDED = frozenset({"tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete",
                     "subscriptions/listen"})


@dataclass(frozen=True)
class Target:
    """What one request reaches: ``name`` is canonical (a tool's or prompt's full name, or the URI)."""

    method: str
    name: str
    plugin: str | None
    needed: tuple[str, ...]  # the scopes it needs
    tool: ToolSpec | None = None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str | None = None  # insufficient_scope, not_in_profile (a tool), not_visible (anything else)
    missing: tuple[str, ...] = ()


def decided(policy: ScopePolicy, method: str) -> bool:
    """Whether requests of ``method`` reach something the decision must allow: MCP's own methods that
    name a tool, prompt or resource, and every method a plugin added (``plexor_protocol_methods``)."""
    return method in DECIDED or method in policy.kernel.protocol_methods


def targets(policy: ScopePolicy, method: str, params: object) -> list[Target]:
    """What a request reaches (none when it names nothing known: the kernel answers that with guidance)."""
    kernel = policy.kernel
    added = kernel.protocol_methods.get(method)
    if added is not None:  # a plugin's own method: its declared scopes, else its plugin's write scope
        needed = policy.method(added)
        return [Target(method, method, None if added.scopes == () else added.plugin, needed)]
    if method not in DECIDED or not isinstance(params, dict):
        return []
    if method == "tools/call":
        tool = kernel.find_tool(str(params.get("name")))
        return [] if tool is None else [Target(method, tool.name, tool.plugin, policy.tool(tool), tool)]
    if method == "prompts/get":
        return _prompt(policy, method, params.get("name"))
    if method == "completion/complete":
        raw = params.get("ref")
        ref: dict[str, object] = raw if isinstance(raw, dict) else {}
        if ref.get("type") == "ref/prompt":
            return _prompt(policy, method, ref.get("name"))
        return _uris(policy, method, [ref.get("uri")])
    if method == "subscriptions/listen":
        wanted = params.get("notifications")
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        return _uris(policy, method, uris if isinstance(uris, list) else [])
    return _uris(policy, method, [params.get("uri")])


def _prompt(policy: ScopePolicy, method: str, name: object) -> list[Target]:
    prompt = policy.kernel.find_prompt(str(name))
    return [] if prompt is None else [Target(method, prompt.name, prompt.plugin, policy.plugin_scopes(prompt.plugin))]


def _uris(policy: ScopePolicy, method: str, uris: list[object]) -> list[Target]:
    out = []
    for uri in uris:
        plugin = policy.kernel.resource_plugin(str(uri)) if isinstance(uri, str) else None
        if plugin is not None:
            out.append(Target(method, str(uri), plugin, policy.plugin_scopes(plugin)))
    return out


def decide(access: Access, target: Target) -> Decision:
    """May the connection behind ``access`` reach ``target``: its token's scopes, then its profile."""
    missing = access.missing(target.needed)
    if missing:
        return Decision(False, "insufficient_scope", missing)
    if target.tool is not None:
        return Decision(True) if access.tool_callable(target.tool) else Decision(False, "not_in_profile")
    return Decision(True) if access.plugin_visible(target.plugin) else Decision(False, "not_visible")
