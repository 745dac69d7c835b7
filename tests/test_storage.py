"""Each plugin's database: SQLite by default, PostgreSQL by URL, versioned migrations."""

from __future__ import annotations

import sqlite3

import peewee
import pytest
from conftest import make_plugin

from plexor import Context
from plexor.core.kernel import State

pytestmark = pytest.mark.anyio

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_available() -> bool:
    try:
        import psycopg2
    except ImportError:
        return False
    try:
        psycopg2.connect(PG_URL, connect_timeout=2).close()
        return True
    except Exception:
        return False


def notes_plugin(table: str = "kt_notes", migrations=None):
    class Note(peewee.Model):
        text = peewee.TextField()

        class Meta:
            table_name = table

    def models(register):
        register(Note)
        for version, func in (migrations or {}).items():
            register.migration(version, func)

    def tools(register, settings):
        def add(text: str, ctx: Context) -> dict:
            with ctx.database.atomic():
                note = Note.create(text=text)
            return {"id": note.id, "count": Note.select().count()}

        register(add)

    return make_plugin("notes", plexor_register_models=models, plexor_register_tools=tools), Note


async def test_sqlite_file_per_plugin_with_wal_and_foreign_keys(plexor):
    plugin, _ = notes_plugin()
    async with plexor.client([("notes", plugin)]) as client:
        r = await client.call_tool("notes_add", {"text": "hello"})
        assert r.structured_content == {"id": 1, "count": 1}
        db = client.kernel.plugin("notes").database
        assert db.execute_sql("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute_sql("PRAGMA foreign_keys").fetchone()[0] == 1
        assert db.execute_sql("PRAGMA busy_timeout").fetchone()[0] == 10000
    path = plexor.home / "data" / "notes" / "notes.sqlite3"
    assert path.exists()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT text FROM kt_notes").fetchall() == [("hello",)]
        assert raw.execute("SELECT plugin, version FROM plexor_schema").fetchall() == [("notes", 1)]


async def test_data_survives_a_restart_and_migrations_run_once(plexor):
    runs = []

    def v1(db):
        runs.append(1)
        db.execute_sql("CREATE TABLE kt_notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")

    def v2(db):
        runs.append(2)
        db.execute_sql("ALTER TABLE kt_notes ADD COLUMN tag TEXT")

    plugin, _ = notes_plugin(migrations={1: v1})
    async with plexor.client([("notes", plugin)]) as client:
        await client.call_tool("notes_add", {"text": "kept"})
    plugin2, _ = notes_plugin(migrations={1: v1, 2: v2})
    async with plexor.client([("notes", plugin2)]) as client:
        r = await client.call_tool("notes_add", {"text": "second"})
        assert r.structured_content["count"] == 2
        cols = [row[1] for row in client.kernel.plugin("notes").database.execute_sql("PRAGMA table_info(kt_notes)")]
        assert "tag" in cols
    assert runs == [1, 2]


async def test_a_newer_schema_version_is_refused_not_rebuilt(plexor):
    plugin, _ = notes_plugin()
    async with plexor.client([("notes", plugin)]) as client:
        await client.call_tool("notes_add", {"text": "precious"})
    path = plexor.home / "data" / "notes" / "notes.sqlite3"
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE plexor_schema SET version = 7")
    async with plexor.kernel([("notes", notes_plugin()[0])]) as kernel:
        rec = kernel.plugin("notes")
        assert rec.state == State.FAILED
        assert "schema version 7, newer than this plugin knows (1)" in rec.error
        assert "pip install -U plexor-notes" in rec.error
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT text FROM kt_notes").fetchall() == [("precious",)]


async def test_a_failing_migration_rolls_back_and_fails_the_plugin(plexor):
    def v1(db):
        db.execute_sql("CREATE TABLE kt_notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        raise peewee.OperationalError("disk I/O error")

    async with plexor.kernel([("notes", notes_plugin(migrations={1: v1})[0])]) as kernel:
        rec = kernel.plugin("notes")
        assert rec.state == State.FAILED and "rolled back" in rec.error
        tables = kernel.plugin("notes").database
        assert tables is None  # closed after the failure
    with sqlite3.connect(plexor.home / "data" / "notes" / "notes.sqlite3") as raw:
        names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "kt_notes" not in names


async def test_migration_gaps_are_refused(plexor):
    async with plexor.kernel([("notes", notes_plugin(migrations={1: lambda db: None, 3: lambda db: None})[0])]) as k:
        assert "not [2]" in k.plugin("notes").error


async def test_storage_errors_in_tools_become_guidance(plexor):
    def tools(register, settings):
        def bad(ctx: Context) -> dict:
            ctx.database.execute_sql("SELECT * FROM no_such_table")
            return {}

        register(bad)

    plugin = make_plugin("notes", plexor_register_models=lambda register: register(notes_plugin()[1]),
                         plexor_register_tools=tools)
    async with plexor.client([("notes", plugin)]) as client:
        r = await client.call_tool("notes_bad", {})
        assert r.is_error
        assert r.structured_content["error"]["type"] == "storage_error"
        assert "no such table: no_such_table" in r.content[0].text
        assert "Check the notes database" in r.content[0].text


async def test_database_url_that_cannot_connect_fails_with_guidance(plexor):
    env = {"PLEXOR_NOTES_DATABASE_URL": "postgresql://nobody:secret@127.0.0.1:1/none"}
    async with plexor.kernel([("notes", notes_plugin()[0])], env=env) as kernel:
        err = kernel.plugin("notes").error
        assert "cannot open the notes database at postgresql://nobody:***@127.0.0.1:1/none" in err
        assert "secret" not in err
        assert "PLEXOR_NOTES_DATABASE_URL" in err


@pytest.mark.postgres
@pytest.mark.skipif(not pg_available(), reason="no PostgreSQL server reachable at 127.0.0.1:5432 (database test)")
async def test_postgresql_by_database_url(plexor, plexor_postgres):
    import psycopg2

    plugin, _ = notes_plugin(table="kt_pg_notes")
    async with plexor.client([("notes", plugin)], env={"PLEXOR_NOTES_DATABASE_URL": plexor_postgres}) as client:
        assert isinstance(client.kernel.plugin("notes").database, peewee.PostgresqlDatabase)
        r = await client.call_tool("notes_add", {"text": "in postgres"})
        assert r.structured_content == {"id": 1, "count": 1}
    with psycopg2.connect(plexor_postgres) as conn, conn.cursor() as cur:  # the test's own schema (plexor_postgres, plexor.testing)
        cur.execute("SELECT text FROM kt_pg_notes")
        assert cur.fetchall() == [("in postgres",)]
        cur.execute("SELECT version FROM plexor_schema WHERE plugin = 'notes'")
        assert cur.fetchone() == (1,)


async def test_hook_plexor_register_models(plexor):
    plugin, Note = notes_plugin()
    async with plexor.kernel([("notes", plugin)]) as kernel:
        assert Note._meta.database is kernel.plugin("notes").database
        assert Note.table_exists()
