"""The ``plexor`` command.

Exit codes: 0 success, 1 a tool error, 2 a usage error (bad option, unknown
tool, bad arguments or configuration).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from plexor import __version__
from plexor.core.config import LOG_LEVELS

__all__ = ["main", "run_kernel"]

ENV_HELP = (
    "Environment: PLEXOR_HOME=DIR keeps config, data and logs under DIR; PLEXOR_PLUGINS=a,b loads only "
    "those plugins (empty: none); PLEXOR_DISABLE=a,b blocks plugins; PLEXOR_<PLUGIN>_<KEY> overrides a "
    "setting; PLEXOR_TOKEN sets the HTTP bearer token; PLEXOR_LOG_LEVEL sets the log level (stderr); "
    "PLEXOR_SEPARATOR (_ or -) joins namespace and method in tool names; PLEXOR_START_WAIT (seconds, "
    "default 15) bounds how long a call waits for its plugin to start; PLEXOR_PAGE_SIZE (default 100) "
    "sizes list pages."
)

CORE_COMMANDS = ("serve", "connect", "plugins", "tools", "call", "paths", "install", "uninstall")


class PluginGroup(click.Group):
    """The root group: core commands, plus each plugin's group (loaded only when needed)."""

    _plugin_commands: dict[str, tuple[click.Command, str]] | None = None
    _clash_errors: list[str]
    environ: dict[str, str] | None = None  # None: os.environ (plexor.testing.plugin_cli sets its own)
    _stand_ins: dict[str, click.Command] | None = None  # while --help is rendered from the cache

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
                    staging.commands = {n: _failed_command(n, rec.name, rec.error or "") for n in staging.commands}
                else:
                    kernel._call(rec, "plexor_register_commands", cli=staging, plugin=rec.handle)
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

    def list_commands(self, ctx: click.Context) -> list[str]:
        if self._stand_ins is not None:
            return sorted(set(self.commands) | set(self._stand_ins))
        return sorted(set(super().list_commands(ctx)) | set(self._load_plugin_commands()))

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
        if self._stand_ins is not None and cmd_name in self._stand_ins:
            return self._stand_ins[cmd_name]
        found = self._load_plugin_commands().get(cmd_name)
        return found[0] if found else None


def _help_cache(environ: dict[str, str] | None) -> tuple[Any, str]:
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


def _save_help_cache(environ: dict[str, str] | None, commands: dict[str, Any]) -> None:
    try:
        path, key = _help_cache(environ)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "commands": commands}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only data directory only costs the next --help its speed
        pass


def _close_databases(kernel: Any) -> None:
    for rec in kernel.records.values():
        db, rec.database = rec.database, None
        if db is not None and not db.is_closed():
            db.close()


def _failed_command(name: str, plugin: str, error: str) -> click.Command:
    def explain() -> None:
        click.echo(f"plexor {name}: the plugin {plugin!r} is installed but failed: {error}", err=True)
        click.echo("Fix the cause (see `plexor plugins`) and try again.", err=True)
        sys.exit(2)

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
    configure(os.environ.get("PLEXOR_LOG_LEVEL") or ("warning" if _LOG_JSON else "critical"))


_LOG_JSON = False
_shown: set[str] = set()


def _report(kernel: Any, *, strict: bool = True) -> None:
    """Print the kernel's configuration warnings as plain lines; unknown plugin names are a usage error."""
    unknown = getattr(kernel, "unknown_plugins", [])
    for text in [*getattr(kernel, "warnings", []), *([] if strict else unknown)]:
        if text not in _shown:
            _shown.add(text)
            click.echo(f"warning: {text}", err=True)
    if strict and unknown:
        raise click.UsageError("; ".join(unknown) + "\nFix the variable (`plexor plugins` lists what is installed).")


def stdio_hint() -> str:
    """What ``plexor serve`` says when started on a terminal, where nothing will ever speak MCP to it."""
    me = f"{sys.executable} -m plexor serve"
    return (f"plexor {__version__}: serving MCP on stdio, waiting for a client to send JSON-RPC on stdin.\n"
            "This is the command MCP clients launch; typing here does nothing useful. Stop it with Ctrl+C.\n"
            f"Try it in the MCP Inspector:  npx @modelcontextprotocol/inspector {me}\n"
            "Set up a client:  plexor install claude-desktop|claude-code|cursor|vscode|windsurf\n"
            "Serve over HTTP instead:  plexor serve --transport http")


