"""The MCP Inspector's CLI (npm ``@modelcontextprotocol/inspector``, ``--cli``) against Plexor, over stdio
and over Streamable HTTP: ``tools/list``, ``tools/call`` on a tool of every installed plugin,
``resources/list``, ``resources/templates/list`` and ``resources/read``, asserting on its JSON output.

The Inspector is installed by ``tests/interop/setup.sh`` (pinned, into ``.cache/inspector``); the session
fixture runs it, which is instant once installed. Without npm and without an install the whole module
is skipped, unless ``PLEXOR_REQUIRE_INSPECTOR=1`` makes that a failure (for CI). Tests of a plugin that
is not installed are skipped with the reason (the kernel's tox env has only the example plugin; the
``all`` env has every plugin).

Over stdio each Inspector command launches its own ``python -m plexor serve`` (as a desktop client
would), all sharing one ``PLEXOR_HOME``: what one process writes (an arbor tree), the next one reads.
The Inspector hands the server only the variables given with ``-e``, not its own environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from interop.support import STATUS_REPLY, edgelake_node, http_server, index_folders, installed, server_env, write_notes

import plexor

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "tests" / "interop" / "setup.sh"
CACHE = Path(os.environ.get("PLEXOR_INSPECTOR_CACHE") or ROOT / ".cache" / "inspector")
REQUIRED = os.environ.get("PLEXOR_REQUIRE_INSPECTOR") == "1"
TIMEOUT = 60


def needs(plugin: str):
    skip = pytest.mark.skipif(not installed(plugin), reason=f"the {plugin} plugin is not installed (tox -e all installs it)")
    return lambda test: pytest.mark.all_plugins(skip(test))


@dataclass
class Outcome:
    """One Inspector command: its exit code, stdout parsed as JSON (None when empty) and stderr."""

    returncode: int
    data: Any
    stderr: str


@dataclass
class Inspector:
    node: str
    entry: str

    def run(self, *args: str) -> Outcome:
        done = subprocess.run([self.node, self.entry, "--cli", *args], capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        try:
            data = json.loads(done.stdout) if done.stdout.strip() else None
        except json.JSONDecodeError as e:
            raise AssertionError(f"the Inspector printed something other than JSON ({e}):\n{done.stdout[:2000]}"
                                 f"\nstderr:\n{done.stderr[-2000:]}") from None
        return Outcome(done.returncode, data, done.stderr)


@pytest.fixture(scope="session")
def inspector() -> Inspector:
    def unavailable(reason: str) -> None:
        if REQUIRED:
            pytest.fail(f"{reason} (and PLEXOR_REQUIRE_INSPECTOR=1)")
        pytest.skip(reason)

    stamp = CACHE / "installed.json"
    if shutil.which("bash") is None:
        if not stamp.is_file():
            unavailable(f"the MCP Inspector is not installed in {CACHE} and bash is missing to run {SETUP}")
    else:
        done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=600)
        if done.returncode == 3:
            unavailable(f"the MCP Inspector cannot be installed here: {done.stderr.strip()}")
        assert done.returncode == 0, f"{SETUP} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    paths = json.loads(stamp.read_text(encoding="utf-8"))
    if not (Path(paths["node"]).is_file() and Path(paths["entry"]).is_file()):
        unavailable(f"the MCP Inspector install in {CACHE} is incomplete; run {SETUP}")
    return Inspector(paths["node"], paths["entry"])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One PLEXOR_HOME for the module, a folder of notes (indexed) and a stand-in EdgeLake node."""
    base = tmp_path_factory.mktemp("inspector")
    notes = write_notes(base / "notes")
    with edgelake_node() as node:
        env = {"PLEXOR_HOME": str(base / "home"), "PLEXOR_LOG_LEVEL": "warning",
               "PLEXOR_FOLDER_SEARCH_FOLDERS": str(notes), "PLEXOR_EDGELAKE_NODES": node.address}
        if installed("folder-search"):
            # Indexed up front: each stdio command is a fresh process that would otherwise still be indexing.
            index_folders(server_env(base / "home", **env))
        yield {"base": base, "env": env, "node": node}


@pytest.fixture(scope="module")
def http_plexor(world):
    env = server_env(Path(world["env"]["PLEXOR_HOME"]), **world["env"])
    with http_server(env, log=world["base"] / "http.log") as server:
        yield server


