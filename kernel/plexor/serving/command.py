"""``plexor serve``: the command that runs a transport (registered on the ``plexor`` group by ``plexor.cli``)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from plexor.core.config import LOG_LEVELS
from plexor.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor.core.kernel import Kernel
    from plexor.features.auth.config import Profile
    from plexor.serving.http_options import HttpOptions

__all__ = ["serve"]


def _csv_env(name: str) -> list[str]:
    return [part.strip() for part in os.environ.get(name, "").split(",") if part.strip()]


def _ping_seconds() -> float:
    """PLEXOR_SSE_PING_SECONDS: how long a 2026-07-28 answer may stay silent before it turns SSE and is pinged."""
    raw = os.environ.get("PLEXOR_SSE_PING_SECONDS", "").strip()
    try:
        seconds = float(raw) if raw else 15.0
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 86400:
        raise click.UsageError(f"PLEXOR_SSE_PING_SECONDS={raw!r} is not a number of seconds above 0 (the default is "
                               "15): set it below the idle timeout of the proxies in front of the server, or unset it")
    return seconds


@click.command()
@click.option("--transport", type=click.Choice(["stdio", "http", "sse"]), default="stdio", show_default=True,
              help="stdio for MCP clients that launch the server; http for Streamable HTTP at /mcp; sse for legacy SSE.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (http/sse).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (http/sse); 0 picks a free one.")
@click.option("--token", envvar="PLEXOR_TOKEN", default=None, help="Require 'Authorization: Bearer TOKEN' (http/sse).")
@click.option("--token-file", envvar="PLEXOR_TOKEN_FILE", default=None, metavar="FILE",
              help="Read the bearer token from FILE (a mounted secret, a systemd credential); as PLEXOR_TOKEN_FILE.")
@click.option("--auth-issuer", envvar="PLEXOR_AUTH_ISSUER", default=None,
              help="OAuth 2.1: accept access tokens of this authorization server (issuer URL); as [plexor.auth] issuer.")
@click.option("--resource-url", envvar="PLEXOR_RESOURCE_URL", default=None,
              help="OAuth 2.1: this server's public URL of /mcp, the audience tokens must name; as [plexor.auth] resource.")
@click.option("--profile", default=None, help="Tool profile of connections that name none ([plexor.profiles.NAME]).")
@click.option("--stateless", is_flag=True, help="Streamable HTTP without sessions (each request stands alone).")
@click.option("--json-response", is_flag=True,
              help="Streamable HTTP: answer each POST with one JSON body instead of an SSE stream (a faster round "
                   "trip; progress and log notifications during a call, and 2025-era questions, are not sent).")
@click.option("--allow-unauthenticated", is_flag=True, help="Allow a non-loopback bind without --token.")
@click.option("--allow-origin", "allow_origins", multiple=True,
              help="Extra allowed Origin (repeatable), e.g. https://app.example; also PLEXOR_ALLOWED_ORIGINS=a,b.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="Extra allowed Host header (repeatable), e.g. mcp.example:443; also PLEXOR_ALLOWED_HOSTS=a,b.")
@click.option("--max-body", default=4 * 1024 * 1024, show_default=True, type=click.IntRange(1024), help="Largest request body in bytes (413 above).")
@click.option("--request-timeout", envvar="PLEXOR_REQUEST_TIMEOUT", default=300.0, show_default=True,
              type=click.FloatRange(0.1), help="Seconds one MCP request (e.g. a tool call), or a task, may run before it "
              "is cancelled with an error (a tool may declare longer); as PLEXOR_REQUEST_TIMEOUT.")
@click.option("--grace", default=30.0, show_default=True, type=click.FloatRange(0),
              help="On SIGTERM/SIGINT, seconds in-flight calls get to finish.")
@click.option("--header-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds a request's headers may take to arrive (http/sse); slower connections are closed (408).")
@click.option("--body-timeout", default=60.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds a request's body may take to arrive after its headers (http/sse).")
@click.option("--max-connections", default=0, show_default=True, type=click.IntRange(0),
              help="Open connections at most (http/sse); 0: three quarters of the file descriptor limit, at most 4096. "
                   "At the cap a new connection replaces the oldest idle one, or gets 503 when all are busy.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Worker processes for stateless Streamable HTTP (needs --stateless); they share the storage.")
@click.option("--daemon", is_flag=True, help="Start the shared background server (http, 127.0.0.1, generated token) "
              "for `plexor connect`, or report the one running; prints its registry.")
@click.option("--registry", "registry", default=None, hidden=True, help="(internal) write the daemon registry here once ready.")
@click.option("--log-level", default=None, type=click.Choice(LOG_LEVELS, case_sensitive=False), help="Log level (JSON lines on stderr); as PLEXOR_LOG_LEVEL.")
def serve(transport: str, host: str, port: int, token: str | None, stateless: bool, json_response: bool,
          allow_unauthenticated: bool,
          allow_origins: tuple[str, ...], allow_hosts: tuple[str, ...], max_body: int, request_timeout: float,
          grace: float, header_timeout: float, body_timeout: float, max_connections: int, workers: int, daemon: bool,
          registry: str | None, log_level: str | None, auth_issuer: str | None = None, resource_url: str | None = None,
          profile: str | None = None, token_file: str | None = None) -> None:
    """Run the MCP server (stdio by default)."""
    from plexor.log import configure

    configure(log_level or os.environ.get("PLEXOR_LOG_LEVEL") or "info", force=True)
    # A misspelt PLEXOR_PLUGINS/PLEXOR_DISABLE name does not stop the server (a client launching it would
    # see only "Connection closed"): it serves the plugins that exist and says the did-you-mean in the
    # log, plexor_health and the initialize instructions. CLI commands still refuse it (exit 2).
    if token_file:
        token = _read_token_file(token_file, token)
    if daemon:
        _report_daemon(transport)
        return
    if workers > 1 and (transport != "http" or not stateless):
        raise click.UsageError("--workers N needs --transport http --stateless: MCP sessions cannot span processes")
    kernel, stdio_profile = _checked_kernel(transport, profile, auth_issuer)
    if transport == "stdio":
        _serve_stdio(kernel, grace, stdio_profile)
        return
    from plexor.transports import HttpOptions

    _check_http_access(kernel, host, token, auth_issuer, resource_url, profile, allow_unauthenticated)
    opts = HttpOptions(host=host, port=port, token=token, stateless=stateless, transport=transport,
                       allowed_origins=list(allow_origins) + _csv_env("PLEXOR_ALLOWED_ORIGINS"),
                       allowed_hosts=list(allow_hosts) + _csv_env("PLEXOR_ALLOWED_HOSTS"),
                       max_body_bytes=max_body, request_timeout=request_timeout, grace=grace, workers=workers,
                       json_response=json_response, header_timeout=header_timeout, body_timeout=body_timeout, max_connections=max_connections,
                       auth_issuer=auth_issuer, resource_url=resource_url, profile=profile, ping_seconds=_ping_seconds())
    _serve_http(kernel, opts, registry)


def _report_daemon(transport: str) -> None:
    """``serve --daemon``: start the shared daemon (or find the one running) and print its registry, without the token."""
    if transport != "http":
        raise click.UsageError("--daemon serves Streamable HTTP: use --transport http --daemon")
    from plexor.plugin_commands import disabled_features

    if "daemon" in disabled_features(None):
        raise click.UsageError("--daemon starts the shared daemon of the built-in plugin 'daemon', which PLEXOR_DISABLE "
                               "turns off; remove daemon from PLEXOR_DISABLE to use it")
    from plexor.features.daemon.process import DaemonError, ensure_daemon

    try:
        info = ensure_daemon()
    except DaemonError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(json.dumps({k: v for k, v in info.items() if k != "token"} | {"registry": str(_registry_path())}))


def _checked_kernel(transport: str, profile: str | None, auth_issuer: str | None) -> tuple[Kernel, Profile | None]:
    """The kernel to serve (loaded, except under stdio) and stdio's profile; every bad setting a usage error now.

    Under stdio only the config file is checked: the kernel loads the plugins right after answering the
    handshake (see ``plexor.serving.stdio.serve_stdio``).
    """
    from plexor.core.kernel import Kernel

    stdio_profile: Profile | None = None
    try:
        kernel = Kernel()
        from plexor.features.telemetry import for_kernel

        kernel.telemetry = for_kernel(kernel)  # PLEXOR_OTEL without the SDK is a usage error now, not later
        from plexor.features.state.keys import configured_keys

        configured_keys(kernel.environ)  # a bad PLEXOR_STATE_KEY* is a usage error now, not a failed request later
        from plexor.limits import LIMITS, value

        for name in LIMITS:  # a bad PLEXOR_MAX_* (or other limit) too, not a traceback once the app is built
            value(name, kernel.environ)
        if transport != "stdio":
            from plexor.features.state.events import wants_shared_store

            wants_shared_store(kernel.environ, None)  # a bad PLEXOR_EVENT_STORE is a usage error
        if transport == "stdio":
            from plexor.core.config import check_log_level, load_config_file

            check_log_level(kernel.environ)
            stdio_profile = profile_for_stdio(load_config_file(kernel.paths.config_file), profile, kernel.paths.config_file)
        else:
            with _stdout_to_stderr():  # a plugin printing at import must not write on the protocol stream
                kernel.load()
        from plexor.serving.features import refuse_unguarded

        refuse_unguarded(kernel, profile, auth_issuer)  # authorization configured, its plugin off: a usage error
    except Exception as exc:  # noqa: BLE001
        message = exc.render() if hasattr(exc, "render") else str(exc)
        raise click.UsageError(message) from exc
    return kernel, stdio_profile


def _serve_stdio(kernel: Kernel, grace: float, profile: Profile | None) -> None:
    """Serve one client on stdin/stdout, unless stdin cannot carry one (a supervisor's); hints for a person at a terminal."""
    import anyio

    from plexor.serving.stdin import NO_CLIENT_HINT, unusable_stdin
    from plexor.transports import serve_stdio

    why = unusable_stdin()
    if why is not None:  # a supervisor's stdin: no client can ever come (plexor.serving.stdin)
        click.echo(f"plexor serve: stdin {why}: {NO_CLIENT_HINT}.", err=True)
        return
    hint = None
    if sys.stdin.isatty():  # a person, not a client, started it: say what it waits for (never on a pipe)
        def hint() -> None:  # once Ctrl+C is handled, as the hint promises
            click.echo(stdio_hint(), err=True)

    def silent() -> None:
        click.echo("plexor serve: stdin ended before a client sent anything; nothing was served.", err=True)

    anyio.run(lambda: serve_stdio(kernel, grace=grace, listening=hint, profile=profile, silent=silent))


def _check_http_access(kernel: Kernel, host: str, token: str | None, auth_issuer: str | None, resource_url: str | None,
                       profile: str | None, allow_unauthenticated: bool) -> None:
    """Refuse a profile nobody configured and an open bind beyond this machine (unless allowed); warn of an allowed one."""
    from plexor.features.auth import load as load_auth
    from plexor.transports import is_loopback

    try:
        auth, profiles = load_auth(kernel, issuer=auth_issuer, resource=resource_url)
    except Exception as exc:  # noqa: BLE001 - a ConfigError: say what to fix
        raise click.UsageError(exc.render() if hasattr(exc, "render") else str(exc)) from exc
    oauth = auth.enabled
    if profile is not None and profile not in profiles:
        raise click.UsageError(f"--profile {profile} is not a configured profile; use one of: "
                               f"{', '.join(sorted(profiles)) or 'none (add [plexor.profiles.NAME] to plexor.toml)'}")
    if not is_loopback(host) and not token and not oauth and not allow_unauthenticated:
        raise click.UsageError(
            f"binding {host} exposes the server beyond this machine; pass --token (or set PLEXOR_TOKEN), "
            "or --allow-unauthenticated if you really mean it"
        )
    if not is_loopback(host) and not token and not oauth:
        click.echo(f"warning: serving on {host} without a token: anyone who can reach it can call every tool", err=True)


def _serve_http(kernel: Kernel, opts: HttpOptions, registry: str | None) -> None:
    """Bind (exit 2 when the port cannot be had), say where, and serve until a signal."""
    from plexor.transports import bind_socket, serve_http

    host, port, transport, workers = opts.host, opts.port, opts.transport, opts.workers
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


def stdio_hint() -> str:
    """What ``plexor serve`` says when started on a terminal, where nothing will ever speak MCP to it."""
    me = f"{sys.executable} -m plexor serve"
    return (f"plexor {__version__}: serving MCP on stdio, waiting for a client to send JSON-RPC on stdin.\n"
            "This is the command MCP clients launch; typing here does nothing useful. Stop it with Ctrl+C.\n"
            f"Try it in the MCP Inspector:  npx @modelcontextprotocol/inspector {me}\n"
            "Set up a client:  plexor install claude-desktop|claude-code|cursor|vscode|windsurf\n"
            "Serve over HTTP instead:  plexor serve --transport http")


def profile_for_stdio(config: Mapping[str, object], name: str | None, where: Path | str) -> Profile | None:
    """The ``Profile`` of ``serve --profile NAME`` over stdio (read from the file: the kernel loads later), or None."""
    if name is None:
        return None
    from plexor.features.auth.config import profiles_config

    section = config.get("plexor")
    profiles = profiles_config(section.get("profiles") if isinstance(section, dict) else None,
                               f"[plexor.profiles] of {where}")
    if name not in profiles:
        from plexor.errors import ConfigError

        raise ConfigError(f"--profile {name} is not a configured profile",
                          f"Use one of: {', '.join(sorted(profiles)) or 'none'} (the [plexor.profiles] of {where}).")
    from plexor.features.auth import stdio_scopes

    stdio_scopes(where)  # a bad [plexor.auth] (whose scopes the profile uses) is a usage error now, not at the handshake
    return profiles[name]


def _read_token_file(path: str, token: str | None) -> str:
    """The token in ``path`` (surrounding whitespace dropped); a usage error when it cannot serve as one."""
    if token:
        raise click.UsageError("both a token (--token or PLEXOR_TOKEN) and a token file (--token-file or "
                               "PLEXOR_TOKEN_FILE) are given; keep one")
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"cannot read the token file {path}: {getattr(exc, 'strerror', None) or exc}; "
                               "check the path and that this user may read it") from exc
    if not text or any(ch.isspace() for ch in text):
        raise click.UsageError(f"the token file {path} must hold one token (no spaces); it holds "
                               + ("nothing" if not text else "several words"))
    return text


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
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


def _registry_path() -> Path:
    from plexor.features.daemon.process import registry_path

    return registry_path()


def _daemon_hooks(registry: str, opts: HttpOptions) -> tuple[Callable[[], None], Callable[[], None]]:
    import time

    from plexor.features.daemon.process import plugin_selection, remove_registry, write_registry

    path = Path(registry)
    pid = os.getpid()

    def ready() -> None:
        write_registry(path, {"pid": pid, "host": opts.host, "port": opts.port,
                              "url": f"http://{opts.host}:{opts.port}/mcp", "token": opts.token or "",  # the daemon always has one
                              "version": __version__, "started_at": time.time(), "plugins": plugin_selection()})

    return ready, lambda: remove_registry(path, pid)
