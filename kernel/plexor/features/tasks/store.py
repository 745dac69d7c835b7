"""Tasks in the kernel's database (:mod:`plexor.features.state`): one row per task, shared by every process.

Every read and write here is one short statement or transaction, synchronous
(callers run them in a worker thread). A task is *owned* by the worker that
runs it: the owner renews a lease (``lease_until``) while it works; a task
whose lease ran out, or whose owner process is gone from this host, is stale
and any process may settle it (:meth:`TaskStore.stale`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plexor.features.state import StateDB

__all__ = ["ACTIVE", "TERMINAL", "TaskRow", "TaskStore", "iso"]

ACTIVE = ("working", "input_required")
TERMINAL = ("completed", "failed", "cancelled")
_COLUMNS = ("task_id", "owner", "era", "tool", "arguments", "capabilities", "status", "status_message", "created_at",
            "updated_at", "ttl_ms", "expires_at", "poll_ms", "result", "error", "input_requests", "input_responses",
            "worker", "host", "pid", "lease_until", "cancel_requested", "idempotent", "attempts")


def _create(state: StateDB) -> None:
    state.execute(
        "CREATE TABLE IF NOT EXISTS plexor_tasks ("
        " task_id VARCHAR(64) PRIMARY KEY, owner VARCHAR(128) NOT NULL, era VARCHAR(16) NOT NULL,"
        " tool VARCHAR(200) NOT NULL, arguments TEXT NOT NULL, capabilities TEXT NOT NULL,"
        " status VARCHAR(16) NOT NULL, status_message TEXT, created_at DOUBLE PRECISION NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL, ttl_ms BIGINT, expires_at DOUBLE PRECISION, poll_ms INTEGER NOT NULL,"
        " result TEXT, error TEXT, input_requests TEXT, input_responses TEXT,"
        " worker VARCHAR(128) NOT NULL, host VARCHAR(255) NOT NULL, pid INTEGER NOT NULL,"
        " lease_until DOUBLE PRECISION NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0,"
        " idempotent INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 1)")
    state.execute("CREATE INDEX IF NOT EXISTS plexor_tasks_active ON plexor_tasks (status, lease_until)")
    state.execute("CREATE INDEX IF NOT EXISTS plexor_tasks_expiry ON plexor_tasks (expires_at)")
    state.execute("CREATE INDEX IF NOT EXISTS plexor_tasks_owner ON plexor_tasks (owner, created_at)")


def iso(ts: float) -> str:
    """An ISO 8601 UTC timestamp with milliseconds, as the protocol shows times."""
    import datetime

    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class TaskRow:
    """One task as stored."""

    task_id: str
    owner: str
    era: str
    tool: str
    arguments: dict[str, object]
    capabilities: dict[str, object]
    status: str
    status_message: str | None
    created_at: float
    updated_at: float
    ttl_ms: int | None
    expires_at: float | None
    poll_ms: int
    result: dict[str, object] | None
    error: dict[str, object] | None
    input_requests: dict[str, dict[str, object]]
    input_responses: dict[str, dict[str, object]]  # each answer checked when it was taken
    worker: str
    host: str
    pid: int
    lease_until: float
    cancel_requested: bool
    idempotent: bool
    attempts: int

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at

    @classmethod
    def from_db(cls, row: tuple[Any, ...]) -> TaskRow:
        d = dict(zip(_COLUMNS, row, strict=True))
        for key in ("arguments", "capabilities", "input_requests", "input_responses"):
            d[key] = json.loads(d[key]) if d[key] else {}
        for key in ("result", "error"):
            d[key] = json.loads(d[key]) if d[key] else None
        d["cancel_requested"] = bool(d["cancel_requested"])
        d["idempotent"] = bool(d["idempotent"])
        d["ttl_ms"] = None if d["ttl_ms"] is None else int(d["ttl_ms"])
        return cls(**d)


def _dump(value: object) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class TaskStore:
    """The ``plexor_tasks`` table: create, read, move between states, lease, reap, sweep."""

    def __init__(self, state: StateDB) -> None:
        self.state = state
        state.migrate("tasks", {1: _create})
        self._lock_suffix = "" if state.dialect == "sqlite" else " FOR UPDATE"

    def _relax(self) -> None:
        if self.state.dialect != "sqlite":
            # Changes after the creation need not wait for PostgreSQL's disk flush (milliseconds each):
            # visible at once, and a database crash loses at most the last fraction of a second of them,
            # which leaves a task working until its lease runs out and it is settled like a dead worker's.
            self.state.execute("SET LOCAL synchronous_commit TO off")

    def _quick(self, sql: str, params: Sequence[object]) -> int:
        """One change to an existing task (see :meth:`_relax`)."""
        if self.state.dialect == "sqlite":
            return self.state.execute(sql, params)
        with self.state.transaction():
            self._relax()
            return self.state.execute(sql, params)

    def create(self, row: TaskRow) -> None:
        values = [getattr(row, c) for c in _COLUMNS]
        for i, c in enumerate(_COLUMNS):
            if c in ("arguments", "capabilities", "input_requests", "input_responses", "result", "error"):
                values[i] = _dump(values[i]) if values[i] or c in ("arguments", "capabilities") else None
            elif c in ("cancel_requested", "idempotent"):
                values[i] = int(bool(values[i]))
        self.state.execute(f"INSERT INTO plexor_tasks ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                           values)

    def get(self, task_id: str) -> TaskRow | None:
        rows = self.state.query(f"SELECT {', '.join(_COLUMNS)} FROM plexor_tasks WHERE task_id = ?", (task_id,))
        return TaskRow.from_db(rows[0]) if rows else None

    def owned(self, owner: str, now: float) -> int:
        """How many unexpired tasks ``owner`` has stored."""
        return int(self.state.query("SELECT COUNT(*) FROM plexor_tasks WHERE owner = ? AND expires_at > ?",
                                    (owner, now))[0][0])

    def usage(self, owner: str, now: float) -> tuple[int, int]:
        """(how many unexpired tasks ``owner`` has stored, their arguments' and results' bytes)."""
        size = "LENGTH(CAST({} AS BLOB))" if self.state.dialect == "sqlite" else "OCTET_LENGTH({})"
        rows = self.state.query(f"SELECT COUNT(*), COALESCE(SUM({size.format('arguments')} + COALESCE("
                                f"{size.format('result')}, 0)), 0) FROM plexor_tasks WHERE owner = ? AND expires_at > ?",
                                (owner, now))
        return int(rows[0][0]), int(rows[0][1])

    def page(self, owner: str, offset: int, limit: int) -> list[TaskRow]:
        rows = self.state.query(f"SELECT {', '.join(_COLUMNS)} FROM plexor_tasks WHERE owner = ? "
                                "ORDER BY created_at, task_id LIMIT ? OFFSET ?", (owner, limit, offset))
        return [TaskRow.from_db(r) for r in rows]

    def settle(self, task_id: str, status: str, message: str | None, *, result: dict[str, object] | None = None,
               error: dict[str, object] | None = None,
               worker: str | None = None) -> bool:
        """Move an active task to a terminal ``status``; False when it already ended (or another worker owns it)."""
        sql = ("UPDATE plexor_tasks SET status = ?, status_message = ?, result = ?, error = ?, input_requests = NULL, "
               "updated_at = ? WHERE task_id = ? AND status IN ('working', 'input_required')")
        params: list[object] = [status, message, _dump(result), _dump(error), time.time(), task_id]
        if worker is not None:
            sql += " AND worker = ?"
            params.append(worker)
        return self._quick(sql, params) > 0

    def progress(self, task_id: str, message: str) -> None:
        self._quick("UPDATE plexor_tasks SET status_message = ?, updated_at = ? "
                           "WHERE task_id = ? AND status = 'working'", (message, time.time(), task_id))

    def ask(self, task_id: str, requests: dict[str, dict[str, object]], message: str) -> bool:
        """Add ``requests`` to the pending input requests; the task becomes ``input_required``."""
        with self.state.transaction():
            self._relax()
            rows = self.state.query("SELECT status, input_requests FROM plexor_tasks WHERE task_id = ?"
                                    + self._lock_suffix, (task_id,))
            if not rows or rows[0][0] not in ACTIVE:
                return False
            pending = json.loads(rows[0][1]) if rows[0][1] else {}
            pending.update(requests)
            self.state.execute("UPDATE plexor_tasks SET status = 'input_required', status_message = ?, "
                               "input_requests = ?, updated_at = ? WHERE task_id = ?",
                               (message, _dump(pending), time.time(), task_id))
            return True

    def answer(self, task_id: str, responses: Mapping[str, object]) -> list[str]:
        """Record answers to pending requests (others are ignored); returns the keys taken."""
        with self.state.transaction():
            self._relax()
            rows = self.state.query("SELECT status, input_requests, input_responses FROM plexor_tasks WHERE task_id = ?"
                                    + self._lock_suffix, (task_id,))
            if not rows or rows[0][0] not in ACTIVE:
                return []
            pending = json.loads(rows[0][1]) if rows[0][1] else {}
            answers = json.loads(rows[0][2]) if rows[0][2] else {}
            taken = [k for k in responses if k in pending]
            if not taken:
                return []
            for key in taken:
                answers[key] = responses[key]
                del pending[key]
            self.state.execute("UPDATE plexor_tasks SET input_requests = ?, input_responses = ?, updated_at = ?, "
                               "status = ? WHERE task_id = ?",
                               (_dump(pending) if pending else None, _dump(answers), time.time(),
                                "input_required" if pending else "working", task_id))
            return taken

    def answers(self, task_id: str) -> dict[str, object]:
        rows = self.state.query("SELECT input_responses FROM plexor_tasks WHERE task_id = ?", (task_id,))
        found = json.loads(rows[0][0]) if rows and rows[0][0] else {}
        return found if isinstance(found, dict) else {}

    def resume(self, task_id: str) -> None:
        """Back to ``working`` once every question is answered."""
        self._quick("UPDATE plexor_tasks SET status = 'working', updated_at = ? WHERE task_id = ? "
                    "AND status = 'input_required' AND input_requests IS NULL", (time.time(), task_id))

    def cancel(self, task_id: str, message: str) -> bool:
        return self._quick(
            "UPDATE plexor_tasks SET status = 'cancelled', status_message = ?, cancel_requested = 1, "
            "input_requests = NULL, updated_at = ? WHERE task_id = ? AND status IN ('working', 'input_required')",
            (message, time.time(), task_id)) > 0

    def renew(self, worker: str, lease_seconds: float) -> list[str]:
        """Renew this worker's leases; returns its task ids that ended elsewhere (cancelled, reaped)."""
        now = time.time()
        self._quick("UPDATE plexor_tasks SET lease_until = ? WHERE worker = ? "
                    "AND status IN ('working', 'input_required')", (now + lease_seconds, worker))
        return [r[0] for r in self.state.query(
            "SELECT task_id FROM plexor_tasks WHERE worker = ? AND status = 'cancelled' AND cancel_requested = 1 "
            "AND updated_at > ?", (worker, now - 3 * lease_seconds))]

    def stale(self, host: str, now: float) -> list[TaskRow]:
        """Active tasks whose worker is gone: its lease ran out, or its process no longer exists on this host."""
        rows = self.state.query(f"SELECT {', '.join(_COLUMNS)} FROM plexor_tasks "
                                "WHERE status IN ('working', 'input_required') AND (lease_until < ? OR host = ?)",
                                (now, host))
        out = []
        for raw in rows:
            row = TaskRow.from_db(raw)
            if row.lease_until < now or (row.host == host and row.pid != os.getpid() and not _alive(row.pid)):
                out.append(row)
        return out

    def claim(self, row: TaskRow, worker: str, pid: int, host: str, lease_seconds: float) -> bool:
        """Take over a stale task to run it again (compare-and-set on its previous worker)."""
        return self.state.execute(
            "UPDATE plexor_tasks SET worker = ?, pid = ?, host = ?, lease_until = ?, attempts = attempts + 1, "
            "status = 'working', status_message = ?, input_requests = NULL, updated_at = ? "
            "WHERE task_id = ? AND worker = ? AND status IN ('working', 'input_required')",
            (worker, pid, host, time.time() + lease_seconds,
             f"restarted after its worker ({row.host} pid {row.pid}) stopped", time.time(), row.task_id, row.worker)) > 0

    def sweep(self, now: float) -> int:
        """Delete tasks whose time to live has passed."""
        return self.state.execute("DELETE FROM plexor_tasks WHERE expires_at IS NOT NULL AND expires_at < ?", (now,))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` on this host still runs (a worker that died leaves its tasks to be settled).

    On Windows ``os.kill(pid, 0)`` would send CTRL_C_EVENT, not probe: there the answer is "alive" and
    the task's lease settles it (at most ``lease_seconds`` later), as for a worker on another host.
    """
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return True
    # A zombie (killed, not yet reaped by its parent) still answers kill(0): look at its state.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True