class Client:
    """Inspector commands against one transport."""

    def __init__(self, inspector: Inspector, transport: str, env: dict[str, str], server: Any = None) -> None:
        self.inspector, self.transport, self.env, self.server = inspector, transport, env, server

    def run(self, *args: str) -> Outcome:
        if self.transport == "stdio":
            variables = [a for key, value in self.env.items() for a in ("-e", f"{key}={value}")]
            return self.inspector.run(*variables, *args, "--", sys.executable, "-m", "plexor", "serve")
        return self.inspector.run(self.server.url, "--transport", "http", *args)

    def ok(self, *args: str) -> Any:
        out = self.run(*args)
        assert out.returncode == 0, f"{args} exited {out.returncode}: {out.data}\n{out.stderr[-2000:]}"
        return out.data

    def call(self, tool: str, **arguments: Any) -> Outcome:
        pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
        return self.run("--method", "tools/call", "--tool-name", tool, *(["--tool-arg", *pairs] if pairs else []))

    def call_ok(self, tool: str, **arguments: Any) -> dict:
        out = self.call(tool, **arguments)
        assert out.returncode == 0 and out.data["isError"] is False, f"{tool}: {out.data}\n{out.stderr[-2000:]}"
        return out.data


@pytest.fixture(params=["stdio", "http"])
def client(request, inspector, world) -> Client:
    server = request.getfixturevalue("http_plexor") if request.param == "http" else None
    return Client(inspector, request.param, world["env"], server)


