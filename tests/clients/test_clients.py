"""The client matrix: Plexor, with every plugin, driven by the MCP client libraries people use, each
pinned and installed by ``tests/clients/install.py`` (``tox -e clients``).

Each library runs in its own venv (Python) or from one ``npm ci`` (Node), through a small driver
(``drivers/``) that does what an application using the library does: connect, list the tools, call one
tool of every plugin, make a call that fails, read a resource. The driver writes down what the library
showed at each step (``drivers/scenario.py``); this file asserts on it: the tool names, the values in the
results, and the guidance sentence of the failing call as the library's user gets it.

Over stdio the library starts ``<this python> -m plexor serve`` itself; over Streamable HTTP it talks
to one ``plexor serve --transport http`` started here. A library that cannot be installed fails its
tests with the installer's output; they are skipped only when the registry cannot be reached (said in
the reason). docs/clients.md has the resulting table and what each library shows for a failed call.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from interop.support import STATUS_REPLY, edgelake_node, http_server, index_folders, missing, server_env, write_notes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import install  # noqa: E402  (tests/clients/install.py, the installer, standard library only)

DRIVER_TIMEOUT = 240
PLUGINS = ("example", "arbor", "keyboard", "folder-search", "edgelake")
# The guidance of the failing call, as Plexor writes it (keyboard's error for an unknown key name).
ERROR_MESSAGE = "no key is named 'nosuchkey', and nothing is close"
GUIDANCE = "Check the spelling, or call keyboard_search_keys (by category: keyboard_list_categories) to browse"


@dataclass(frozen=True)
class Library:
    """One client library: how to run its driver, over which transports, and how it shows a failed call."""

    name: str
    install: str  # install.install() key: a Python client's name, or "node"
    driver: str
    transports: tuple[str, ...]
    raises: bool  # True: an isError result becomes an exception; False: the text comes back as the result
    extra: dict[str, Any] = field(default_factory=dict)  # more config for the driver


LIBRARIES = [
    Library("fastmcp", "fastmcp", "fastmcp_client.py", ("stdio", "http"), raises=True),
    Library("langchain-mcp-adapters", "langchain-mcp-adapters", "langchain_client.py", ("stdio", "http"), raises=False),
    Library("pydantic-ai", "pydantic-ai", "pydantic_ai_client.py", ("stdio", "http"), raises=False),
    Library("openai-agents", "openai-agents", "openai_agents_client.py", ("stdio", "http"), raises=False),
    Library("llama-index-tools-mcp", "llama-index-tools-mcp", "llama_index_client.py", ("stdio", "http"),
            raises=False),
    Library("@modelcontextprotocol/sdk", "node", "sdk", ("stdio", "http"), raises=False),
    # Over stdio, with protocolVersionDiscovery: false (see test_ai_sdk_default_stdio_discovery below).
    Library("@ai-sdk/mcp", "node", "ai-sdk", ("stdio", "http"), raises=False, extra={"discovery": False}),
    Library("mcp-remote", "node", "mcp-remote", ("http",), raises=False),
]
CASES = [pytest.param(lib, t, id=f"{lib.name}-{t}") for lib in LIBRARIES for t in lib.transports]


# --------------------------------------------------------------------------- installs (once, in parallel)
@pytest.fixture(scope="session")
def installs() -> dict[str, install.Installed | Exception]:
    keys = sorted({lib.install for lib in LIBRARIES})

    def attempt(key: str) -> install.Installed | Exception:
        try:
            return install.install(key)
        except (install.Unavailable, install.InstallFailed) as e:
            return e

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(keys, pool.map(attempt, keys), strict=True))


def installed(installs: dict[str, Any], key: str) -> install.Installed:
    got = installs[key]
    if isinstance(got, install.Unavailable):
        pytest.skip(f"not installable here: {got}")
    if isinstance(got, Exception):
        pytest.fail(f"installing {key} failed: {got}", pytrace=False)
    return got


# --------------------------------------------------------------------------- Plexor and its data
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    absent = missing(*PLUGINS)
    assert not absent, f"the client matrix needs every plugin; not installed: {absent} (tox -e clients installs them)"
    base = tmp_path_factory.mktemp("clients")
    notes = write_notes(base / "notes")
    with edgelake_node() as node:
        env = server_env(base / "home", PLEXOR_FOLDER_SEARCH_FOLDERS=str(notes), PLEXOR_EDGELAKE_NODES=node.address)
        index_folders(env)  # each stdio client starts a fresh server, which then finds the index made
        yield {"base": base, "env": env, "node": node}


@pytest.fixture(scope="module")
def http_plexor(world):
    with http_server(world["env"], log=world["base"] / "http.log") as server:
        yield server


@pytest.fixture(scope="module")
def served_tools(http_plexor) -> set[str]:
    """The tool names Plexor serves, as the ``mcp`` SDK of this env lists them."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def names() -> set[str]:
        async with streamable_http_client(http_plexor.url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return {t.name for t in (await session.list_tools()).tools}

    return anyio.run(names)


# --------------------------------------------------------------------------- one library, one transport
def scenario(lib: Library, transport: str, world: dict[str, Any], out: Path) -> dict[str, Any]:
    title = f"{lib.name} over {transport}"
    config: dict[str, Any] = {
        "transport": transport,
        "command": sys.executable, "args": ["-m", "plexor", "serve"], "env": world["env"],
        "calls": [
            {"tool": "example_greet", "arguments": {"name": "Ada", "times": 2}},
            {"tool": "keyboard_lookup_keycode", "arguments": {"key_name": "escape"}},
            {"tool": "arbor_tree_create", "arguments": {"metadata": json.dumps({"title": title})}},
            # A fresh server rescans the folder at start; until then a search may miss the note.
            {"tool": "folders_search_content", "arguments": {"exact_terms": ["kettle"]}, "until": "kettle.md"},
            {"tool": "edgelake_node_status", "arguments": {}},
        ],
        "failing": {"tool": "keyboard_lookup_keycode", "arguments": {"key_name": "nosuchkey"}},
        "resources": ["example://about"],
        "out": str(out),
        "remote_home": str(out.parent / "mcp-remote-home"),
        **lib.extra,
    }
    return config


def run_driver(lib: Library, config: dict[str, Any], tool: install.Installed, tmp: Path) -> dict[str, Any]:
    path = tmp / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    if lib.install == "node":
        # ES modules find packages from the script's folder: run a copy that sits beside node_modules.
        script = tool.where / "node_client.mjs"
        shutil.copyfile(HERE / "drivers" / "node_client.mjs", script)
        cmd = [str(tool.program), str(script), lib.driver, str(path)]
    else:
        cmd = [str(tool.program), str(HERE / "drivers" / lib.driver), str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "PYTHON"))}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=DRIVER_TIMEOUT, env=env,
                          stdin=subprocess.DEVNULL)
    out = Path(config["out"])
    assert out.is_file(), f"the {lib.name} driver wrote no record (exit {done.returncode}):\n{done.stderr[-4000:]}"
    record: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    record["stderr"] = done.stderr[-4000:]
    keep = os.environ.get("PLEXOR_CLIENTS_RECORDS")  # a folder to keep every record in (for docs/clients.md)
    if keep:
        name = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{lib.name}-{lib.driver}-{config['transport']}")
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{name}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    return record


