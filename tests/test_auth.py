"""The token verifier on its own: key rotation, an unreachable issuer, the verified-token cache.

A real JWKS over HTTP (a stdlib server in a thread, whose key set the test changes) and real
tokens signed with PyJWT; :class:`plexor.features.auth.jwks.JwtVerifier` is the kernel's own code.
"""

from __future__ import annotations

import time

import jwt
import pytest
from auth.support import Issuer, free_port, rsa_jwk

from plexor.features.auth import auth_config
from plexor.features.auth.jwks import JwtVerifier
from plexor.features.auth.tokens import TokenRefused

pytestmark = pytest.mark.anyio
RESOURCE = "https://mcp.example/mcp"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def issuer():
    found = Issuer(RESOURCE)
    yield found
    found.stop()


async def test_a_rotated_key_is_fetched_once_and_an_unknown_one_refused(issuer, monkeypatch):
    import plexor.features.auth.jwks as jwks

    old = issuer.publish("old")
    verifier = JwtVerifier(auth_config({"issuer": issuer.url, "resource": RESOURCE}))
    assert (await verifier.check(issuer.token(old, "old"))).scopes == ["a:read"]
    assert issuer.fetches == 1
    new = issuer.publish("new")  # the authorization server rotates: the new key is published, then used
    monkeypatch.setattr(jwks, "MIN_REFRESH", 0.0)
    assert (await verifier.check(issuer.token(new, "new"))).subject == "s"
    assert issuer.fetches == 2
    await verifier.check(issuer.token(old, "old", jti="2"))  # both keys known now: no fetch
    assert issuer.fetches == 2
    monkeypatch.setattr(jwks, "MIN_REFRESH", 3600.0)  # an unknown kid within the window: refused without a fetch
    stranger, _ = rsa_jwk("stranger")
    with pytest.raises(TokenRefused) as refused:
        await verifier.check(issuer.token(stranger, "stranger"))
    assert refused.value.reason == "unknown_key" and issuer.fetches == 2


async def test_an_unreachable_issuer_refuses_every_token_with_that_reason():
    port = free_port()  # nothing listens there
    verifier = JwtVerifier(auth_config({"issuer": f"http://127.0.0.1:{port}", "resource": RESOURCE}))
    key, _ = rsa_jwk("k")
    token = jwt.encode({"iss": f"http://127.0.0.1:{port}", "aud": RESOURCE, "exp": int(time.time()) + 60}, key,
                       algorithm="RS256", headers={"kid": "k"})
    with pytest.raises(TokenRefused) as refused:
        await verifier.check(token)
    assert refused.value.reason == "issuer_unreachable" and "metadata" in refused.value.description


async def test_a_long_run_of_failed_fetches_keeps_backing_off_instead_of_overflowing():
    # The back-off doubles per failure; 2.0 ** 1024 raised OverflowError, which turned every later
    # request into a 500 and ended the back-off.
    port = free_port()  # nothing listens there
    verifier = JwtVerifier(auth_config({"issuer": f"http://127.0.0.1:{port}", "resource": RESOURCE}))
    verifier.failures = 5000
    key, _ = rsa_jwk("k")
    token = jwt.encode({"iss": f"http://127.0.0.1:{port}", "aud": RESOURCE, "exp": int(time.time()) + 60}, key,
                       algorithm="RS256", headers={"kid": "k"})
    with pytest.raises(TokenRefused) as refused:
        await verifier.check(token)
    assert refused.value.reason == "issuer_unreachable" and verifier.failures == 5001
    assert 0 < verifier.retry_at - time.monotonic() <= 60  # the default PLEXOR_AUTH_FETCH_BACKOFF


async def test_a_cached_token_still_expires(issuer):
    key = issuer.publish("k")
    verifier = JwtVerifier(auth_config({"issuer": issuer.url, "resource": RESOURCE, "leeway": 0}))
    token = issuer.token(key, "k", exp=int(time.time()) + 2)
    await verifier.check(token)
    await verifier.check(token)  # from the cache
    time.sleep(2.5)
    with pytest.raises(TokenRefused) as refused:
        await verifier.check(token)
    assert refused.value.reason == "expired"
