"""The one way arbor talks to its database: named rows in, named rows out.

Every statement runs on the database object the kernel opened for the plugin
(SQLite or PostgreSQL) — never through peewee's global model binding, so two
kernels in one process each use their own database. Raw SQL is written with
``?`` placeholders and turned into the driver's style in exactly one place,
:meth:`DataAccess.sql`; peewee queries are bound to the database per query
(:meth:`DataAccess.bound`).

Write transactions are serialised per tree: ``BEGIN IMMEDIATE`` on SQLite
(the write lock up front, so a busy peer is waited for) and ``SELECT ... FOR
UPDATE`` of the tree row on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["DataAccess"]

R = TypeVar("R", bound=tuple[Any, ...])
Q = TypeVar("Q")


class DataAccess:
    """Statements, transactions and bulk loads on one peewee database.

    :param db: the peewee database the kernel opened for the plugin.
    """

    def __init__(self, db: Any) -> None:
        import peewee

        self.db = db
        self.is_sqlite = isinstance(db, peewee.SqliteDatabase)
        self.is_postgres = isinstance(db, peewee.PostgresqlDatabase)
        self._translated: dict[str, str] = {}

    # ------------------------------------------------------------- statements
    def sql(self, text: str) -> str:
        """``text`` with its ``?`` placeholders in the driver's style (the only place they are rewritten)."""
        if self.is_sqlite:
            return text
        out = self._translated.get(text)
        if out is None:
            out = self._translated[text] = text.replace("?", self.db.param)
        return out

    def execute(self, text: str, params: Iterable[Any] = ()) -> Any:
        """Run one statement; returns the cursor."""
        return self.db.execute_sql(self.sql(text), tuple(params))

    def row(self, row_type: type[R], text: str, params: Iterable[Any] = ()) -> R | None:
        """The first row as ``row_type`` (a NamedTuple whose fields are the SELECT list), or ``None``."""
        raw = self.execute(text, params).fetchone()
        return None if raw is None else row_type._make(raw)  # type: ignore[attr-defined]

    def rows(self, row_type: type[R], text: str, params: Iterable[Any] = ()) -> list[R]:
        """Every row as ``row_type``."""
        make = row_type._make  # type: ignore[attr-defined]
        return [make(raw) for raw in self.execute(text, params).fetchall()]

    def stream(self, row_type: type[R], text: str, params: Iterable[Any] = ()) -> Iterator[R]:
        """Every row as ``row_type``, one at a time (for reads too large to hold as rows)."""
        make = row_type._make  # type: ignore[attr-defined]
        for raw in self.execute(text, params):
            yield make(raw)

    def value(self, text: str, params: Iterable[Any] = ()) -> Any:
        """The first column of the first row (``None`` without a row)."""
        raw = self.execute(text, params).fetchone()
        return None if raw is None else raw[0]

    def values(self, text: str, params: Iterable[Any] = ()) -> list[Any]:
        """The first column of every row."""
        return [raw[0] for raw in self.execute(text, params).fetchall()]

    def mapping(self, text: str, params: Iterable[Any] = ()) -> dict[Any, Any]:
        """A two-column SELECT as ``{first: second}``."""
        return {key: value for key, value in self.execute(text, params).fetchall()}

    def bound(self, query: Q) -> Q:
        """A peewee query bound to this database (not to whatever the model class is bound to)."""
        return query.bind(self.db)  # type: ignore[attr-defined,no-any-return]

    def column(self, query: Any) -> list[Any]:
        """The first column of every row of a peewee query, run on this database."""
        return list(self.bound(query).scalars())

    def among(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
        """``(condition, params)`` pairs that together select the rows whose ``column`` is one of ``values``.

        PostgreSQL takes the whole list as one array parameter (``= ANY(?)``, planned once); SQLite an
        ``IN (?, ...)`` list of at most 500 values at a time.
        """
        if self.is_postgres:
            if values:
                yield f"{column} = ANY(?)", [list(values)]
            return
        for start in range(0, len(values), 500):
            chunk = list(values[start : start + 500])
            yield f"{column} IN ({self.marks(len(chunk))})", chunk

    @staticmethod
    def marks(count: int) -> str:
        """``?, ?, ...``: ``count`` placeholders for an ``IN (...)`` list."""
        return ", ".join("?" * count)

    # ----------------------------------------------------------- transactions
    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction; SQLite takes the write lock up front so a busy peer is waited for."""
        if self.is_sqlite and self.db.transaction_depth() == 0:
            with self.db.atomic("IMMEDIATE"):
                yield
        else:
            with self.db.atomic():
                yield

    def lock_tree(self, tree_id: str) -> None:
        """Serialise writers of one tree (PostgreSQL; SQLite's write lock already covers the file)."""
        if self.is_postgres:
            self.execute("SELECT id FROM arbor_tree WHERE id = ? FOR UPDATE", (tree_id,))

    # -------------------------------------------------------------- bulk load
    def reserve(self, count: int) -> int:
        """Reserve ``count`` consecutive node keys inside the current write transaction; returns the first."""
        if self.is_postgres:
            # Other writers draw keys from the sequence; the table lock keeps
            # them out until this transaction ends, so the block stays ours.
            self.execute("LOCK TABLE arbor_node IN SHARE ROW EXCLUSIVE MODE")
            sequence = self.value("SELECT pg_get_serial_sequence('arbor_node', 'seq')")
            last, called = self.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
            top = max(self.value("SELECT COALESCE(MAX(seq), 0) FROM arbor_node"), last if called else last - 1)
            self.execute("SELECT setval(?, ?)", (sequence, top + count))
            return int(top) + 1
        return int(self.value("SELECT COALESCE(MAX(seq), 0) FROM arbor_node")) + 1

    def insert_many(self, table: str, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """Insert many rows at once: ``executemany`` on SQLite, multi-row VALUES pages on PostgreSQL."""
        cursor = self.db.cursor()
        listed = ", ".join(names)
        if self.is_postgres:
            from psycopg2.extras import execute_values

            execute_values(cursor, f"INSERT INTO {table} ({listed}) VALUES %s", rows, page_size=2000)
        else:
            cursor.executemany(f"INSERT INTO {table} ({listed}) VALUES ({self.marks(len(names))})", rows)

    def after_bulk(self, count: int) -> None:
        """Refresh PostgreSQL's statistics after a large load.

        PostgreSQL plans the recursive queries from table statistics; after a
        bulk load they are stale until autovacuum catches up (a minute or
        more), and a stale plan scans the whole table at every level.
        """
        if self.is_postgres and count >= 1000:
            self.execute("ANALYZE arbor_node")