def report(record: dict[str, Any], *keys: str) -> str:
    part = {k: record.get(k) for k in keys} if keys else record
    return json.dumps(part, indent=1, ensure_ascii=False)[:6000]


def found(seen: str, expected: Any) -> bool:
    """Whether ``expected`` (parsed JSON) appears anywhere in ``seen``: the text itself, or a JSON string
    nested in it (libraries wrap the resource text in lists, dicts and JSON-in-JSON)."""
    def walk(value: Any) -> bool:
        if value == expected:
            return True
        if isinstance(value, str):
            try:
                inner = json.loads(value)
            except ValueError:
                return False
            return inner != value and walk(inner)
        if isinstance(value, dict):
            return any(walk(v) for v in value.values())
        if isinstance(value, list):
            return any(walk(v) for v in value)
        return False
    return walk(seen)


def check(lib: Library, transport: str, record: dict[str, Any], served: set[str], world: dict[str, Any]) -> None:
    assert "connect" not in record, f"{lib.name} could not connect over {transport}:\n{report(record)}"
    assert record["list_tools"]["ok"], report(record, "list_tools", "stderr")
    listed = set(record["tools"])
    assert listed == served, (f"{lib.name} lists other tools than Plexor serves: missing {sorted(served - listed)}, "
                              f"extra {sorted(listed - served)}")

    calls = record["calls"]
    for tool, result in calls.items():
        assert result["ok"], f"{lib.name}: {tool} raised {result.get('raised')}\n{result.get('trace', '')}"
    assert "Hello, Ada! Hello, Ada!" in calls["example_greet"]["seen"]
    assert "kVK_Escape" in calls["keyboard_lookup_keycode"]["seen"]
    assert re.search(r'\b53\b', calls["keyboard_lookup_keycode"]["seen"])
    tree = calls["arbor_tree_create"]["seen"]
    assert f"{lib.name} over {transport}" in tree and re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", tree), tree
    assert "kettle.md" in calls["folders_search_content"]["seen"], calls["folders_search_content"]["seen"]
    assert STATUS_REPLY["assigned_name"] in calls["edgelake_node_status"]["seen"]

    failing = record["failing"]
    assert ERROR_MESSAGE in failing["seen"] and GUIDANCE in failing["seen"], \
        f"{lib.name} hid Plexor's guidance for a failed call:\n{report(record, 'failing')}"
    assert failing["ok"] is not lib.raises, \
        f"{lib.name} {'returned' if failing['ok'] else 'raised'} on an isError result:\n{report(record, 'failing')}"

    about = record["resources"]["example://about"]
    assert about["ok"], report(record, "resources", "stderr")
    assert found(about["seen"], {"plugin": "example", "greeting": "Hello"}), about["seen"]


