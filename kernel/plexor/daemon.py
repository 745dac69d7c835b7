"""The shared local daemon and ``plexor connect``.

``plexor serve --transport http --daemon`` starts one background server per
data directory. It listens on 127.0.0.1 (a free port), requires a generated
bearer token, and writes ``<data_dir>/daemon.json`` (mode 0600)::

    {"pid": 4242, "host": "127.0.0.1", "port": 50123, "url": "http://127.0.0.1:50123/mcp",
     "token": "...", "version": "0.1.0", "started_at": 1700000000.0}

``plexor connect`` is what MCP clients launch instead of ``plexor serve``: a
stdio MCP server (the SDK's low-level ``Server``) that relays every request to
the daemon through the SDK's ``Client``. It starts the daemon when none answers
and waits until ``/healthz`` says ready; when the connection drops it checks
the daemon, restarts it if it is gone, reconnects and retries the request
once. A daemon of another Plexor version is stopped and replaced.

A tool that asks the client something (``ctx.ask``) works through the relay
too: the relay speaks 2026-07-28 to the daemon, declaring the end client's
capabilities, and the daemon answers with an ``InputRequiredResult``. A 2026-07-28 client gets it as is and retries through
the relay; for an older client the relay asks each question itself (as a
server-to-client request on stdio) and retries upstream with the answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from plexor import __version__

__all__ = ["DaemonError", "daemon_health", "ensure_daemon", "read_registry", "registry_path", "run_connect",
           "start_daemon", "stop_daemon", "write_registry"]

REGISTRY = "daemon.json"
# Rounds of InputRequiredResult the relay resolves for a pre-2026 client before giving up.
MAX_ASK_ROUNDS = 10


class DaemonError(RuntimeError):
    """The daemon could not be started or reached; the message says what to do."""


# ------------------------------------------------------------------ registry
def _data_dir(environ: dict[str, str] | None = None) -> Path:
    from plexor.core.config import paths

    return paths(environ if environ is not None else dict(os.environ)).data_dir


def registry_path(environ: dict[str, str] | None = None) -> Path:
    return _data_dir(environ) / REGISTRY


def write_registry(path: Path, info: dict[str, Any]) -> None:
    """Write the registry atomically, readable by this user only (it holds the token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, path)


