"""Fixtures for the arbor tests: the storage backend (SQLite, or the real PostgreSQL) and small helpers.

Every behaviour test takes the ``backend`` fixture and runs twice: once on
the default SQLite file, once on PostgreSQL at 127.0.0.1:5432 (database
``test``, user ``postgres``) in a schema of its own that is dropped after the
test (the kernel's ``plexor_postgres`` fixture), so parallel runs sharing that database never see
each other's trees. Set ``PLEXOR_TEST_POSTGRES`` to use another server.
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for a kernel using this backend (background sweeper off; tests sweep on purpose)."""
    env = {"PLEXOR_ARBOR_SWEEP_INTERVAL": "0"}
    if request.param == "postgresql":
        env["PLEXOR_ARBOR_DATABASE_URL"] = request.getfixturevalue("plexor_postgres")
    return env
