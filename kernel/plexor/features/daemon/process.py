"""The shared local daemon's process: its registry, start-up, liveness and stopping.

``plexor serve --transport http --daemon`` starts one background server per
data directory and plugin set (``PLEXOR_PLUGINS``/``PLEXOR_DISABLE``; see
:func:`registry_path`). It listens on 127.0.0.1 (a free port), requires a generated
bearer token, and writes ``<data_dir>/daemon.json`` (mode 0600; ``daemon-<hash>.json`` for a chosen set)::

    {"pid": 4242, "host": "127.0.0.1", "port": 50123, "url": "http://127.0.0.1:50123/mcp",
     "token": "...", "version": "0.1.0", "started_at": 1700000000.0, "alive": ".../daemon-4242.alive"}

Liveness and stopping work the same on every system, without signals sent from outside
(``os.kill(pid, 0)`` would be a Ctrl+C on Windows, where there is no SIGTERM to send either):

* while it runs, the daemon holds an exclusive lock on ``daemon-<pid>.alive`` (``filelock``: flock on
  POSIX, LockFileEx on Windows; the system drops it when the process ends, however it ends), so
  another process that fails to take that lock knows the daemon is alive;
* to stop it, ``stop_daemon`` writes ``daemon-<pid>.stop``; the daemon, watching for it, raises
  SIGTERM in itself, which drains in-flight calls as a Ctrl+C would. Only a daemon that does not
  exit within the wait is terminated (SIGKILL on POSIX, ``TerminateProcess`` on Windows).

``plexor connect`` (:mod:`plexor.features.daemon.relay`) is what MCP clients launch instead of
``plexor serve``; its upstream side (:mod:`plexor.features.daemon.upstream`) starts the daemon here
(:func:`ensure_daemon`) when none answers, waits until ``/healthz`` says ready, and restarts it when it is
gone. A daemon of another Plexor version is stopped and replaced. Questions a tool asks through the
relay are passed on by :mod:`plexor.features.daemon.asking`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol, Required, TypedDict

from plexor.version import __version__

__all__ = ["DaemonError", "Log", "Registry", "daemon_health", "ensure_daemon", "plugin_selection", "read_registry",
           "registry_path", "start_daemon", "stop_daemon", "write_registry"]

REGISTRY = "daemon.json"


class Registry(TypedDict, total=False):
    """A daemon's registry (``daemon.json``): where it listens, its token, and how to tell it is alive."""

    pid: Required[int]
    port: Required[int]
    token: Required[str]
    version: Required[str]
    host: str
    url: str
    started_at: float
    alive: str  # the file whose lock the daemon holds while it runs
    plugins: str  # plugin_selection() of the daemon


class Log(Protocol):
    """What the daemon's helpers log to (:func:`plexor.log.get_logger`)."""

    def debug(self, event: str, **values: object) -> object: ...
    def info(self, event: str, **values: object) -> object: ...
    def warning(self, event: str, **values: object) -> object: ...


class DaemonError(RuntimeError):
    """The daemon could not be started or reached; the message says what to do."""


# ------------------------------------------------------------------ registry
def _data_dir(environ: dict[str, str] | None = None) -> Path:
    from plexor.core.config import paths

    return paths(environ if environ is not None else dict(os.environ)).data_dir


def plugin_selection(environ: dict[str, str] | None = None) -> str:
    """The plugin set a client asks for, as one canonical text (``PLEXOR_PLUGINS``, ``PLEXOR_DISABLE``).

    Unset ``PLEXOR_PLUGINS`` is every plugin (``*``); an empty one is none. Order and spaces do not count.
    """
    env = os.environ if environ is None else environ

    def names(var: str) -> str:
        return ",".join(sorted({p.strip() for p in env.get(var, "").split(",") if p.strip()}))

    return f"plugins={'*' if env.get('PLEXOR_PLUGINS') is None else names('PLEXOR_PLUGINS')};disable={names('PLEXOR_DISABLE')}"


DEFAULT_SELECTION = "plugins=*;disable="


