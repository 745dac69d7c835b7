"""`plexor bundle` builds an MCP Bundle that the official MCPB CLI (npm @anthropic-ai/mcpb, pinned in
tests/bundle/package-lock.json, installed by tests/bundle/setup.sh) validates and describes, and that
starts as Claude Desktop starts it: unpacked, its manifest's command, args and env with `${__dirname}`
substituted, under a Python that has none of Plexor's packages (everything comes from the bundle), then
driven over stdio by the SDK's client.

Building the bundle runs pip (about a minute or two), so these tests run in `tox -e all` only, which
installs the CLI and sets PLEXOR_REQUIRE_MCPB=1 (a missing CLI is then a failure, not a skip).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PLEXOR_MCPB_CACHE") or REPO / ".cache" / "mcpb")
CLI = CACHE / "node_modules" / "@anthropic-ai" / "mcpb" / "dist" / "cli" / "cli.js"
PLUGINS = ["keyboard", "example"]


def _skip_or_fail(why: str) -> None:
    if os.environ.get("PLEXOR_REQUIRE_MCPB"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def mcpb():
    if shutil.which("node") is None or not CLI.exists():
        _skip_or_fail(f"the MCPB CLI is not installed in {CACHE}: run `bash tests/bundle/setup.sh`")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["node", str(CLI), *args], capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from importlib.metadata import entry_points

    missing = set(PLUGINS) - {ep.name for ep in entry_points(group="plexor")}
    if missing:
        _skip_or_fail(f"the plugins {sorted(missing)} are not installed here")
    out = tmp_path_factory.mktemp("bundle") / "plexor-test.mcpb"
    done = subprocess.run([sys.executable, "-m", "plexor", "bundle", *PLUGINS, "--output", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout and "keyboard, example" in done.stdout
    return out


@pytest.fixture(scope="module")
def unpacked(bundle, mcpb, tmp_path_factory):
    """The bundle unpacked by the official CLI, as Claude Desktop installs it."""
    where = tmp_path_factory.mktemp("installed") / "plexor"
    out = mcpb("unpack", str(bundle), str(where))
    assert out.returncode == 0, out.stderr
    return where


def test_the_official_cli_validates_and_describes_the_bundle(bundle, unpacked, mcpb):
    valid = mcpb("validate", str(unpacked / "manifest.json"))
    assert valid.returncode == 0 and "validation passes" in valid.stdout, valid.stdout + valid.stderr
    info = mcpb("info", str(bundle))
    assert info.returncode == 0, info.stderr
    assert f"File: {bundle.name}" in info.stdout and "Size:" in info.stdout
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["server"]["mcp_config"]["env"]["PLEXOR_PLUGINS"] == "keyboard,example"
    names = {t["name"] for t in manifest["tools"]}
    assert {"keyboard_lookup_keycode", "example_greet", "plexor_health"} <= names


def _python_without_plexor(major_minor: str) -> str:
    """A Python of the bundle's minor version on PATH, outside this virtualenv (as Claude Desktop finds one)."""
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not Path(d).resolve().is_relative_to(Path(sys.prefix).resolve()))
    for name in (f"python{major_minor}", "python3"):
        found = shutil.which(name, path=path)
        if found:
            # The interpreter itself (a pyenv shim is a bash script that finds it).
            real, _, version = subprocess.run(
                [found, "-c", "import sys; print(sys.executable, f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                capture_output=True, text=True).stdout.strip().rpartition(" ")
            if version == major_minor and real:
                return real
    _skip_or_fail(f"no Python {major_minor} outside this virtualenv on PATH to start the bundle with")
    raise AssertionError  # unreachable


def _as_claude_desktop(unpacked: Path, home: Path) -> tuple[str, list[str], dict[str, str]]:
    """The manifest's command, args and env with Claude Desktop's substitutions, and a bare environment."""
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    config = manifest["server"]["mcp_config"]

    def sub(text: str) -> str:
        return (text.replace("${__dirname}", str(unpacked)).replace("${HOME}", str(home))
                .replace("${pathSeparator}", os.sep).replace("${/}", os.sep))

    runtime = manifest["compatibility"]["runtimes"]["python"]  # ">=3.11,<3.12"
    python = _python_without_plexor(runtime.split(",")[0].removeprefix(">="))
    assert config["command"] in ("python3", "python")
    bare_path = os.pathsep.join([str(Path(python).parent), "/usr/bin", "/bin"])
    env = {"PATH": bare_path, "HOME": str(home), **{k: sub(v) for k, v in config["env"].items()}}
    return python, [sub(a) for a in config["args"]], env


@pytest.mark.anyio
async def test_the_bundle_starts_as_claude_desktop_starts_it_and_serves_its_plugins(unpacked, tmp_path):
    from mcp import Client, StdioServerParameters

    python, args, env = _as_claude_desktop(unpacked, tmp_path)
    where = subprocess.run([python, "-c", "import plexor, plexor_keyboard; print(plexor.__file__)"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.returncode == 0 and where.stdout.startswith(str(unpacked)), where.stdout + where.stderr
    alone = subprocess.run([python, "-c", "import plexor"], env={"PATH": env["PATH"], "HOME": str(tmp_path)},
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode != 0, "this Python has Plexor of its own: the test would not show the bundle is self-contained"
    with anyio.fail_after(120):
        async with Client(StdioServerParameters(command=python, args=args, env=env), mode="legacy") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"keyboard_lookup_keycode", "example_greet", "plexor_health"} <= tools
            assert not any(t.startswith(("arbor_", "folders_", "edgelake_")) for t in tools)
            key = await client.call_tool("keyboard_lookup_keycode", {"key_name": "Return"})
            assert not key.is_error and key.structured_content["key"]["code"] == 36, key.content
            health = (await client.call_tool("plexor_health", {})).structured_content
            assert {p["name"]: p["state"] for p in health["plugins"]}["keyboard"] == "ready"
