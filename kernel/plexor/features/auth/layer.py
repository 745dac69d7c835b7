"""The SDK server's ``authorization`` layer: one decision, scopes and profile, for every request, and every list filtered.

It runs before the ``tasks`` layer (:mod:`plexor.serving.layers`), so a tool call refused here never
becomes a task, in either era. It refuses what is outside the connection's scopes or profile (a second
line behind the HTTP guard's 403, :mod:`plexor.features.auth.guard`, and the only one for profiles), and filters
``tools/list``, ``resources/list``, ``resources/templates/list`` and ``prompts/list`` by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from plexor.features.auth.audit import audit
from plexor.features.auth.decide import Target, decide, targets
from plexor.features.auth.guard import ACCESS_KEY
from plexor.features.auth.scopes import Access, ScopePolicy
from plexor.features.auth.search import FIND_TOOLS, find_tools, find_tools_wire

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

__all__ = ["Middleware", "access_middleware"]

#: SDK middleware, as the request path takes it (and the SDK's ``Server.middleware`` holds it).
Middleware: TypeAlias = "ServerMiddleware[object]"


def _access_of(ctx: ServerRequestContext[object, object]) -> Access | None:
    scope = getattr(ctx.request, "scope", None)  # a Starlette request over HTTP; None under stdio
    found = scope.get(ACCESS_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Access) and found.restricted else None


def _refusal(target: Target, reason: str, missing: tuple[str, ...], access: Access) -> HandlerResult:
    """What the SDK layer answers a request the decision refused: a tool's error result, else invalid params."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    if target.method == "tools/call":
        text = (f"{target.name} needs the scope(s) {' '.join(missing)}, which this token lacks. Get a token with them."
                if missing else
                f"{target.name} is not in this connection's profile {access.profile.name if access.profile else ''!r}. "
                "Use one of the tools listed by tools/list, or connect with a profile that has it.")
        return types.CallToolResult.model_validate({  # as the SDK shapes a handler's result, in either era
            "content": [{"type": "text", "text": text}], "isError": True,
            "structuredContent": {"error": {"message": text, "kind": reason}}})
    raise MCPError(types.INVALID_PARAMS, f"{target.name} is not available to this connection (its token's scopes or "
                   f"its profile do not include it): {target.method} refused", {"reason": reason, "target": target.name})


def _filter(policy: ScopePolicy, access: Access, method: str, result: HandlerResult) -> HandlerResult:
    """A list's page with only what ``access`` may use."""
    if not isinstance(result, dict):
        return result
    if method == "tools/list" and isinstance(result.get("tools"), list):
        tools = policy.kernel.registry.tools
        result["tools"] = [t for t in result["tools"] if t.get("name") not in tools or access.tool_visible(tools[t["name"]])]
        if access.profile is not None and access.profile.search and not result.get("nextCursor"):
            result["tools"].append(find_tools_wire())
    elif method == "resources/list" and isinstance(result.get("resources"), list):
        result["resources"] = [r for r in result["resources"]
                               if access.plugin_visible(policy.plugin_of_uri(str(r.get("uri", ""))))]
    elif method == "resources/templates/list" and isinstance(result.get("resourceTemplates"), list):
        result["resourceTemplates"] = [t for t in result["resourceTemplates"]
                                       if access.plugin_visible(policy.plugin_of_uri(str(t.get("uriTemplate", ""))))]
    elif method == "prompts/list" and isinstance(result.get("prompts"), list):
        prompts = policy.kernel.registry.prompts
        result["prompts"] = [p for p in result["prompts"]
                             if p.get("name") not in prompts or access.plugin_visible(prompts[p["name"]].plugin)]
    return result


def access_middleware(policy: ScopePolicy, *, every: Access | None = None) -> Middleware:
    """SDK middleware (the ``authorization`` layer): the one decision for every request, and every list filtered.

    It runs before the ``tasks`` layer (``plexor.serving.layers``), so a tool call refused here
    never becomes a task, in either era. Over HTTP each request's ``Access`` comes from the guard;
    ``every`` is the one of a transport without one (stdio's ``serve --profile``).
    """
    import mcp_types as types

    async def middleware(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        access = _access_of(ctx) or every
        if access is None:
            return await call_next(ctx)
        method = ctx.method
        params: dict[str, object] = dict(ctx.params) if isinstance(ctx.params, dict) else {}
        if method == "tools/call" and access.profile is not None and access.profile.search \
                and params.get("name") == FIND_TOOLS:
            args = params.get("arguments")
            audit("allow", method=method, target=FIND_TOOLS, **access.who())
            return types.CallToolResult.model_validate(find_tools(access, policy, args if isinstance(args, dict) else {}))
        for target in targets(policy, method, params):
            decision = decide(access, target)
            if not decision.allowed:
                reason = decision.reason or "not_visible"
                audit("deny", reason=reason, method=method, target=target.name, plugin=target.plugin, **access.who())
                return _refusal(target, reason, decision.missing, access)
        return _filter(policy, access, method, await call_next(ctx))

    return middleware
