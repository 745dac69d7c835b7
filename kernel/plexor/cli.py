"""The ``plexor`` command.

Exit codes, for every command and plugin command (tests/test_exit_codes.py walks them all):
0 done; 1 the command was right but the work failed or found nothing (a tool's error, a tree,
folder or key that does not exist, a service that does not answer); 2 what was typed or
configured must change (a usage error; an unknown command, tool, plugin or client; a value a
tool refuses, ``InvalidArgument``; a bad ``plexor.toml`` or ``PLEXOR_*`` variable).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from plexor import plugin_commands
from plexor.plugin_commands import (
    PluginGroup,
    _quiet_logs,
    _report,
    _usage_error,
)
from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.core.kernel import Kernel
    from plexor.core.results import Outcome

__all__ = ["main", "run_kernel"]

T = TypeVar("T")

ENV_HELP = (
    "Environment: PLEXOR_HOME=DIR keeps config, data and logs under DIR; PLEXOR_PLUGINS=a,b loads only "
    "those plugins (empty: none); PLEXOR_DISABLE=a,b blocks plugins; PLEXOR_<PLUGIN>_<KEY> overrides a "
    "setting; PLEXOR_TOKEN sets the HTTP bearer token; PLEXOR_LOG_LEVEL sets the log level (stderr); "
    "PLEXOR_SEPARATOR (_ or -) joins namespace and method in tool names; PLEXOR_START_WAIT (seconds, "
    "default 15) bounds how long a call waits for its plugin to start; PLEXOR_PAGE_SIZE (default 100) "
    "sizes list pages. Many hosts (docs/deploy.md): PLEXOR_DATABASE_URL puts the kernel's tasks, "
    "notifications and events on PostgreSQL; PLEXOR_STATE_KEY or PLEXOR_STATE_KEY_FILE gives every host the "
    "same request-state key (PLEXOR_STATE_KEY_PREVIOUS during a rotation). Limits per caller and on what the "
    "server keeps (PLEXOR_MAX_*, PLEXOR_EVENT_STORE_*_BYTES, PLEXOR_AUTH_FETCH_*): docs/security.md#limits."
)

@overload
def run_kernel(func: Callable[[Kernel], Awaitable[T]], *, plugins: list[str] | None = None) -> T: ...
@overload
def run_kernel(func: Callable[[Kernel], T], *, plugins: list[str] | None = None) -> T: ...
def run_kernel(func: Callable[[Kernel], object], *, plugins: list[str] | None = None) -> object:
    """Start a kernel (optionally with only ``plugins``), run ``await func(kernel)``, stop it.

    For plugin commands: ``run_kernel(lambda k: do_sweep(k), plugins=["arbor"])``.
    """
    import anyio

    from plexor.core.kernel import Kernel
    from plexor.errors import ConfigError

    environ = dict(os.environ)
    if plugins is not None:
        environ["PLEXOR_PLUGINS"] = ",".join(plugins)

    async def go() -> object:
        try:
            kernel = Kernel(environ=environ)
            kernel.load()
        except ConfigError as exc:
            raise _usage_error(exc) from exc
        _report(kernel)
        await kernel.start()
        try:
            result = func(kernel)
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            await kernel.stop()

    return anyio.run(go)


def _set_log_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        plugin_commands.LOG_JSON = True
    return value


@click.group(cls=PluginGroup, epilog=ENV_HELP)
@click.version_option(__version__, prog_name="plexor")
@click.option("--log-json", is_flag=True, is_eager=True, expose_value=False, callback=_set_log_json,
              help="Also show the kernel's JSON log lines (warnings and errors) on stderr.")
def main() -> None:
    """Plexor: an MCP server whose tools, resources and prompts come from plugins.

    Exit codes: 0 done; 1 the command was right but the work failed or found nothing; 2 what was typed
    or configured must change (usage, unknown names, refused values, a bad plexor.toml or PLEXOR_*).

    Shell completion: eval "$(_PLEXOR_COMPLETE=bash_source plexor)" in ~/.bashrc (zsh_source, fish_source).
    """


# serve and config are added when used (PluginGroup.lazy_commands), and so are the built-in features' commands:
# connect (the daemon feature), install, uninstall and bundle (the install feature): plexor.extending.plexor_cli_commands.


@main.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_cmd(as_json: bool) -> None:
    """List plugins: name, distribution, version, state (ready/failed/disabled), tools, error.

    A plugin that warms up in the background (an index to open) is waited for, as a call would be, up
    to PLEXOR_START_WAIT seconds; one still warming after that is listed as starting, with its progress.
    """
    _quiet_logs()

    async def listing(kernel: Kernel) -> list[dict[str, Any]]:
        import time

        import anyio

        deadline = time.monotonic() + kernel.start_wait
        while any(r.state.value == "starting" for r in kernel.records.values()) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        return [r.describe() for r in sorted(kernel.records.values(), key=lambda r: r.name)]

    rows = run_kernel(listing)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'NAME':<16} {'DISTRIBUTION':<24} {'VERSION':<9} {'STATE':<9} TOOLS")
    for r in rows:
        click.echo(f"{r['name']:<16} {r['distribution']:<24} {r['version']:<9} {r['state']:<9} {len(r['tools'])}")
        if r["state"] == "starting":
            done = f"{r['progress']:.0%}" if r["progress"] is not None else "no progress reported"
            click.echo(f"  still warming up ({done}{': ' + r['progress_message'] if r['progress_message'] else ''}); "
                       "a server keeps warming it up in the background, and calls wait for it")
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
    good.sort(key=lambda t: t.name)
    if as_json:
        click.echo(json.dumps([
            {"name": t.name, "plugin": t.plugin, "description": t.description, "input_schema": t.signature.input_schema,
             **({"output_schema": t.signature.output_schema} if t.signature.output_schema else {}),
             **({"annotations": t.annotations} if t.annotations else {})}
            for t in good], indent=2))
        return
    import textwrap

    from plexor.signature import properties, required_names, type_text  # the wording of the kernel's argument errors

    for t in good:
        first = (t.description or "").strip().split("\n\n")[0]
        click.echo(f"{t.name}  [{t.plugin}]")
        click.echo(textwrap.fill(" ".join(first.split()), 100, initial_indent="    ", subsequent_indent="    "))
        props = properties(t.signature.accepts or t.signature.input_schema)  # unions whole, for people
        required = required_names(t.signature.input_schema)
        for name, prop in props.items():
            click.echo(f"    - {name}: {type_text(prop)}{' (required)' if name in required else ''}")


def _takes(prop: Mapping[str, object], kinds: tuple[str, ...]) -> bool:
    typ = prop.get("type")
    if typ in kinds or (isinstance(typ, list) and any(k in typ for k in kinds)) or ("object" in kinds and "$ref" in prop):
        return True
    options: list[object] = []
    for key in ("anyOf", "oneOf"):
        found = prop.get(key)
        options.extend(found if isinstance(found, list) else [])
    return any(isinstance(option, Mapping) and _takes(option, kinds) for option in options)


def _takes_string(prop: Mapping[str, object]) -> bool:
    return _takes(prop, ("string",))


def _parse_args(pairs: tuple[str, ...], raw_json: str | None, schema: Mapping[str, object]) -> dict[str, object]:
    args: dict[str, object] = {}
    if raw_json:
        try:
            loaded = json.loads(raw_json)
        except json.JSONDecodeError as exc:
            raise click.UsageError(f"--json is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise click.UsageError("--json must be a JSON object, e.g. '{\"key\": \"value\"}'")
        args.update(loaded)
    found = schema.get("properties")
    props = found if isinstance(found, Mapping) else {}
    for pair in pairs:
        if "=" not in pair:
            raise click.UsageError(f"--arg {pair!r} must look like key=value")
        key, value = pair.split("=", 1)
        prop = props.get(key)
        prop = prop if isinstance(prop, Mapping) else {}
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
    """Call TOOL in-process and print its result (exit 1 when the tool fails, 2 when it refuses the arguments)."""
    _quiet_logs()
    from plexor.errors import NotFound

    async def go(kernel: Kernel) -> tuple[str, str] | Outcome:
        try:
            spec = kernel.resolve_tool(tool)
        except NotFound as exc:  # a name that is not there is usage (2); a failed plugin's tool fails (1) unless
            rec = kernel.records.get(str(exc.data.get("plugin", "")))  # its configuration failed it (2: fix that)
            failed = exc.data.get("state") == "failed" and not (rec is not None and rec.failed_by_config)
            return ("failed" if failed else "usage", exc.render())
        try:
            args = _parse_args(pairs, raw_json, spec.signature.accepts or spec.signature.input_schema)
        except click.UsageError as exc:
            return ("usage", exc.format_message())
        return await kernel.call_tool(spec.name, args)

    outcome = run_kernel(go)
    if isinstance(outcome, tuple):  # ("usage" | "failed", what to say)
        kind, said = outcome
        click.echo(said, err=kind == "usage")
        sys.exit(2 if kind == "usage" else 1)
    click.echo(outcome.text)
    if outcome.is_error:  # InvalidArgument and ConfigError: 2 (change the input); any other failure: 1
        sys.exit(getattr(outcome.error, "exit_code", 1))


@main.command("paths")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def paths_cmd(as_json: bool) -> None:
    """Show the config, data and log directories (PLEXOR_HOME moves them all), saying which do not exist yet."""
    from plexor.core.config import paths

    p = paths()
    found = {"config_dir": p.config_dir, "config_file": p.config_file, "data_dir": p.data_dir, "log_dir": p.log_dir}
    if as_json:
        click.echo(json.dumps({k: str(v) for k, v in found.items()}, indent=2))
        return
    later = {"config_dir": "`plexor config path` creates it", "config_file": "`plexor config path` creates a starter",
             "data_dir": "made when Plexor first stores something", "log_dir": "made when the daemon first starts"}
    for k, v in found.items():
        click.echo(f"{k:<12} {v}" + ("" if v.exists() else f"  (does not exist yet: {later[k]})"))


if __name__ == "__main__":  # pragma: no cover
    main()