def test_the_pinned_inspector_runs_on_a_node_it_supports(inspector):
    pinned = re.search(r'^INSPECTOR_VERSION="([^"]+)"', SETUP.read_text(encoding="utf-8"), re.M).group(1)
    out = subprocess.run([inspector.node, inspector.entry, "--version"], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert out.returncode == 0 and pinned in out.stdout
    assert f"MCP Inspector {pinned}" in (ROOT / "docs" / "clients.md").read_text(encoding="utf-8"), \
        "docs/clients.md should name the Inspector version the tests run"
    node = subprocess.run([inspector.node, "--version"], capture_output=True, text=True, timeout=TIMEOUT)
    major, minor = (int(x) for x in node.stdout.strip().lstrip("v").split(".")[:2])
    assert (major, minor) >= (22, 19), "the Inspector's engines field asks for Node >= 22.19"


def test_tools_list_has_every_installed_plugin(client):
    tools = client.ok("--method", "tools/list")["tools"]
    names = {t["name"] for t in tools}
    assert {"plexor_health", "plexor_plugins"} <= names
    expected = {"example": "example_greet", "arbor": "arbor_tree_create", "keyboard": "keyboard_lookup_keycode",
                "folder-search": "folders_search_content", "edgelake": "edgelake_node_status"}
    for plugin, tool in expected.items():
        assert (tool in names) == installed(plugin), (plugin, tool)
    for tool in tools:
        assert tool["description"].strip(), tool["name"]
        assert tool["inputSchema"]["type"] == "object", tool["name"]
    greet = next((t for t in tools if t["name"] == "example_greet"), None)
    if greet is not None:
        assert greet["inputSchema"]["required"] == ["name"]
        assert greet["annotations"]["readOnlyHint"] is True


def test_plexor_health(client):
    health = client.call_ok("plexor_health")["structuredContent"]
    if client.transport == "http":
        assert health["kernel"]["state"] == "ready"
    else:
        # Each stdio call is a fresh server: plexor_health answers while the other plugins may
        # still be starting (by design), so the kernel is starting or already ready.
        assert health["kernel"]["state"] in ("starting", "ready")
    plexor_entry = next(p for p in health["plugins"] if p["name"] == "plexor")
    assert plexor_entry["state"] == "ready"
    assert health["version"] == plexor.__version__
    assert health["pid"] != os.getpid()
    if client.transport == "http":
        assert health["pid"] == client.server.proc.pid
    states = {p["name"]: p["state"] for p in health["plugins"]}
    for plugin in ("example", "arbor", "keyboard", "folder-search", "edgelake"):
        if installed(plugin):
            assert states[plugin] in ("ready", "starting"), (plugin, states[plugin])


@needs("example")
def test_example_greet(client):
    r = client.call_ok("example_greet", name="Ada", times=2)
    assert r["structuredContent"] == {"greeting": "Hello, Ada! Hello, Ada!"}
    assert r["content"][0]["type"] == "text" and "Hello, Ada!" in r["content"][0]["text"]


@needs("keyboard")
def test_keyboard_lookup_keycode(client):
    key = client.call_ok("keyboard_lookup_keycode", key_name="escape")["structuredContent"]
    assert key["found"] is True and key["key"]["code"] == 53 and key["key"]["name"] == "Escape"


@needs("arbor")
def test_arbor_tree_created_then_read_as_a_resource(client):
    tree = client.call_ok("arbor_tree_create", metadata={"title": f"inspector over {client.transport}"})
    tree_id = tree["structuredContent"]["id"]
    # Over stdio, the read below is a new server process reading the same PLEXOR_HOME.
    contents = client.ok("--method", "resources/read", "--uri", f"arbor://tree/{tree_id}")["contents"]
    assert contents[0]["uri"] == f"arbor://tree/{tree_id}"
    assert tree_id in contents[0]["text"] and f"inspector over {client.transport}" in contents[0]["text"]


@needs("folder-search")
def test_folders_search_content(client):
    found = client.call_ok("folders_search_content", exact_terms=["kettle"])["structuredContent"]
    assert [r["path"] for r in found["results"]] == ["kettle.md"]
    assert "**kettle**" in found["results"][0]["snippet"]


@needs("edgelake")
def test_edgelake_node_status_reaches_the_node(client, world):
    before = len(world["node"].commands)
    status = client.call_ok("edgelake_node_status")["structuredContent"]
    assert status["status"] == STATUS_REPLY
    assert status["source"]["node"] == world["node"].address
    assert "get status where format = json" in world["node"].commands[before:]


def test_resources_list_and_read(client):
    resources = {r["uri"]: r for r in client.ok("--method", "resources/list")["resources"]}
    if installed("keyboard"):
        assert resources["keycode://all"]["mimeType"] == "application/json"
    if not installed("example"):
        pytest.skip("resources/read reads example://about, from the example plugin, which is not installed")
    assert resources["example://about"]["name"] == "about"
    about = client.ok("--method", "resources/read", "--uri", "example://about")["contents"][0]
    assert about["mimeType"] == "application/json"
    assert json.loads(about["text"]) == {"plugin": "example", "greeting": "Hello"}


# Below: HTTP only. The server answers these the same way over either transport; over stdio each
# command costs a server start, so they are not repeated there.

@pytest.fixture
def http_client(inspector, world, http_plexor) -> Client:
    return Client(inspector, "http", world["env"], http_plexor)


@needs("example")
def test_a_tool_error_reaches_the_inspector_with_guidance(http_client):
    bad = http_client.call("example_greet", name="Ada", times=11)
    assert bad.returncode != 0 and bad.data["isError"] is True
    assert "times = 11 is out of range" in bad.data["content"][0]["text"]
    assert "Pass a number from 1 to 10." in bad.data["content"][0]["text"]


def test_resource_templates_list(http_client):
    templates = {t["uriTemplate"] for t in http_client.ok("--method", "resources/templates/list")["resourceTemplates"]}
    for plugin, template in (("arbor", "arbor://tree/{tree_id}"), ("keyboard", "keycode://category/{category}"),
                             ("edgelake", "edgelake://database/{database}")):
        assert (template in templates) == installed(plugin), (plugin, template)


@needs("keyboard")
def test_keycode_resources_read(http_client):
    keys = json.loads(http_client.ok("--method", "resources/read", "--uri", "keycode://all")["contents"][0]["text"])
    assert keys["count"] == 120
    assert next(k for k in keys["keys"] if k["name"] == "Escape")["code"] == 53
    letters = http_client.ok("--method", "resources/read", "--uri", "keycode://category/letters")["contents"][0]
    names = {k["name"] for k in json.loads(letters["text"])["keys"]}
    assert len(names) == 26 and {"A", "Z"} <= names


def test_unknown_resource_names_what_is_served(http_client):
    out = http_client.run("--method", "resources/read", "--uri", "nothing://here")
    assert out.returncode != 0
    assert "no resource matches 'nothing://here'" in out.stderr


def test_plexor_connect_clients_share_one_daemon(inspector, tmp_path):
    """docs/clients.md's recommended command, `plexor connect`: each launch relays to one shared daemon,
    which also answers over HTTP with the token from its registry."""
    from plexor.features.daemon.process import read_registry, stop_daemon

    home = tmp_path / "home"
    registry = home / "data" / "daemon.json"
    variables = ["-e", f"PLEXOR_HOME={home}", "-e", "PLEXOR_LOG_LEVEL=warning"]
    try:
        pids = []
        for _ in range(2):
            out = inspector.run(*variables, "--method", "tools/call", "--tool-name", "plexor_health",
                                "--", sys.executable, "-m", "plexor", "connect")
            assert out.returncode == 0, f"{out.data}\n{out.stderr[-2000:]}"
            pids.append(out.data["structuredContent"]["pid"])
        info = read_registry(registry)
        assert info is not None and pids == [info["pid"], info["pid"]]

        health = inspector.run(info["url"], "--transport", "http", "--header", f"Authorization: Bearer {info['token']}",
                               "--method", "tools/call", "--tool-name", "plexor_health")
        assert health.returncode == 0 and health.data["structuredContent"]["pid"] == info["pid"]
        refused = inspector.run(info["url"], "--transport", "http", "--method", "tools/list")
        assert refused.returncode != 0  # 401 without the token: the Inspector falls back to OAuth, which it cannot do
        assert "auth" in (json.dumps(refused.data) + refused.stderr).lower()
    finally:
        info = read_registry(registry)
        if info is not None:
            stop_daemon(info, wait=10)