def run_kernel(func: Any, *, plugins: list[str] | None = None) -> Any:
    """Start a kernel (optionally with only ``plugins``), run ``await func(kernel)``, stop it.

    For plugin commands: ``run_kernel(lambda k: do_sweep(k), plugins=["arbor"])``.
    """
    import anyio

    from plexor.core.kernel import Kernel
    from plexor.errors import ConfigError

    environ = dict(os.environ)
    if plugins is not None:
        environ["PLEXOR_PLUGINS"] = ",".join(plugins)

    async def go() -> Any:
        try:
            kernel = Kernel(environ=environ)
            kernel.load()
        except ConfigError as exc:
            raise _usage_error(exc) from exc
        _report(kernel)
        await kernel.start()
        try:
            result = func(kernel)
            if hasattr(result, "__await__"):
                result = await result
            return result
        finally:
            await kernel.stop()

    return anyio.run(go)


def _set_log_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    global _LOG_JSON
    _LOG_JSON = _LOG_JSON or value
    return value


@click.group(cls=PluginGroup, epilog=ENV_HELP)
@click.version_option(__version__, prog_name="plexor")
@click.option("--log-json", is_flag=True, is_eager=True, expose_value=False, callback=_set_log_json,
              help="Also show the kernel's JSON log lines (warnings and errors) on stderr.")
def main() -> None:
    """Plexor: an MCP server whose tools, resources and prompts come from plugins."""


from plexor.serving.command import serve  # noqa: E402 - the serve command lives with the transports

main.add_command(serve)

from plexor.install import install_cmd, uninstall_cmd  # noqa: E402

main.add_command(install_cmd)
main.add_command(uninstall_cmd)


@main.command("connect")
@click.option("--log-level", default=None, type=click.Choice(LOG_LEVELS, case_sensitive=False), help="Log level (JSON lines on stderr); as PLEXOR_LOG_LEVEL.")
def connect_cmd(log_level: str | None) -> None:
    """Serve MCP on stdio by relaying to the shared daemon (started when absent; restarted if it dies).

    Configure MCP clients to launch `plexor connect` instead of `plexor serve`:
    every client then shares one background process (one model, one watcher, one set of connections).
    """
    from plexor.log import configure

    configure(log_level or os.environ.get("PLEXOR_LOG_LEVEL") or "warning", force=True)
    import anyio

    from plexor.daemon import DaemonError, run_connect

    try:
        anyio.run(run_connect)
    except DaemonError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _started(func: Any) -> Any:
    return run_kernel(func)


@main.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_cmd(as_json: bool) -> None:
    """List plugins: name, distribution, version, state (ready/failed/disabled), tools, error."""
    _quiet_logs()
    rows = _started(lambda k: [r.describe() for r in sorted(k.records.values(), key=lambda r: r.name)])
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'NAME':<16} {'DISTRIBUTION':<24} {'VERSION':<9} {'STATE':<9} TOOLS")
    for r in rows:
        click.echo(f"{r['name']:<16} {r['distribution']:<24} {r['version']:<9} {r['state']:<9} {len(r['tools'])}")
        if r["error"]:
            click.echo(f"  error: {r['error']}")
        for w in r["warnings"]:
            click.echo(f"  warning: {w}")


@main.command("tools")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (name, plugin, description, input schema).")
def tools_cmd(as_json: bool) -> None:
    """List every tool with its description and input schema."""
    _quiet_logs()
    from plexor.core.kernel import Kernel
    from plexor.errors import ConfigError

    try:
        kernel = Kernel()
        kernel.load()
    except ConfigError as exc:
        raise _usage_error(exc) from exc
    _report(kernel)
    good = []
    for t in kernel.registry.tools.values():
        try:
            kernel.prepare_tool(t)
            good.append(t)
        except Exception as exc:  # noqa: BLE001 - one bad signature must not hide the other tools
            click.echo(f"warning: {exc}", err=True)
    tools: list[dict[str, Any]] = [
        {"name": t.name, "plugin": t.plugin, "description": t.description, "input_schema": t.signature.input_schema,
         **({"output_schema": t.signature.output_schema} if t.signature.output_schema else {}),
         **({"annotations": t.annotations} if t.annotations else {})}
        for t in sorted(good, key=lambda t: t.name)
    ]
    if as_json:
        click.echo(json.dumps(tools, indent=2))
        return
    import textwrap

    from plexor.core.schema import _type_text  # the wording of the kernel's argument errors

    for entry in tools:
        first = (entry["description"] or "").strip().split("\n\n")[0]
        click.echo(f"{entry['name']}  [{entry['plugin']}]")
        click.echo(textwrap.fill(" ".join(first.split()), 100, initial_indent="    ", subsequent_indent="    "))
        props = entry["input_schema"].get("properties", {})
        required = set(entry["input_schema"].get("required", []))
        for name, prop in props.items():
            click.echo(f"    - {name}: {_type_text(prop)}{' (required)' if name in required else ''}")


