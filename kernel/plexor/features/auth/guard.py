"""The HTTP side of authorization: who is calling (token), which profile, and may this call run.

``AccessGuard`` is ASGI middleware in front of the MCP routes. With OAuth on it validates the
bearer token (401 with ``WWW-Authenticate: Bearer ... resource_metadata=...`` when it is missing or
refused), serves the protected resource metadata (RFC 9728), and reads the JSON-RPC body of each
POST: a request whose target (:mod:`plexor.features.auth.decide`: a tool call, plain or as a task, a prompt,
a resource read or subscription, a completion, every URI of a listen stream) needs scopes the token
lacks is answered ``403`` with ``error="insufficient_scope", scope="..."`` before the SDK sees it,
so nothing of it reaches a plugin and the client can step up.

Why the body, and not a signal from the pipeline: the status line must say 403, and on Streamable
HTTP the SDK may already have sent ``200`` and opened an event stream by the time a handler runs.
Reading the body first costs one ``json.loads`` of a request that is at most ``--max-body`` bytes.

The connection's :class:`~plexor.features.auth.scopes.Access` (scopes, profile, who, and the principal
that owns its tasks) rides on the ASGI scope, under :data:`ACCESS_KEY`, for the SDK server's
``authorization`` layer (:mod:`plexor.features.auth.layer`), which makes the same decision for every request.
"""

from __future__ import annotations

import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from plexor.features.auth.audit import audit
from plexor.features.auth.config import AuthConfig, Profile
from plexor.features.auth.decide import Target, decide, decided, targets
from plexor.features.auth.scopes import Access, ScopePolicy, granted_scopes
from plexor.features.auth.tokens import TokenRefused, Verifier

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ACCESS_KEY", "PROFILE_HEADER", "AccessGuard", "principal_of", "unknown_profile"]

ACCESS_KEY = "plexor.access"  # where the Access of a request is kept in its ASGI scope
PROFILE_HEADER = b"plexor-profile"
KNOWN_TOKENS = 4096


def _quoted(text: str) -> str:
    """A header quoted-string's content: no quotes, backslashes or control characters."""
    return "".join(c for c in text if c not in '"\\' and 32 <= ord(c) < 127)


async def _answer(send: Send, status: int, body: dict[str, object], headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    raw = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *headers]})
    await send({"type": "http.response.body", "body": raw})


async def unknown_profile(send: Send, name: str, profiles: dict[str, Profile]) -> None:
    """404 for a request naming a profile the server does not have."""
    known = ", ".join(sorted(profiles)) or "none are configured"
    await _answer(send, 404, {"error": "unknown_profile", "message": f"no profile named {name!r}",
                              "guidance": f"Use one of the profiles in [plexor.profiles] of plexor.toml ({known})."})


