"""The agent frameworks: every tool reaches the model whole, and calls work with only the required arguments.

An agent framework converts each MCP tool into a tool of its own, and the model sees what the
conversion left. Each framework here, pinned and installed like the client matrix
(``tests/clients/install.py``: its own venv, mcp 1.x where it pins ``mcp<2``), lists Plexor's tools
through its own code, offline (no model, no network), and its driver (``drivers/*_tools.py``,
``drivers/frameworks.py``) writes down the schema each tool became. The loss report (``losses.py``)
compares it with the schema Plexor serves: types, enums, descriptions, ``required`` and nested
properties. Then one tool of every plugin is called through the framework with only its required
arguments, and again with ``null`` for every optional one.

Some losses come from a converter's own model, whatever the schema says, and are listed (``known``)
so that any other loss, or one of these going away, fails: docs/authoring.md has the measurements.
A nested property a converter drops must at least be named in its parent's description.
Frameworks that check arguments against the converted schema themselves refuse ``null`` where it
advertises a plain type, before Plexor sees it (``nulls=False``): a model driven by them is never
told it may send one. Plexor accepts it from the others (strict-mode converters send it).

Also here: 20 short sessions of mcp 1.x's ``ClientSession`` (open, list, call, close), which ended
with ``BrokenResourceError`` when an unsolicited ``*/list_changed`` arrived while it closed.
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

import anyio
import pytest
from interop.support import STATUS_REPLY
from losses import losses
from test_clients import installed, world  # noqa: F401 - world is a fixture used here

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import install  # noqa: E402

DRIVER_TIMEOUT = 300
SESSIONS = 20
# One tool of every plugin, with its required arguments, and what its result must show.
CALLS = {
    "example_greet": ({"name": "Ada"}, "Hello, Ada!"),
    "keyboard_lookup_keycode": ({"key_name": "escape"}, "kVK_Escape"),
    "arbor_tree_list": ({}, "next_offset"),
    "folders_list_folders": ({}, "folders"),
    "edgelake_node_status": ({}, STATUS_REPLY["assigned_name"]),
    "plexor_health": ({}, "plugins"),
}
# Converter limits no schema shape avoids (measured: docs/authoring.md, "Schemas every model API accepts").
OLLAMA_NESTED = frozenset({  # ollama's Tool.Function.Parameters.Property keeps type, items, description, enum
    # (so handle's description names its fields: checked by _unnamed)
    "arbor_node_create_external: handle: required ['identifier', 'source'] became []",
    *(f"arbor_node_create_external: handle.{p}: missing" for p in ("source", "identifier", "source_version",
                                                                   "metadata")),
})
AUTOGEN_NESTED = frozenset({  # jsonref.replace_refs drops the description beside a $ref to a nested model
    "arbor_node_create_external: handle: description lost",  # (an array's item says it in the array's)
})
MCP_USE_LIMITS = frozenset({  # mcp-use's JSONSchemaToZod: an integer is a refined z.number(), an enum a refined z.string()
    "arbor_context_get_path: limit: type ['integer'] became ['number']",
    "arbor_node_get_path: limit: type ['integer'] became ['number']",
    "arbor_tree_claim: count: type ['integer'] became ['number']",
    *(f"arbor_tree_list: {p}: type ['integer'] became ['number']" for p in ("limit", "offset")),
    *(f"arbor_tree_list_archived: {p}: type ['integer'] became ['number']" for p in ("limit", "offset")),
    *(f"arbor_tree_list_scheduled: {p}: type ['integer'] became ['number']" for p in ("limit", "offset")),
    "arbor_tree_release: count: type ['integer'] became ['number']",
    *(f"arbor_tree_render: {p}: type ['integer'] became ['number']" for p in ("limit", "max_depth", "offset")),
    "edgelake_query: limit: type ['integer'] became ['number']",
    "example_greet: times: type ['integer'] became ['number']",
    "folders_find_documents: limit: type ['integer'] became ['number']",
    "folders_get_chunks: chunk_ids[]: type ['integer'] became ['number']",
    "folders_get_document_text: max_chars: type ['integer'] became ['number']",
    "folders_list_documents: limit: type ['integer'] became ['number']",
    "folders_search_content: limit: type ['integer'] became ['number']",
    "arbor_tree_list: state: enum ['active', 'scheduled_delete', 'archived'] became None",
    "edgelake_info_table: info_type: enum ['columns', 'exists', 'partitions'] became None",
    "edgelake_monitor_nodes: status_type: enum ['status', 'resources', 'version', 'cpu'] became None",
    "edgelake_query: format: enum ['json', 'table'] became None",
    "edgelake_query: order_by[].direction: enum ['asc', 'desc'] became None",
    "folders_get_server_info: section: enum ['folders', 'model', 'search', 'settings', 'totals', 'warnings'] became None",
    "plexor_plugins: state: enum ['created', 'loading', 'starting', 'ready', 'draining', 'stopped', 'failed', 'disabled'] "
    "became None",
})


@dataclass(frozen=True)
class Framework:
    name: str  # the distribution pinned (its version is checked)
    install: str  # install.install() key
    driver: str
    nulls: bool  # True: null for every optional argument reaches Plexor; False: the framework may refuse it first
    known: frozenset[str] = field(default_factory=frozenset)


FRAMEWORKS = [
    Framework("anthropic", "anthropic", "anthropic_tools.py", nulls=True),
    Framework("ollama", "ollama", "ollama_tools.py", nulls=True, known=OLLAMA_NESTED),
    Framework("semantic-kernel", "semantic-kernel", "semantic_kernel_tools.py", nulls=True),
    Framework("autogen-ext", "autogen-ext", "autogen_tools.py", nulls=False, known=AUTOGEN_NESTED),
    Framework("dspy", "dspy", "dspy_tools.py", nulls=False),
    Framework("smolagents", "smolagents", "smolagents_tools.py", nulls=True),
    Framework("@langchain/mcp-adapters", "node", "langchain_js_tools.mjs", nulls=False),
    Framework("mcp-use", "node-mcp-use", "mcp_use_tools.mjs", nulls=False, known=MCP_USE_LIMITS),
]
NODE_FOLDERS = {"node": HERE, "node-mcp-use": HERE / "mcp-use"}  # install key: its package.json's folder


@pytest.fixture(scope="session")
def framework_installs() -> dict[str, install.Installed | Exception]:
    keys = sorted({f.install for f in FRAMEWORKS} | {"mcp-1", "decoding"})

    def attempt(key: str) -> install.Installed | Exception:
        try:
            return install.install(key)
        except (install.Unavailable, install.InstallFailed) as e:
            return e

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(keys, pool.map(attempt, keys), strict=True))


def _serve(plexor: dict[str, Any]) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "plexor", "serve"], "env": plexor["env"]}


@pytest.fixture(scope="module")
def served(world) -> dict[str, dict[str, Any]]:  # noqa: F811 - the fixture imported above
    """Every tool's input schema, as this env's ``mcp`` SDK lists it over stdio."""
    from mcp import Client, StdioServerParameters

    async def listed() -> dict[str, dict[str, Any]]:
        params = StdioServerParameters(**_serve(world))
        async with Client(params, mode="legacy") as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    return anyio.run(listed)


def _calls(served: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    calls = []
    for tool, (arguments, _) in CALLS.items():
        calls.append({"label": f"{tool}/required", "tool": tool, "arguments": arguments})
        optional = {p: None for p in served[tool]["properties"] if p not in served[tool].get("required", [])}
        calls.append({"label": f"{tool}/nulls", "tool": tool, "arguments": {**arguments, **optional}})
    return calls


def _run(program: list[str], config: dict[str, Any], tmp: Path) -> dict[str, Any]:
    path = tmp / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "PYTHON"))}
    done = subprocess.run([*program, str(path)], capture_output=True, text=True, timeout=DRIVER_TIMEOUT, env=env,
                          stdin=subprocess.DEVNULL)
    out = Path(config["out"])
    assert out.is_file(), f"{program[-1]} wrote no record (exit {done.returncode}):\n{done.stderr[-4000:]}"
    record: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    record["stderr"] = done.stderr[-3000:]
    return record


def _program(fw: Framework, tool: install.Installed) -> list[str]:
    if fw.install in NODE_FOLDERS:  # ES modules resolve packages from the script's folder
        script = tool.where / fw.driver
        shutil.copyfile(HERE / "drivers" / fw.driver, script)
        return [str(tool.program), str(script)]
    return [str(tool.program), str(HERE / "drivers" / fw.driver)]


def _report(fw: Framework, record: dict[str, Any], served: dict[str, dict[str, Any]]) -> list[str]:
    found = [f"{name}: {loss}" for name, schema in served.items()
             for loss in losses(schema, record["converted"].get(name))]
    return sorted(set(found) ^ fw.known)  # a new loss, or a known one that went away


def _unnamed(fw: Framework, record: dict[str, Any]) -> list[str]:
    """The nested properties a converter dropped (ollama) that the parent's description it kept does not
    name: the model must still learn them from the text (docs/authoring.md)."""
    unnamed = []
    for loss in sorted(fw.known):
        dropped = re.fullmatch(r"(\w+): ([\w.]+)\.(\w+): missing", loss)
        if dropped:
            tool, parent, name = dropped.groups()
            schema = record["converted"][tool]
            for step in parent.split("."):
                schema = schema["properties"][step]
            if name not in str(schema.get("description", "")):
                unnamed.append(f"{tool}: {parent}'s description does not name {name!r}")
    return unnamed


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=[f.name for f in FRAMEWORKS])
def test_framework(fw: Framework, framework_installs, world, served, tmp_path):  # noqa: F811
    tool = installed(framework_installs, fw.install)
    config = {**_serve(world), "calls": _calls(served), "out": str(tmp_path / "record.json")}
    record = _run(_program(fw, tool), config, tmp_path)
    assert "connect" not in record, f"{fw.name} could not connect:\n{json.dumps(record, indent=1)[:4000]}"
    assert not record["refused"], f"{fw.name} refused tools: {json.dumps(record['refused'], indent=1)[:4000]}"
    assert set(record["converted"]) == set(served), \
        f"{fw.name} lists other tools: missing {sorted(set(served) - set(record['converted']))}"
    report = _report(fw, record, served)
    assert not report, f"{fw.name} loss report (new losses, or known ones gone):\n" + "\n".join(report)
    assert not _unnamed(fw, record), _unnamed(fw, record)
    for name, (_, shows) in CALLS.items():
        required = record["calls"][f"{name}/required"]
        assert required["ok"] and shows in required["seen"], f"{fw.name}: {name} with its required arguments: {required}"
        nulls = record["calls"][f"{name}/nulls"]
        if nulls["ok"] or fw.nulls:  # it reached Plexor: null is "not given"
            assert nulls["ok"] and shows in nulls["seen"], f"{fw.name}: {name} with null for the optional: {nulls}"
        else:  # refused by the framework's own check of the advertised type, never by Plexor
            assert "Accepted arguments" not in nulls["seen"], (fw.name, name, nulls)
    assert record["version"] == _pinned(fw), f"{fw.name} {record['version']} ran, {_pinned(fw)} is pinned"


def _pinned(fw: Framework) -> str:
    if fw.install in NODE_FOLDERS:
        package = NODE_FOLDERS[fw.install] / "package.json"
        return json.loads(package.read_text(encoding="utf-8"))["dependencies"][fw.name]
    lock = (HERE / "requirements" / f"{fw.install}.txt").read_text(encoding="utf-8")
    pinned = re.search(rf"^{re.escape(fw.name)}==(\S+)$", lock, re.M)
    assert pinned, f"{fw.name} is not pinned in requirements/{fw.install}.txt"
    return pinned.group(1)


def test_mcp1_short_sessions_end_cleanly(framework_installs, world, tmp_path):  # noqa: F811
    """20 consecutive short stdio sessions of mcp 1.x's ClientSession: none errors, none is told of a
    list it never fetched (only the tools were listed)."""
    tool = installed(framework_installs, "mcp-1")
    config = {**_serve(world), "sessions": SESSIONS, "out": str(tmp_path / "record.json"),
              "call": {"tool": "example_greet", "arguments": {"name": "Ada"}}}
    record = _run([str(tool.program), str(HERE / "drivers" / "mcp1_sessions.py")], config, tmp_path)
    assert record["version"].startswith("1."), record["version"]
    failed = [s for s in record["sessions"] if not s["ok"] or not s.get("called")]
    assert not failed, json.dumps(failed[:3], indent=1)
    told = [s["notifications"] for s in record["sessions"] if any("list_changed" in n for n in s["notifications"])]
    assert not told, f"sessions told of lists they never fetched: {told[:3]}"
    assert len(record["sessions"]) == SESSIONS


def test_local_decoding_compilers_accept_every_schema(framework_installs, served, tmp_path):
    """llguidance and outlines-core compile every tool's schema into a grammar, without a warning."""
    tool = installed(framework_installs, "decoding")
    config = {"schemas": served, "out": str(tmp_path / "record.json")}
    record = _run([str(tool.program), str(HERE / "drivers" / "decoding.py")], config, tmp_path)
    assert record["compiled"] == len(served)
    assert not record["llguidance"], json.dumps(record["llguidance"], indent=1)[:4000]
    assert not record["outlines_core"], json.dumps(record["outlines_core"], indent=1)[:4000]


def test_every_framework_in_the_docs_table():
    """docs/clients.md's frameworks table names every framework with the version pinned here."""
    doc = (HERE.parents[1] / "docs" / "clients.md").read_text(encoding="utf-8")
    for fw in FRAMEWORKS:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{fw.name}`")), None)
        assert row is not None, f"docs/clients.md has no frameworks row for `{fw.name}`"
        assert f"| {_pinned(fw)} |" in row, f"docs/clients.md's row for {fw.name} should say {_pinned(fw)}"
