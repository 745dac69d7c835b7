"""``plexor connect``: the command MCP clients launch to share the daemon (the ``daemon`` built-in plugin adds it)."""

from __future__ import annotations

import os
import sys

import click

from plexor.core.config import LOG_LEVELS
from plexor.errors import PlexorError

__all__ = ["connect_cmd"]


@click.command("connect")
@click.option("--log-level", default=None, type=click.Choice(LOG_LEVELS, case_sensitive=False), help="Log level (JSON lines on stderr); as PLEXOR_LOG_LEVEL.")
@click.option("--profile", default=None, help="Show this client only the tools of a profile ([plexor.profiles.NAME] of plexor.toml).")
def connect_cmd(log_level: str | None, profile: str | None) -> None:
    """Serve MCP on stdio by relaying to the shared daemon (started when absent; restarted if it dies).

    Configure MCP clients to launch `plexor connect` instead of `plexor serve`:
    every client then shares one background process (one model, one watcher, one set of connections).
    """
    from plexor.log import configure

    configure(log_level or os.environ.get("PLEXOR_LOG_LEVEL") or "warning", force=True)
    if profile is not None:  # a usage error whatever stdin is, as for serve; the daemon refuses it too
        from plexor.core.config import load_config_file, paths
        from plexor.serving.command import profile_for_stdio

        where = paths().config_file
        try:
            profile_for_stdio(load_config_file(where), profile, where)
        except Exception as exc:  # noqa: BLE001 - a ConfigError: say what to fix
            click.echo(f"error: {exc.render() if isinstance(exc, PlexorError) else exc}", err=True)
            sys.exit(2)
    from plexor.serving.stdin import unusable_stdin

    why = unusable_stdin()
    if why is not None:  # a supervisor's stdin: no client can ever come, so no daemon is started for it
        click.echo(f"plexor connect: stdin {why}: nothing to relay on stdio. MCP clients launch `plexor connect` "
                   "with a pipe on stdin; to run the shared server as a service, use `plexor serve --transport http`.",
                   err=True)
        return
    import anyio

    from plexor.features.daemon.process import DaemonError
    from plexor.features.daemon.relay import run_connect

    try:
        anyio.run(lambda: run_connect(profile=profile))
    except DaemonError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
