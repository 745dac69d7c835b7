"""``plexor install <client>`` / ``plexor uninstall <client>``: write an MCP client's configuration.

Each client keeps a JSON file with one table of servers (``mcpServers``, or
``servers`` for VS Code). Installing merges one entry into it, keeping every
other key and server, after copying the file to ``<file>.bak``; a different
server already under the same name is left alone unless ``--force`` is given.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import click

__all__ = ["CLIENTS", "Client", "config_path", "install_cmd", "server_entry", "uninstall_cmd"]


@dataclass(frozen=True)
class Client:
    """One MCP client: where its file is, which key holds the servers, whether entries carry ``type``."""

    name: str
    title: str
    key: str = "mcpServers"
    typed: bool = False  # entries say "type": "stdio"
    default_scope: str = "user"
    scopes: tuple[str, ...] = ("user",)


CLIENTS = {c.name: c for c in (
    Client("claude-desktop", "Claude Desktop"),
    Client("claude-code", "Claude Code", typed=True, scopes=("user", "project")),
    Client("cursor", "Cursor", scopes=("user", "project")),
    Client("vscode", "VS Code", key="servers", typed=True, default_scope="project", scopes=("user", "project")),
    Client("windsurf", "Windsurf"),
)}


def _app_config_dir(app: str, platform: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The per-user application folder: Application Support (macOS), %APPDATA% (Windows), XDG (Linux)."""
    platform = platform or sys.platform
    env = os.environ if environ is None else environ
    home = Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / app
    if platform == "win32":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming") / app
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / app


def _store_claude_dir(environ: Mapping[str, str]) -> Path | None:
    """Claude Desktop from the Microsoft Store keeps its roaming folder inside its package:
    ``%LOCALAPPDATA%\\Packages\\Claude_<publisher id>\\LocalCache\\Roaming\\Claude``. The newest such package, if any."""
    local = environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    try:
        packages = [p for p in (Path(local) / "Packages").glob("Claude_*") if p.is_dir()]
    except OSError:
        return None
    if not packages:
        return None
    newest = max(packages, key=lambda p: p.stat().st_mtime)
    return newest / "LocalCache" / "Roaming" / "Claude"


def config_path(client: Client, scope: str, project: Path | None = None, *, platform: str | None = None,
                environ: Mapping[str, str] | None = None) -> Path:
    """The file ``client`` reads its servers from, for ``scope`` (user or project) on this system.

    ``platform`` and ``environ`` default to this process's (``sys.platform``, ``os.environ``).
    """
    platform = platform or sys.platform
    env = os.environ if environ is None else environ
    home, where = Path.home(), project or Path.cwd()
    if client.name == "claude-desktop":
        store = _store_claude_dir(env) if platform == "win32" else None
        # MSIX redirects the Store app's %APPDATA% into its package: it reads that copy, so prefer it.
        folder = store if store is not None else _app_config_dir("Claude", platform, env)
        return folder / "claude_desktop_config.json"
    if client.name == "claude-code":
        return where / ".mcp.json" if scope == "project" else home / ".claude.json"
    if client.name == "cursor":
        return (where if scope == "project" else home) / ".cursor" / "mcp.json"
    if client.name == "vscode":
        if scope == "project":
            return where / ".vscode" / "mcp.json"
        return _app_config_dir("Code", platform, env) / "User" / "mcp.json"
    return home / ".codeium" / "windsurf" / "mcp_config.json"


def server_entry(client: Client, mode: str, env: dict[str, str]) -> dict[str, object]:
    """The entry that starts Plexor: this interpreter, by absolute path, running ``-m plexor <mode>``."""
    entry: dict[str, object] = {"type": "stdio"} if client.typed else {}
    entry.update(command=str(Path(sys.executable).absolute()), args=["-m", "plexor", mode])
    if env:
        entry["env"] = dict(env)
    return entry


def _fail(message: str, hint: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    click.echo(hint, err=True)
    sys.exit(2)


def _client(name: str) -> Client:
    if name not in CLIENTS:
        near = difflib.get_close_matches(name, list(CLIENTS), n=1)
        _fail(f"unknown client {name!r}" + (f"; did you mean {near[0]!r}?" if near else ""),
              f"Clients: {', '.join(CLIENTS)}.")
    return CLIENTS[name]


def _read(path: Path, key: str) -> tuple[dict[str, object], dict[str, object]]:
    """The client's file, and its table of servers (``key``, added when absent)."""
    if not path.exists():
        fresh: dict[str, object] = {}
        return {key: fresh}, fresh
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not valid JSON ({exc}); it was left as it is",
              "Fix it by hand (comments are not supported here), or print the entry with --print and paste it.")
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror}", "Check the file's permissions.")
    servers: object = data.setdefault(key, {}) if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(servers, dict):
        _fail(f"{path} does not hold a JSON object with a {key!r} object; it was left as it is",
              "Fix it by hand, or print the entry with --print and paste it.")
    return data, servers


