"""Access-token validation: JWTs against the authorization server's keys, or RFC 7662 introspection.

PyJWT does the cryptography; this module only decides what to accept. A JWT must be signed
with an allowed algorithm (never ``none``) by a key of the issuer's JWKS, name the configured
issuer, carry this server's resource URL in ``aud`` (RFC 8707), and be inside ``exp``/``nbf``
(with ``leeway`` seconds of clock skew). The JWKS is fetched once and cached; a token signed by a
key the cache does not know triggers one refetch (key rotation), at most every
``MIN_REFRESH`` seconds. Verified tokens are cached until they expire, so a busy client costs a
dictionary lookup per request, not a signature check.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

from mcp.server.auth.provider import AccessToken

from plexor.auth.config import AuthConfig

__all__ = ["IntrospectionVerifier", "JwtVerifier", "TokenRefused", "make_verifier"]

MIN_REFRESH = 30.0  # seconds between two JWKS fetches forced by unknown keys
MAX_AGE = 3600.0  # the JWKS is refetched after this long even when every key is known
CACHE_SIZE = 4096  # verified tokens kept


class TokenRefused(Exception):
    """A token this server does not accept; ``reason`` is a short code for the audit log."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _scopes(claims: dict[str, Any], claim: str | None) -> list[str]:
    for name in ([claim] if claim else ["scope", "scp"]):
        value = claims.get(name)
        if isinstance(value, str):
            return value.split()
        if isinstance(value, list):
            return [str(v) for v in value]
    return []


class _Cache:
    """Verified tokens until they expire (a bounded LRU)."""

    def __init__(self) -> None:
        self.items: OrderedDict[str, AccessToken] = OrderedDict()

    def get(self, token: str, leeway: float) -> AccessToken | None:
        found = self.items.get(token)
        if found is None:
            return None
        if found.expires_at is not None and found.expires_at + leeway < time.time():
            del self.items[token]
            raise TokenRefused("expired", "the access token has expired")
        return found

    def put(self, token: str, value: AccessToken) -> None:
        self.items[token] = value
        while len(self.items) > CACHE_SIZE:
            self.items.popitem(last=False)


async def _get_json(url: str, **kwargs: Any) -> Any:
    import httpx2

    async with httpx2.AsyncClient(timeout=10.0, follow_redirects=False) as client:
        response = await client.get(url, headers={"Accept": "application/json"}, **kwargs)
        response.raise_for_status()
        return response.json()


async def discover_metadata(issuer: str) -> dict[str, Any]:
    """The authorization server's metadata (RFC 8414, then OpenID Connect discovery)."""
    from urllib.parse import urlsplit

    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    errors = []
    for url in (f"{base}/.well-known/oauth-authorization-server{path}", f"{issuer.rstrip('/')}/.well-known/openid-configuration"):
        try:
            found = await _get_json(url)
        except Exception as exc:  # noqa: BLE001 - tried in turn, reported together
            errors.append(f"{url}: {exc}")
            continue
        if isinstance(found, dict) and _same_url(str(found.get("issuer", "")), issuer):
            return found
        errors.append(f"{url}: names issuer {found.get('issuer') if isinstance(found, dict) else None!r}")
    raise TokenRefused("issuer_unreachable", "cannot read the authorization server's metadata: " + "; ".join(errors))


class _Verifier:
    """The SDK's ``TokenVerifier`` protocol over ``check`` (which says why a token is refused)."""

    async def check(self, token: str) -> AccessToken:
        raise NotImplementedError

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return await self.check(token)
        except TokenRefused:
            return None


