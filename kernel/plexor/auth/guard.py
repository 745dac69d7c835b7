"""The HTTP side of authorization: who is calling (token), which profile, and may this call run.

``AccessGuard`` is ASGI middleware in front of the MCP routes. With OAuth on it validates the
bearer token (401 with ``WWW-Authenticate: Bearer ... resource_metadata=...`` when it is missing or
refused), serves the protected resource metadata (RFC 9728), and reads the JSON-RPC body of each
POST: a ``tools/call``, ``resources/read``, ``prompts/get`` or ``completion/complete`` whose
scopes the token lacks is answered ``403`` with ``error="insufficient_scope", scope="..."`` before
the SDK sees it, so nothing of it reaches a plugin and the client can step up.

Why the body, and not a signal from the pipeline: the status line must say 403, and on Streamable
HTTP the SDK may already have sent ``200`` and opened an event stream by the time a handler runs.
Reading the body first costs one ``json.loads`` of a request that is at most ``--max-body`` bytes.

The connection's :class:`~plexor.auth.scopes.Access` (scopes, profile, who) rides on the ASGI
scope; :func:`access_middleware`, an SDK middleware, filters ``tools/list``, ``resources/list``,
``resources/templates/list`` and ``prompts/list`` by it and refuses calls outside it (a second
line behind the 403, and the only one for profiles, which narrow what a client sees but are not
a security boundary).
"""

from __future__ import annotations

import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from plexor.auth.audit import audit
from plexor.auth.config import AuthConfig, Profile
from plexor.auth.scopes import Access, ScopePolicy, granted_scopes
from plexor.auth.search import FIND_TOOLS, find_tools, find_tools_wire
from plexor.auth.tokens import IntrospectionVerifier, JwtVerifier, TokenRefused

__all__ = ["ACCESS_KEY", "PROFILE_HEADER", "AccessGuard", "access_middleware"]

ACCESS_KEY = "plexor.access"  # where the Access of a request is kept in its ASGI scope
PROFILE_HEADER = b"plexor-profile"
KNOWN_TOKENS = 4096
_CALLS = frozenset({"tools/call", "resources/read", "resources/subscribe", "prompts/get", "completion/complete"})


def _quoted(text: str) -> str:
    """A header quoted-string's content: no quotes, backslashes or control characters."""
    return "".join(c for c in text if c not in '"\\' and 32 <= ord(c) < 127)


async def _answer(send: Any, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    raw = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *headers]})
    await send({"type": "http.response.body", "body": raw})