def _takes(prop: dict[str, Any], kinds: tuple[str, ...]) -> bool:
    typ = prop.get("type")
    if typ in kinds or (isinstance(typ, list) and any(k in typ for k in kinds)) or ("object" in kinds and "$ref" in prop):
        return True
    return any(_takes(option, kinds) for option in prop.get("anyOf", []) + prop.get("oneOf", []))


def _takes_string(prop: dict[str, Any]) -> bool:
    return _takes(prop, ("string",))


def _parse_args(pairs: tuple[str, ...], raw_json: str | None, schema: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if raw_json:
        try:
            loaded = json.loads(raw_json)
        except json.JSONDecodeError as exc:
            raise click.UsageError(f"--json is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise click.UsageError("--json must be a JSON object, e.g. '{\"key\": \"value\"}'")
        args.update(loaded)
    props = schema.get("properties", {})
    for pair in pairs:
        if "=" not in pair:
            raise click.UsageError(f"--arg {pair!r} must look like key=value")
        key, value = pair.split("=", 1)
        prop = props.get(key, {})
        if value.lstrip()[:1] in ("[", "{") and _takes(prop, ("array", "object")):
            try:  # "--arg select=[...]" is a list when a list is accepted
                args[key] = json.loads(value)
                continue
            except json.JSONDecodeError:
                pass
        if _takes_string(prop):
            args[key] = value  # "--arg name=123" means the text 123 when text is accepted
            continue
        try:
            args[key] = json.loads(value)
        except json.JSONDecodeError:
            args[key] = value
    return args


@main.command("call")
@click.argument("tool")
@click.option("--arg", "pairs", multiple=True, metavar="KEY=VALUE", help="An argument (repeatable); JSON values are parsed.")
@click.option("--json", "raw_json", default=None, metavar="OBJECT", help="All arguments as one JSON object.")
def call_cmd(tool: str, pairs: tuple[str, ...], raw_json: str | None) -> None:
    """Call TOOL in-process and print its result (exit 1 when the tool reports an error)."""
    _quiet_logs()
    from plexor.errors import NotFound

    async def go(kernel: Any) -> Any:
        try:
            spec = kernel.resolve_tool(tool)
        except NotFound as exc:  # a failed plugin's tool is a tool error (1); a name that is not there, usage (2)
            return ("failed" if exc.data.get("state") == "failed" else "usage", exc.render())
        try:
            args = _parse_args(pairs, raw_json, spec.signature.input_schema)
        except click.UsageError as exc:
            return ("usage", exc.format_message())
        return ("ok", await kernel.call_tool(spec.name, args))

    kind, outcome = _started(go)
    if kind in ("usage", "failed"):
        click.echo(outcome, err=kind == "usage")
        sys.exit(2 if kind == "usage" else 1)
    from plexor.errors import InvalidArgument

    click.echo(outcome.text)
    if outcome.is_error:
        sys.exit(2 if isinstance(outcome.error, InvalidArgument) else 1)


@main.command("paths")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def paths_cmd(as_json: bool) -> None:
    """Show the config, data and log directories (PLEXOR_HOME moves them all)."""
    from plexor.core.config import paths

    p = paths()
    data = {"config_dir": str(p.config_dir), "config_file": str(p.config_file), "data_dir": str(p.data_dir),
            "log_dir": str(p.log_dir)}
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        for k, v in data.items():
            click.echo(f"{k:<12} {v}")


if __name__ == "__main__":  # pragma: no cover
    main()
