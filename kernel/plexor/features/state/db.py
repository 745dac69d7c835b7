"""Opening the kernel's database; see :mod:`plexor.features.state` for the API."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from plexor.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from peewee import Database

    from plexor.core.base import KernelBase

__all__ = ["DATABASE_FILE", "StateDB", "database_url", "kernel_state", "open_state"]

DATABASE_FILE = "plexor.sqlite3"
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class StateDB:
    """The kernel's database: SQLite or PostgreSQL behind one small, synchronous API."""

    def __init__(self, db: Database, location: str) -> None:
        import peewee

        self.db = db
        #: Where it is, for messages (a URL's password is hidden).
        self.location = location
        self.dialect = "sqlite" if isinstance(db, peewee.SqliteDatabase) else "postgresql"
        #: What makes an integer primary key count up, for CREATE TABLE.
        self.autoincrement = "INTEGER PRIMARY KEY AUTOINCREMENT" if self.dialect == "sqlite" else "BIGSERIAL PRIMARY KEY"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<StateDB {self.dialect} {self.location}>"

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        # peewee-stubs leave Database.execute_sql untyped (a stub gap): the cursor is the DB-API driver's
        cursor = self.db.execute_sql(self._sql(sql), tuple(params))  # type: ignore[no-untyped-call]
        return int(cursor.rowcount or 0)

    def query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run one query; returns its rows as tuples."""
        cursor = self.db.execute_sql(self._sql(sql), tuple(params))  # type: ignore[no-untyped-call]  # as in execute
        return [tuple(row) for row in cursor.fetchall()]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; on SQLite it takes the write lock at once (``BEGIN IMMEDIATE``)."""
        with self.db.atomic("IMMEDIATE") if self.dialect == "sqlite" else self.db.atomic():
            yield

    def migrate(self, component: str, steps: Mapping[int, Callable[[StateDB], None]]) -> int:
        """Run the numbered steps of ``component`` not run yet (once, under a lock); returns the version."""
        from plexor.core.storage import migrate

        def step(f: Callable[[StateDB], None]) -> Callable[[Database], None]:
            return lambda _db: f(self)

        return migrate(self.db, f"plexor.{component}", [], {n: step(f) for n, f in steps.items()})

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """``fn(*args)`` in a worker thread (for calls that may wait on another process's lock)."""
        import anyio

        return await anyio.to_thread.run_sync(lambda: fn(*args))

    def close(self) -> None:
        try:
            if hasattr(self.db, "close_all"):
                self.db.close_all()
            if not self.db.is_closed():
                self.db.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def open_state(data_dir: Path, url: str | None = None) -> StateDB:
    """Open (and create) the kernel's database: ``<data_dir>/plexor.sqlite3``, or ``url`` when given.

    Failures are :class:`plexor.errors.StorageError` with guidance.
    """
    from plexor.core.storage import SQLITE_PRAGMAS, _redact, open_database

    if url:
        from plexor.errors import StorageError

        try:
            db = open_database("plexor", data_dir, url)
        except StorageError as exc:
            raise StorageError(exc.message.replace("the plexor database", "the kernel's database"),
                               "Check that the server is running and the URL is right (PLEXOR_DATABASE_URL or "
                               "[plexor] database_url in plexor.toml); for PostgreSQL the driver is installed with "
                               "`pip install psycopg2-binary`.") from exc
        if db.__class__.__name__.startswith("Postgres"):
            # a failed statement must not leave the thread's connection aborted (peewee's stubs know
            # autorollback only as an __init__ option)
            db.autorollback = True  # type: ignore[attr-defined]
        return StateDB(db, _redact(url))
    import peewee

    from plexor.errors import StorageError

    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / DATABASE_FILE
    db = peewee.SqliteDatabase(str(path), pragmas=SQLITE_PRAGMAS, timeout=10)
    try:
        db.connect(reuse_if_open=True)
    except peewee.DatabaseError as exc:
        raise StorageError(f"cannot open the kernel's database {path}: {exc}",
                           "Check the file's permissions and free disk space; if the file is damaged, move it away "
                           "(Plexor never deletes it for you) and start again.") from exc
    return StateDB(db, str(path))


def database_url(environ: Mapping[str, str], config: Mapping[str, object]) -> str | None:
    """The kernel's database URL: ``PLEXOR_DATABASE_URL``, else ``[plexor] database_url``, else None (SQLite)."""
    raw = environ.get("PLEXOR_DATABASE_URL")
    source = "PLEXOR_DATABASE_URL"
    if raw is None:
        table = config.get("plexor", {})
        raw = table.get("database_url") if isinstance(table, Mapping) else None
        source = "[plexor] database_url in plexor.toml"
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if not isinstance(raw, str) or "://" not in raw:
        raise ConfigError(f"{source}={raw!r} is not a database URL",
                          "Use postgresql://user[:password]@host[:port]/database, or leave it unset for the SQLite "
                          "file in the data directory.")
    return raw.strip()


def kernel_state(kernel: KernelBase) -> StateDB:
    """The kernel's :class:`StateDB`, opened on first use and kept for the kernel's lifetime."""
    return kernel.keep(StateDB, lambda: open_state(kernel.paths.data_dir,
                                                   database_url(kernel.environ, kernel.config_tables())))
