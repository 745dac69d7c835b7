"""The results view (an MCP App): its shipped page, the two searches linked to it, and clients without
the extension, which get exactly the results they got before. The page itself is driven in Chromium by
tests/apps (tox -e apps)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_ready
from mcp.client.extension import ClientExtension

from plexor.testing import app_page_problems

pytestmark = pytest.mark.anyio
INSTALLED = ["folder-search"]
APP = "ui://folder-search/results.html"
MIME = "text/html;profile=mcp-app"
SOURCE = Path(__file__).resolve().parents[1] / "app" / "results.js"


class AppsHost(ClientExtension):
    identifier = "io.modelcontextprotocol/ui"

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [MIME]}


async def test_the_shipped_page_is_self_contained_and_locked_down(plexor: Any) -> None:
    async with plexor.client(installed=INSTALLED, extensions=[AppsHost()]) as client:
        listed = next(r for r in (await client.list_resources()).resources if r.uri == APP)
        content = (await client.read_resource(APP)).contents[0]
    async with plexor.client(installed=INSTALLED) as client:  # listed only to hosts that can show it
        assert APP not in {r.uri for r in (await client.list_resources()).resources}
    assert listed.mime_type == content.mime_type == MIME and content.meta == {"ui": {"csp": {}, "prefersBorder": True}}
    assert app_page_problems(content.text) == []
    assert "<script src" not in content.text and len(re.findall(r"<script\b", content.text)) == 1


def test_the_view_never_parses_server_values_as_html() -> None:
    if not SOURCE.exists():
        pytest.skip("the app's source is in the repository, not in the wheel")
    code = SOURCE.read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser", "srcdoc", "eval(",
                 "new Function"):
        assert sink not in code, sink


async def test_the_searches_link_to_the_view_and_answer_the_same_without_apps(plexor: Any, plexor_config: Any,
                                                                            corpus: Path) -> None:
    plexor_config({"folder-search": {"folders": [str(corpus)], "model": "none"}})
    calls = [("folders_search_content", {"exact_terms": ["backoff"]}), ("folders_find_documents", {"query": "retry"})]
    async with plexor.client(installed=INSTALLED, extensions=[AppsHost()]) as client:
        await wait_ready(client)
        tools = {t.name: t for t in (await client.list_tools()).tools}
        apps = [await client.call_tool(name, args) for name, args in calls]
    linked = {name for name, t in tools.items() if (t.meta or {}).get("ui")}
    assert linked == {"folders_search_content", "folders_find_documents"}
    assert tools["folders_search_content"].meta["ui"] == {"resourceUri": APP, "visibility": ["model", "app"]}
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        assert {t.name for t in (await client.list_tools()).tools} == set(tools)
        plain = [await client.call_tool(name, args) for name, args in calls]
    for before, after in zip(plain, apps, strict=True):
        assert not before.is_error and before.content == after.content
        assert before.structured_content == after.structured_content
    assert "retry.md" in plain[0].content[0].text and "**backoff**" in plain[0].content[0].text
