"""Change notifications between processes: the backends of :class:`plexor.notify.Notifier` for many workers.

A change published in one process (a plugin's ``resource_updated``, a list that changed) must reach
the clients connected to every other process serving the same data. Two backends, chosen by the
kernel's database (:func:`shared_backend`):

:class:`PostgresBus` (``PLEXOR_DATABASE_URL=postgresql://...``; any number of hosts)
    ``NOTIFY plexor_events`` carries each event; every process ``LISTEN``s on a dedicated
    connection in a thread of its own and reconnects (with back-off) when it drops.
:class:`SqliteBus` (the data directory's ``plexor.sqlite3``; one host)
    each event is a row of ``plexor_notifications``; every process reads the rows after the last
    it has seen. A wake-up datagram on a Unix socket (one per process, in a private directory of
    the temp dir named after the data directory) tells the others to read at once; without one
    (Windows, an unwritable temp dir) they read every ``poll`` seconds. Rows older than a minute
    are deleted.

Both deliver their own process's events at once, without a round trip, and skip them when they
come back. Delivery stays at most once and level-triggered, as :mod:`plexor.notify` promises: a
process that was not listening when an event happened does not get it later.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from plexor.notify import KINDS, Event

if TYPE_CHECKING:  # pragma: no cover
    from psycopg2.extensions import connection

    from plexor.core.base import KernelBase
    from plexor.features.state.db import StateDB
    from plexor.log import Logger
    from plexor.notify import Backend, Notifier

__all__ = ["CHANNEL", "PostgresBus", "SqliteBus", "install", "shared_backend"]

CHANNEL = "plexor_events"
KEEP_SECONDS = 60.0  # SQLite rows older than this are deleted
_NOTIFY_LIMIT = 7900  # PostgreSQL refuses NOTIFY payloads of 8000 bytes or more


def _log() -> Logger:
    from plexor.log import get_logger

    return get_logger("plexor.bus")


def _encode(origin: str, event: Event) -> str:
    return json.dumps({"o": origin, "k": event.kind, "p": dict(event.payload)}, separators=(",", ":"))


def _decode(text: str) -> tuple[str, Event] | None:
    try:
        raw = json.loads(text)
        kind, payload = raw["k"], raw.get("p") or {}
        if kind not in KINDS or not isinstance(payload, dict):
            return None
        return str(raw.get("o", "")), Event(kind, payload)
    except (ValueError, KeyError, TypeError):
        return None


class _Base:
    """What both backends share: an origin id, local delivery, a sender thread, a listener thread."""

    def __init__(self) -> None:
        self.origin = uuid.uuid4().hex
        self._deliver: Callable[[Event], None] | None = None
        self._outbox: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.sent = 0  # events written to the shared medium (for tests and the bench)
        self.heard = 0  # events from other processes delivered here

    def attach(self, deliver: Callable[[Event], None]) -> None:
        self._deliver = deliver

    def publish(self, event: Event) -> None:
        if self._deliver is not None:
            self._deliver(event)  # this process's subscribers hear it at once
        self._outbox.put(_encode(self.origin, event))

    def _heard(self, text: str) -> None:
        decoded = _decode(text)
        if decoded is None or decoded[0] == self.origin or self._deliver is None:
            return
        self.heard += 1
        self._deliver(decoded[1])

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    async def close(self) -> None:
        import anyio

        self._stop.set()
        self._outbox.put(None)
        self._wake_self()
        for thread in self._threads:
            await anyio.to_thread.run_sync(thread.join, 5.0)
        self._threads.clear()

    def _wake_self(self) -> None:
        return None


class PostgresBus(_Base):
    """Events through PostgreSQL ``LISTEN``/``NOTIFY`` on channel :data:`CHANNEL` (see the module docstring)."""

    def __init__(self, dsn: str, *, retry: float = 1.0) -> None:
        super().__init__()
        self.dsn = dsn
        self.retry = retry
        self.listening = threading.Event()  # set while the LISTEN connection is up

    def _connect(self) -> connection:
        import psycopg2

        conn = psycopg2.connect(self.dsn, connect_timeout=5, application_name="plexor-bus")
        conn.autocommit = True
        return conn

    async def start(self) -> None:
        import anyio

        self._spawn(self._listen, "plexor-bus-listen")
        self._spawn(self._send, "plexor-bus-send")
        await anyio.to_thread.run_sync(self.listening.wait, 5.0)  # events from now on are heard

    def _send(self) -> None:
        conn = None
        while True:
            item = self._outbox.get()
            if item is None:
                break
            if len(item.encode()) > _NOTIFY_LIMIT:
                _log().warning("notification_too_large", size=len(item), hint="the event is delivered in this process only")
                continue
            for attempt in range(3):
                try:
                    if conn is None:
                        conn = self._connect()
                    with conn.cursor() as cur:
                        cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, item))
                    self.sent += 1
                    break
                except Exception as exc:  # noqa: BLE001 - the database went away: reconnect and retry
                    with contextlib.suppress(Exception):
                        if conn is not None:
                            conn.close()
                    conn = None
                    if attempt == 2 or self._stop.wait(self.retry):
                        _log().warning("notification_not_sent", error=str(exc).strip()[:200])
                        break
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _listen(self) -> None:
        import select

        delay = self.retry
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._connect()
                with conn.cursor() as cur:
                    cur.execute(f"LISTEN {CHANNEL}")
                self.listening.set()
                delay = self.retry
                while not self._stop.is_set():
                    if select.select([conn], [], [], 0.5)[0]:
                        conn.poll()
                        while conn.notifies:
                            self._heard(conn.notifies.pop(0).payload)
            except Exception as exc:  # noqa: BLE001 - reconnect with back-off; events meanwhile are missed
                self.listening.clear()
                if not self._stop.is_set():
                    _log().warning("notification_listener_lost", error=str(exc).strip()[:200], retry_in=delay)
                    self._stop.wait(delay)
                    delay = min(delay * 2, 30.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
        self.listening.clear()


def _create_notifications(state: StateDB) -> None:
    state.execute(f"CREATE TABLE IF NOT EXISTS plexor_notifications (id {state.autoincrement}, "
                  "origin VARCHAR(32) NOT NULL, body TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)")


class SqliteBus(_Base):
    """Events through a table of the data directory's SQLite database, with wake-up datagrams (see the module docstring)."""

    def __init__(self, state: StateDB, *, poll: float = 1.0, socket_dir: Path | None = None) -> None:
        super().__init__()
        self.state = state
        self.poll = poll
        where = state.location
        self.socket_dir = socket_dir if socket_dir is not None else Path(tempfile.gettempdir()) / (
            "plexor-bus-" + hashlib.sha256(os.path.abspath(where).encode()).hexdigest()[:16])
        self._sock: socket.socket | None = None
        self._sock_path: Path | None = None
        self._last = 0
        self._pruned = 0.0
        self._ready = threading.Event()

    async def start(self) -> None:
        self.state.migrate("bus", {1: _create_notifications})
        rows = self.state.query("SELECT MAX(id) FROM plexor_notifications")
        self._last = int(rows[0][0] or 0) if rows else 0
        self._open_socket()
        self._spawn(self._listen, "plexor-bus-listen")
        self._spawn(self._send, "plexor-bus-send")

    def _open_socket(self) -> None:
        if not hasattr(socket, "AF_UNIX"):
            return
        try:
            self.socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = self.socket_dir / f"{os.getpid()}-{self.origin[:8]}.sock"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(str(path))
            sock.setblocking(False)
            self._sock, self._sock_path = sock, path
        except OSError as exc:
            _log().info("notification_wakeups_off", error=str(exc), poll_seconds=self.poll)
            self._sock = None

    def _wake_others(self) -> None:
        if self._sock is None:
            return
        try:
            peers = list(self.socket_dir.iterdir())
        except OSError:
            return
        for peer in peers:
            if peer == self._sock_path or peer.suffix != ".sock":
                continue
            try:
                self._sock.sendto(b"!", str(peer))
            except BlockingIOError:
                pass  # its queue is full: it has wake-ups pending anyway
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    peer.unlink()  # a process that is gone
            except OSError:
                pass

    def _wake_self(self) -> None:
        if self._sock is not None and self._sock_path is not None:
            with contextlib.suppress(OSError):
                self._sock.sendto(b"", str(self._sock_path))

    def _send(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                break
            batch = [item]
            while True:  # everything queued meanwhile goes in the same transaction
                try:
                    nxt = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._outbox.put(None)
                    break
                batch.append(nxt)
            now = time.time()
            try:
                with self.state.transaction():
                    for body in batch:
                        self.state.execute("INSERT INTO plexor_notifications (origin, body, at) VALUES (?, ?, ?)",
                                           (self.origin, body, now))
                    if now - self._pruned > KEEP_SECONDS / 4:
                        self.state.execute("DELETE FROM plexor_notifications WHERE at < ?", (now - KEEP_SECONDS,))
                        self._pruned = now
                self.sent += len(batch)
            except Exception as exc:  # noqa: BLE001 - a locked or failing database: the event is lost, say so
                _log().warning("notification_not_sent", error=str(exc)[:200])
                continue
            self._wake_others()

    def _listen(self) -> None:
        import select

        sock = self._sock
        while not self._stop.is_set():
            if sock is not None:
                with contextlib.suppress(OSError, ValueError):
                    if select.select([sock], [], [], self.poll)[0]:
                        while True:  # drain: one read answers every wake-up so far
                            try:
                                sock.recv(64)
                            except (BlockingIOError, OSError):
                                break
            else:
                self._stop.wait(self.poll)
            if self._stop.is_set():
                break
            try:
                rows = self.state.query("SELECT id, origin, body FROM plexor_notifications WHERE id > ? ORDER BY id",
                                        (self._last,))
            except Exception as exc:  # noqa: BLE001 - try again at the next wake-up
                _log().debug("notification_read_failed", error=str(exc)[:200])
                continue
            for row_id, origin, body in rows:
                self._last = max(self._last, int(row_id))
                if origin != self.origin:
                    self._heard(body)

    async def close(self) -> None:
        await super().close()
        if self._sock is not None:
            self._sock.close()
            if self._sock_path is not None:
                with contextlib.suppress(OSError):
                    self._sock_path.unlink()
                with contextlib.suppress(OSError):
                    self.socket_dir.rmdir()  # the last process of this data directory tidies up
            self._sock = None


def shared_backend(kernel: KernelBase) -> Backend:
    """The backend that reaches every process serving this kernel's data: PostgreSQL's when the kernel's
    database is PostgreSQL, else the SQLite one."""
    from plexor.features.state.db import database_url, kernel_state

    url = database_url(kernel.environ, kernel.config_tables())
    if url and url.split(":", 1)[0].lower() in ("postgres", "postgresql", "postgresql+psycopg2"):
        return PostgresBus(url.replace("postgresql+psycopg2://", "postgresql://", 1))
    return SqliteBus(kernel_state(kernel))


def install(notifier: Notifier, backend: Backend) -> None:
    """Make ``backend`` carry ``notifier``'s events (before it is started)."""
    notifier.backend = backend
    backend.attach(notifier.deliver)
