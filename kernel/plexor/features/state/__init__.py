"""The kernel's own storage: one database for what the kernel itself keeps (tasks, events, keys...).

Plugins keep their data in their own databases (:mod:`plexor.core.storage`);
this package is for state that belongs to the kernel and must be shared by
every process that serves the same data: ``--workers N``, a restarted server,
the daemon, and (on PostgreSQL) other hosts.

Where it lives
    SQLite at ``<data dir>/plexor.sqlite3`` by default (WAL, a busy timeout:
    several processes on one host share it), or the database named by
    ``PLEXOR_DATABASE_URL`` / ``plexor.toml`` ``[plexor] database_url``
    (``postgresql://user@host/db``; the environment wins).

The API (small on purpose)::

    from plexor.features.state import open_state, kernel_state, database_url

    state = kernel_state(kernel)          # the kernel's StateDB, opened once per kernel and process
    state = open_state(data_dir, url)     # or open one yourself (tests, CLI commands)

    state.migrate("events", {1: create_events, 2: add_index})   # numbered, once, under a lock
    rows = state.query("SELECT id, body FROM plexor_events WHERE id > ?", (last,))
    n = state.execute("DELETE FROM plexor_events WHERE at < ?", (cutoff,))   # rows changed
    with state.transaction():             # BEGIN IMMEDIATE on SQLite, a transaction on PostgreSQL
        ...
    state.dialect                         # "sqlite" or "postgresql"
    state.db                              # the peewee Database (its raw connection for LISTEN/NOTIFY)
    state.close()

SQL is written with ``?`` placeholders for both dialects (translated to ``%s``
on PostgreSQL); portable SQL only (``INTEGER``, ``BIGINT``, ``TEXT``,
``DOUBLE PRECISION``, ``VARCHAR``; no ``AUTOINCREMENT``/``SERIAL`` - use
``state.autoincrement`` in a ``CREATE TABLE``). Table names start with
``plexor_``; each component (``tasks``, ``events``...) lives in its own
module of this package and owns its tables and its migration numbering
(recorded in ``plexor_schema`` as ``plexor.<component>``).

Calls are synchronous (peewee keeps one connection per thread); from async
code run them in a worker thread (``await state.run(fn, *args)``) when they
may wait on a lock.
"""

from __future__ import annotations

from plexor.features.state.db import DATABASE_FILE, StateDB, database_url, kernel_state, open_state

__all__ = ["DATABASE_FILE", "StateDB", "database_url", "kernel_state", "open_state"]
