"""The tree viewer (an MCP App): its shipped page, the tools linked to it, the app-only arbor_tree_view,
and clients without the extension, which see exactly what they saw before. The page itself is driven in
Chromium by tests/apps (tox -e apps)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from arbor_testlib import Calls
from mcp.client.extension import ClientExtension

from plexor.testing import app_page_problems

pytestmark = pytest.mark.anyio
APP = "ui://arbor/tree.html"
MIME = "text/html;profile=mcp-app"
LINKED = {"arbor_tree_render", "arbor_tree_get", "arbor_tree_get_skeleton", "arbor_tree_get_head", "arbor_node_get",
          "arbor_context_get_path", "arbor_context_list_leaves"}
SOURCE = Path(__file__).resolve().parents[1] / "app" / "tree.js"


class AppsHost(ClientExtension):
    identifier = "io.modelcontextprotocol/ui"

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [MIME]}


async def test_the_shipped_page_is_self_contained_and_locked_down(plexor: Any) -> None:
    async with plexor.client(installed=["arbor"], extensions=[AppsHost()]) as client:
        listed = next(r for r in (await client.list_resources()).resources if r.uri == APP)
        content = (await client.read_resource(APP)).contents[0]
    async with plexor.client(installed=["arbor"]) as client:  # listed only to hosts that can show it
        assert APP not in {r.uri for r in (await client.list_resources()).resources}
    assert listed.mime_type == content.mime_type == MIME and content.meta == {"ui": {"csp": {}, "prefersBorder": True}}
    assert app_page_problems(content.text) == []
    assert "<script src" not in content.text and len(re.findall(r"<script\b", content.text)) == 1


def test_the_viewer_never_parses_server_values_as_html() -> None:
    if not SOURCE.exists():
        pytest.skip("the app's source is in the repository, not in the wheel")
    code = SOURCE.read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser", "srcdoc", "eval(",
                 "new Function"):
        assert sink not in code, sink


async def test_tree_tools_link_to_the_viewer_and_tree_view_is_for_the_app_only(plexor: Any) -> None:
    async with plexor.client(installed=["arbor"], extensions=[AppsHost()]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    linked = {name for name, t in tools.items() if (t.meta or {}).get("ui", {}).get("resourceUri") == APP}
    assert linked == LINKED | {"arbor_tree_view"}
    assert tools["arbor_tree_render"].meta["ui"]["visibility"] == ["model", "app"]
    assert tools["arbor_tree_view"].meta["ui"]["visibility"] == ["app"]
    async with plexor.client(installed=["arbor"]) as client:
        plain = {t.name for t in (await client.list_tools()).tools}
    assert plain == set(tools) - {"arbor_tree_view"}


async def test_a_client_without_apps_gets_the_same_text_and_structured_results(plexor: Any, backend: Any) -> None:
    async with plexor.client(installed=["arbor"], env=backend) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        await call.ok("node_create_text", tree_id=tree["id"], content="Hello", metadata={"role": "user"})
        plain = [await client.call_tool(name, {"tree_id": tree["id"]})
                 for name in ("arbor_tree_render", "arbor_tree_get_skeleton", "arbor_context_get_path")]
    async with plexor.client(installed=["arbor"], env=backend, extensions=[AppsHost()]) as client:
        apps = [await client.call_tool(name, {"tree_id": tree["id"]})
                for name in ("arbor_tree_render", "arbor_tree_get_skeleton", "arbor_context_get_path")]
    for before, after in zip(plain, apps, strict=True):
        assert before.content == after.content and before.structured_content == after.structured_content
        assert "ui" not in (before.meta or {})
    assert plain[0].content[0].text.splitlines()[1].endswith("User: Hello")


async def test_tree_view_draws_every_node_with_an_excerpt(plexor: Any, backend: Any) -> None:
    async with plexor.client(installed=["arbor"], env=backend, extensions=[AppsHost()]) as client:
        call = Calls(client)
        tree = await call.ok("tree_create")
        t = tree["id"]
        ask = await call.ok("node_create_text", tree_id=t, content="How long to steep tea?", metadata={"role": "user"})
        a = await call.ok("node_create_text", tree_id=t, content="Three minutes " * 20, metadata={"role": "assistant"})
        b = await call.ok("node_create_text", tree_id=t, content="<b>Four</b>", parent=ask["id"])
        view = await call.ok("tree_view", tree_id=t, excerpt=20)
        nodes = {n["id"]: n for n in view["nodes"]}
        assert view["tree"]["head"] == b["id"] and view["tree"]["root"] == tree["root"]
        assert nodes[ask["id"]]["children"] == [a["id"], b["id"]] and nodes[ask["id"]]["role"] == "user"
        assert nodes[a["id"]]["excerpt"] == ("Three minutes " * 2)[:20] and nodes[a["id"]]["length"] == 280
        assert nodes[b["id"]]["excerpt"] == "<b>Four</b>" and nodes[b["id"]]["role"] is None
        text, _ = await call.error("tree_view", tree_id=t, excerpt=1000)
        assert "excerpt must be 0-400, got 1000" in text