def registry_path(environ: dict[str, str] | None = None) -> Path:
    """The registry of the daemon that serves this environment's plugin set.

    One daemon per plugin set: a client asking for other plugins than a running daemon's gets a
    daemon of its own (``daemon-<hash of the set>.json``) instead of that daemon's tools. Every
    plugin (nothing chosen) keeps the plain ``daemon.json``.
    """
    import hashlib

    selection = plugin_selection(environ)
    if selection == DEFAULT_SELECTION:
        return _data_dir(environ) / REGISTRY
    key = hashlib.sha256(selection.encode()).hexdigest()[:12]
    return _data_dir(environ) / f"daemon-{key}.json"


def write_registry(path: Path, info: Registry) -> None:
    """Write the registry atomically, readable by this user only (it holds the token).

    Written by the daemon about itself, it first takes the daemon's liveness lock and starts
    watching for a stop request (module docstring); the registry then names the lock's file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if info.get("pid") == os.getpid():
        if path not in _held:
            _held[path] = _Liveness(_alive_path(path, os.getpid()))
        info = {**info, "alive": str(_held[path].alive)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, path)


def read_registry(path: Path) -> Registry | None:
    """The registry at ``path``; ``None`` when there is none, or it is not one (its required fields checked)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    pid, port, token, version = (info.get(k) for k in ("pid", "port", "token", "version"))
    if not (isinstance(pid, int) and isinstance(port, int) and isinstance(token, str) and isinstance(version, str)):
        return None
    found: Registry = {"pid": pid, "port": port, "token": token, "version": version}
    host, url, started, alive, plugins = (info.get(k) for k in ("host", "url", "started_at", "alive", "plugins"))
    if isinstance(host, str):
        found["host"] = host
    if isinstance(url, str):
        found["url"] = url
    if isinstance(started, (int, float)):
        found["started_at"] = float(started)
    if isinstance(alive, str):
        found["alive"] = alive
    if isinstance(plugins, str):
        found["plugins"] = plugins
    return found


def remove_registry(path: Path, pid: int) -> None:
    """Remove the registry if it still names ``pid`` (a newer daemon may have replaced it).

    In the daemon itself, this also lets go of its liveness lock: it is about to exit.
    """
    info = read_registry(path)
    if info is not None and info.get("pid") == pid:
        with contextlib.suppress(OSError):
            path.unlink()
    held = _held.pop(path, None) if pid == os.getpid() else None
    if held is not None:
        held.release()


def _alive_path(path: Path, pid: int) -> Path:
    return path.with_name(f"{path.stem}-{pid}.alive")


class _Liveness:
    """Held by the daemon process: its liveness lock, and the thread that watches for a stop request."""

    def __init__(self, alive: Path) -> None:
        from filelock import FileLock

        self.alive = alive
        self.lock = FileLock(alive, timeout=10)
        self.lock.acquire()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="plexor-daemon-stop", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        request = self.alive.with_suffix(".stop")
        while not self.done.wait(0.1):
            if request.exists():
                with contextlib.suppress(OSError):
                    request.unlink()
                # As a Ctrl+C would: the server's handler drains (a second request exits at once).
                signal.raise_signal(signal.SIGTERM)

    def release(self) -> None:
        self.done.set()
        self.lock.release()
        with contextlib.suppress(OSError):
            self.alive.unlink()


_held: dict[Path, _Liveness] = {}  # in the daemon: registry path -> its liveness


def _alive(info: Registry) -> bool:
    """Whether the daemon of the registry ``info`` still runs (on every system; no signal is sent).

    It does while it holds the lock on its ``alive`` file. A registry without one (a daemon of an
    older Plexor) is alive while its ``/healthz`` answers to its token.
    """
    alive = info.get("alive")
    if not alive:
        return daemon_health(info, timeout=1.0) is not None
    path = Path(alive)
    if int(info["pid"]) == os.getpid() and any(h.alive == path for h in _held.values()):
        return True
    if not path.exists():
        return False
    from filelock import FileLock, Timeout

    probe = FileLock(path, timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return True
    except OSError:  # cannot even open it: someone holds it in a way we cannot test; assume alive
        return True
    probe.release()
    with contextlib.suppress(OSError):
        path.unlink()  # left behind by a daemon that was killed
    return False


def daemon_health(info: Registry, timeout: float = 2.0) -> dict[str, object] | None:
    """``GET /healthz`` of the daemon in ``info``; ``None`` when it does not answer."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"http://{info.get('host', '127.0.0.1')}:{info['port']}/healthz",
                                 headers={"Authorization": f"Bearer {info['token']}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback URL we built
            found = json.loads(resp.read())
            return found if isinstance(found, dict) else None
    except urllib.error.HTTPError as exc:  # 503 while starting or draining: the body still says which
        try:
            body = json.loads(exc.read()) if exc.code == 503 else None
        except (OSError, ValueError):
            body = None
        return body if isinstance(body, dict) else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


# ------------------------------------------------------------------ lifecycle
@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive lock so that two ``plexor connect`` starting together start one daemon."""
    from filelock import FileLock  # flock on POSIX, LockFileEx on Windows

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_suffix(".lock")):
        yield


