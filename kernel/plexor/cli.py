"""The ``plexor`` command.

Exit codes: 0 success, 1 a tool error, 2 a usage error (bad option, unknown
tool, bad arguments or configuration).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import click

from plexor import __version__

__all__ = ["main", "run_kernel"]

ENV_HELP = (
    "Environment: PLEXOR_HOME=DIR keeps config, data and logs under DIR; PLEXOR_PLUGINS=a,b loads only "
    "those plugins (empty: none); PLEXOR_DISABLE=a,b blocks plugins; PLEXOR_<PLUGIN>_<KEY> overrides a "
    "setting; PLEXOR_TOKEN sets the HTTP bearer token; PLEXOR_LOG_LEVEL sets the log level (stderr); "
    "PLEXOR_SEPARATOR (_ or -) joins namespace and method in tool names; PLEXOR_START_WAIT (seconds, "
    "default 15) bounds how long a call waits for its plugin to start; PLEXOR_PAGE_SIZE (default 100) "
    "sizes list pages."
)

CORE_COMMANDS = ("serve", "connect", "plugins", "tools", "call", "paths")


class PluginGroup(click.Group):
    """The root group: core commands, plus each plugin's group (loaded only when needed)."""

    _plugin_commands: dict[str, tuple[click.Command, str]] | None = None
    _clash_errors: list[str]
    environ: dict[str, str] | None = None  # None: os.environ (plexor.testing.plugin_cli sets its own)

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
        return self._plugin_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._load_plugin_commands()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        found = self._load_plugin_commands().get(cmd_name)
        return found[0] if found else None


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
    from plexor.log import configure

    configure(os.environ.get("PLEXOR_LOG_LEVEL", "warning"))


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
        await kernel.start()
        try:
            result = func(kernel)
            if hasattr(result, "__await__"):
                result = await result
            return result
        finally:
            await kernel.stop()

    return anyio.run(go)


@click.group(cls=PluginGroup, epilog=ENV_HELP)
@click.version_option(__version__, prog_name="plexor")
def main() -> None:
    """Plexor: an MCP server whose tools, resources and prompts come from plugins."""


def _csv_env(name: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, "").split(",") if part.strip()]


@main.command()
@click.option("--transport", type=click.Choice(["stdio", "http", "sse"]), default="stdio", show_default=True,
              help="stdio for MCP clients that launch the server; http for Streamable HTTP at /mcp; sse for legacy SSE.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (http/sse).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (http/sse); 0 picks a free one.")