class AccessGuard:
    """Token, profile and per-call scope checks in front of every MCP route (see the module doc)."""

    def __init__(self, app: Any, policy: ScopePolicy, config: AuthConfig, profiles: dict[str, Profile], *,
                 verifier: JwtVerifier | IntrospectionVerifier | None, static_token: str | None, max_body: int,
                 default_profile: str | None = None) -> None:
        self.app = app
        self.policy = policy
        self.config = config
        self.profiles = profiles
        self.verifier = verifier
        self.static_token = static_token.encode() if static_token else None
        self.max_body = max_body
        self.default_profile = default_profile or config.default_profile
        self._known: OrderedDict[bytes, _Known] = OrderedDict()  # verified tokens, most recent last
        self.metadata_url: str | None = None
        self.metadata_app: Any = None
        if verifier is not None:
            self._metadata()

    def _metadata(self) -> None:
        from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
        from pydantic import AnyHttpUrl
        from starlette.applications import Starlette
        from starlette.routing import Route

        resource = AnyHttpUrl(str(self.config.resource))
        # The issuer as a string: the metadata model keeps an empty path empty, while AnyHttpUrl("http://as")
        # would add a "/" and break the client's exact issuer comparison (RFC 8414 section 3.3).
        issuer: Any = str(self.config.issuer)
        routes = create_protected_resource_routes(
            resource_url=resource, authorization_servers=[issuer],
            scopes_supported=self.policy.every_scope(), resource_name=self.config.resource_name or "Plexor",
            resource_documentation=AnyHttpUrl(self.config.documentation) if self.config.documentation else None)
        root = "/.well-known/oauth-protected-resource"
        if routes[0].path != root:  # also at the root, where clients look when they ignore the header
            routes.append(Route(root, endpoint=routes[0].endpoint, methods=["GET", "OPTIONS"]))
        self.metadata_url = str(build_resource_metadata_url(resource))
        self.metadata_app = Starlette(routes=routes)

    # ----------------------------------------------------------------- the request
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.metadata_app is not None and path.startswith("/.well-known/oauth-protected-resource"):
            await self.metadata_app(scope, receive, send)
            return
        path_profile = None
        if path.startswith("/mcp/") and path.count("/") == 2 and len(path) > 5:
            path_profile = path[5:]
            scope = {**scope, "path": "/mcp", "raw_path": b"/mcp"}
        headers = scope.get("headers") or ()
        access = Access(self.policy)
        user: Any = None
        if self.verifier is not None:
            user = await self._authenticate(scope, headers, access, send)
            if user is False:
                return
        wanted = [v.decode("latin-1").strip() for k, v in headers if k == PROFILE_HEADER]
        claimed = access.claims.get(self.config.profile_claim) if access.claims else None
        name = claimed if isinstance(claimed, str) else path_profile or (wanted[0] if wanted else None) or self.default_profile
        if name is not None:
            profile = self.profiles.get(name)
            if profile is None:
                known = ", ".join(sorted(self.profiles)) or "none are configured"
                await _answer(send, 404, {"error": "unknown_profile", "message": f"no profile named {name!r}",
                                          "guidance": f"Use one of the profiles in [plexor.profiles] of plexor.toml ({known})."})
                return
            access.profile = profile
        scope = {**scope, ACCESS_KEY: access}
        if user is not None:
            scope["user"], scope["auth"] = user, access.credentials
        if (access.scopes is not None or self.verifier is not None) and scope.get("method") == "POST":
            # with OAuth on, the static token's calls are audited too (it holds every scope)
            replay = await self._check_body(scope, receive, send, access)
            if replay is None:
                return
            receive = replay
        if user is None:
            await self.app(scope, receive, send)
            return
        from mcp.server.auth.middleware.auth_context import auth_context_var

        reset = auth_context_var.set(user)  # the SDK binds request state to this principal
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

    async def _authenticate(self, scope: Any, headers: Any, access: Access, send: Any) -> Any:
        """The token's user (``AuthenticatedUser``), None for the static token, False when refused (answered)."""
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

        given = [v for k, v in headers if k == b"authorization"]
        if len(given) > 1:
            await _answer(send, 400, {"error": "invalid_request", "error_description": "more than one Authorization header"})
            return False
        scheme, _, raw = (given[0] if given else b"").strip().partition(b" ")
        token = raw.strip()
        where = {"method": scope.get("method"), "path": scope.get("path")}
        if scheme.lower() != b"bearer" or not token:
            audit("deny", reason="no_token", **where)
            await self._unauthorized(send, None, "no bearer token")
            return False
        if self.static_token is not None and hmac.compare_digest(token, self.static_token):
            access.subject = "static-token"
            return None
        known = self._known.get(token)
        if known is not None and (known.expires_at is None or known.expires_at + self.config.leeway >= time.time()):
            known.fill(access)
            return known.user
        assert self.verifier is not None
        try:
            found = await self.verifier.check(token.decode("latin-1"))
        except TokenRefused as refused:
            self._known.pop(token, None)
            audit("deny", reason=refused.reason, detail=refused.description, **where)
            await self._unauthorized(send, refused.reason, refused.description)
            return False
        known = _Known(found, AuthenticatedUser(found))
        self._known[token] = known
        while len(self._known) > KNOWN_TOKENS:
            self._known.popitem(last=False)
        known.fill(access)
        return known.user

    async def _unauthorized(self, send: Any, reason: str | None, description: str) -> None:
        parts = []
        if reason is not None:
            parts += ['error="invalid_token"', f'error_description="{_quoted(description)}"']
        challenge = self.config.challenge_scopes or tuple(self.policy.every_scope())
        if challenge:
            parts.append(f'scope="{" ".join(challenge)}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        await _answer(send, 401, {"error": "invalid_token" if reason else "unauthorized", "error_description": description,
                                  "guidance": f"Get an access token from {self.config.issuer} for the resource "
                                              f"{self.config.resource} (see {self.metadata_url}) and send it as "
                                              "'Authorization: Bearer <token>'."},
                      [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())])

    async def _check_body(self, scope: Any, receive: Any, send: Any, access: Access) -> Callable[[], Any] | None:
        """Read the body; answer 403 for a call the token lacks scopes for (None), else a receive that replays it."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _answer(send, 413, {"error": "payload_too_large",
                                          "message": f"request body larger than {self.max_body} bytes",
                                          "guidance": "Send a smaller request, or start the server with a larger --max-body."})
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        for method, target, needed, plugin in self._calls(body):
            missing = access.missing(needed)
            fields = {**access.who(), "method": method, "target": target, "plugin": plugin,
                      "scopes_needed": list(needed) or None}
            if missing:
                audit("deny", reason="insufficient_scope", scopes_missing=list(missing), **fields)
                scope_text = " ".join(needed)
                await _answer(send, 403, {
                    "error": "insufficient_scope",
                    "error_description": f"{method} {target} needs the scope(s) {scope_text}",
                    "guidance": f"Ask the authorization server for a token with the scope(s) {scope_text} (step up), "
                                "then send the request again."}, [(b"www-authenticate", (
                                    f'Bearer error="insufficient_scope", scope="{scope_text}", '
                                    f'resource_metadata="{self.metadata_url}", '
                                    f'error_description="{_quoted(method + " " + target)} needs more scope"').encode())])
                return None
            audit("allow", **fields)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    def _calls(self, body: bytes) -> list[tuple[str, str, tuple[str, ...], str | None]]:
        """(method, target, scopes needed, plugin) of each call in a JSON-RPC body (a batch too); junk gives none."""
        try:
            parsed = json.loads(body)
        except ValueError:
            return []  # the SDK answers it
        out = []
        for message in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(message, dict) or message.get("method") not in _CALLS:
                continue
            method, params = message["method"], message.get("params")
            if not isinstance(params, dict):
                continue
            found = self._needs(method, params)
            if found is not None:
                out.append((method, *found))
        return out

    def _needs(self, method: str, params: dict[str, Any]) -> tuple[str, tuple[str, ...], str | None] | None:
        if method == "tools/call":
            spec = self.policy.resolve_tool(str(params.get("name")))
            return None if spec is None else (spec.name, self.policy.tool(spec), spec.plugin)
        if method == "prompts/get":
            prompt = self.policy.kernel.registry.prompts.get(str(params.get("name")))
            return None if prompt is None else (prompt.name, self.policy.plugin_scopes(prompt.plugin), prompt.plugin)
        if method == "completion/complete":
            raw = params.get("ref")
            ref: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if ref.get("type") == "ref/prompt":
                prompt = self.policy.kernel.registry.prompts.get(str(ref.get("name")))
                plugin = prompt.plugin if prompt else None
            else:
                plugin = self.policy.plugin_of_uri(str(ref.get("uri", "")))
            return None if plugin is None else (f"{ref.get('type')} {ref.get('name') or ref.get('uri')}",
                                                self.policy.plugin_scopes(plugin), plugin)
        uri = str(params.get("uri", ""))
        plugin = self.policy.plugin_of_uri(uri)
        return None if plugin is None else (uri, self.policy.plugin_scopes(plugin), plugin)


class _Known:
    """What a verified token gives each of its requests, worked out once (the token's user, scopes, who)."""

    __slots__ = ("claims", "client", "credentials", "expires_at", "issuer", "scopes", "subject", "token_id", "user")

    def __init__(self, found: Any, user: Any) -> None:
        from starlette.authentication import AuthCredentials

        self.user = user
        self.expires_at = found.expires_at
        self.claims = found.claims or {}
        self.scopes = granted_scopes(found.scopes)
        self.credentials = AuthCredentials(sorted(self.scopes))
        self.subject, self.client = found.subject, found.client_id or None
        self.issuer, self.token_id = str(self.claims.get("iss") or "") or None, self.claims.get("jti")

    def fill(self, access: Access) -> None:
        access.scopes, access.subject, access.client = self.scopes, self.subject, self.client
        access.issuer, access.token_id, access.claims = self.issuer, self.token_id, self.claims
        access.credentials = self.credentials


def _access_of(ctx: Any) -> Access | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    found = scope.get(ACCESS_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Access) and found.restricted else None


def _field(result: Any, key: str) -> Any:
    return result.get(key) if isinstance(result, dict) else None


def access_middleware(policy: ScopePolicy) -> Callable[..., Any]:
    """SDK middleware: lists filtered by the request's Access, and calls outside it refused."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    async def middleware(ctx: Any, call_next: Any) -> Any:
        access = _access_of(ctx)
        if access is None:
            return await call_next(ctx)
        method = ctx.method
        params: dict[str, Any] = dict(ctx.params) if isinstance(ctx.params, dict) else {}
        searching = access.profile is not None and access.profile.search
        if method == "tools/call":
            if searching and params.get("name") == FIND_TOOLS:
                args = params.get("arguments")
                audit("allow", method=method, target=FIND_TOOLS, **access.who())
                return types.CallToolResult.model_validate(find_tools(access, policy, args if isinstance(args, dict) else {}))
            spec = policy.resolve_tool(str(params.get("name")))
            if spec is not None and not access.tool_callable(spec):
                missing = access.missing(policy.tool(spec))
                reason = "insufficient_scope" if missing else "not_in_profile"
                audit("deny", reason=reason, method=method, target=spec.name, plugin=spec.plugin, **access.who())
                text = (f"{spec.name} needs the scope(s) {' '.join(missing)}, which this token lacks. Get a token with them."
                        if missing else
                        f"{spec.name} is not in this connection's profile {access.profile.name if access.profile else ''!r}. "
                        "Use one of the tools listed by tools/list, or connect with a profile that has it.")
                return types.CallToolResult.model_validate({  # as the SDK shapes a handler's result, in either era
                    "content": [{"type": "text", "text": text}], "isError": True,
                    "structuredContent": {"error": {"message": text, "kind": reason}}})
        elif method in ("resources/read", "prompts/get"):
            if method == "prompts/get":
                prompt = policy.kernel.registry.prompts.get(str(params.get("name")))
                plugin = prompt.plugin if prompt else None
            else:
                plugin = policy.plugin_of_uri(str(params.get("uri", "")))
            if not access.plugin_visible(plugin):
                audit("deny", reason="not_visible", method=method, target=params.get("uri") or params.get("name"),
                      plugin=plugin, **access.who())
                raise MCPError(types.INVALID_PARAMS, f"{params.get('uri') or params.get('name')} is not available to this "
                               "connection (its token's scopes or its profile do not include it)")
        result = await call_next(ctx)
        if method == "tools/list" and isinstance(_field(result, "tools"), list):
            tools = policy.kernel.registry.tools
            result["tools"] = [t for t in result["tools"]
                               if t.get("name") not in tools or access.tool_visible(tools[t["name"]])]
            if searching and not result.get("nextCursor"):
                result["tools"].append(find_tools_wire())
        elif method == "resources/list" and isinstance(_field(result, "resources"), list):
            result["resources"] = [r for r in result["resources"]
                                   if access.plugin_visible(policy.plugin_of_uri(str(r.get("uri", ""))))]
        elif method == "resources/templates/list" and isinstance(_field(result, "resourceTemplates"), list):
            result["resourceTemplates"] = [t for t in result["resourceTemplates"]
                                           if access.plugin_visible(policy.plugin_of_uri(str(t.get("uriTemplate", ""))))]
        elif method == "prompts/list" and isinstance(_field(result, "prompts"), list):
            prompts = policy.kernel.registry.prompts
            result["prompts"] = [p for p in result["prompts"]
                                 if p.get("name") not in prompts or access.plugin_visible(prompts[p["name"]].plugin)]
        return result

    return middleware