def read_registry(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not {"pid", "port", "token", "version"} <= set(info):
        return None
    return info


def remove_registry(path: Path, pid: int) -> None:
    """Remove the registry if it still names ``pid`` (a newer daemon may have replaced it)."""
    info = read_registry(path)
    if info is not None and info.get("pid") == pid:
        with contextlib.suppress(OSError):
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own child that exited) still answers kill(0): reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def daemon_health(info: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    """``GET /healthz`` of the daemon in ``info``; ``None`` when it does not answer."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"http://{info.get('host', '127.0.0.1')}:{info['port']}/healthz",
                                 headers={"Authorization": f"Bearer {info['token']}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback URL we built
            found: dict[str, Any] = json.loads(resp.read())
            return found
    except (OSError, ValueError, urllib.error.URLError):
        return None


# ------------------------------------------------------------------ lifecycle
@contextlib.contextmanager
def _lock(path: Path) -> Any:
    """An exclusive lock so that two ``plexor connect`` starting together start one daemon."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _ready(health: dict[str, Any] | None) -> bool:
    return bool(health) and health.get("kernel", {}).get("state") == "ready"  # type: ignore[union-attr]


def start_daemon(environ: dict[str, str] | None = None, *, wait: float = 60.0) -> dict[str, Any]:
    """Start a daemon process for this data directory and wait until it is healthy; returns its registry."""
    env = dict(os.environ if environ is None else environ)
    path = registry_path(env)
    from plexor.core.config import paths

    log_dir = paths(env).log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    env["PLEXOR_TOKEN"] = secrets.token_urlsafe(32)
    env.setdefault("PLEXOR_LOG_LEVEL", "info")
    with open(log_dir / "daemon.log", "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", "0",
             "--registry", str(path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env,
            start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DaemonError(f"the Plexor daemon exited at start (code {proc.returncode}); "
                              f"see {log_dir / 'daemon.log'}")
        info = read_registry(path)
        if info is not None and info["pid"] == proc.pid and _ready(daemon_health(info)):
            return info
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    raise DaemonError(f"the Plexor daemon did not become healthy within {wait:g} s; see {log_dir / 'daemon.log'}")


def stop_daemon(info: dict[str, Any], *, wait: float = 30.0) -> None:
    """SIGTERM the daemon (in-flight calls finish) and wait for it to exit; SIGKILL after ``wait``."""
    pid = int(info["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ensure_daemon(environ: dict[str, str] | None = None, *, wait: float = 60.0,
                  log: Any = None) -> dict[str, Any]:
    """The running daemon's registry; start one if none answers; replace one of another version."""
    env = dict(os.environ if environ is None else environ)
    path = registry_path(env)
    with _lock(path):
        info = read_registry(path)
        if info is not None and _alive(int(info["pid"])):
            health = daemon_health(info)
            if _ready(health) and info["version"] == __version__:
                return info
            if health is not None and info["version"] != __version__:
                if log is not None:
                    log.warning("daemon_version_mismatch", daemon=info["version"], connect=__version__,
                                action="restarting the daemon")
                stop_daemon(info)
            elif health is None:
                # Alive but not answering (stuck, or still starting): give it a moment, then replace it.
                for _ in range(40):
                    time.sleep(0.05)
                    if _ready(daemon_health(info)):
                        return info
                stop_daemon(info, wait=5)
        return start_daemon(env, wait=wait)


# ------------------------------------------------------------------ connect
class _Upstream:
    """SDK ``Client``s to the daemon, each owned by a background task; reconnects on demand.

    One client per set of client capabilities the relay has to declare upstream: the daemon must
    see what the *end* client can answer (``ctx.can_ask``), and the SDK client stamps its
    capabilities on every request it sends. A relay serves one end client, so in practice that is
    one client for asking requests and one (declaring nothing) for the rest. On 2026-07-28 a client
    costs no handshake, only a connection.
    """

    def __init__(self, environ: dict[str, str], log: Any) -> None:
        self.environ = environ
        self.log = log
        self.clients: dict[frozenset[str], tuple[Any, Any]] = {}
        self.info: dict[str, Any] | None = None
        self._lock: Any = None
        self._tg: Any = None
        self.generation = 0

    async def _own(self, info: dict[str, Any], caps: frozenset[str], ready: Any, outcome: dict[str, Any]) -> None:
        import anyio
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        close = anyio.Event()
        # 2026-07-28 upstream: a tool that asks answers with InputRequiredResult, which the relay
        # passes on or resolves (see relay_asking). The callbacks only declare the capabilities;
        # on this protocol the daemon never sends requests mid-call.
        callbacks: dict[str, Any] = {}
        if "elicitation" in caps:
            callbacks["elicitation_callback"] = _never
        if "sampling" in caps:
            callbacks["sampling_callback"] = _never
        if "roots" in caps:
            callbacks["list_roots_callback"] = _never_roots
        try:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {info['token']}"})
            async with http, Client(streamable_http_client(info["url"], http_client=http), mode="2026-07-28",
                                    cache=None, **callbacks) as client:
                self.clients[caps] = (client, close)
                ready.set()
                await close.wait()
        except Exception as exc:  # noqa: BLE001 - reported to the waiting request, or (once closed) dropped
            if not ready.is_set():
                outcome["error"] = exc
                ready.set()
            else:
                self.log.debug("connect_upstream_closed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if self.clients.get(caps, (None, None))[1] is close:
                del self.clients[caps]

    async def connect(self, caps: frozenset[str] = frozenset(), *, restart: bool = False) -> Any:
        import anyio

        async with self._lock:
            if restart:
                self.close()
                self.clients.clear()
                self.info = None
            if caps in self.clients:
                return self.clients[caps][0]
            if self.info is None:
                self.info = await anyio.to_thread.run_sync(lambda: ensure_daemon(self.environ, log=self.log))
                self.generation += 1
                self.log.info("connect_upstream", url=self.info["url"], pid=self.info["pid"], generation=self.generation)
            info = self.info
            ready = anyio.Event()
            outcome: dict[str, Any] = {}
            self._tg.start_soon(self._own, info, caps, ready, outcome)
            await ready.wait()
            if "error" in outcome:
                self.info = None  # check (and if need be restart) the daemon next time
                raise DaemonError(f"cannot reach the Plexor daemon at {info['url']}: {outcome['error']}")
            return self.clients[caps][0]

    async def request(self, op: Any, caps: frozenset[str] = frozenset()) -> Any:
        """Run ``op(client)``; on a broken connection restart/reconnect and run it once more."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        client = await self.connect(caps)
        generation = self.generation
        try:
            return await op(client)
        except MCPError as exc:
            if exc.error.code not in (types.CONNECTION_CLOSED,) and "onnect" not in str(exc):
                raise  # a real answer from the daemon: pass it on
            failure: Exception = exc
        except Exception as exc:  # noqa: BLE001 - transport errors (httpx2, closed streams)
            failure = exc
        self.log.warning("connect_upstream_lost", error=f"{type(failure).__name__}: {failure}", action="reconnect and retry once")
        client = await self.connect(caps, restart=self.generation == generation)
        return await op(client)

    def close(self) -> None:
        for _client, close in list(self.clients.values()):
            close.set()


def _asking_caps(ctx: Any) -> frozenset[str]:
    """What the end client can be asked, to declare upstream for this request."""
    from plexor.asking import client_capabilities, declares

    caps = client_capabilities(ctx.session)
    return frozenset(name for name in ("elicitation", "sampling", "roots") if declares(caps, name))


async def _never(context: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ErrorData(code=types.INTERNAL_ERROR, message="plexor connect answers questions through InputRequiredResult")


async def _never_roots(context: Any) -> Any:
    return await _never(context, None)


async def relay_asking(ctx: Any, params: Any, send: Any, *, tool: bool) -> Any:
    """Send ``send(client, input_responses, request_state)`` upstream, resolving questions for old clients.

    A 2026-07-28 client receives the upstream ``InputRequiredResult`` unchanged (after a check that
    it declared what is asked). For an older client the relay asks each question over its own
    stdio session, like the kernel does, and retries upstream with the answers.
    """
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    from plexor.asking import (
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        AskError,
        Exchange,
        can_answer,
        client_capabilities,
        missing_capability,
        question_from_wire,
    )
    from plexor.errors import PlexorError

    modern = (getattr(ctx, "protocol_version", None) or "") >= "2026-07-28"
    responses, state = params.input_responses, params.request_state
    rounds = 0
    try:
        try:
            result = await send(responses, state)
        except MCPError as exc:  # the daemon says the end client lacks a capability: as `plexor serve` would
            if exc.error.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
                raise
            data = exc.error.data if isinstance(exc.error.data, dict) else {}
            raise AskError(exc.error.message.split("\n", 1)[0], str(data.get("guidance") or ""), rpc_code=exc.error.code,
                           data={k: v for k, v in data.items() if k != "guidance"}) from None
        while isinstance(result, types.InputRequiredResult):
            wire = {k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in (result.input_requests or {}).items()}
            if modern:
                caps = client_capabilities(ctx.session)
                for key, request in wire.items():
                    if not can_answer(caps, request["method"]):
                        raise missing_capability(key, request["method"])
                return result
            rounds += 1
            if rounds > MAX_ASK_ROUNDS:
                raise PlexorError(f"the call asked more than {MAX_ASK_ROUNDS} rounds of questions",
                                  "Answer fewer follow-ups, or use a 2026-07-28 client, which drives the rounds itself.")
            exchange = Exchange(capabilities=lambda: client_capabilities(ctx.session), session=ctx.session,
                                request_id=ctx.request_id)
            answers = await exchange.ask({k: question_from_wire(r) for k, r in wire.items()})
            typed = {k: _typed_answer(types, v) for k, v in answers.items()}
            result = await send(typed, result.request_state)
    except AskError as err:
        if modern or not tool:
            raise MCPError(err.rpc_code, err.render(), {**err.data, "guidance": err.guidance}) from None
        return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())], is_error=True)
    except PlexorError as err:
        if not tool:
            raise MCPError(types.INTERNAL_ERROR, err.render()) from None
        return types.CallToolResult(content=[types.TextContent(type="text", text=err.render())], is_error=True)
    return result


def _typed_answer(types: Any, answer: dict[str, Any]) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(types.InputResponse).validate_python(answer)


async def run_connect(environ: dict[str, str] | None = None) -> None:
    """Serve MCP on stdin/stdout, relaying every request to the shared daemon."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import NotificationOptions, Server

    from plexor.log import get_logger
    from plexor.serving.stdio import stdio_streams

    env = dict(os.environ if environ is None else environ)
    log = get_logger("plexor.connect")
    up = _Upstream(env, log)
    up._lock = anyio.Lock()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_tools(cursor=params.cursor if params else None))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            with contextlib.suppress(Exception):
                await ctx.session.report_progress(progress, total, message)

        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.call_tool(
                params.name, params.arguments, progress_callback=relay_progress, input_responses=responses,
                request_state=state, allow_input_required=True), _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=True)

    async def list_resources(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_resources(cursor=params.cursor if params else None))

    async def list_templates(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_resource_templates(cursor=params.cursor if params else None))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.read_resource(
                str(params.uri), input_responses=responses, request_state=state, allow_input_required=True),
                _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=False)

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return await up.request(lambda c: c.list_prompts(cursor=params.cursor if params else None))

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        async def send(responses: Any, state: Any) -> Any:
            return await up.request(lambda c: c.session.get_prompt(
                params.name, dict(params.arguments or {}), input_responses=responses, request_state=state,
                allow_input_required=True), _asking_caps(ctx))

        return await relay_asking(ctx, params, send, tool=False)

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> Any:
        return await up.request(lambda c: c.complete(params.ref, {"name": params.argument.name, "value": params.argument.value}))

    server: Server[Any] = Server(
        "plexor", version=__version__, title="Plexor (shared daemon)",
        instructions="Relays to the shared Plexor daemon. Call plexor_health to see which process answers.",
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_list_resource_templates=list_templates, on_read_resource=read_resource,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete,
    )
    async with anyio.create_task_group() as tg:
        up._tg = tg
        await up.connect()  # start (or find) the daemon before answering the handshake
        async with stdio_streams(log) as (read_stream, write_stream):
            await server.run(read_stream, write_stream,
                             server.create_initialization_options(NotificationOptions(tools_changed=True)))
        up.close()
        tg.cancel_scope.cancel()
