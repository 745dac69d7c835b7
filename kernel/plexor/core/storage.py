"""Each plugin's database: opened, migrated, bound to its models, closed.

SQLite by default (one file per plugin under the data directory, WAL, foreign
keys, a busy timeout so that two server processes can share it), or any URL
peewee understands (``postgresql://user@host/db``) from the plugin's
``database_url`` setting. Schema changes are numbered migrations recorded in
``plexor_schema``; an unknown newer version refuses to open instead of
rebuilding anything.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from plexor.errors import StorageError

if TYPE_CHECKING:  # pragma: no cover
    from peewee import Database, Model

__all__ = ["SQLITE_PRAGMAS", "migrate", "open_database", "schema_version"]

SQLITE_PRAGMAS = {
    "journal_mode": "wal",
    "foreign_keys": 1,
    "busy_timeout": 10_000,
    "synchronous": "normal",
    "cache_size": -16_000,
}


def open_database(plugin: str, data_dir: Path, url: str | None) -> Database:
    """Open (and create) the plugin's database; errors become :class:`StorageError` with guidance."""
    import peewee

    if url:
        from playhouse.db_url import connect

        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://") :]
        try:
            db: Database = connect(url)
            db.connect(reuse_if_open=True)
        except Exception as exc:  # noqa: BLE001 - every driver raises its own types
            raise StorageError(
                f"cannot open the {plugin} database at {_redact(url)}: {type(exc).__name__}: {exc}".strip(),
                f"Check that the server is running and the URL is right ([{plugin}] database_url in plexor.toml "
                f"or PLEXOR_{plugin.upper().replace('-', '_')}_DATABASE_URL); for PostgreSQL the driver is "
                "installed with `pip install psycopg2-binary`.",
            ) from exc
        return db
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{plugin}.sqlite3"
    db = peewee.SqliteDatabase(str(path), pragmas=SQLITE_PRAGMAS, timeout=10)
    try:
        db.connect(reuse_if_open=True)
    except peewee.DatabaseError as exc:
        raise StorageError(
            f"cannot open the {plugin} database {path}: {exc}",
            "Check the file's permissions and free disk space; if the file is damaged, move it away "
            "(Plexor never deletes it for you) and start again.",
        ) from exc
    return db


def _redact(url: str) -> str:
    # Keep passwords out of messages and logs.
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return url


def _ensure_version_table(db: Database) -> None:
    import peewee

    create = ("CREATE TABLE IF NOT EXISTS plexor_schema ("
              " plugin VARCHAR(100) PRIMARY KEY, version INTEGER NOT NULL, applied_at VARCHAR(40) NOT NULL)")
    if isinstance(db, peewee.PostgresqlDatabase):
        # IF NOT EXISTS races on PostgreSQL (two CREATEs at once: a unique violation in pg_type), so
        # processes starting together on a fresh database take turns.
        if db.execute_sql("SELECT to_regclass('plexor_schema')").fetchone()[0] is None:  # type: ignore[no-untyped-call]
            with db.atomic():
                db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(b"plexor_schema"),))  # type: ignore[no-untyped-call]
                db.execute_sql(create)  # type: ignore[no-untyped-call]
        return
    db.execute_sql(create)  # type: ignore[no-untyped-call]  # untyped in peewee's stubs


def schema_version(db: Database, plugin: str) -> int:
    """The migration version recorded for ``plugin`` (0 when none ran yet)."""
    _ensure_version_table(db)
    row = db.execute_sql(f"SELECT version FROM plexor_schema WHERE plugin = {db.param}", (plugin,)).fetchone()  # type: ignore[no-untyped-call]  # untyped in peewee's stubs
    return int(row[0]) if row else 0


def migrate(db: Database, plugin: str, models: list[type[Model]], migrations: dict[int, Callable[[Database], object]]) -> int:
    """Bind ``models`` to ``db`` and run the migrations it has not seen yet; returns the new version.

    With no migrations declared, version 1 creates the registered tables.
    Migrations run inside one transaction each, under a lock (``BEGIN
    IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL) so that two
    processes starting together migrate once.
    """
    import datetime

    import peewee

    db.bind(models, bind_refs=False, bind_backrefs=False)
    steps = dict(migrations) or {1: lambda database: database.create_tables(models, safe=True)}
    latest = max(steps)
    missing = [n for n in range(1, latest + 1) if n not in steps]
    if missing:
        raise StorageError(
            f"plugin {plugin!r} declares migrations up to {latest} but not {missing}",
            "Number migrations 1, 2, 3... without gaps (a plugin bug; report it to its author).",
        )
    is_sqlite = isinstance(db, peewee.SqliteDatabase)
    try:
        _ensure_version_table(db)
        current = schema_version(db, plugin)
        if current > latest:
            raise StorageError(
                f"the {plugin} database is at schema version {current}, newer than this plugin knows ({latest})",
                f"Upgrade plexor-{plugin} (pip install -U plexor-{plugin}), or point [{plugin}] database_url "
                "at another database. Nothing was changed.",
            )
        for version in range(current + 1, latest + 1):
            with db.atomic("IMMEDIATE") if is_sqlite else db.atomic():
                if not is_sqlite and isinstance(db, peewee.PostgresqlDatabase):
                    db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(plugin.encode()),))  # type: ignore[no-untyped-call]
                if schema_version(db, plugin) >= version:  # another process got there first
                    continue
                steps[version](db)
                now = datetime.datetime.now(datetime.UTC).isoformat()
                updated = db.execute_sql(  # type: ignore[no-untyped-call]  # untyped in peewee's stubs
                    f"UPDATE plexor_schema SET version = {db.param}, applied_at = {db.param} WHERE plugin = {db.param}",
                    (version, now, plugin),
                ).rowcount
                if not updated:
                    db.execute_sql(  # type: ignore[no-untyped-call]  # untyped in peewee's stubs
                        f"INSERT INTO plexor_schema (plugin, version, applied_at) VALUES ({db.param}, {db.param}, {db.param})",
                        (plugin, version, now),
                    )
        return latest
    except StorageError:
        raise
    except peewee.PeeweeException as exc:
        raise StorageError(
            f"migrating the {plugin} database failed: {exc}",
            "The failed step was rolled back. Check disk space and permissions, then restart.",
        ) from exc
