"""`plexor install <client>` / `plexor uninstall <client>` on real files in a temporary home."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def run(home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()

    def go(*args):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PLEXOR_", "XDG_"))}
        env.update(HOME=str(home), USERPROFILE=str(home), APPDATA=str(home / "AppData" / "Roaming"))
        return subprocess.run([sys.executable, "-m", "plexor", *args], env=env, cwd=project, capture_output=True,
                              text=True, timeout=60)

    go.project = project
    return go


def _desktop_file(home):
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "win32":
        return home / "AppData" / "Roaming" / "Claude" / "claude_desktop_config.json"
    return home / ".config" / "Claude" / "claude_desktop_config.json"


def test_each_client_gets_its_own_file_and_format(run, home):
    expected = {
        ("claude-desktop", "user"): (_desktop_file(home), "mcpServers", False),
        ("claude-code", "user"): (home / ".claude.json", "mcpServers", True),
        ("claude-code", "project"): (run.project / ".mcp.json", "mcpServers", True),
        ("cursor", "user"): (home / ".cursor" / "mcp.json", "mcpServers", False),
        ("cursor", "project"): (run.project / ".cursor" / "mcp.json", "mcpServers", False),
        ("vscode", "project"): (run.project / ".vscode" / "mcp.json", "servers", True),
        ("windsurf", "user"): (home / ".codeium" / "windsurf" / "mcp_config.json", "mcpServers", False),
    }
    for (client, scope), (path, key, typed) in expected.items():
        out = run("install", client, "--scope", scope)
        assert out.returncode == 0, (client, out.stderr)
        entry = json.loads(path.read_text())[key]["plexor"]
        assert entry["command"] == sys.executable and os.path.isabs(entry["command"])
        assert entry["args"] == ["-m", "plexor", "serve"]
        assert ("type" in entry) == typed and entry.get("type", "stdio") == "stdio"


def test_plugins_env_mode_and_name(run, home):
    out = run("install", "cursor", "--mode", "connect", "--plugins", "example", "--env", "PLEXOR_LOG_LEVEL=info",
              "--name", "keys")
    assert out.returncode == 0, out.stderr
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["keys"]
    assert entry["args"] == ["-m", "plexor", "connect"]
    assert entry["env"] == {"PLEXOR_PLUGINS": "example", "PLEXOR_LOG_LEVEL": "info"}


def test_merge_keeps_other_servers_and_keys_and_backs_up(run, home):
    path = home / ".claude.json"
    original = {"numStartups": 7, "projects": {"/x": {"allowedTools": []}},
                "mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": []}}}
    path.write_text(json.dumps(original))
    out = run("install", "claude-code")
    assert out.returncode == 0, out.stderr
    data = json.loads(path.read_text())
    assert data["numStartups"] == 7 and data["projects"] == original["projects"]
    assert set(data["mcpServers"]) == {"other", "plexor"}
    assert json.loads((home / ".claude.json.bak").read_text()) == original
    again = run("install", "claude-code")  # the same entry again: nothing to do
    assert again.returncode == 0 and "nothing changed" in again.stdout


def test_a_different_server_of_the_same_name_needs_force(run, home):
    path = home / ".codeium" / "windsurf" / "mcp_config.json"
    path.parent.mkdir(parents=True)
    theirs = {"mcpServers": {"plexor": {"command": "/opt/old/plexor", "args": ["serve"]}}}
    path.write_text(json.dumps(theirs))
    refused = run("install", "windsurf")
    assert refused.returncode == 2
    assert "already has a different server named 'plexor'" in refused.stderr and "--force" in refused.stderr
    assert json.loads(path.read_text()) == theirs  # untouched
    forced = run("install", "windsurf", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(path.read_text())["mcpServers"]["plexor"]["args"] == ["-m", "plexor", "serve"]
    assert json.loads(path.with_name("mcp_config.json.bak").read_text()) == theirs


def test_uninstall_removes_only_its_entry(run, home):
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    assert run("install", "cursor").returncode == 0
    out = run("uninstall", "cursor")
    assert out.returncode == 0 and "removed 'plexor'" in out.stdout
    assert json.loads(path.read_text()) == {"mcpServers": {"other": {"command": "x"}}}
    absent = run("uninstall", "cursor")
    assert absent.returncode == 0 and "no server named 'plexor'" in absent.stdout


def test_print_writes_nothing(run, home):
    out = run("install", "vscode", "--print", "--plugins", "example")
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["servers"]["plexor"]["env"] == {"PLEXOR_PLUGINS": "example"}
    assert str(run.project / ".vscode" / "mcp.json") in out.stderr
    assert not (run.project / ".vscode").exists()


def test_bad_input_is_a_usage_error_with_guidance(run, home):
    client = run("install", "cursr")
    assert client.returncode == 2 and "did you mean 'cursor'" in client.stderr
    plugin = run("install", "cursor", "--plugins", "exampel")
    assert plugin.returncode == 2 and "did you mean 'example'" in plugin.stderr
    env = run("install", "cursor", "--env", "NOEQUALS")
    assert env.returncode == 2 and "KEY=VALUE" in env.stderr
    scope = run("install", "windsurf", "--scope", "project")
    assert scope.returncode == 2 and "no project scope" in scope.stderr
    broken = home / ".cursor" / "mcp.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{ // a comment\n}")
    bad_json = run("install", "cursor")
    assert bad_json.returncode == 2 and "is not valid JSON" in bad_json.stderr
    assert broken.read_text() == "{ // a comment\n}"
    assert not (run.project / ".cursor").exists() and not (home / ".cursor" / "mcp.json.bak").exists()


@pytest.mark.anyio
async def test_the_written_command_starts_a_server(run, home, tmp_path):
    from mcp import Client, StdioServerParameters

    out = run("install", "claude-desktop", "--plugins", "example", "--env", f"PLEXOR_HOME={tmp_path / 'ph'}")
    assert out.returncode == 0, out.stderr
    entry = json.loads(_desktop_file(home).read_text())["mcpServers"]["plexor"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env={**env, **entry["env"]})
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "example_greet" in names and not any(n.startswith(("arbor_", "keyboard_")) for n in names)
        result = await client.call_tool("example_greet", {"name": "Ada"})
        assert not result.is_error and "Ada" in result.content[0].text


def test_claude_desktop_from_the_microsoft_store_is_preferred_on_windows(tmp_path):
    from plexor.features.install.clients import CLIENTS, config_path

    local, roaming = tmp_path / "AppData" / "Local", tmp_path / "AppData" / "Roaming"
    env = {"LOCALAPPDATA": str(local), "APPDATA": str(roaming)}
    desktop = CLIENTS["claude-desktop"]
    classic = roaming / "Claude" / "claude_desktop_config.json"
    assert config_path(desktop, "user", platform="win32", environ=env) == classic  # no Store package
    (local / "Packages" / "ClaudeHelper_1").mkdir(parents=True)  # not Claude's package
    (local / "Packages" / "Claude_pzs8sxrjxfjjc").mkdir(parents=True)
    store = local / "Packages" / "Claude_pzs8sxrjxfjjc" / "LocalCache" / "Roaming" / "Claude"
    assert config_path(desktop, "user", platform="win32", environ=env) == store / "claude_desktop_config.json"
    older = local / "Packages" / "Claude_olderpublisher"
    older.mkdir()
    os.utime(older, (1_000_000_000, 1_000_000_000))
    assert config_path(desktop, "user", platform="win32", environ=env) == store / "claude_desktop_config.json"
    # Elsewhere the Store does not exist: the folder is ignored.
    assert "Packages" not in str(config_path(desktop, "user", platform="linux", environ=env))
    assert "Packages" not in str(config_path(desktop, "user", platform="darwin", environ=env))
    assert config_path(CLIENTS["vscode"], "user", platform="win32", environ=env) == roaming / "Code" / "User" / "mcp.json"


@pytest.mark.skipif(sys.platform != "win32", reason="the Store exists on Windows only")
def test_install_writes_the_store_apps_file(run, home, tmp_path, monkeypatch):
    local = tmp_path / "Local"
    store = local / "Packages" / "Claude_pzs8sxrjxfjjc"
    store.mkdir(parents=True)
    monkeypatch.setenv("LOCALAPPDATA", str(local))
    out = run("install", "claude-desktop")
    assert out.returncode == 0, out.stderr
    written = store / "LocalCache" / "Roaming" / "Claude" / "claude_desktop_config.json"
    assert json.loads(written.read_text())["mcpServers"]["plexor"]["args"] == ["-m", "plexor", "serve"]
