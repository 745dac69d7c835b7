"""The resource server against tokens minted wrongly, scopes per tool, filtered lists, the audit trail.

One real authorization server (oidc-provider, whose signing key the test holds) and one served
Plexor for the module. Every refused request is a ``tools/call`` of the ``ledger`` test plugin,
which records each call it receives: a refusal must leave no record.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from auth.support import SCOPES, authorization_server, free_port, rsa_jwk, served_plexor

pytestmark = pytest.mark.anyio

POST = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ledger_post", "arguments": {"amount": 1}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with authorization_server(tmp, resource) as asrv:
        auth = {"issuer": asrv.issuer, "resource": resource, "leeway": 0,
                "scopes": {"plexor_plugins": ["ledger:admin"]}}
        profiles = {"reader": {"tools": ["ledger_balance", "plexor_*"]}}
        with served_plexor(tmp / "home", port, auth=auth, profiles=profiles) as px:
            yield asrv, px


def post(px, token, body=POST, **headers):
    sent = dict(HEADERS, **headers)
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.post(px.url, content=json.dumps(body), headers=sent, timeout=30)


def challenge(response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    out = {}
    for part in value[7:].split(", "):
        key, _, quoted = part.partition("=")
        out[key] = quoted.strip('"')
    return out


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_protected_resource_metadata_names_the_issuer_and_scopes(stack):
    asrv, px = stack
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        doc = httpx.get(px.base + path).json()
        assert doc["resource"] == asrv.resource
        assert doc["authorization_servers"] == [asrv.issuer]  # exactly, no trailing slash (RFC 8414 3.3)
        assert set(doc["scopes_supported"]) == set(SCOPES)
        assert doc["bearer_methods_supported"] == ["header"]


def test_no_token_gets_401_pointing_at_the_metadata(stack):
    asrv, px = stack
    before = px.calls()
    r = post(px, None)
    assert r.status_code == 401
    c = challenge(r)
    assert c["resource_metadata"] == f"{px.base}/.well-known/oauth-protected-resource/mcp"
    assert "error" not in c  # RFC 6750 3.1: no error code when no credentials were sent
    assert set(c["scope"].split()) == set(SCOPES)
    assert px.calls() == before


@pytest.mark.parametrize("case", ["garbage", "wrong_issuer", "wrong_audience", "expired", "not_yet_valid",
                                  "unknown_key", "alg_none", "tampered", "hs256_with_public_key", "no_exp"])
def test_wrongly_minted_tokens_are_refused_with_401(stack, case):
    import time

    from cryptography.hazmat.primitives import serialization

    asrv, px = stack
    now = int(time.time())
    if case == "garbage":
        token, reason = "not-a-jwt", "malformed"
    elif case == "wrong_issuer":
        token, reason = asrv.mint({"iss": "http://127.0.0.1:1/evil"}), "issuer"
    elif case == "wrong_audience":
        token, reason = asrv.mint({"aud": "http://127.0.0.1:1/other/mcp"}), "audience"
    elif case == "expired":
        token, reason = asrv.mint({"exp": now - 5, "iat": now - 300}), "expired"
    elif case == "not_yet_valid":
        token, reason = asrv.mint({"nbf": now + 600}), "not_yet_valid"
    elif case == "unknown_key":
        other, _ = rsa_jwk("other-key")
        token, reason = asrv.mint(key=other, kid="other-key"), "unknown_key"
    elif case == "alg_none":
        token = f"{_b64({'alg': 'none', 'typ': 'at+jwt', 'kid': asrv.kid})}.{_b64(json.loads(_claims(asrv.mint())))}."
        reason = "algorithm"
    elif case == "tampered":
        head, body, sig = asrv.mint({"scope": "ledger:read"}).split(".")
        claims = json.loads(_claims(f"{head}.{body}.{sig}"))
        claims["scope"] = " ".join(SCOPES)
        token, reason = f"{head}.{_b64(claims)}.{sig}", "signature"
    elif case == "hs256_with_public_key":
        public = asrv.key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        import hashlib
        import hmac as _hmac

        head = _b64({"alg": "HS256", "typ": "at+jwt", "kid": asrv.kid})
        body = _b64(json.loads(_claims(asrv.mint())))
        sig = base64.urlsafe_b64encode(_hmac.new(public, f"{head}.{body}".encode(), hashlib.sha256).digest()).rstrip(b"=")
        token, reason = f"{head}.{body}.{sig.decode()}", "algorithm"
    else:
        token, reason = asrv.mint(drop=("exp",)), "claims"
    before = px.calls()
    r = post(px, token)
    assert r.status_code == 401, r.text
    c = challenge(r)
    assert c["error"] == "invalid_token" and c["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    assert px.calls() == before  # nothing reached the plugin
    denials = [a for a in px.audit() if a.get("reason") == reason]
    assert denials, f"no audit line with reason {reason!r}: {px.audit()[-3:]}"
    assert token not in px.stderr_path.read_text()  # the token is never logged


def _claims(token: str) -> str:
    body = token.split(".")[1]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


@pytest.mark.parametrize(("scopes", "tool", "needed"), [
    ("ledger:read", "ledger_post", "ledger:write"),  # derived: not readOnlyHint
    ("ledger:read ledger:write", "ledger_purge", "ledger:admin"),  # declared: register(..., scopes=[...])
    ("ledger:write plexor:read", "plexor_plugins", "ledger:admin"),  # mapped in [plexor.auth.scopes]
])
def test_missing_scope_gets_403_insufficient_scope_and_nothing_runs(stack, scopes, tool, needed):
    asrv, px = stack
    before = px.calls()
    body = {**POST, "params": {"name": tool, "arguments": {"amount": 1} if tool == "ledger_post" else {}}}
    r = post(px, asrv.mint({"scope": scopes}), body)
    assert r.status_code == 403, r.text
    c = challenge(r)
    assert c["error"] == "insufficient_scope" and c["scope"] == needed
    assert c["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    assert r.json()["error"] == "insufficient_scope"
    assert px.calls() == before
    assert any(a.get("reason") == "insufficient_scope" and a.get("target") == tool and a.get("subject") == "mallory"
               for a in px.audit())


def test_resource_read_and_prompt_need_the_plugins_read_scope(stack):
    asrv, px = stack
    token = asrv.mint({"scope": "plexor:read"})
    read = {"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "ledger://entries"}}
    prompt = {"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": {"name": "ledger_summary"}}
    for body in (read, prompt):
        r = post(px, token, body)
        assert r.status_code == 403 and challenge(r)["scope"] == "ledger:read"


async def _session(px, token, **headers):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=30)
    return http, Client(streamable_http_client(px.url, http_client=http))


async def test_lists_show_only_what_the_scopes_allow(stack):
    asrv, px = stack
    seen = {}
    for scopes in ("ledger:read", "ledger:write", "plexor:read", " ".join(SCOPES)):
        http, client = await _session(px, asrv.mint({"scope": scopes}))
        async with http, client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            seen[scopes] = (tools, resources, prompts)
    assert seen["ledger:read"] == (["ledger_balance"], ["ledger://entries"], ["ledger_summary"])
    assert seen["ledger:write"] == (["ledger_balance", "ledger_post"], ["ledger://entries"], ["ledger_summary"])  # write implies read
    assert seen["plexor:read"] == (["plexor_health"], [], [])  # plexor_plugins is mapped to ledger:admin
    assert seen[" ".join(SCOPES)][0] == ["ledger_balance", "ledger_post", "ledger_purge", "plexor_health", "plexor_plugins"]


async def test_a_valid_token_reaches_the_plugin_and_is_audited(stack):
    asrv, px = stack
    http, client = await _session(px, asrv.mint({"scope": "ledger:write", "jti": "jti-allowed"}))
    async with http, client:
        result = await client.call_tool("ledger_post", {"amount": 3})
    assert not result.is_error and result.structured_content == {"posted": 3}
    assert px.calls()[-1] == {"call": "post", "amount": 3}
    allowed = [a for a in px.audit() if a["decision"] == "allow" and a.get("token_id") == "jti-allowed"]
    assert allowed and allowed[-1]["target"] == "ledger_post" and allowed[-1]["client"] == "minted"
    assert allowed[-1]["scopes_needed"] == ["ledger:write"]


async def test_the_static_token_still_works_beside_oauth(stack):
    asrv, px = stack
    http, client = await _session(px, px.static)
    async with http, client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "ledger_purge" in names
        assert not (await client.call_tool("ledger_purge", {})).is_error
    assert px.calls()[-1] == {"call": "purge"}
    assert any(a["decision"] == "allow" and a.get("subject") == "static-token" and a.get("target") == "ledger_purge"
               for a in px.audit())


async def test_a_token_claim_picks_the_profile_and_wins_over_the_header(stack):
    asrv, px = stack
    token = asrv.mint({"plexor_profile": "reader"})
    http, client = await _session(px, token, **{"Plexor-Profile": "nonexistent"})
    async with http, client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["ledger_balance", "plexor_health", "plexor_plugins"]
        before = px.calls()
        refused = await client.call_tool("ledger_post", {"amount": 9})
        assert refused.is_error and "profile 'reader'" in refused.content[0].text
        assert px.calls() == before
    assert any(a.get("reason") == "not_in_profile" and a.get("profile") == "reader" for a in px.audit())


def test_legacy_sse_is_guarded_too(stack, tmp_path):
    asrv, _ = stack
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with served_plexor(tmp_path / "sse", port, auth={"issuer": asrv.issuer, "resource": resource},
                       args=("--transport", "sse")) as px:
        base = px.base
        r = httpx.get(f"{base}/sse")
        assert r.status_code == 401 and "resource_metadata" in r.headers["www-authenticate"]
        token = asrv.mint({"aud": resource, "scope": "ledger:read"})
        r = httpx.post(f"{base}/messages/?session_id=0123456789abcdef0123456789abcdef", content=json.dumps(POST),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        assert r.status_code == 403 and challenge(r)["scope"] == "ledger:write"
        assert px.calls() == []


async def test_opaque_tokens_are_checked_by_introspection(tmp_path):
    from auth.support import obtain_token, register_client

    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with authorization_server(tmp_path, resource, format="opaque") as asrv:
        plexor_client = register_client(asrv.issuer, token_endpoint_auth_method="client_secret_basic")
        auth = {"issuer": asrv.issuer, "resource": resource,
                "introspection_endpoint": f"{asrv.issuer}/token/introspection",
                "client_id": plexor_client["client_id"], "client_secret": plexor_client["client_secret"]}
        with served_plexor(tmp_path / "home", port, auth=auth) as px:
            token = obtain_token(asrv.issuer, resource, "ledger:read")["access_token"]
            assert token.count(".") != 2  # opaque, not a JWT
            http, client = await _session(px, token)
            async with http, client:
                assert sorted(t.name for t in (await client.list_tools()).tools) == ["ledger_balance"]
                assert not (await client.call_tool("ledger_balance", {})).is_error
            assert post(px, token).status_code == 403  # ledger_post needs ledger:write
            r = post(px, token + "x")
            assert r.status_code == 401 and challenge(r)["error"] == "invalid_token"
            assert any(a.get("reason") == "inactive" for a in px.audit())
            assert [c["call"] for c in px.calls()] == ["balance"]


def test_subscribing_to_a_resource_needs_its_read_scope(stack):
    asrv, px = stack
    body = {"jsonrpc": "2.0", "id": 10, "method": "resources/subscribe", "params": {"uri": "ledger://entries"}}
    r = post(px, asrv.mint({"scope": "plexor:read"}), body)
    assert r.status_code == 403 and challenge(r)["scope"] == "ledger:read"
