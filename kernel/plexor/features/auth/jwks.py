"""JWT access tokens (RFC 9068) checked against the issuer's published keys (its JWKS), with PyJWT.

A JWT must be signed with an allowed algorithm (never ``none``) by a key of the issuer's JWKS, name the
configured issuer, carry this server's resource URL in ``aud`` (RFC 8707), and be inside ``exp``/``nbf``
(with ``leeway`` seconds of clock skew). The JWKS is fetched once and cached; a token signed by a key the
cache does not know triggers one refetch (key rotation), at most every ``MIN_REFRESH`` seconds. Verified
JWTs are cached until they expire. A token naming another issuer or audience is refused before anything
is fetched; while no key could be loaded, no new try before a back-off (see :mod:`plexor.features.auth.tokens`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from mcp.server.auth.provider import AccessToken

from plexor.features.auth.config import AuthConfig
from plexor.features.auth.tokens import TokenCache, TokenRefused, Verifier, discover_metadata, fetch_json, granted_by

if TYPE_CHECKING:  # pragma: no cover
    from jwt import PyJWK

__all__ = ["MAX_AGE", "MIN_REFRESH", "JwtVerifier"]

MIN_REFRESH = 30.0  # seconds between two JWKS fetches forced by unknown keys
MAX_AGE = 3600.0  # the JWKS is refetched after this long even when every key is known


class JwtVerifier(Verifier):
    """The SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068) of one issuer and resource."""

    def __init__(self, config: AuthConfig) -> None:
        assert config.issuer and config.resource
        self.config = config
        self.issuer = config.issuer
        self.audience = [config.resource, config.resource.rstrip("/"), config.resource.rstrip("/") + "/"]
        self.algorithms = list(config.algorithms)
        self.keys: dict[str | None, PyJWK] = {}
        self.fetched = 0.0
        self._lock: asyncio.Lock | None = None
        self.attempts = 0  # fetches of the keys begun
        self.failures = 0  # failed fetches in a row
        self.retry_at = 0.0  # no new fetch before this (monotonic), while failing
        self.failure: TokenRefused | None = None
        self.cache = TokenCache()
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
        self._addressed_here(token)  # before any fetch: a stranger's token never makes the server fetch keys
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
                             scopes=granted_by(claims, self.config.scope_claim),
                             expires_at=int(claims["exp"]), resource=self.config.resource,
                             subject=str(claims["sub"]) if "sub" in claims else None, claims=claims)
        self.cache.put(token, access)
        return access

    def _addressed_here(self, token: str) -> None:
        """Refuse, unverified and without fetching anything, a token naming another issuer or audience."""
        import jwt

        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise TokenRefused("malformed", f"the access token is invalid ({exc})") from None
        for claim in ("iss", "aud"):
            if claim not in claims:
                raise TokenRefused("claims", f"the access token lacks the {claim!r} claim")
        if claims["iss"] != self.issuer:
            raise TokenRefused("issuer", f"the access token was not issued by {self.issuer}")
        aud = claims["aud"]
        if not any(a in self.audience for a in ([aud] if isinstance(aud, str) else aud if isinstance(aud, list) else [])):
            raise TokenRefused("audience", f"the access token was not issued for this server ({self.config.resource})")

    async def _key(self, kid: str | None) -> PyJWK:
        now = time.monotonic()
        if not self.keys or now - self.fetched > MAX_AGE or (kid not in self.keys and now - self.fetched > MIN_REFRESH):
            await self._refresh()  # the first load, the hourly one, or a key added since (rotation)
        key = self.keys.get(kid)
        if key is None and kid is None and len(self.keys) == 1:
            key = next(iter(self.keys.values()))
        if key is None:
            raise TokenRefused("unknown_key", f"the access token is signed by a key ({kid!r}) the issuer does not publish")
        return key

    async def _refresh(self) -> None:
        """Fetch the keys: one fetch at a time, its outcome shared by every request that waited for it; after a
        failure, no new try for a back-off (1 s, doubling up to ``PLEXOR_AUTH_FETCH_BACKOFF``) while no key is held."""
        from plexor.limits import REFUSALS, value

        if self._lock is None:
            self._lock = asyncio.Lock()
        seen = self.attempts
        async with self._lock:
            if self.attempts != seen:  # a fetch finished while this request waited: its outcome stands
                if self.failure is not None and not self.keys:
                    raise self.failure
                return
            wait = self.retry_at - time.monotonic()
            if wait > 0:
                if self.keys:
                    return  # keep the keys held until the authorization server answers again
                REFUSALS["auth_fetch_backoff"] += 1
                assert self.failure is not None
                raise TokenRefused("issuer_unreachable", f"{self.failure.description}; not asked again for {wait:.0f} s "
                                   "(the back-off grows to PLEXOR_AUTH_FETCH_BACKOFF)")
            self.attempts += 1
            try:
                await self._load()
            except TokenRefused as refused:
                self.failures += 1
                self.retry_at = time.monotonic() + min(value("auth_fetch_backoff"), 2.0 ** min(self.failures - 1, 16))
                self.failure, self.fetched = refused, time.monotonic()
                if not self.keys:
                    raise
                return
            self.failures, self.retry_at, self.failure = 0, 0.0, None

    async def _load(self) -> None:
        import jwt

        if self.jwks_uri is None:
            self.jwks_uri = str((await discover_metadata(self.issuer)).get("jwks_uri") or "") or None
            if self.jwks_uri is None:
                raise TokenRefused("issuer_unreachable", "the authorization server's metadata names no jwks_uri")
        try:
            document = await fetch_json("GET", self.jwks_uri)
            if not isinstance(document, dict):
                raise TypeError(f"a JWKS is a JSON object, not {type(document).__name__}")
            keyset = jwt.PyJWKSet.from_dict(document)
        except Exception as exc:  # noqa: BLE001 - the keys cannot be had: every token is refused, with this reason
            raise TokenRefused("issuer_unreachable", f"cannot read the signing keys at {self.jwks_uri}: {exc}") from None
        self.keys = {k.key_id: k for k in keyset.keys if getattr(k, "public_key_use", None) in (None, "sig")}
        self.fetched = time.monotonic()