@click.option("--token", envvar="PLEXOR_TOKEN", default=None, help="Require 'Authorization: Bearer TOKEN' (http/sse).")
@click.option("--stateless", is_flag=True, help="Streamable HTTP without sessions (each request stands alone).")
@click.option("--allow-unauthenticated", is_flag=True, help="Allow a non-loopback bind without --token.")
@click.option("--allow-origin", "allow_origins", multiple=True,
              help="Extra allowed Origin (repeatable), e.g. https://app.example; also PLEXOR_ALLOWED_ORIGINS=a,b.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="Extra allowed Host header (repeatable), e.g. mcp.example:443; also PLEXOR_ALLOWED_HOSTS=a,b.")
@click.option("--max-body", default=4 * 1024 * 1024, show_default=True, type=click.IntRange(1024), help="Largest request body in bytes (413 above).")
@click.option("--request-timeout", default=300.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds one MCP request (e.g. a tool call) may run before it is cancelled with an error.")
@click.option("--grace", default=30.0, show_default=True, type=click.FloatRange(0),
              help="On SIGTERM/SIGINT, seconds in-flight calls get to finish.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Worker processes for stateless Streamable HTTP (needs --stateless); they share the storage.")
@click.option("--daemon", is_flag=True, help="Start the shared background server (http, 127.0.0.1, generated token) "
              "for `plexor connect`, or report the one running; prints its registry.")
@click.option("--registry", "registry", default=None, hidden=True, help="(internal) write the daemon registry here once ready.")
@click.option("--log-level", default=None, type=click.Choice(["debug", "info", "warning", "error"]), help="Log level (JSON lines on stderr).")
def serve(transport: str, host: str, port: int, token: str | None, stateless: bool, allow_unauthenticated: bool,
          allow_origins: tuple[str, ...], allow_hosts: tuple[str, ...], max_body: int, request_timeout: float,
          grace: float, workers: int, daemon: bool, registry: str | None, log_level: str | None) -> None:
    """Run the MCP server (stdio by default)."""
    from plexor.log import configure

    configure(log_level or os.environ.get("PLEXOR_LOG_LEVEL") or "info", force=True)
    if daemon:
        if transport != "http":
            raise click.UsageError("--daemon serves Streamable HTTP: use --transport http --daemon")
        from plexor.daemon import DaemonError, ensure_daemon

        try:
            info = ensure_daemon()
        except DaemonError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        click.echo(json.dumps({k: v for k, v in info.items() if k != "token"} | {"registry": str(_registry_path())}))
        return
    if workers > 1 and (transport != "http" or not stateless):
        raise click.UsageError("--workers N needs --transport http --stateless: MCP sessions cannot span processes")
    from plexor.core.kernel import Kernel

    try:
        kernel = Kernel()
        if transport == "stdio":
            # Only the config file is checked now: under stdio the kernel loads the
            # plugins right after answering the handshake (see transports.serve_stdio).
            from plexor.core.config import load_config_file

            load_config_file(kernel.paths.config_file)
        else:
            with _stdout_to_stderr():  # a plugin printing at import must not write on the protocol stream
                kernel.load()
    except Exception as exc:  # noqa: BLE001
        message = exc.render() if hasattr(exc, "render") else str(exc)
        raise click.UsageError(message) from exc
    if transport == "stdio":
        import anyio

        from plexor.transports import serve_stdio

        anyio.run(lambda: serve_stdio(kernel, grace=grace))
        return
    from plexor.transports import HttpOptions, bind_socket, is_loopback, serve_http

    if not is_loopback(host) and not token and not allow_unauthenticated:
        raise click.UsageError(
            f"binding {host} exposes the server beyond this machine; pass --token (or set PLEXOR_TOKEN), "
            "or --allow-unauthenticated if you really mean it"
        )
    if not is_loopback(host) and not token:
        click.echo(f"warning: serving on {host} without a token: anyone who can reach it can call every tool", err=True)
    opts = HttpOptions(host=host, port=port, token=token, stateless=stateless, transport=transport,
                       allowed_origins=list(allow_origins) + _csv_env("PLEXOR_ALLOWED_ORIGINS"),
                       allowed_hosts=list(allow_hosts) + _csv_env("PLEXOR_ALLOWED_HOSTS"),
                       max_body_bytes=max_body, request_timeout=request_timeout, grace=grace, workers=workers)
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        click.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}. Pick another --port "
                   "(0 picks a free one), or stop what is using it.", err=True)
        sys.exit(2)
    opts.port = sock.getsockname()[1]
    on_ready = on_stop = None
    if registry:
        on_ready, on_stop = _daemon_hooks(registry, opts)
    click.echo(f"plexor {__version__} serving {'SSE at /sse' if transport == 'sse' else 'Streamable HTTP at /mcp'} "
               f"on http://{host}:{opts.port}" + (f" with {workers} workers" if workers > 1 else ""), err=True)
    serve_http(None if workers > 1 else kernel, opts, sock=sock, on_ready=on_ready, on_stop=on_stop)


@contextlib.contextmanager
def _stdout_to_stderr() -> Any:
    """Send fd 1 and ``sys.stdout`` to stderr for the duration (both restored afterwards)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _registry_path() -> Any:
    from plexor.daemon import registry_path

    return registry_path()


def _daemon_hooks(registry: str, opts: Any) -> tuple[Any, Any]:
    import time
    from pathlib import Path

    from plexor.daemon import remove_registry, write_registry

    path = Path(registry)
    pid = os.getpid()

    def ready() -> None:
        write_registry(path, {"pid": pid, "host": opts.host, "port": opts.port,
                              "url": f"http://{opts.host}:{opts.port}/mcp", "token": opts.token,
                              "version": __version__, "started_at": time.time()})

    return ready, lambda: remove_registry(path, pid)


@main.command("connect")
@click.option("--log-level", default=None, type=click.Choice(["debug", "info", "warning", "error"]), help="Log level (JSON lines on stderr).")
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
    for entry in tools:
        first = (entry["description"] or "").strip().splitlines()[0] if entry["description"] else ""
        click.echo(f"{entry['name']}  [{entry['plugin']}]\n    {first}")
        props = entry["input_schema"].get("properties", {})
        required = set(entry["input_schema"].get("required", []))
        for name, prop in props.items():
            typ = prop.get("type") or ("|".join(map(str, prop["enum"])) if "enum" in prop else "any")
            click.echo(f"    - {name}: {typ}{' (required)' if name in required else ''}")


def _takes_string(prop: dict[str, Any]) -> bool:
    if prop.get("type") == "string" or (isinstance(prop.get("type"), list) and "string" in prop["type"]):
        return True
    return any(_takes_string(option) for option in prop.get("anyOf", []) + prop.get("oneOf", []))


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
        if _takes_string(props.get(key, {})):
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
        except NotFound as exc:
            return ("usage", exc.render())
        try:
            args = _parse_args(pairs, raw_json, spec.signature.input_schema)
        except click.UsageError as exc:
            return ("usage", exc.format_message())
        return ("ok", await kernel.call_tool(spec.name, args))

    kind, outcome = _started(go)
    if kind == "usage":
        click.echo(outcome, err=True)
        sys.exit(2)
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