def _ready(health: Mapping[str, object] | None) -> bool:
    kernel = health.get("kernel") if health else None
    return isinstance(kernel, Mapping) and kernel.get("state") == "ready"


def start_daemon(environ: dict[str, str] | None = None, *, wait: float = 60.0) -> Registry:
    """Start a daemon process for this data directory and wait until it is healthy; returns its registry."""
    env = dict(os.environ if environ is None else environ)
    path = registry_path(env)
    from plexor.core.config import paths

    log_dir = paths(env).log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    env["PLEXOR_TOKEN"] = secrets.token_urlsafe(32)
    env.setdefault("PLEXOR_LOG_LEVEL", "info")
    detached = _detached(os.name == "nt")
    with open(log_dir / "daemon.log", "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "plexor", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", "0",
             "--registry", str(path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env, close_fds=True,
            creationflags=detached.get("creationflags", 0), start_new_session=bool(detached.get("start_new_session")),
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
    with contextlib.suppress(OSError):
        proc.kill()  # Popen's own: SIGKILL on POSIX, TerminateProcess on Windows
    raise DaemonError(f"the Plexor daemon did not become healthy within {wait:g} s; see {log_dir / 'daemon.log'}")


def _detached(windows: bool) -> dict[str, int]:
    """Popen options that keep the daemon alive when the terminal or the client that started it goes away."""
    if windows:  # its own process group (no Ctrl+C of the starting console) and no console window
        return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)
                | getattr(subprocess, "CREATE_NO_WINDOW", 0x08000000)}
    return {"start_new_session": True}


def _terminate(pid: int) -> None:
    """End ``pid`` at once: SIGKILL on POSIX; on Windows ``os.kill`` with SIGTERM is ``TerminateProcess``."""
    with contextlib.suppress(OSError):
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


def stop_daemon(info: Registry, *, wait: float = 30.0) -> None:
    """Ask the daemon to stop (in-flight calls finish) and wait for it to exit; terminate it after ``wait``."""
    pid = int(info["pid"])
    alive = info.get("alive")
    request = Path(alive).with_suffix(".stop") if alive else None
    if request is not None:
        with contextlib.suppress(OSError):
            request.write_bytes(b"")
    else:  # a daemon of an older Plexor watches for no request
        _terminate(pid)
    deadline = time.monotonic() + wait
    while _alive(info) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(info):
        _terminate(pid)
        deadline = time.monotonic() + 10
        while _alive(info) and time.monotonic() < deadline:
            time.sleep(0.05)
    if request is not None:
        with contextlib.suppress(OSError):
            request.unlink()


def ensure_daemon(environ: dict[str, str] | None = None, *, wait: float = 60.0,
                  log: Log | None = None) -> Registry:
    """The running daemon's registry; start one if none answers; replace one of another version."""
    env = dict(os.environ if environ is None else environ)
    path = registry_path(env)
    with _lock(path):
        info = read_registry(path)
        if info is not None and _alive(info):
            health = daemon_health(info)
            wanted = plugin_selection(env)
            if _ready(health) and info["version"] == __version__ and info.get("plugins", wanted) == wanted:
                return info
            if health is not None and info.get("plugins", wanted) != wanted:
                if log is not None:  # never serve a client fewer (or other) plugins than it asked for
                    log.warning("daemon_plugins_differ", daemon=info.get("plugins"), connect=wanted,
                                action="restarting the daemon with the plugins asked for")
                stop_daemon(info)
                return start_daemon(env, wait=wait)
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
