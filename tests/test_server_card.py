"""The server card at /.well-known/mcp/server-card.json: identity, where to connect, capabilities and
tools, over raw HTTP against a real `plexor serve` (Streamable HTTP, stateless, SSE)."""

from __future__ import annotations

import httpx
import pytest
from conformance.serving import serve_http

CARD = "/.well-known/mcp/server-card.json"


def _card(served) -> dict:
    r = httpx.get(served.base + CARD, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    return r.json()


def test_the_card_describes_the_server_its_transport_and_its_tools(tmp_path):
    with serve_http(tmp_path) as served:
        card = _card(served)
    assert card["$schema"].endswith("/server-card.schema.json")
    assert card["title"] == "Plexor" and card["version"] and card["description"]
    assert card["icons"][0]["src"].startswith("data:image/svg+xml;base64,")
    assert card["remotes"] == [{"type": "streamable-http", "url": f"{served.base}/mcp",
                                "supportedProtocolVersions": ["2025-11-25", "2026-07-28"]}]
    assert card["packages"][0]["transport"] == {"type": "stdio"}
    assert card["capabilities"]["tools"] == {"listChanged": True}
    names = {t["name"]: t for t in card["tools"]}
    assert "plexor_health" in names and "test_echo" in names  # the kernel's and the fixture plugin's
    assert names["plexor_health"]["description"].startswith("Report the server's health")
    assert "inputSchema" not in names["test_echo"]  # schemas stay with tools/list


@pytest.mark.parametrize(("args", "remote"), [
    (("--stateless",), {"type": "streamable-http", "stateless": True}),
    (("--transport", "sse"), {"type": "sse", "supportedProtocolVersions": ["2025-11-25"]}),
])
def test_the_card_names_the_transport_served(tmp_path, args, remote):
    with serve_http(tmp_path, *args) as served:
        card = _card(served)
    assert remote.items() <= card["remotes"][0].items()
    assert card["remotes"][0]["url"] == served.base + ("/sse" if remote["type"] == "sse" else "/mcp")


def test_the_card_is_checked_like_every_route(tmp_path):
    with serve_http(tmp_path) as served:
        r = httpx.get(served.base + CARD, headers={"Host": "evil.example"}, timeout=10)
    assert r.status_code in (403, 421)


def test_the_card_is_a_built_in_plugin_that_can_be_turned_off(tmp_path):
    """`card` is listed with the features; PLEXOR_DISABLE=card serves no card and changes nothing else."""
    with serve_http(tmp_path, env={"PLEXOR_DISABLE": "card"}) as served:
        assert httpx.get(served.base + CARD, timeout=10).status_code == 404
        health = httpx.get(served.base + "/healthz", timeout=10)
    assert health.status_code == 200  # listed in tests/test_extending.py with the other features