class AccessGuard:
    """Token, profile and per-call scope checks in front of every MCP route (see the module doc)."""

    def __init__(self, app: ASGIApp, policy: ScopePolicy, config: AuthConfig, profiles: dict[str, Profile], *,
                 verifier: Verifier | None, static_token: str | None, max_body: int,
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
        self.metadata_app: ASGIApp | None = None
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
        issuer = str(self.config.issuer)
        routes = create_protected_resource_routes(  # the SDK's signature says AnyHttpUrl; its model takes a str too
            resource_url=resource, authorization_servers=[issuer],  # type: ignore[list-item]
            scopes_supported=self.policy.every_scope(), resource_name=self.config.resource_name or "Plexor",
            resource_documentation=AnyHttpUrl(self.config.documentation) if self.config.documentation else None)
        root = "/.well-known/oauth-protected-resource"
        if routes[0].path != root:  # also at the root, where clients look when they ignore the header
            routes.append(Route(root, endpoint=routes[0].endpoint, methods=["GET", "OPTIONS"]))
        self.metadata_url = str(build_resource_metadata_url(resource))
        self.metadata_app = Starlette(routes=routes)

    # ----------------------------------------------------------------- the request
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
        headers: Iterable[tuple[bytes, bytes]] = scope.get("headers") or ()
        access = Access(self.policy)
        user: AuthenticatedUser | None = None
        if self.verifier is not None:
            found = await self._authenticate(scope, headers, access, send)
            if found is False:
                return
            user = found
        wanted = [v.decode("latin-1").strip() for k, v in headers if k == PROFILE_HEADER]
        claim = self.config.profile_claim
        try:
            claimed = _claimed_profile(access.claims, claim)
        except ValueError:  # present but not a name: refused, never read as no claim (the client would pick)
            assert access.claims is not None
            await _answer(send, 403, {"error": "invalid_profile_claim",
                                      "message": f"the token's {claim!r} claim is {access.claims[claim]!r}, not a "
                                                 "profile name",
                                      "guidance": f"Have the authorization server set {claim!r} to one profile name (a "
                                                  "string, or a list of exactly one), or leave it out."})
            return
        name = claimed or path_profile or (wanted[0] if wanted else None) or self.default_profile
        if name is not None:
            profile = self.profiles.get(name)
            if profile is None:
                await unknown_profile(send, name, self.profiles)
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

    async def _authenticate(self, scope: Scope, headers: Iterable[tuple[bytes, bytes]], access: Access,
                            send: Send) -> AuthenticatedUser | Literal[False] | None:
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
            access.subject = "static-token"  # for the audit only: its principal stays "" (the local user)
            return None
        known = self._known.get(token)
        if (known is not None and (known.expires_at is None or known.expires_at + self.config.leeway >= time.time())
                and self.verifier is not None and self.verifier.trusted(token.decode("latin-1"))):
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
        known = _Known(found, AuthenticatedUser(found), token)
        self._known[token] = known
        while len(self._known) > KNOWN_TOKENS:
            self._known.popitem(last=False)
        known.fill(access)
        return known.user

    async def _unauthorized(self, send: Send, reason: str | None, description: str) -> None:
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

    async def _check_body(self, scope: Scope, receive: Receive, send: Send, access: Access) -> Receive | None:
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
        for target in self._calls(body):
            decision = decide(access, target)
            fields = {**access.who(), "method": target.method, "target": target.name, "plugin": target.plugin,
                      "scopes_needed": list(target.needed) or None}
            if decision.reason == "insufficient_scope":
                audit("deny", reason="insufficient_scope", scopes_missing=list(decision.missing), **fields)
                await self._forbidden(send, target)
                return None
            if decision.allowed:  # a profile's refusal is the SDK layer's to answer (and audit)
                audit("allow", reason=None, **fields)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def _forbidden(self, send: Send, target: Target) -> None:
        scope_text = " ".join(target.needed)
        what = f"{target.method} {target.name}"
        await _answer(send, 403, {
            "error": "insufficient_scope", "error_description": f"{what} needs the scope(s) {scope_text}",
            "guidance": f"Ask the authorization server for a token with the scope(s) {scope_text} (step up), "
                        "then send the request again."}, [(b"www-authenticate", (
                            f'Bearer error="insufficient_scope", scope="{scope_text}", '
                            f'resource_metadata="{self.metadata_url}", '
                            f'error_description="{_quoted(what)} needs more scope"').encode())])

    def _calls(self, body: bytes) -> list[Target]:
        """What the JSON-RPC request of a body reaches; junk, batches and notifications give none.

        No era of MCP serves a batch: the SDK refuses it whole and ``plexor.serving.guard.AnswerIds``
        answers each of its ids (-32600). Deciding its items here would answer a 403 that leaves
        every id unanswered, and audit ``allow`` for calls that never run; were a batch ever
        dispatched, the SDK layer would still decide each of its requests.
        """
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            return []  # the SDK (or plexor.serving.bounds.NestingLimit) answers it
        method = parsed.get("method") if isinstance(parsed, dict) else None
        if not isinstance(method, str) or "id" not in parsed or not decided(self.policy, method):
            return []  # nothing it names runs: junk, a batch, or a notification (no id: no handler runs for it)
        return targets(self.policy, method, parsed.get("params"))


def _claimed_profile(claims: Mapping[str, object] | None, claim: str) -> str | None:
    """The profile a token's claim names (None when it has no such claim); ValueError when the claim is not
    a name: a non-empty string, or a list of exactly one (custom claims are often arrays)."""
    if not claims or claim not in claims:
        return None
    value = claims[claim]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or not value:
        raise ValueError(claim)
    return value


class _Known:
    """What a verified token gives each of its requests, worked out once (the token's user, scopes, who)."""

    __slots__ = ("claims", "client", "credentials", "expires_at", "issuer", "principal", "scopes", "subject", "token_id",
                 "user")

    def __init__(self, found: AccessToken, user: AuthenticatedUser, token: bytes) -> None:
        from starlette.authentication import AuthCredentials

        self.user = user
        self.expires_at = found.expires_at
        self.claims = found.claims or {}
        self.scopes = granted_scopes(found.scopes)
        self.credentials = AuthCredentials(sorted(self.scopes))
        self.subject, self.client = found.subject, found.client_id or None
        self.issuer, self.token_id = str(self.claims.get("iss") or "") or None, self.claims.get("jti")
        self.principal = principal_of(self.issuer, self.subject, self.client, token)

    def fill(self, access: Access) -> None:
        access.scopes, access.subject, access.client = self.scopes, self.subject, self.client
        access.principal = self.principal
        access.issuer, access.token_id, access.claims = self.issuer, self.token_id, self.claims
        access.credentials = self.credentials


def principal_of(issuer: str | None, subject: str | None, client: str | None, token: bytes) -> str:
    """Who a verified token speaks for, as an owner of tasks: never "" (the static token's, the local user's).

    The issuer, subject and client together, each length-prefixed so no two triples read alike; the
    same person through the same client keeps it across token refreshes. A token without a subject
    names nobody another token could also name: it owns only what it made itself.
    """
    import hashlib

    if not subject:
        return "token:" + hashlib.sha256(b"token\0" + token).hexdigest()[:32]
    parts = [issuer or "", subject, client or ""]
    joined = "".join(f"{len(p)}:{p}" for p in parts)
    return "oauth:" + hashlib.sha256(joined.encode()).hexdigest()[:32]
