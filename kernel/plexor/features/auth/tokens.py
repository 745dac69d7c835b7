"""Access-token validation: JWTs against the authorization server's keys, or RFC 7662 introspection.

PyJWT does the cryptography; this module only decides what to accept. A JWT must be signed
with an allowed algorithm (never ``none``) by a key of the issuer's JWKS, name the configured
issuer, carry this server's resource URL in ``aud`` (RFC 8707), and be inside ``exp``/``nbf``
(with ``leeway`` seconds of clock skew). The JWKS is fetched once and cached; a token signed by a
key the cache does not know triggers one refetch (key rotation), at most every
``MIN_REFRESH`` seconds. Verified JWTs are cached until they expire, so a busy client costs a
dictionary lookup per request, not a signature check; an introspected (opaque) token is asked about
again after ``PLEXOR_AUTH_RECHECK_SECONDS`` (60 s), so its revocation is seen within that.

Fetches from the authorization server are bounded (``docs/security.md#limits``): an answer of at most
``PLEXOR_AUTH_FETCH_BYTES``, a deadline of ``PLEXOR_AUTH_FETCH_SECONDS`` for the whole exchange, one key
fetch in flight whose outcome every waiting request shares, and, while no key could be loaded, no new
try before a back-off (1 s, doubling up to ``PLEXOR_AUTH_FETCH_BACKOFF``). A token naming another
issuer or audience is refused before anything is fetched. Introspection is bounded too: at most
``PLEXOR_AUTH_MAX_INTROSPECTIONS`` questions in flight, and a token found inactive is refused without
asking again for ``PLEXOR_AUTH_REFUSED_CACHE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

from mcp.server.auth.provider import AccessToken

from plexor.features.auth.config import AuthConfig

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


async def _fetch(method: str, url: str, **kwargs: Any) -> Any:
    """JSON from the authorization server, within ``PLEXOR_AUTH_FETCH_BYTES`` and ``PLEXOR_AUTH_FETCH_SECONDS``.

    The deadline covers the whole exchange (connecting, headers, every byte of the body), not each
    read: a server dripping a byte every few seconds is cut off like one that never answers.
    """
    import json

    import anyio
    import httpx2

    from plexor.limits import refuse, value

    cap, seconds = int(value("auth_fetch_bytes")), value("auth_fetch_seconds")
    try:
        with anyio.fail_after(seconds):
            async with httpx2.AsyncClient(timeout=seconds, follow_redirects=False) as client, \
                    client.stream(method, url, headers={"Accept": "application/json"}, **kwargs) as response:
                response.raise_for_status()
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > cap:
                        raise OSError(refuse("auth_fetch_bytes", cap, f"the answer from {url} is larger than {cap} bytes",
                                             "ask the authorization server's operator why"))
    except TimeoutError:
        raise OSError(refuse("auth_fetch_seconds", seconds, f"{url} did not answer completely within {seconds:g} s",
                             "check the authorization server")) from None
    return json.loads(bytes(body))


async def _get_json(url: str, **kwargs: Any) -> Any:
    return await _fetch("GET", url, **kwargs)


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

    def trusted(self, token: str) -> bool:
        """Whether a token verified before may still be taken without asking :meth:`check` (until it expires)."""
        return True

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
        self.attempts = 0  # fetches of the keys begun
        self.failures = 0  # failed fetches in a row
        self.retry_at = 0.0  # no new fetch before this (monotonic), while failing
        self.failure: TokenRefused | None = None
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
                             scopes=_scopes(claims, self.config.scope_claim),
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

    async def _key(self, kid: str | None) -> Any:
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
            document = await _get_json(self.jwks_uri)
            keyset = jwt.PyJWKSet.from_dict(document)
        except Exception as exc:  # noqa: BLE001 - the keys cannot be had: every token is refused, with this reason
            raise TokenRefused("issuer_unreachable", f"cannot read the signing keys at {self.jwks_uri}: {exc}") from None
        self.keys = {k.key_id: k for k in keyset.keys if getattr(k, "public_key_use", None) in (None, "sig")}
        self.fetched = time.monotonic()


class _Busy(Exception):
    """Every introspection slot stayed taken for the whole fetch deadline (not the endpoint's failure)."""


class IntrospectionVerifier(_Verifier):
    """RFC 7662: ask the authorization server about each (opaque) token.

    An active token is trusted for ``PLEXOR_AUTH_RECHECK_SECONDS`` (60 s; then asked about again, so a revoked
    one is refused within that), a token found inactive (or not meant for this server) is refused without
    asking again for ``PLEXOR_AUTH_REFUSED_CACHE_SECONDS`` (10 s), and at most ``PLEXOR_AUTH_MAX_INTROSPECTIONS``
    questions are in flight at once (one per token); a request that finds no free one within
    ``PLEXOR_AUTH_FETCH_SECONDS`` is refused, naming the limit."""

    def __init__(self, config: AuthConfig) -> None:
        assert config.introspection_endpoint and config.resource
        self.config = config
        self.cache = _Cache()
        self.checked: dict[str, float] = {}
        self.refused: OrderedDict[str, tuple[float, TokenRefused]] = OrderedDict()  # token -> (until, why)
        self._asking: dict[str, asyncio.Future[Any]] = {}  # introspections in flight, by token
        self._slots: asyncio.Semaphore | None = None
        self.failures, self.retry_at, self.failure = 0, 0.0, ""

    def trusted(self, token: str) -> bool:
        """Only within ``PLEXOR_AUTH_RECHECK_SECONDS`` of its last introspection."""
        from plexor.limits import value

        return time.monotonic() - self.checked.get(token, float("-inf")) < value("auth_recheck_seconds")

    async def check(self, token: str) -> AccessToken:
        from plexor.limits import value

        found = self.cache.get(token, 0.0)
        if found is not None and time.monotonic() - self.checked.get(token, 0.0) < value("auth_recheck_seconds"):
            return found
        known = self.refused.get(token)
        if known is not None:
            if time.monotonic() < known[0]:
                raise known[1]
            del self.refused[token]
        try:
            access = self._accept(token, await self._ask(token))
        except TokenRefused as refused:
            self.cache.items.pop(token, None)  # revoked, or never good: forgotten
            self.checked.pop(token, None)
            if refused.reason not in ("issuer_unreachable", "busy"):  # the server's answer, not a failure to get one
                self.refused[token] = (time.monotonic() + value("auth_refused_seconds"), refused)
                while len(self.refused) > CACHE_SIZE:
                    self.refused.popitem(last=False)
            raise
        self.cache.put(token, access)
        self.checked[token] = time.monotonic()
        if len(self.checked) > CACHE_SIZE:
            self.checked = {k: v for k, v in self.checked.items() if k in self.cache.items}
        return access

    def _accept(self, token: str, answer: Any) -> AccessToken:
        """The token as the introspection ``answer`` describes it, or why it is refused."""
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
        return AccessToken(token=token, client_id=str(answer.get("client_id") or ""),
                           scopes=_scopes(answer, self.config.scope_claim),
                           expires_at=int(exp) if isinstance(exp, (int, float)) else None,
                           resource=self.config.resource, subject=answer.get("sub"), claims=answer)

    async def _ask(self, token: str) -> Any:
        """The introspection answer: one question per token in flight, none while the endpoint is backed off."""
        from plexor.limits import REFUSALS, value

        wait = self.retry_at - time.monotonic()
        if wait > 0:
            REFUSALS["auth_fetch_backoff"] += 1
            raise TokenRefused("issuer_unreachable", f"token introspection failed ({self.failure}); not asked again for "
                               f"{wait:.0f} s (the back-off grows to PLEXOR_AUTH_FETCH_BACKOFF)")
        asked = self._asking.get(token)
        if asked is None:
            asked = self._asking[token] = asyncio.ensure_future(self._post(token))
            asked.add_done_callback(lambda _done: self._asking.pop(token, None))
        try:
            answer = await asyncio.shield(asked)
        except _Busy as busy:
            raise TokenRefused("busy", str(busy)) from None
        except Exception as exc:  # noqa: BLE001
            self.failures += 1
            self.failure = str(exc)
            self.retry_at = time.monotonic() + min(value("auth_fetch_backoff"), 2.0 ** min(self.failures - 1, 16))
            raise TokenRefused("issuer_unreachable", f"token introspection failed: {exc}") from None
        self.failures = 0
        return answer

    async def _post(self, token: str) -> Any:
        import anyio

        from plexor.limits import refuse, value

        most = int(value("auth_introspections"))
        if self._slots is None:
            self._slots = asyncio.Semaphore(most)
        seconds = value("auth_fetch_seconds")
        try:
            with anyio.fail_after(seconds):
                await self._slots.acquire()
        except TimeoutError:
            raise _Busy(refuse("auth_introspections", most, f"no token introspection could start within {seconds:g} s",
                               "retry in a moment")) from None
        try:
            auth: Any = (self.config.client_id, self.config.client_secret or "") if self.config.client_id else None
            return await _fetch("POST", str(self.config.introspection_endpoint), data={"token": token}, auth=auth)
        finally:
            self._slots.release()


def make_verifier(config: AuthConfig) -> JwtVerifier | IntrospectionVerifier:
    return IntrospectionVerifier(config) if config.introspection_endpoint else JwtVerifier(config)
