"""The plugin side of the ``plexor`` command: each plugin's command group, loaded only when needed.

``plexor --help`` lists plugin commands from a cache while nothing that could change them has
changed (installed distributions, ``PLEXOR_*`` variables, ``plexor.toml``), so no plugin is
imported to print help. Each plugin's commands receive its :class:`plexor.PluginHandle`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.core.kernel import Kernel

__all__ = ["CORE_COMMANDS", "PluginGroup"]


CORE_COMMANDS = ("serve", "connect", "plugins", "tools", "call", "paths", "config", "install", "uninstall", "bundle")


class PluginGroup(click.Group):
    """The root group: core commands, plus each plugin's group (loaded only when needed)."""

    _plugin_commands: dict[str, tuple[click.Command, str]] | None = None
    _clash_errors: list[str]
    environ: dict[str, str] | None = None  # None: os.environ (plexor.testing.plugin_cli sets its own)
    _stand_ins: dict[str, click.Command] | None = None  # while --help is rendered from the cache
    # Core commands imported when used (`plexor paths` needs neither the transports nor the client table).
    # The built-in features' commands (connect, install, uninstall, bundle) come from their plugins:
    # feature_commands(), also imported when used.
    lazy_commands: dict[str, str] = {  # noqa: RUF012 - read-only: name -> "module:attribute"
        "serve": "plexor.serving.command:serve",
        "config": "plexor.config_cmd:config_cmd",
    }
    _features: dict[str, tuple[str, str]] | None = None  # feature_commands(), once asked for

    def get_help(self, ctx: click.Context) -> str:
        """The root help; a clean rendering is also saved for :mod:`plexor.launcher` to print next time."""
        text = super().get_help(ctx)
        if ctx.parent is None and self.environ is None:
            from plexor import help_cache

            # Saved only when the plugin commands listed are the cached ones: nothing warned on loading them.
            if ctx.info_name == help_cache.prog_name() and _load_help_cache(None) is not None:
                from plexor.core.config import paths

                where = paths()
                help_cache.save_help(text + "\n", str(where.data_dir), str(where.config_file))
        return text

    def _load_plugin_commands(self) -> dict[str, tuple[click.Command, str]]:
        if self._plugin_commands is not None:
            return self._plugin_commands
        self._plugin_commands = {}
        self._clash_errors = []
        from plexor.core.kernel import Kernel

        _quiet_logs()
        try:
            kernel = Kernel(environ=self.environ)
            kernel.load()
        except Exception as exc:  # noqa: BLE001 - a broken config must not break --help
            text = exc.render() if hasattr(exc, "render") else str(exc)
            click.echo(f"warning: plugin commands are unavailable: {text}", err=True)
            return self._plugin_commands
        _report(kernel, strict=False)
        for rec in kernel.records.values():
            hook = getattr(rec.module, "plexor_register_commands", None) if rec.module is not None else None
            if hook is None or rec.state.value == "disabled":
                continue
            staging = click.Group(name="staging")
            try:
                if rec.state.value == "failed":
                    # Its commands would not work, but "No such command" would hide why: stand-ins say.
                    import inspect

                    offered = {"cli": staging, "plugin": rec.handle}
                    hook(**{p: offered[p] for p in inspect.signature(hook).parameters if p in offered})
                    staging.commands = {n: _failed_command(n, rec.name, rec.error or "", 2 if rec.failed_by_config else 1)
                                        for n in staging.commands}
                else:
                    kernel.call_hook(rec, "plexor_register_commands", cli=staging, plugin=rec.handle)
            except Exception as exc:  # noqa: BLE001
                self._clash_errors.append(f"plugin {rec.name} could not add its commands: {exc}")
                continue
            for name, cmd in staging.commands.items():
                if name in CORE_COMMANDS:
                    self._clash_errors.append(f"plugin {rec.name} ({rec.distribution}) tried to replace the core command {name!r}; refused")
                elif name in self._plugin_commands:
                    other = self._plugin_commands[name][1]
                    self._clash_errors.append(f"command {name!r} of {rec.distribution} clashes with {other}; {rec.distribution}'s was refused")
                else:
                    self._plugin_commands[name] = (cmd, rec.distribution)
        for err in self._clash_errors:
            click.echo(f"warning: {err}", err=True)
        import atexit

        atexit.register(_close_databases, kernel)  # what plugin commands opened through their handles
        if not self._clash_errors and not kernel.warnings and not kernel.unknown_plugins:
            _save_help_cache(self.environ, {n: [c.help, c.short_help, c.hidden] for n, (c, _) in self._plugin_commands.items()})
        return self._plugin_commands

    def _feature_commands(self) -> dict[str, tuple[str, str]]:
        if self._features is None:
            self._features = feature_commands()
        return self._features

    def list_commands(self, ctx: click.Context) -> list[str]:
        off = disabled_features(self.environ)
        features = {name for name, (feature, _) in self._feature_commands().items() if feature not in off}
        core = set(super().list_commands(ctx)) | set(self.lazy_commands) | features
        if self._stand_ins is not None:
            return sorted(core | set(self._stand_ins))
        return sorted(core | set(self._load_plugin_commands()))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """``--help`` from the cache of plugin commands when nothing changed since it was written
        (installed plugins, PLEXOR_* variables, plexor.toml): no plugin is imported."""
        cached = _load_help_cache(self.environ) if self._plugin_commands is None else None
        if cached is None:
            super().format_commands(ctx, formatter)
            return
        self._stand_ins = {n: click.Command(n, help=h, short_help=sh, hidden=hidden) for n, (h, sh, hidden) in cached.items()}
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._stand_ins = None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        if cmd_name in self.lazy_commands:
            command = _imported(self.lazy_commands[cmd_name])
            self.add_command(command, cmd_name)
            return command
        feature, target = self._feature_commands().get(cmd_name, ("", ""))
        if target:  # never added to the group: whether its feature is on depends on each group's environment
            return _disabled_command(cmd_name, feature) if feature in disabled_features(self.environ) else _imported(target)
        if self._stand_ins is not None and cmd_name in self._stand_ins:
            return self._stand_ins[cmd_name]
        found = self._load_plugin_commands().get(cmd_name)
        return found[0] if found else None


