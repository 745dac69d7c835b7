"""The whole OAuth 2.1 flow against a real authorization server (oidc-provider, npm, pinned).

The SDK's own OAuth client (``mcp.client.auth.OAuthClientProvider``) connects to a served Plexor
that is a resource server of it: 401 → protected resource metadata → authorization server
metadata → dynamic client registration → authorization code with PKCE (a headless user agent
logs in and consents) → token exchange → calls; then a scope step-up on a 403, and a refresh
once the access token expires.
"""

from __future__ import annotations

import time

import pytest
from auth.support import REDIRECT, authorization_server, free_port, served_plexor, user_agent

pytestmark = pytest.mark.anyio


class Storage:
    """The client's token storage, kept in memory; every token it is handed is remembered."""

    def __init__(self) -> None:
        self.tokens = None
        self.client = None
        self.history: list = []

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


def oauth_client(url: str, storage: Storage, consents: list):
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    answers: dict = {}

    async def redirect_handler(authorization_url: str) -> None:
        import anyio

        consents.append(authorization_url)
        answers.update(await anyio.to_thread.run_sync(user_agent, authorization_url))

    async def callback_handler():
        return AuthorizationCodeResult(code=answers.get("code"), state=answers.get("state"), iss=answers.get("iss"))

    metadata = OAuthClientMetadata(client_name="plexor-tests", redirect_uris=[REDIRECT],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none")
    return OAuthClientProvider(url, metadata, storage, redirect_handler, callback_handler)


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_sdk_oauth_client_completes_the_flow_with_step_up_and_refresh(tmp_path):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with authorization_server(tmp_path, resource, access_ttl=4) as asrv:
        auth = {"issuer": asrv.issuer, "resource": resource, "leeway": 0,
                "challenge_scopes": ["ledger:read", "plexor:read"]}
        with served_plexor(tmp_path / "home", port, auth=auth) as px:
            storage, consents = Storage(), []
            provider = oauth_client(px.url, storage, consents)
            async with httpx2.AsyncClient(auth=provider, timeout=30) as http, \
                    Client(streamable_http_client(px.url, http_client=http)) as client:
                # 1. discovery and the first grant: read scopes only (the 401's challenge)
                assert len(consents) == 1 and "scope=ledger%3Aread+plexor%3Aread" in consents[0]
                assert "resource=" in consents[0] and "code_challenge_method=S256" in consents[0]
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {"ledger_balance", "plexor_health", "plexor_plugins"}
                result = await client.call_tool("ledger_balance", {"account": "a"})
                assert not result.is_error and result.structured_content["balance"] == 42
                assert [c["call"] for c in px.calls()] == ["balance"]
                # 2. a write: 403 insufficient_scope, the client steps up (a second consent), the call goes through once
                result = await client.call_tool("ledger_post", {"amount": 5})
                assert not result.is_error, result
                assert len(consents) == 2 and "ledger%3Awrite" in consents[1]
                assert [c["call"] for c in px.calls()] == ["balance", "post"]
                granted = set(storage.tokens.scope.split())
                assert {"ledger:read", "ledger:write"} <= granted
                # 3. expiry and refresh: after the 4 s lifetime the client refreshes, no new consent
                before = storage.tokens.access_token
                time.sleep(5)
                result = await client.call_tool("ledger_balance", {"account": "b"})
                assert not result.is_error
                assert storage.tokens.access_token != before and len(consents) == 2
            decisions = [(a["decision"], a.get("reason"), a.get("target")) for a in px.audit()]
            assert ("deny", "insufficient_scope", "ledger_post") in decisions
            assert ("allow", None, "ledger_post") in decisions
            assert all(before not in str(a) for a in px.audit())  # never the token