@pytest.mark.parametrize(("lib", "transport"), CASES)
def test_client(lib: Library, transport: str, installs, world, served_tools, request, tmp_path):
    tool = installed(installs, lib.install)
    config = scenario(lib, transport, world, tmp_path / "record.json")
    if transport == "http":
        config["url"] = request.getfixturevalue("http_plexor").url
    before = len(world["node"].commands)
    record = run_driver(lib, config, tool, tmp_path)
    check(lib, transport, record, served_tools, world)
    assert "get status where format = json" in world["node"].commands[before:], "edgelake did not reach the node"
    expected = _pinned_version(lib)
    assert record["version"] == expected, f"{lib.name} {record['version']} ran, {expected} is pinned"


def _pinned_version(lib: Library) -> str:
    if lib.install == "node":
        return json.loads((HERE / "package.json").read_text(encoding="utf-8"))["dependencies"][lib.name]
    dist = {"fastmcp": "fastmcp-slim", "pydantic-ai": "pydantic-ai-slim"}.get(lib.name, lib.name)
    lock = (HERE / "requirements" / f"{lib.install}.txt").read_text(encoding="utf-8")
    pinned = re.search(rf"^{re.escape(dist)}==(\S+)$", lock, re.M)
    assert pinned, f"{dist} is not pinned in requirements/{lib.install}.txt"
    return pinned.group(1)


def test_ai_sdk_default_stdio_discovery(installs, world, served_tools, tmp_path):
    """The AI SDK's MCP client over stdio with its defaults (protocolVersionDiscovery on).

    The client waits 1 s for ``server/discover`` and then falls back to ``initialize`` on the same
    connection. Plexor answers the discover without waiting for its plugins, and when the fallback
    ``initialize`` is already waiting behind the discover it serves the connection in the handshake
    era (docs/transports.md): either way the whole scenario passes."""
    lib = Library("@ai-sdk/mcp", "node", "ai-sdk", ("stdio",), raises=False)
    tool = installed(installs, "node")
    record = run_driver(lib, scenario(lib, "stdio", world, tmp_path / "record.json"), tool, tmp_path)
    check(lib, "stdio", record, served_tools, world)


def test_every_library_in_the_docs_table():
    """docs/clients.md's matrix names every library with the version pinned here."""
    doc = (HERE.parents[1] / "docs" / "clients.md").read_text(encoding="utf-8")
    for lib in LIBRARIES:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{lib.name}`")), None)
        assert row is not None, f"docs/clients.md has no matrix row for `{lib.name}`"
        assert _pinned_version(lib) in row, f"docs/clients.md's row for {lib.name} should say {_pinned_version(lib)}"
