"""The Arbor tree viewer in a real Chromium, through a host built on the ext-apps SDK's AppBridge,
against a real ``plexor serve --transport http``: select, collapse and expand, move the head and
branch from a node (checked with a real MCP call), and hostile node content that must stay text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from interop.support import http_server, server_env

from apps.support import call, drive, keep_shots, need_browser

HOSTILE = '<img src=x onerror="parent.postMessage(1,\'*\');window.pwned=1"><script>window.pwned=2</script>'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    need_browser()
    home = tmp_path_factory.mktemp("home")
    # Both plugins with a view, so two apps share ui:// on one server.
    with http_server(server_env(home, PLEXOR_PLUGINS="arbor,folder-search"), log=home / "serve.log") as server:
        yield server


def seed(url: str, hostile: bool = False) -> dict[str, str]:
    """A tree: system, user, assistant, then two user branches from the assistant's reply."""
    async def build() -> dict[str, str]:
        tree = await call(url, "arbor_tree_create", {})
        tid = tree["id"]
        ids = {"tree": tid}
        for key, role, text in [("system", "system", "You are a helpful gardener."),
                                ("ask", "user", "How do I prune an apple tree?"),
                                ("answer", "assistant", "Prune in late winter: remove dead wood first.\nThen thin crossing branches."),
                                ("left", "user", HOSTILE if hostile else "And a pear tree?")]:
            node = await call(url, "arbor_node_create_text", {"tree_id": tid, "content": text,
                                                               "metadata": json.dumps({"role": role})})
            ids[key] = node["id"]
        right = await call(url, "arbor_node_create_text", {"tree_id": tid, "content": "What about cherries?",
                                                            "parent": ids["answer"], "metadata": json.dumps({"role": "user"})})
        ids["right"] = right["id"]
        return ids
    return anyio.run(build)


def test_tree_viewer_select_expand_move_head_and_branch(served: Any, tmp_path: Path) -> None:
    ids = seed(served.url)
    line = '.line[data-node="{}"]'.format
    report = drive(served.url, {"tool": "arbor_tree_render", "args": {"tree_id": ids["tree"]}, "steps": [
        {"wait": line(ids["right"])},
        {"count": ".line"},                                         # 0: every node drawn
        {"text": line(ids["right"]) + " .head"},                    # 1: the head is marked
        {"text": line(ids["answer"]) + " .branches"},               # 2: the branch point says so
        {"shot": "arbor-tree-viewer"},
        {"click": line(ids["answer"]) + " .toggle"},                # collapse the branch point
        {"count": ".line"},                                         # 3: its children are hidden
        {"click": line(ids["answer"]) + " .toggle"},                # expand it again
        {"count": ".line"},                                         # 4
        {"click": line(ids["left"])},                               # select a node
        {"wait": "#path li.here"},
        {"text": "#content"},                                       # 5: its full content
        {"count": "#path li"},                                      # 6: its context path
        {"shot": "arbor-tree-viewer-selected"},
        {"click": "#make-head"},                                    # move the head there
        {"wait": line(ids["left"]) + " .head"},
        {"click": line(ids["system"])},
        {"wait": "#path li.here"},
        {"fill": ["#reply", "Start over: what is pruning?"]},
        {"click": "#branch"},                                       # branch from the system message
        {"wait": line(ids["system"]) + " .branches"},
        {"count": ".line"},                                         # 7: the new node is drawn
        {"shot": "arbor-tree-viewer-branched"},
    ]}, tmp_path)
    steps = report["steps"]
    assert steps[0] == 6 and steps[1] == "HEAD" and steps[2] == "2 branches"  # the tree's root, then 5 messages
    assert steps[3] == 4 and steps[4] == 6
    assert steps[5] == "And a pear tree?" and steps[6] == 5
    assert steps[7] == 7
    assert report["outside"] == [] and report["dialogs"] == 0
    host = report["host"]  # what the host read: the tool's link and the resource's policy
    assert host["toolMeta"]["ui"] == {"resourceUri": "ui://arbor/tree.html", "visibility": ["model", "app"]}
    assert host["resourceMeta"] == {"ui": {"csp": {}, "prefersBorder": True}}
    head = anyio.run(call, served.url, "arbor_tree_get_head", {"tree_id": ids["tree"]})
    assert head["parent"] == ids["system"] and head["data"]["content"] == "Start over: what is pruning?"
    skeleton = anyio.run(call, served.url, "arbor_tree_get_skeleton", {"tree_id": ids["tree"]})
    root = next(n for n in skeleton["nodes"] if n["id"] == ids["system"])
    assert root["children"] == [ids["ask"], head["id"]]
    keep_shots(tmp_path, "arbor-tree-viewer", "arbor-tree-viewer-selected")


def test_the_server_advertises_the_extension_on_server_discover(served: Any) -> None:
    # (The 2025-11-25 initialize result, which the test host's client uses, has no field for extensions.)
    from conformance.serving import modern_post

    status, reply = modern_post(served, "server/discover", {})
    assert status == 200 and reply["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/ui"] == {}


def test_hostile_node_content_stays_text(served: Any, tmp_path: Path) -> None:
    ids = seed(served.url, hostile=True)
    line = '.line[data-node="{}"]'.format
    report = drive(served.url, {"tool": "arbor_tree_get", "args": {"tree_id": ids["tree"]}, "steps": [
        {"wait": line(ids["left"])},
        {"click": line(ids["left"])},
        {"wait": "#path li.here"},
        {"text": "#content"},
        {"eval": "[document.querySelectorAll('img').length, window.pwned ?? null,"
                 " document.scripts.length]"},
    ]}, tmp_path)
    text, (elements, pwned, scripts) = report["steps"][0], report["steps"][1]
    assert text == HOSTILE  # shown as the characters it is
    assert elements == 0 and pwned is None and scripts == 1
    assert report["dialogs"] == 0 and report["outside"] == []
