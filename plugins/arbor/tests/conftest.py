"""Fixtures for the arbor tests: the storage backend (SQLite, or the real PostgreSQL) and small helpers.

Every behaviour test takes the ``backend`` fixture and runs twice: once on
the default SQLite file, once on PostgreSQL at 127.0.0.1:5432 (database
``test``, user ``postgres``) in a schema of its own that is dropped after the
test, so parallel runs sharing that database never see each other's trees.
Set ``ARBOR_TEST_POSTGRES`` to use another server.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

PG_DSN = os.environ.get("ARBOR_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _pg_connect() -> Any:
    try:
        import psycopg2
    except ImportError:  # pragma: no cover - psycopg2-binary is in the test extra
        pytest.skip("PostgreSQL tests skipped: psycopg2 is not installed (pip install plexor-arbor[test])")
    try:
        conn = psycopg2.connect(PG_DSN, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure to connect means: no server here
        pytest.skip(f"PostgreSQL tests skipped: no server reachable at {PG_DSN} ({type(exc).__name__}: {exc})".strip())
    conn.autocommit = True
    return conn


@pytest.fixture
def pg_schema() -> Any:
    """A fresh PostgreSQL schema; yields the database URL whose search_path points at it."""
    conn = _pg_connect()
    schema = f"arbor_test_{uuid.uuid4().hex[:16]}"
    with conn.cursor() as cur:
        cur.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{PG_DSN}?options=-csearch_path%3D{schema}"
    finally:
        with conn.cursor() as cur:
            cur.execute("SET lock_timeout = '20s'")
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for a kernel using this backend (background sweeper off; tests sweep on purpose)."""
    env = {"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}
    if request.param == "postgresql":
        env["PLEXOR_ARBOR_DATABASE_URL"] = request.getfixturevalue("pg_schema")
    return env
