"""The kernel's own database (plexor.features.state): SQLite by default, PostgreSQL from a URL, real both."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from plexor.core.kernel import Kernel
from plexor.errors import ConfigError, StorageError
from plexor.features.state import DATABASE_FILE, database_url, kernel_state, open_state

PG = "postgresql://postgres@127.0.0.1:5432/test"


def _pg_up() -> bool:
    try:
        open_state(Path("/nonexistent"), PG).close()
        return True
    except StorageError:
        return False


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "postgresql" and not _pg_up():
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    # PostgreSQL: a schema of the test's own (plexor_postgres, plexor.testing), so tests running at once share no table
    s = open_state(tmp_path, request.getfixturevalue("plexor_postgres") if request.param == "postgresql" else None)
    yield s
    s.close()


def test_migrate_execute_query_both_dialects(state) -> None:  # type: ignore[no-untyped-def]
    table = f"plexor_probe_{uuid.uuid4().hex[:8]}"
    component = f"probe_{table}"
    steps = {1: lambda st: st.execute(f"CREATE TABLE {table} (id {st.autoincrement}, v TEXT NOT NULL)")}
    try:
        assert state.migrate(component, steps) == 1
        assert state.migrate(component, steps) == 1  # once only: a second CREATE would raise
        with state.transaction():
            assert state.execute(f"INSERT INTO {table} (v) VALUES (?)", ("a?b",)) == 1
        assert state.query(f"SELECT id, v FROM {table} WHERE v = ?", ("a?b",)) == [(1, "a?b")]
        with pytest.raises(RuntimeError), state.transaction():
            state.execute(f"INSERT INTO {table} (v) VALUES (?)", ("rolled back",))
            raise RuntimeError
        with pytest.raises(Exception):  # noqa: B017,PT011 - each driver its own type
            state.query(f"SELECT missing FROM {table}")
        assert state.query(f"SELECT count(*) FROM {table}") == [(1,)]  # the connection is still usable
    finally:
        state.execute(f"DROP TABLE IF EXISTS {table}")
        state.execute("DELETE FROM plexor_schema WHERE plugin = ?", (f"plexor.{component}",))


def test_sqlite_is_one_file_in_the_data_dir_in_wal(tmp_path: Path) -> None:
    s = open_state(tmp_path)
    try:
        assert (tmp_path / DATABASE_FILE).exists()
        assert s.query("PRAGMA journal_mode") == [("wal",)]
        assert s.dialect == "sqlite"
    finally:
        s.close()


def test_database_url_environment_wins_over_the_file() -> None:
    assert database_url({}, {}) is None
    assert database_url({}, {"plexor": {"database_url": PG}}) == PG
    assert database_url({"PLEXOR_DATABASE_URL": "postgresql://x@h/d"}, {"plexor": {"database_url": PG}}) == "postgresql://x@h/d"
    with pytest.raises(ConfigError, match="PLEXOR_DATABASE_URL='nonsense' is not a database URL"):
        database_url({"PLEXOR_DATABASE_URL": "nonsense"}, {})


def test_unreachable_url_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        open_state(tmp_path, "postgresql://postgres@127.0.0.1:1/test")
    assert "kernel's database" in info.value.message and "PLEXOR_DATABASE_URL" in info.value.render()


def test_kernel_state_from_config_file_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "plexor.toml").write_text('[plexor]\ndatabase_url = ""\n')
    k = Kernel(load_entry_points=False, environ={"PLEXOR_HOME": str(tmp_path), "PLEXOR_DATABASE_URL": ""}).load()
    assert not [w for w in k.warnings if "database_url" in w or "PLEXOR_DATABASE_URL" in w]
    s = kernel_state(k)
    assert s is kernel_state(k) and s.dialect == "sqlite"
    assert (tmp_path / "data" / DATABASE_FILE).exists()