class JwtVerifier(_Verifier):
    """The SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068) of one issuer and resource."""

    def __init__(self, config: AuthConfig) -> None:
        assert config.issuer and config.resource
        self.config = config
        self.issuer = config.issuer
        self.audience = [config.resource, config.resource.rstrip("/"), config.resource.rstrip("/") + "/"]
        self.algorithms = list(config.algorithms)
        self.keys: dict[str | None, Any] = {}
        self.fetched = 0.0
        self._lock: asyncio.Lock | None = None
        self.cache = _Cache()
        self.jwks_uri = config.jwks_uri

    async def check(self, token: str) -> AccessToken:
        found = self.cache.get(token, self.config.leeway)
        if found is not None:
            return found
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused("malformed", f"the access token is not a JWT ({exc})") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise TokenRefused("algorithm", f"the access token is signed with {alg!r}; accepted: {', '.join(self.algorithms)}")
        key = await self._key(header.get("kid"))
        try:
            claims = jwt.decode(token, key, algorithms=[alg], audience=self.audience, issuer=self.issuer,
                                leeway=self.config.leeway, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired", "the access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("not_yet_valid", "the access token is not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("audience", f"the access token was not issued for this server ({self.config.resource})") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("issuer", f"the access token was not issued by {self.issuer}") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("signature", "the access token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRefused("claims", f"the access token lacks the {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise TokenRefused("malformed", f"the access token is invalid ({exc})") from None
        access = AccessToken(token=token, client_id=str(claims.get("client_id") or claims.get("azp") or ""),
                             scopes=_scopes(claims, self.config.scope_claim),
                             expires_at=int(claims["exp"]), resource=self.config.resource,
                             subject=str(claims["sub"]) if "sub" in claims else None, claims=claims)
        self.cache.put(token, access)
        return access

    async def _key(self, kid: str | None) -> Any:
        now = time.monotonic()
        if not self.keys or now - self.fetched > MAX_AGE:
            await self._refresh(force=True)
        elif kid not in self.keys and now - self.fetched > MIN_REFRESH:
            await self._refresh(force=False)  # a key added since the last fetch (rotation)
        key = self.keys.get(kid)
        if key is None and kid is None and len(self.keys) == 1:
            key = next(iter(self.keys.values()))
        if key is None:
            raise TokenRefused("unknown_key", f"the access token is signed by a key ({kid!r}) the issuer does not publish")
        return key

    async def _refresh(self, *, force: bool) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        seen = self.fetched
        async with self._lock:
            if self.fetched != seen and not force:
                return  # another request refreshed meanwhile
            import jwt

            if self.jwks_uri is None:
                self.jwks_uri = str((await discover_metadata(self.issuer)).get("jwks_uri") or "") or None
                if self.jwks_uri is None:
                    raise TokenRefused("issuer_unreachable", "the authorization server's metadata names no jwks_uri")
            try:
                document = await _get_json(self.jwks_uri)
                keyset = jwt.PyJWKSet.from_dict(document)
            except TokenRefused:
                raise
            except Exception as exc:  # noqa: BLE001 - the keys cannot be had: every token is refused, with this reason
                self.fetched = time.monotonic()
                raise TokenRefused("issuer_unreachable", f"cannot read the signing keys at {self.jwks_uri}: {exc}") from None
            self.keys = {k.key_id: k for k in keyset.keys if getattr(k, "public_key_use", None) in (None, "sig")}
            self.fetched = time.monotonic()


class IntrospectionVerifier(_Verifier):
    """RFC 7662: ask the authorization server about each (opaque) token, caching answers up to 60 s."""

    def __init__(self, config: AuthConfig) -> None:
        assert config.introspection_endpoint and config.resource
        self.config = config
        self.cache = _Cache()
        self.checked: dict[str, float] = {}

    async def check(self, token: str) -> AccessToken:
        found = self.cache.get(token, 0.0)
        if found is not None and time.monotonic() - self.checked.get(token, 0.0) < 60.0:
            return found
        import httpx2

        auth: Any = (self.config.client_id, self.config.client_secret or "") if self.config.client_id else None
        try:
            async with httpx2.AsyncClient(timeout=10.0) as client:
                response = await client.post(str(self.config.introspection_endpoint), data={"token": token},
                                             auth=auth, headers={"Accept": "application/json"})
                response.raise_for_status()
                answer = response.json()
        except Exception as exc:  # noqa: BLE001
            raise TokenRefused("issuer_unreachable", f"token introspection failed: {exc}") from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise TokenRefused("inactive", "the authorization server says the access token is not active")
        if answer.get("iss") is not None and not _same_url(str(answer["iss"]), str(self.config.issuer)):
            raise TokenRefused("issuer", f"the access token was not issued by {self.config.issuer}")
        aud = answer.get("aud")
        auds = [aud] if isinstance(aud, str) else list(aud or [])
        if not any(_same_url(str(a), str(self.config.resource)) for a in auds):
            raise TokenRefused("audience", f"the access token was not issued for this server ({self.config.resource})")
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp + self.config.leeway < time.time():
            raise TokenRefused("expired", "the access token has expired")
        access = AccessToken(token=token, client_id=str(answer.get("client_id") or ""),
                             scopes=_scopes(answer, self.config.scope_claim),
                             expires_at=int(exp) if isinstance(exp, (int, float)) else None,
                             resource=self.config.resource, subject=answer.get("sub"), claims=answer)
        self.cache.put(token, access)
        self.checked[token] = time.monotonic()
        if len(self.checked) > CACHE_SIZE:
            self.checked = {k: v for k, v in self.checked.items() if k in self.cache.items}
        return access


def make_verifier(config: AuthConfig) -> JwtVerifier | IntrospectionVerifier:
    return IntrospectionVerifier(config) if config.introspection_endpoint else JwtVerifier(config)
