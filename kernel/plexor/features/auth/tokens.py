"""Access-token validation: JWTs against the authorization server's keys (:mod:`plexor.features.auth.jwks`), or
RFC 7662 introspection (:mod:`plexor.features.auth.introspection`); here what both share: why a token is
refused, the cache of verified tokens, and bounded fetches from the authorization server.

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

import time
from collections import OrderedDict
from collections.abc import Mapping

from mcp.server.auth.provider import AccessToken

__all__ = ["CACHE_SIZE", "TokenCache", "TokenRefused", "Verifier", "discover_metadata", "fetch_json", "granted_by",
           "same_url"]

CACHE_SIZE = 4096  # verified tokens kept


class TokenRefused(Exception):
    """A token this server does not accept; ``reason`` is a short code for the audit log."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description


def same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def granted_by(claims: Mapping[str, object], claim: str | None) -> list[str]:
    """The scopes a token's claims (or introspection answer) grant: ``claim``, else ``scope`` or ``scp``."""
    for name in ([claim] if claim else ["scope", "scp"]):
        value = claims.get(name)
        if isinstance(value, str):
            return value.split()
        if isinstance(value, list):
            return [str(v) for v in value]
    return []


class TokenCache:
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


async def fetch_json(method: str, url: str, *, data: dict[str, str] | None = None,
                     auth: tuple[str, str] | None = None) -> object:
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
                    client.stream(method, url, headers={"Accept": "application/json"}, data=data, auth=auth) as response:
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


async def discover_metadata(issuer: str) -> dict[str, object]:
    """The authorization server's metadata (RFC 8414, then OpenID Connect discovery)."""
    from urllib.parse import urlsplit

    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    errors = []
    for url in (f"{base}/.well-known/oauth-authorization-server{path}", f"{issuer.rstrip('/')}/.well-known/openid-configuration"):
        try:
            found = await fetch_json("GET", url)
        except Exception as exc:  # noqa: BLE001 - tried in turn, reported together
            errors.append(f"{url}: {exc}")
            continue
        if isinstance(found, dict) and same_url(str(found.get("issuer", "")), issuer):
            return found
        errors.append(f"{url}: names issuer {found.get('issuer') if isinstance(found, dict) else None!r}")
    raise TokenRefused("issuer_unreachable", "cannot read the authorization server's metadata: " + "; ".join(errors))


class Verifier:
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