def _write(path: Path, data: Mapping[str, object]) -> Path | None:
    """Back the old file up to ``<file>.bak``, then replace it atomically; returns the backup's path."""
    backup = None
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".plexor-tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return backup


def _installed_plugins() -> list[str]:
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="plexor")} | {"plexor"})


def _parse_env(pairs: tuple[str, ...], plugins: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    if plugins is not None:
        names = [p.strip() for p in plugins.split(",") if p.strip()]
        installed = _installed_plugins()
        for name in names:
            if name not in installed:
                near = difflib.get_close_matches(name, installed, n=1)
                _fail(f"--plugins names {name!r}, which is not installed"
                      + (f"; did you mean {near[0]!r}?" if near else ""), f"Installed: {', '.join(installed)}.")
        env["PLEXOR_PLUGINS"] = ",".join(names)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            _fail(f"--env {pair!r} must look like KEY=VALUE", "For example: --env PLEXOR_LOG_LEVEL=info")
        env[key.strip()] = value
    return env


_CLIENT_ARG = click.argument("client", metavar="CLIENT")
_SCOPE = click.option("--scope", type=click.Choice(["user", "project"]), default=None,
                      help="user: your account's file; project: the current folder's (Claude Code, Cursor, VS Code). "
                           "Default: user, project for VS Code.")
_NAME = click.option("--name", default="plexor", show_default=True, help="The server's name in the client.")
_FILE = click.option("--file", "file_", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Write this file instead of the client's usual one.")


def _target(client: Client, scope: str | None, file_: Path | None) -> Path:
    chosen = scope or client.default_scope
    if chosen not in client.scopes:
        _fail(f"{client.title} has no {chosen} scope", f"Use --scope {' or '.join(client.scopes)}.")
    return file_ if file_ is not None else config_path(client, chosen)


@click.command("install")
@_CLIENT_ARG
@click.option("--mode", type=click.Choice(["serve", "connect"]), default="serve", show_default=True,
              help="serve: a server per client window; connect: relay to one shared daemon.")
@click.option("--plugins", default=None, metavar="A,B", help="Load only these plugins (PLEXOR_PLUGINS).")
@click.option("--env", "pairs", multiple=True, metavar="KEY=VALUE", help="An environment variable (repeatable).")
@_NAME
@_SCOPE
@_FILE
@click.option("--print", "print_only", is_flag=True, help="Print the configuration instead of writing it.")
@click.option("--force", is_flag=True, help="Replace a different server of the same name.")
def install_cmd(client: str, mode: str, plugins: str | None, pairs: tuple[str, ...], name: str, scope: str | None,
                file_: Path | None, print_only: bool, force: bool) -> None:
    """Add Plexor to an MCP client's configuration (CLIENT: claude-desktop, claude-code, cursor, vscode, windsurf).

    The entry runs this Python (absolute path) as `python -m plexor serve` (or `connect`). An existing
    file keeps its other servers and settings; it is copied to <file>.bak first.
    """
    spec = _client(client)
    path = _target(spec, scope, file_)
    entry = server_entry(spec, mode, _parse_env(pairs, plugins))
    if print_only:
        click.echo(f"# add to {path}", err=True)
        click.echo(json.dumps({spec.key: {name: entry}}, indent=2))
        return
    data, servers = _read(path, spec.key)
    old = servers.get(name)
    if old == entry:
        click.echo(f"{spec.title}: {name!r} is already in {path} as it would be written; nothing changed.")
        return
    if old is not None and not force:
        _fail(f"{path} already has a different server named {name!r}: {json.dumps(old)}",
              "Pass --force to replace it (the file is backed up first), or --name to add Plexor beside it.")
    servers[name] = entry
    backup = _write(path, data)
    click.echo(f"{spec.title}: {'replaced' if old is not None else 'added'} {name!r} in {path}"
               + (f" (backup: {backup})" if backup else ""))
    click.echo(f"Restart {spec.title} (or reload its MCP servers) to start it.")


@click.command("uninstall")
@_CLIENT_ARG
@_NAME
@_SCOPE
@_FILE
def uninstall_cmd(client: str, name: str, scope: str | None, file_: Path | None) -> None:
    """Remove Plexor's entry from an MCP client's configuration (the file is copied to <file>.bak first)."""
    spec = _client(client)
    path = _target(spec, scope, file_)
    data, servers = _read(path, spec.key)
    if name not in servers:
        others = ", ".join(sorted(servers)) or "none"
        click.echo(f"{spec.title}: no server named {name!r} in {path} (servers there: {others}); nothing changed.")
        return
    del servers[name]
    backup = _write(path, data)
    click.echo(f"{spec.title}: removed {name!r} from {path} (backup: {backup})")