def feature_commands() -> dict[str, tuple[str, str]]:
    """The built-in features' top-level commands, disabled ones included: name -> (feature, "module:attribute").

    Asked of the features alone (:data:`plexor.extending.FEATURES`, their ``plexor_cli_commands`` hook), with
    no kernel and no other plugin loaded: their plugin modules import only ``plexor`` and the standard library.
    """
    import importlib

    import pluggy

    from plexor import extending

    pm = pluggy.PluginManager("plexor")
    pm.add_hookspecs(extending)
    for name, module in extending.FEATURES.items():
        pm.register(importlib.import_module(module), name=name)
    found: dict[str, tuple[str, str]] = {}
    for impl in pm.hook.plexor_cli_commands.get_hookimpls():
        answer = impl.function()
        for command, target in (answer.items() if isinstance(answer, Mapping) else ()):
            found[str(command)] = (impl.plugin_name, str(target))
    return found


def disabled_features(environ: Mapping[str, str] | None) -> set[str]:
    """The built-in features that ``PLEXOR_DISABLE`` turns off in ``environ`` (``None``: this process's)."""
    from plexor.extending import FEATURES

    env = os.environ if environ is None else environ
    return {name.strip() for name in env.get("PLEXOR_DISABLE", "").split(",")} & set(FEATURES)


def _imported(target: str) -> click.Command:
    """The click command at ``"module:attribute"``."""
    import importlib

    module, _, attr = target.partition(":")
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


def _disabled_command(name: str, feature: str) -> click.Command:
    """What ``plexor NAME`` runs when the built-in feature that adds it is turned off: it says so, exit 2."""
    def explain() -> None:
        click.echo(f"plexor {name}: the built-in plugin {feature!r} that adds this command is disabled by "
                   f"PLEXOR_DISABLE; remove {feature} from PLEXOR_DISABLE to use it.", err=True)
        sys.exit(2)

    return click.Command(name, callback=explain, hidden=True, help=f"(unavailable: PLEXOR_DISABLE turns {feature} off)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                           "help_option_names": []})


def _help_cache(environ: dict[str, str] | None) -> tuple[Path, str]:
    import hashlib

    from plexor.core.config import paths

    env = os.environ if environ is None else environ
    where = paths(env)

    def mtime(path: str | Path) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return 0

    # Installing or removing a distribution changes its site directory (cheaper than reading
    # every distribution's metadata, which costs more than the rest of --help).
    installed = [(entry, mtime(entry)) for entry in sys.path[1:]]  # [0]: the script's folder or the cwd
    plexor_env = sorted((k, v) for k, v in env.items() if k.startswith("PLEXOR_"))
    key = json.dumps([__version__, sys.prefix, installed, plexor_env, mtime(where.config_file)])
    return where.data_dir / "cli-help.json", hashlib.sha256(key.encode()).hexdigest()


def _load_help_cache(environ: dict[str, str] | None) -> dict[str, Any] | None:
    try:
        path, key = _help_cache(environ)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("commands") if isinstance(data, dict) and data.get("key") == key else None


def _save_help_cache(environ: dict[str, str] | None, commands: Mapping[str, object]) -> None:
    try:
        path, key = _help_cache(environ)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "commands": commands}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only data directory only costs the next --help its speed
        pass


def _close_databases(kernel: Kernel) -> None:
    for rec in kernel.records.values():
        db, rec.database = rec.database, None
        if db is not None and not db.is_closed():
            db.close()


def _failed_command(name: str, plugin: str, error: str, code: int) -> click.Command:
    def explain() -> None:
        click.echo(f"plexor {name}: the plugin {plugin!r} is installed but failed: {error}", err=True)
        click.echo("Fix the cause (see `plexor plugins`) and try again.", err=True)
        sys.exit(code)  # 2 when its configuration failed it, else 1

    return click.Command(name, callback=explain, help=f"(unavailable: the plugin {plugin} failed)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


def _usage_error(exc: Exception) -> click.UsageError:
    return click.UsageError(exc.render() if hasattr(exc, "render") else str(exc))


def _quiet_logs() -> None:
    from plexor.core import registry
    from plexor.log import configure

    registry.DEFER_TEMPLATES = True  # the CLI serves no resource template: listing needs no MCP SDK
    # People read CLI output: JSON log lines only when asked (--log-json, PLEXOR_LOG_LEVEL); what they
    # need to know is printed as plain lines (_report).
    configure(os.environ.get("PLEXOR_LOG_LEVEL") or ("warning" if LOG_JSON else "critical"))


LOG_JSON = False  # `plexor --log-json`: JSON log lines on stderr as well as the plain warnings
_shown: set[str] = set()


def _report(kernel: Kernel, *, strict: bool = True) -> None:
    """Print the kernel's configuration warnings as plain lines; unknown plugin names are a usage error."""
    unknown = getattr(kernel, "unknown_plugins", [])
    for text in [*getattr(kernel, "warnings", []), *([] if strict else unknown)]:
        if text not in _shown:
            _shown.add(text)
            click.echo(f"warning: {text}", err=True)
    if strict and unknown:
        raise click.UsageError("; ".join(unknown) + "\nFix the variable (`plexor plugins` lists what is installed).")
