"""``plexor --help`` saved and read back: the key of everything the help text depends on, and the file it is in.

:mod:`plexor.launcher` reads it (``plexor --help`` without click); :class:`plexor.plugin_commands.PluginGroup`
writes it after a full rendering. This module imports nothing beyond ``os`` and ``sys``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # without importing typing
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

__all__ = ["cached_help", "guess_data_dir", "help_key", "prog_name", "save_help"]

HELP_FILE = "cli-help.txt"
# Variables that platformdirs (or PLEXOR_HOME) reads to place the config and data directories.
_DIR_VARIABLES = ("HOME", "USERPROFILE", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "APPDATA", "LOCALAPPDATA")
# The modules whose text makes up the core commands' help (an editable checkout changes without a new version).
_COMMAND_MODULES = ("cli.py", "plugin_commands.py", "config_cmd.py", os.path.join("serving", "command.py"),
                    os.path.join("features", "install", "clients.py"), os.path.join("features", "install", "bundle.py"),
                    os.path.join("features", "install", "plugin.py"), os.path.join("features", "daemon", "command.py"),
                    os.path.join("features", "daemon", "plugin.py"))


def guess_data_dir(environ: Mapping[str, str]) -> str | None:
    """Where :func:`plexor.core.config.paths` puts the data directory, without importing platformdirs.

    Only a guess: a cache written elsewhere is simply not found (the full rendering then runs).
    """
    home = environ.get("PLEXOR_HOME")
    if home:
        return os.path.join(os.path.expanduser(home), "data")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Application Support"), "plexor")
    if sys.platform == "win32":
        local = environ.get("LOCALAPPDATA")
        return os.path.join(local, "plexor", "plexor") if local else None
    base = (environ.get("XDG_DATA_HOME") or "").strip() or os.path.expanduser("~/.local/share")
    return os.path.join(base, "plexor")


def _columns(environ: Mapping[str, str]) -> int:
    """The width click wraps help to: shutil.get_terminal_size's columns, at most 80, minus 2 (at least 50)."""
    try:
        columns = int(environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(min(columns or 80, 80) - 2, 50)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def help_key(environ: Mapping[str, str], prog: str, data_dir: str, config_file: str) -> str:
    """Everything the root help text depends on, as one line."""
    from plexor.version import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    parts = (
        __version__, sys.prefix, prog, os.path.normpath(data_dir), config_file, _mtime(config_file), _columns(environ),
        [(entry, _mtime(entry)) for entry in sys.path[1:]],  # [0]: the script's folder or the cwd
        [_mtime(os.path.join(here, name)) for name in _COMMAND_MODULES],
        sorted((k, v) for k, v in environ.items() if k.startswith("PLEXOR_") or k in _DIR_VARIABLES),
    )
    return repr(parts).replace("\n", " ")


def prog_name() -> str:
    """The name click shows in ``Usage:`` for a console script."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "plexor"


def cached_help(environ: Mapping[str, str] | None = None) -> str | None:
    """The help text saved by :func:`save_help` if it still holds; ``None`` otherwise."""
    env = os.environ if environ is None else environ
    data_dir = guess_data_dir(env)
    if data_dir is None:
        return None
    try:
        with open(os.path.join(data_dir, HELP_FILE), encoding="utf-8") as fh:
            key, config_file, text = fh.read().split("\n", 2)
    except (OSError, ValueError):
        return None
    return text if key == help_key(env, prog_name(), data_dir, config_file) else None


def save_help(text: str, data_dir: str, config_file: str, environ: Mapping[str, str] | None = None) -> None:
    """Record ``plexor --help``'s full text (as printed, with its final newline) for :func:`cached_help`."""
    env = os.environ if environ is None else environ
    path = os.path.join(data_dir, HELP_FILE)
    tmp = f"{path}.{os.getpid()}"
    try:
        os.makedirs(data_dir, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{help_key(env, prog_name(), data_dir, config_file)}\n{config_file}\n{text}")
        os.replace(tmp, path)
    except OSError:  # a read-only data directory only costs the next --help its speed
        pass
