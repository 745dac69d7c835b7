"""``plexor config``: where ``plexor.toml`` lives, a commented starter file, editing and checking it.

The first ``plexor config path`` (or ``edit``) creates the config directory and a starter
``plexor.toml`` in which every installed plugin's settings are listed, commented out, with their
defaults and help: uncommenting a line is all a first configuration takes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.core.kernel import Kernel

__all__ = ["config_cmd"]

HEADER = """\
# Plexor's configuration: one table per plugin, e.g. [arbor] database_url = "postgresql://...".
# Every setting below is commented out and shows its default; uncomment a line to change it.
# PLEXOR_<PLUGIN>_<KEY> environment variables override this file (PLEXOR_FOLDER_SEARCH_FOLDERS=~/notes).
# Check it with `plexor config validate`; `plexor --help` lists the other PLEXOR_* variables.
"""


def _toml_value(value: object) -> str:
    if isinstance(value, Path):
        value = str(value)
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def starter_text(kernel: Kernel) -> str:
    """The commented starter file: each loaded plugin's declared settings with their defaults and help."""
    from plexor.settings import ConfigSpec

    parts = [HEADER]
    for rec in sorted(kernel.records.values(), key=lambda r: r.name):
        hook = getattr(rec.module, "plexor_add_config", None) if rec.module is not None else None
        spec = ConfigSpec(rec.name)
        if hook is not None:
            try:
                hook(config=spec)
            except Exception:  # noqa: BLE001 - a broken plugin is reported by `validate`, not here
                continue
        if rec.settings is not None and "database_url" in rec.settings and "database_url" not in spec.settings:
            spec.add("database_url", str, None, help="database URL (postgresql://...); default: a SQLite file")
        if not spec.settings:
            continue
        parts.append(f"\n# [{rec.name}]")
        for setting in spec.settings.values():
            about = setting.type_name + (f", one of {', '.join(map(str, setting.choices))}" if setting.choices else "")
            value = "" if setting.default is None else _toml_value(setting.default)
            about += "; unset by default" if setting.default is None else ""
            parts.append(f"# {setting.key} = {value}    # {setting.help + f' ({about})' if setting.help else about}")
    return "\n".join(parts) + "\n"


def ensure_config_file() -> tuple[Path, bool]:
    """The config file's path, creating its directory and a starter file when missing; ``(path, created)``."""
    from plexor.core.config import paths
    from plexor.core.kernel import Kernel
    from plexor.plugin_commands import _quiet_logs

    path = paths().config_file
    if path.exists():
        return path, False
    _quiet_logs()
    kernel = Kernel()
    kernel.load()
    tmp = path.with_name(f".{path.name}.new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(starter_text(kernel), encoding="utf-8")
        tmp.rename(path) if not path.exists() else tmp.unlink()  # another `plexor config` may have won
    except OSError as exc:  # exit 1: the command is right, the file system refused
        raise click.ClickException(f"cannot create {path}: {exc.strerror or exc}; check the folder's permissions, "
                                   "or point PLEXOR_HOME elsewhere") from exc
    return path, True


def _created(path: Path, created: bool) -> None:
    if created:
        click.echo(f"created {path} (every setting commented out, with its default)", err=True)


@click.group("config")
def config_cmd() -> None:
    """Find, create, edit and check plexor.toml (PLEXOR_HOME moves it)."""


@config_cmd.command("path")
def path_cmd() -> None:
    """Print the config file's path; create it (a commented starter) when missing."""
    path, created = ensure_config_file()
    _created(path, created)
    click.echo(str(path))


@config_cmd.command("edit")
def edit_cmd() -> None:
    """Open plexor.toml in $VISUAL or $EDITOR (a commented starter when missing), then check it."""
    path, created = ensure_config_file()
    _created(path, created)
    try:
        click.edit(filename=str(path))
    except click.ClickException as exc:
        raise click.ClickException(f"{exc.format_message()}; set $EDITOR, or edit {path} directly") from exc
    _validate(path)


@config_cmd.command("validate")
def validate_cmd() -> None:
    """Check plexor.toml and the PLEXOR_* variables against the installed plugins (exit 2 when wrong)."""
    from plexor.core.config import paths

    _validate(paths().config_file)


def _validate(path: Path) -> None:
    from plexor.core.kernel import Kernel
    from plexor.plugin_commands import _quiet_logs

    _quiet_logs()
    problems: list[str] = []
    try:
        kernel = Kernel()
        kernel.load()
    except Exception as exc:  # noqa: BLE001 - a ConfigError: say what to fix
        problems.append(exc.render() if hasattr(exc, "render") else str(exc))
    else:
        problems += [*kernel.warnings, *getattr(kernel, "unknown_plugins", [])]
        for rec in sorted(kernel.records.values(), key=lambda r: r.name):
            problems += rec.settings.warnings if rec.settings else []
            if rec.state.value == "failed":
                problems.append(f"plugin {rec.name} failed: {rec.error}")
    where = str(path) if path.exists() else f"{path} (not created yet: defaults)"
    if problems:
        for text in dict.fromkeys(problems):
            click.echo(f"error: {text}", err=True)
        click.echo(f"{where}: {len(dict.fromkeys(problems))} problem(s)", err=True)
        sys.exit(2)
    click.echo(f"{where}: ok")
