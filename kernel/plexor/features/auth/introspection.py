"""Opaque access tokens checked by asking the authorization server about each (RFC 7662 introspection).

An introspected token is asked about again after ``PLEXOR_AUTH_RECHECK_SECONDS`` (60 s), so its revocation is
seen within that. Introspection is bounded (``docs/security.md#limits``): at most
``PLEXOR_AUTH_MAX_INTROSPECTIONS`` questions in flight, and a token found inactive is refused without asking
again for ``PLEXOR_AUTH_REFUSED_CACHE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from mcp.server.auth.provider import AccessToken

from plexor.features.auth.config import AuthConfig
from plexor.features.auth.tokens import CACHE_SIZE, TokenCache, TokenRefused, Verifier, fetch_json, granted_by, same_url

__all__ = ["IntrospectionVerifier"]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class _Busy(Exception):
    """Every introspection slot stayed taken for the whole fetch deadline (not the endpoint's failure)."""


class IntrospectionVerifier(Verifier):
    """RFC 7662: ask the authorization server about each (opaque) token.

    An active token is trusted for ``PLEXOR_AUTH_RECHECK_SECONDS`` (60 s; then asked about again, so a revoked
    one is refused within that), a token found inactive (or not meant for this server) is refused without
    asking again for ``PLEXOR_AUTH_REFUSED_CACHE_SECONDS`` (10 s), and at most ``PLEXOR_AUTH_MAX_INTROSPECTIONS``
    questions are in flight at once (one per token); a request that finds no free one within
    ``PLEXOR_AUTH_FETCH_SECONDS`` is refused, naming the limit."""

    def __init__(self, config: AuthConfig) -> None:
        assert config.introspection_endpoint and config.resource
        self.config = config
        self.cache = TokenCache()
        self.checked: dict[str, float] = {}
        self.refused: OrderedDict[str, tuple[float, TokenRefused]] = OrderedDict()  # token -> (until, why)
        self._asking: dict[str, asyncio.Future[object]] = {}  # introspections in flight, by token
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

    def _accept(self, token: str, answer: object) -> AccessToken:
        """The token as the introspection ``answer`` describes it, or why it is refused."""
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise TokenRefused("inactive", "the authorization server says the access token is not active")
        if answer.get("iss") is not None and not same_url(str(answer["iss"]), str(self.config.issuer)):
            raise TokenRefused("issuer", f"the access token was not issued by {self.config.issuer}")
        aud = answer.get("aud")
        auds = [aud] if isinstance(aud, str) else list(aud) if isinstance(aud, list) else []
        if not any(same_url(str(a), str(self.config.resource)) for a in auds):
            raise TokenRefused("audience", f"the access token was not issued for this server ({self.config.resource})")
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp + self.config.leeway < time.time():
            raise TokenRefused("expired", "the access token has expired")
        return AccessToken(token=token, client_id=str(answer.get("client_id") or ""),
                           scopes=granted_by(answer, self.config.scope_claim),
                           expires_at=int(exp) if isinstance(exp, (int, float)) else None,
                           resource=self.config.resource, subject=_text(answer.get("sub")), claims=answer)

    async def _ask(self, token: str) -> object:
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

    async def _post(self, token: str) -> object:
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
            auth = (self.config.client_id, self.config.client_secret or "") if self.config.client_id else None
            return await fetch_json("POST", str(self.config.introspection_endpoint), data={"token": token}, auth=auth)
        finally:
            self._slots.release()
