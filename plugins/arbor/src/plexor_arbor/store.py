"""Arbor's storage layer: every read and write of trees and nodes.

All queries run on the database object the kernel opened for the plugin
(SQLite or PostgreSQL), written once with ``?`` placeholders and translated
for PostgreSQL. Nothing here depends on peewee's global model binding, so two
kernels in one process each use their own database.

Rules this module keeps:

* a path (root to node) and a subtree each come from ONE recursive query;
* creating a node — the row, its position among its siblings, the tree's
  head — is one transaction, serialised per tree (``BEGIN IMMEDIATE`` on
  SQLite, ``SELECT ... FOR UPDATE`` on the tree row in PostgreSQL), so two
  server processes sharing a database never hand out the same position;
* timestamps are fixed-width UTC ISO-8601 strings, so they compare in SQL as
  text and need no conversion on the way out.
"""

from __future__ import annotations

import datetime
import gc
import json
import operator
import os
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from plexor import InvalidArgument, NotFound, PlexorError

__all__ = [
    "STATES",
    "Store",
    "TreeInactive",
    "iso_now",
]

STATES = ("active", "scheduled_delete", "archived")
EXPORT_FORMAT = "plexor-arbor/1"
_ID_CHARS = "0123456789abcdef-"

_DEPTH = operator.itemgetter(7)
_SEP = "\x1f"  # the unit separator: splits the per-column strings of a path
_NODE_COLS = "n.seq, n.parent_seq, n.id, n.position, n.kind, n.role, n.content, n.handle, n.metadata, n.created_at"

# The path root -> node as one row: the node count, then per column one string: ids and timestamps
# joined by ",", metadata and text (or an external node's handle; a text node's content is never
# NULL) by the unit separator, "id:position:kind" for every node that is not a plain first text
# child, and last the root's id (``Store.path`` checks that the path starts at the root and ends at
# the node asked for).
#
# SQLite walks RUNS rather than single nodes. A node is nearly always created right after its
# parent (a conversation, an import), so its key is its parent's key + 1; going down from a node,
# every row whose parent is the row just below it is the next node of the path. Each step of the
# recursive query finds, in one backward range scan of at most _RUN keys, the first row that breaks
# that pattern (its parent is elsewhere, or it is a root): the rows from it up to the step's start
# are all on the path, and the walk goes on from its parent (or, when the whole block chains, from
# the row below the block). A path written in one go is then a handful of steps and one sequential
# range read instead of a lookup per node; a path whose nodes are interleaved with other trees'
# costs about what a walk node by node does. The runs are read lowest key first (a parent's key is
# always below its children's), so the rows come root first.
#
# PostgreSQL walks node by node, carrying the columns through the walk (one index lookup per node
# instead of two); each step adds exactly one row, so the aggregates read the node first, the root
# last.
_RUN = 512
_PATH_ODD = "CASE WHEN n.position <> 0 OR n.handle IS NOT NULL THEN n.id || ':' || n.position || ':' || n.kind END"
_PATH_AGGREGATES = (
    "COUNT(*), {agg}(n.id, ','), {agg}(n.created_at, ','), {agg}(COALESCE(n.metadata, ''), {sep}),"
    " {agg}(COALESCE(n.content, n.handle, ''), {sep}), {agg}(" + _PATH_ODD + ", ',')"
)
_BREAK = ("(SELECT s.seq FROM arbor_node s WHERE s.seq BETWEEN {top} - {run} AND {top}"
          " AND (s.parent_seq IS NULL OR s.parent_seq <> s.seq - 1) ORDER BY s.seq DESC LIMIT 1)")
_NEXT_TOP = f"(CASE WHEN r.b IS NULL THEN r.top - {_RUN} - 1 ELSE p.parent_seq END)"
_RUNS_SQLITE = (
    # runs(top, b): a step starts at ``top``; ``b`` is the first break at or below it (NULL: none in the block).
    "WITH RECURSIVE runs(top, b) AS ("
    " SELECT ?1, " + _BREAK.format(top="?1", run=_RUN) +
    " UNION ALL"
    " SELECT " + _NEXT_TOP + ", " + _BREAK.format(top=_NEXT_TOP, run=_RUN) +
    " FROM runs r LEFT JOIN arbor_node p ON p.seq = r.b WHERE " + _NEXT_TOP + " IS NOT NULL)"
)
_RUNS_FROM = (" FROM (SELECT COALESCE(b, top - " + str(_RUN) + ") AS lo, top AS hi FROM runs ORDER BY top) r"
              " JOIN arbor_node n ON n.seq BETWEEN r.lo AND r.hi")
_ROOT_ID = "(SELECT id FROM arbor_node WHERE seq = {p})"
_PATH_SQL_SQLITE = (
    _RUNS_SQLITE + " SELECT " + _PATH_AGGREGATES.format(agg="group_concat", sep="char(31)") + ", "
    + _ROOT_ID.format(p="?2") + _RUNS_FROM
)
_PATH_SQL_POSTGRES = (
    "WITH RECURSIVE up(parent_seq, id, created_at, metadata, kind, content, handle, position) AS ("
    " SELECT parent_seq, id, created_at, metadata, kind, content, handle, position FROM arbor_node WHERE seq = ?"
    " UNION ALL"
    " SELECT n.parent_seq, n.id, n.created_at, n.metadata, n.kind, n.content, n.handle, n.position"
    " FROM arbor_node n JOIN up ON n.seq = up.parent_seq)"
    " SELECT " + _PATH_AGGREGATES.format(agg="string_agg", sep="chr(31)") + ", " + _ROOT_ID.format(p="?")
    + " FROM up n"
)
_PATH_IDS_SQL_SQLITE = _RUNS_SQLITE + " SELECT group_concat(n.id, ','), " + _ROOT_ID.format(p="?2") + _RUNS_FROM
_PATH_IDS_SQL_POSTGRES = (
    "WITH RECURSIVE up(parent_seq, id) AS ("
    " SELECT parent_seq, id FROM arbor_node WHERE seq = ?"
    " UNION ALL"
    " SELECT n.parent_seq, n.id FROM arbor_node n JOIN up ON n.seq = up.parent_seq)"
    " SELECT string_agg(id, ','), " + _ROOT_ID.format(p="?") + " FROM up"
)


class TreeInactive(PlexorError):
    """The tree exists but is scheduled for deletion or archived, so it cannot change."""

    code = "tree_inactive"


def iso_now() -> str:
    """Now, as a fixed-width UTC ISO-8601 string (sorts like the time it names)."""
    return iso(datetime.datetime.now(datetime.UTC))


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)


def canonical_id(value: Any, what: str) -> str:
    """A UUID in its canonical lower-case form, or a clear error naming ``what``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{what} must be a UUID string, got {value!r}",
                              f"Pass the {what} exactly as a previous arbor call returned it.")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument(
            f"{what} {value!r} is not a UUID",
            f"Pass the {what} exactly as a previous arbor call returned it "
            "(e.g. '3f2b8c1e-5d4a-4b7e-9c0d-2a1b3c4d5e6f'); arbor_tree_list lists the trees.",
        ) from None


def _dumps(value: dict[str, Any] | None) -> str | None:
    if not value:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _loads(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _role_of(metadata: dict[str, Any] | None) -> str | None:
    role = (metadata or {}).get("role")
    return role[:64] if isinstance(role, str) and role.strip() else None


def check_handle(handle: Any) -> dict[str, Any]:
    """Validate an external handle ``{source, source_version?, identifier, metadata?}``."""
    if not isinstance(handle, dict):
        raise InvalidArgument(f"handle must be an object, got {handle!r}",
                              'Pass {"source": "...", "identifier": "...", "source_version": "...", "metadata": {}}.')
    for key in ("source", "identifier"):
        if not isinstance(handle.get(key), str) or not handle[key].strip():
            raise InvalidArgument(f"handle.{key} must be a non-empty string, got {handle.get(key)!r}",
                                  f"Name the external {key}, e.g. "
                                  + ('"source": "files"' if key == "source" else '"identifier": "report.pdf#p3"') + ".")
    unknown = set(handle) - {"source", "source_version", "identifier", "metadata"}
    if unknown:
        raise InvalidArgument(f"handle has unknown keys {sorted(unknown)}",
                              "A handle has source, identifier, and optionally source_version and metadata.")
    version = handle.get("source_version")
    if version is not None and not isinstance(version, str):
        raise InvalidArgument(f"handle.source_version must be a string, got {version!r}", 'Use e.g. "1" or "2024-05-01".')
    meta = handle.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise InvalidArgument(f"handle.metadata must be an object, got {meta!r}", "Pass a JSON object or leave it out.")
    return {
        "source": handle["source"],
        "source_version": version,
        "identifier": handle["identifier"],
        "metadata": meta or {},
    }


class Store:
    """Trees and nodes in one plugin database (SQLite or PostgreSQL).

    :param db: the peewee database the kernel opened for the plugin.
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        import peewee

        self.is_sqlite = isinstance(db, peewee.SqliteDatabase)
        self.is_postgres = isinstance(db, peewee.PostgresqlDatabase)
        self._sql_cache: dict[str, str] = {}

    # ---------------------------------------------------------------- helpers
    def _sql(self, sql: str) -> str:
        if self.is_sqlite:
            return sql
        out = self._sql_cache.get(sql)
        if out is None:
            out = self._sql_cache[sql] = sql.replace("?", "%s")
        return out

    def _x(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self.db.execute_sql(self._sql(sql), tuple(params))

    def _one(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self._x(sql, params).fetchone()

    def _all(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return self._x(sql, params).fetchall()

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction; SQLite takes the write lock up front so a busy peer is waited for."""
        if self.is_sqlite and self.db.transaction_depth() == 0:
            with self.db.atomic("IMMEDIATE"):
                yield
        else:
            with self.db.atomic():
                yield

    def _lock_tree(self, tree_id: str) -> None:
        if self.is_postgres:
            self._x("SELECT id FROM arbor_tree WHERE id = ? FOR UPDATE", (tree_id,))

    # ------------------------------------------------------------------ trees
    def _tree_row(self, tree_id: str, *, allow_archived: bool = False, need_active: bool = False) -> Any:
        tid = canonical_id(tree_id, "tree_id")
        row = self._one(
            "SELECT id, root_seq, head_seq, state, ref_count, scheduled_deletion_at, archived_at, created_at, "
            "updated_at, metadata FROM arbor_tree WHERE id = ?", (tid,))
        if row is None:
            raise NotFound(f"no tree with id {tid!r}",
                           "Check the id; arbor_tree_list lists active trees, arbor_tree_list_scheduled and "
                           "arbor_tree_list_archived the others. Create one with arbor_tree_create.")
        state = row[3]
        if state == "archived" and not allow_archived:
            raise TreeInactive(
                f"tree {tid!r} is archived",
                "Read it with arbor_tree_get_archived, or bring it back with arbor_tree_claim "
                "(a claim makes it active again).",
                data={"tree_id": tid, "state": state},
            )
        if need_active and state != "active":
            raise TreeInactive(
                f"tree {tid!r} is scheduled for deletion (no owner holds a reference), so it cannot change",
                "Claim it first with arbor_tree_claim(tree_id, owner_id) to make it active again.",
                data={"tree_id": tid, "state": state},
            )
        return row

    def _ids_of(self, seqs: Iterable[int | None]) -> dict[int, str]:
        wanted = sorted({s for s in seqs if s is not None})
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        return {seq: nid for seq, nid in self._all(f"SELECT seq, id FROM arbor_node WHERE seq IN ({marks})", wanted)}

    def _owners(self, tree_id: str) -> dict[str, int]:
        return {o: c for o, c in self._all(
            "SELECT owner_id, count FROM arbor_owner WHERE tree_id = ? ORDER BY owner_id", (tree_id,))}

    def _tree_dict(self, row: Any, *, owners: dict[str, int] | None = None, ids: dict[int, str] | None = None) -> dict[str, Any]:
        tid, root_seq, head_seq = row[0], row[1], row[2]
        if ids is None:
            ids = self._ids_of([root_seq, head_seq])
        return {
            "id": tid,
            "root": ids.get(root_seq),
            "head": ids.get(head_seq),
            "state": row[3],
            "refs": {"ref_count": row[4], "owners": self._owners(tid) if owners is None else owners},
            "scheduled_deletion_at": row[5],
            "archived_at": row[6],
            "created_at": row[7],
            "updated_at": row[8],
            "metadata": _loads(row[9]),
        }

    def create_tree(self, metadata: dict[str, Any] | None = None, owner_id: str = "system") -> dict[str, Any]:
        """A new active tree with its root node; ``owner_id`` holds its first reference."""
        owner = _check_owner(owner_id)
        meta = _check_metadata(metadata, "metadata")
        tid = str(uuid.uuid4())
        root_id = str(uuid.uuid4())
        now = iso_now()
        with self._write():
            self._x("INSERT INTO arbor_tree (id, state, ref_count, created_at, updated_at, metadata) "
                    "VALUES (?, 'active', 1, ?, ?, ?)", (tid, now, now, json.dumps(meta, ensure_ascii=False)))
            root_seq = self._one(
                "INSERT INTO arbor_node (parent_seq, id, tree_id, position, kind, role, content, handle, metadata, created_at) "
                "VALUES (NULL, ?, ?, 0, 'text', NULL, '', NULL, NULL, ?) RETURNING seq", (root_id, tid, now))[0]
            self._x("UPDATE arbor_tree SET root_seq = ?, head_seq = ? WHERE id = ?", (root_seq, root_seq, tid))
            self._x("INSERT INTO arbor_owner (tree_id, owner_id, count) VALUES (?, ?, 1)", (tid, owner))
        return self.get_tree(tid)

    def head_id(self, tree_id: str) -> str:
        """The id of the tree's head node (the tree must not be archived); cheaper than :meth:`get_tree`."""
        head_seq = self._tree_row(tree_id)[2]
        return self._ids_of([head_seq])[head_seq]

    def get_tree(self, tree_id: str, *, allow_archived: bool = False) -> dict[str, Any]:
        row = self._tree_row(tree_id, allow_archived=allow_archived)
        out = self._tree_dict(row)
        out["node_count"] = self._one("SELECT COUNT(*) FROM arbor_node WHERE tree_id = ?", (row[0],))[0]
        return out

    def list_trees(self, state: str = "active", limit: int = 100, offset: int = 0) -> dict[str, Any]:
        if state not in STATES:
            raise InvalidArgument(f"state {state!r} is not a tree state", f"Use one of: {', '.join(STATES)}.")
        if limit < 1 or limit > 1000:
            raise InvalidArgument(f"limit {limit} is out of range", "Use a limit between 1 and 1000.")
        if offset < 0:
            raise InvalidArgument(f"offset {offset} is negative", "Use 0 for the first page.")
        total = self._one("SELECT COUNT(*) FROM arbor_tree WHERE state = ?", (state,))[0]
        rows = self._all(
            "SELECT id, root_seq, head_seq, state, ref_count, scheduled_deletion_at, archived_at, created_at, "
            "updated_at, metadata FROM arbor_tree WHERE state = ? ORDER BY created_at, id LIMIT ? OFFSET ?",
            (state, limit, offset))
        ids = self._ids_of([s for r in rows for s in (r[1], r[2])])
        owners: dict[str, dict[str, int]] = {r[0]: {} for r in rows}
        if rows:
            marks = ",".join("?" * len(rows))
            for tid, owner, count in self._all(
                    f"SELECT tree_id, owner_id, count FROM arbor_owner WHERE tree_id IN ({marks}) ORDER BY owner_id",
                    [r[0] for r in rows]):
                owners[tid][owner] = count
        trees = [self._tree_dict(r, owners=owners[r[0]], ids=ids) for r in rows]
        nxt = offset + len(rows)
        return {"state": state, "total": total, "trees": trees, "next_offset": nxt if nxt < total else None}

    def update_metadata(self, tree_id: str, metadata: dict[str, Any], merge: bool = False) -> dict[str, Any]:
        meta = _check_metadata(metadata, "metadata")
        with self._write():
            self._lock_tree(canonical_id(tree_id, "tree_id"))
            row = self._tree_row(tree_id, need_active=True)
            if merge:
                current = _loads(row[9])
                for key, value in meta.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
                meta = current
            self._x("UPDATE arbor_tree SET metadata = ?, updated_at = ? WHERE id = ?",
                    (json.dumps(meta, ensure_ascii=False), iso_now(), row[0]))
        return self.get_tree(row[0])

    # --------------------------------------------------------------- refs
    def claim(self, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
        """Add ``count`` references for ``owner_id``; a scheduled or archived tree becomes active again."""
        owner = _check_owner(owner_id)
        _check_count(count)
        tid = canonical_id(tree_id, "tree_id")
        with self._write():
            self._lock_tree(tid)
            row = self._tree_row(tid, allow_archived=True)
            previous = row[3]
            held = self._one("SELECT count FROM arbor_owner WHERE tree_id = ? AND owner_id = ?", (tid, owner))
            if held is None:
                self._x("INSERT INTO arbor_owner (tree_id, owner_id, count) VALUES (?, ?, ?)", (tid, owner, count))
            else:
                self._x("UPDATE arbor_owner SET count = count + ? WHERE tree_id = ? AND owner_id = ?", (count, tid, owner))
            self._x("UPDATE arbor_tree SET ref_count = ref_count + ?, state = 'active', scheduled_deletion_at = NULL, "
                    "archived_at = NULL, updated_at = ? WHERE id = ?", (count, iso_now(), tid))
        out = self.get_tree(tid)
        out["previous_state"] = previous
        return out

    def release(self, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
        """Drop ``count`` of ``owner_id``'s references; at zero references the tree is scheduled for deletion."""
        owner = _check_owner(owner_id)
        _check_count(count)
        tid = canonical_id(tree_id, "tree_id")
        with self._write():
            self._lock_tree(tid)
            row = self._tree_row(tid, allow_archived=True)
            held_row = self._one("SELECT count FROM arbor_owner WHERE tree_id = ? AND owner_id = ?", (tid, owner))
            held = held_row[0] if held_row else 0
            if count > held:
                owners = self._owners(tid)
                raise InvalidArgument(
                    f"owner {owner!r} holds {held} reference{'s' if held != 1 else ''} to tree {tid!r} "
                    f"and cannot release {count}",
                    (f"Release at most {held}. " if held else "")
                    + f"Current owners: {json.dumps(owners) if owners else 'none'} (ref_count {row[4]}).",
                    data={"owner_id": owner, "held": held, "requested": count, "owners": owners},
                )
            if held == count:
                self._x("DELETE FROM arbor_owner WHERE tree_id = ? AND owner_id = ?", (tid, owner))
            else:
                self._x("UPDATE arbor_owner SET count = count - ? WHERE tree_id = ? AND owner_id = ?", (count, tid, owner))
            now = iso_now()
            remaining = row[4] - count
            if remaining <= 0:
                self._x("UPDATE arbor_tree SET ref_count = 0, state = 'scheduled_delete', scheduled_deletion_at = ?, "
                        "updated_at = ? WHERE id = ?", (now, now, tid))
            else:
                self._x("UPDATE arbor_tree SET ref_count = ?, updated_at = ? WHERE id = ?", (remaining, now, tid))
        return self.get_tree(tid, allow_archived=True)

    # -------------------------------------------------------------- nodes
    def _node_ref(self, tree_id: str, node_id: str, what: str = "node_id") -> tuple[int, str]:
        nid = canonical_id(node_id, what)
        row = self._one("SELECT seq, tree_id FROM arbor_node WHERE id = ?", (nid,))
        if row is None:
            raise NotFound(f"no node with id {nid!r} in tree {tree_id!r}",
                           "Check the id; arbor_tree_get_skeleton lists every node of a tree, "
                           "arbor_context_list_leaves the ends of its branches.")
        if row[1] != tree_id:
            raise NotFound(f"node {nid!r} belongs to tree {row[1]!r}, not to tree {tree_id!r}",
                           "Pass the tree_id the node belongs to, or pick a node of this tree.")
        return row[0], nid

    def _node_dicts(self, rows: list[Any], tree_id: str, parent_ids: dict[int, str] | None = None) -> list[dict[str, Any]]:
        if parent_ids is None:
            parent_ids = self._ids_of(r[1] for r in rows)
        return [_node(r, tree_id, parent_ids.get(r[1])) for r in rows]

    def _children_ids(self, seq: int) -> list[str]:
        return [r[0] for r in self._all("SELECT id FROM arbor_node WHERE parent_seq = ? ORDER BY position", (seq,))]

    def create_node(
        self,
        tree_id: str,
        *,
        content: str | None = None,
        handle: dict[str, Any] | None = None,
        parent: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add a text node (``content``) or an external node (``handle``) under ``parent`` (default: the head).

        The row, its position among its siblings and the tree's new head are
        written in one transaction.
        """
        tid = canonical_id(tree_id, "tree_id")
        meta = _check_metadata(metadata, "metadata")
        if handle is not None:
            kind, text, hdl = "external", None, json.dumps(check_handle(handle), ensure_ascii=False)
        else:
            if not isinstance(content, str):
                raise InvalidArgument(f"content must be a string, got {content!r}", "Pass the message text.")
            kind, text, hdl = "text", content, None
        nid = str(uuid.uuid4())
        now = iso_now()
        with self._write():
            self._lock_tree(tid)
            row = self._tree_row(tid, need_active=True)
            if parent is None:
                parent_seq = row[2]
                parent_id = self._ids_of([parent_seq]).get(parent_seq)
            else:
                parent_seq, parent_id = self._node_ref(tid, parent, "parent")
            position = self._one("SELECT COALESCE(MAX(position) + 1, 0) FROM arbor_node WHERE parent_seq = ?",
                                 (parent_seq,))[0]
            seq = self._one(
                "INSERT INTO arbor_node (parent_seq, id, tree_id, position, kind, role, content, handle, metadata, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (parent_seq, nid, tid, position, kind, _role_of(meta), text, hdl, _dumps(meta), now))[0]
            self._x("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (seq, now, tid))
        return _node((seq, parent_seq, nid, position, kind, _role_of(meta), text, hdl, _dumps(meta), now), tid, parent_id)

    def append_chain(
        self,
        tree_id: str,
        items: Iterable[tuple[str, dict[str, Any] | None]],
        *,
        parent: str | None = None,
    ) -> dict[str, Any]:
        """Append a linear run of text nodes ``(content, metadata)`` in one transaction; the head moves to the last.

        Each node is the child of the one before; the first hangs under
        ``parent`` (default: the head). This is the bulk path (imports,
        benchmarks): one ``executemany`` instead of a round trip per node.
        """
        tid = canonical_id(tree_id, "tree_id")
        items = list(items)
        if not items:
            return {"tree_id": tid, "count": 0, "first": None, "last": None}
        now = iso_now()
        with self._write():
            self._lock_tree(tid)
            row = self._tree_row(tid, need_active=True)
            parent_seq = row[2] if parent is None else self._node_ref(tid, parent, "parent")[0]
            position = self._one("SELECT COALESCE(MAX(position) + 1, 0) FROM arbor_node WHERE parent_seq = ?",
                                 (parent_seq,))[0]
            first = self._reserve(len(items))
            rows = []
            prev = parent_seq
            seq = first
            encode = _MetadataEncoder()
            for nid, (content, meta) in zip(uuid4_batch(len(items)), items, strict=True):
                if type(content) is not str:
                    raise InvalidArgument(f"item {seq - first} has content {content!r}, not a string",
                                          "Pass (text, metadata) pairs.")
                if meta:
                    role = meta.get("role")
                    rows.append((seq, prev, nid, tid, position, "text", role[:64] if type(role) is str else None,
                                 content, encode(meta), now))
                else:
                    rows.append((seq, prev, nid, tid, position, "text", None, content, None, now))
                prev = seq
                seq += 1
                position = 0
            self._insert_many("arbor_node", "seq, parent_seq, id, tree_id, position, kind, role, content, metadata, "
                              "created_at", rows)
            self._x("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (prev, now, tid))
        self._after_bulk(len(rows))
        return {"tree_id": tid, "count": len(rows), "first": rows[0][2], "last": rows[-1][2]}

    def _after_bulk(self, count: int) -> None:
        # PostgreSQL plans the recursive queries from table statistics; after a
        # bulk load they are stale until autovacuum catches up (a minute or
        # more), and a stale plan scans the whole table at every level.
        if self.is_postgres and count >= 1000:
            self._x("ANALYZE arbor_node")

    def _reserve(self, n: int) -> int:
        """Reserve ``n`` consecutive node keys inside the current write transaction; returns the first."""
        if self.is_postgres:
            # Other writers draw keys from the sequence; the table lock keeps
            # them out until this transaction ends, so the block stays ours.
            self._x("LOCK TABLE arbor_node IN SHARE ROW EXCLUSIVE MODE")
            seqname = self._one("SELECT pg_get_serial_sequence('arbor_node', 'seq')")[0]
            last, called = self._one(f"SELECT last_value, is_called FROM {seqname}")
            top = max(self._one("SELECT COALESCE(MAX(seq), 0) FROM arbor_node")[0], last if called else last - 1)
            self._x("SELECT setval(?, ?)", (seqname, top + n))
            return top + 1
        return self._one("SELECT COALESCE(MAX(seq), 0) FROM arbor_node")[0] + 1

    def _insert_many(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert many rows at once: ``executemany`` on SQLite, multi-row VALUES pages on PostgreSQL."""
        cursor = self.db.cursor()
        if self.is_postgres:
            from psycopg2.extras import execute_values

            execute_values(cursor, f"INSERT INTO {table} ({columns}) VALUES %s", rows, page_size=2000)
        else:
            marks = ", ".join("?" * (columns.count(",") + 1))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)

    def get_node(self, tree_id: str, node_id: str) -> dict[str, Any]:
        tid = self._tree_row(tree_id)[0]
        seq, nid = self._node_ref(tid, node_id)
        row = self._one(f"SELECT {_NODE_COLS} FROM arbor_node n WHERE n.seq = ?", (seq,))
        node = self._node_dicts([row], tid)[0]
        node["children"] = self._children_ids(seq)
        return node

    def children(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        tid = self._tree_row(tree_id)[0]
        seq, nid = self._node_ref(tid, node_id)
        rows = self._all(f"SELECT {_NODE_COLS} FROM arbor_node n WHERE n.parent_seq = ? ORDER BY n.position", (seq,))
        return [_node(r, tid, nid) for r in rows]

    def parent(self, tree_id: str, node_id: str) -> dict[str, Any] | None:
        tid = self._tree_row(tree_id)[0]
        seq, _ = self._node_ref(tid, node_id)
        row = self._one(f"SELECT {_NODE_COLS} FROM arbor_node n JOIN arbor_node c ON c.parent_seq = n.seq "
                        "WHERE c.seq = ?", (seq,))
        return None if row is None else self._node_dicts([row], tid)[0]

    def path(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        """The nodes from the root to ``node_id``, in order, from ONE recursive query.

        The query walks up the integer parent links and hands each column back
        as ONE string (``group_concat`` / ``string_agg``, in walk order), so a
        deep path costs one row from the database instead of one per node;
        Python splits the strings and builds the node dicts in one pass. Each
        node's parent id is the id of the node before it. Rows that are not
        plain first children (a branch's position, an external node) come back
        in a short list of their own and are patched afterwards. Equal metadata
        strings are parsed once (each node still gets a dict of its own), and
        no garbage collection runs while the node dicts are built. A text that
        contains the separator character is detected (the pieces no longer
        add up) and the path is read again row by row.
        """
        row = self._tree_row(tree_id)
        tid = row[0]
        seq, nid = self._node_ref(tid, node_id)
        count, ids, created, metas, bodies, odd, root = self._one(
            _PATH_SQL_SQLITE if self.is_sqlite else _PATH_SQL_POSTGRES, (seq, row[1]))
        ids = ids.split(",")
        created = created.split(",")
        metas = metas.split(_SEP)
        bodies = bodies.split(_SEP)
        if not self.is_sqlite:  # PostgreSQL hands the walk's order back: the node first
            ids.reverse()
            created.reverse()
            metas.reverse()
            bodies.reverse()
        if not (len(ids) == len(created) == len(metas) == len(bodies) == count) or ids[0] != root or ids[-1] != nid:
            return self._path_by_rows(tid, seq)
        loads = json.loads
        parsed = {m: loads(m) for m in set(metas) if m}
        parsed[""] = {}
        with _gc_paused():
            out = [
                {"id": i, "tree_id": tid, "parent": p, "position": 0, "data": {"type": "text", "content": b},
                 "metadata": parsed[m].copy(), "created_at": c}
                for i, p, c, m, b in zip(ids, [None, *ids], created, metas, bodies, strict=False)
            ]
        if odd:
            entries = [item.split(":") for item in odd.split(",")]
            where = {i: k for k, i in enumerate(ids)} if len(entries) > 8 else None
            for odd_id, position, kind in entries:
                node = out[ids.index(odd_id) if where is None else where[odd_id]]
                node["position"] = int(position)
                if kind == "external":
                    node["data"] = {"type": "external", "handle": loads(node["data"]["content"])}
        return out

    def _path_by_rows(self, tid: str, seq: int) -> list[dict[str, Any]]:
        """The same path, one row per node: the rare fallback of :meth:`path` (and how paths were read before)."""
        rows = self._all(
            "WITH RECURSIVE up(seq, parent_seq, depth) AS ("
            " SELECT seq, parent_seq, 0 FROM arbor_node WHERE seq = ?"
            " UNION ALL"
            " SELECT n.seq, n.parent_seq, up.depth + 1 FROM arbor_node n JOIN up ON n.seq = up.parent_seq)"
            " SELECT n.id, n.position, n.kind, n.content, n.handle, n.metadata, n.created_at, up.depth"
            " FROM up JOIN arbor_node n ON n.seq = up.seq", (seq,))
        # Root first; sorting here (linear on the walk's order) beats an ORDER BY that copies every row.
        rows.sort(key=_DEPTH, reverse=True)
        out: list[dict[str, Any]] = []
        parsed: dict[str, dict[str, Any]] = {}
        parent_id = None
        for nid, position, kind, content, handle, meta, created, _depth in rows:
            if meta:
                m = parsed.get(meta)
                if m is None:
                    m = parsed[meta] = json.loads(meta)
                m = m.copy()
            else:
                m = {}
            if kind == "external":
                data: dict[str, Any] = {"type": "external", "handle": json.loads(handle)}
            else:
                data = {"type": "text", "content": content or ""}
            out.append({"id": nid, "tree_id": tid, "parent": parent_id, "position": position, "data": data,
                        "metadata": m, "created_at": created})
            parent_id = nid
        return out

    def path_ids(self, tree_id: str, node_id: str) -> list[str]:
        """The ids from the root to ``node_id``, from ONE recursive query returning them as one string."""
        row = self._tree_row(tree_id)
        tid = row[0]
        seq, nid = self._node_ref(tid, node_id)
        joined, root = self._one(_PATH_IDS_SQL_SQLITE if self.is_sqlite else _PATH_IDS_SQL_POSTGRES, (seq, row[1]))
        ids = joined.split(",")
        if not self.is_sqlite:
            ids.reverse()
        if ids[0] != root or ids[-1] != nid:  # not in path order: read them again, explicitly ordered
            rows = self._all(
                "WITH RECURSIVE up(seq, parent_seq, depth) AS ("
                " SELECT seq, parent_seq, 0 FROM arbor_node WHERE seq = ?"
                " UNION ALL"
                " SELECT n.seq, n.parent_seq, up.depth + 1 FROM arbor_node n JOIN up ON n.seq = up.parent_seq)"
                " SELECT n.id FROM up JOIN arbor_node n ON n.seq = up.seq ORDER BY up.depth DESC", (seq,))
            return [r[0] for r in rows]
        return ids

    def handles(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        """External handles on the path root → ``node_id``, in path order."""
        tid = self._tree_row(tree_id)[0]
        seq, _ = self._node_ref(tid, node_id)
        rows = self._all(
            "WITH RECURSIVE up(seq, parent_seq, depth) AS ("
            " SELECT seq, parent_seq, 0 FROM arbor_node WHERE seq = ?"
            " UNION ALL"
            " SELECT n.seq, n.parent_seq, up.depth + 1 FROM arbor_node n JOIN up ON n.seq = up.parent_seq)"
            " SELECT n.id, n.handle, n.role FROM up JOIN arbor_node n ON n.seq = up.seq"
            " WHERE n.kind = 'external' ORDER BY up.depth DESC", (seq,))
        return [{"node_id": nid, "handle": json.loads(h), "role": role} for nid, h, role in rows]

    def leaves(self, tree_id: str) -> list[dict[str, Any]]:
        """Nodes without children (the ends of each branch), in creation order."""
        tid = self._tree_row(tree_id)[0]
        rows = self._all(
            f"SELECT {_NODE_COLS} FROM arbor_node n WHERE n.tree_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM arbor_node c WHERE c.parent_seq = n.seq) ORDER BY n.seq", (tid,))
        return self._node_dicts(rows, tid)

    def subtree(self, tree_id: str, node_id: str | None = None, max_depth: int | None = None,
                *, allow_archived: bool = False) -> tuple[Any, list[Any]]:
        """``(tree_row, rows)``: the subtree under ``node_id`` (default: the root) from ONE recursive query.

        Rows are ``(seq, parent_seq, id, position, kind, role, content, handle, depth)``;
        with ``max_depth`` the query stops one level below it, so the renderer
        can say what was left out.
        """
        row = self._tree_row(tree_id, allow_archived=allow_archived)
        tid = row[0]
        start = row[1] if node_id is None else self._node_ref(tid, node_id)[0]
        limit = "" if max_depth is None else " WHERE down.depth <= ?"
        params: list[Any] = [start]
        if max_depth is not None:
            params.append(int(max_depth))
        rows = self._all(
            "WITH RECURSIVE down(seq, depth) AS ("
            " SELECT seq, 0 FROM arbor_node WHERE seq = ?"
            " UNION ALL"
            f" SELECT n.seq, down.depth + 1 FROM arbor_node n JOIN down ON n.parent_seq = down.seq{limit})"
            " SELECT n.seq, n.parent_seq, n.id, n.position, n.kind, n.role, n.content, n.handle, down.depth"
            " FROM down JOIN arbor_node n ON n.seq = down.seq", params)
        return row, rows

    def skeleton(self, tree_id: str) -> dict[str, Any]:
        """The shape of the tree: every node's id, parent, children, kind and role, no content."""
        row, rows = self.subtree(tree_id)
        ids = {r[0]: r[2] for r in rows}
        kids: dict[int, list[tuple[int, str]]] = {}
        for r in rows:
            if r[1] is not None:
                kids.setdefault(r[1], []).append((r[3], r[2]))
        nodes = []
        for r in sorted(rows, key=lambda r: r[0]):
            nodes.append({
                "id": r[2],
                "parent": ids.get(r[1]),
                "children": [nid for _, nid in sorted(kids.get(r[0], []))],
                "kind": r[4],
                "role": r[5],
            })
        tree = self._tree_dict(row, ids=ids)
        tree["node_count"] = len(nodes)
        return {"tree": tree, "nodes": nodes}

    # --------------------------------------------------------------- head
    def get_head(self, tree_id: str) -> dict[str, Any]:
        row = self._tree_row(tree_id)
        node = self._one(f"SELECT {_NODE_COLS} FROM arbor_node n WHERE n.seq = ?", (row[2],))
        out = self._node_dicts([node], row[0])[0]
        out["children"] = self._children_ids(row[2])
        return out

    def set_head(self, tree_id: str, node_id: str) -> dict[str, Any]:
        tid = canonical_id(tree_id, "tree_id")
        with self._write():
            self._lock_tree(tid)
            self._tree_row(tid, need_active=True)
            seq, _ = self._node_ref(tid, node_id)
            self._x("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (seq, iso_now(), tid))
        return self.get_head(tid)

    # -------------------------------------------------------------- sweep
    def sweep(self, scheduled_window: float, archive_window: float, now: datetime.datetime | None = None) -> dict[str, Any]:
        """Archive trees scheduled longer than ``scheduled_window`` seconds; purge trees archived longer than
        ``archive_window`` seconds. Returns the ids of both."""
        moment = now or datetime.datetime.now(datetime.UTC)
        stamp = iso(moment)
        archive_before = iso(moment - datetime.timedelta(seconds=scheduled_window))
        purge_before = iso(moment - datetime.timedelta(seconds=archive_window))
        with self._write():
            # Purge first, so a tree archived in this sweep waits its full archive window.
            purged = [r[0] for r in self._all(
                "SELECT id FROM arbor_tree WHERE state = 'archived' AND archived_at <= ? ORDER BY id", (purge_before,))]
            if purged:
                for chunk in _chunks(purged, 500):
                    marks = ",".join("?" * len(chunk))
                    self._x(f"DELETE FROM arbor_owner WHERE tree_id IN ({marks})", chunk)
                    self._x(f"DELETE FROM arbor_node WHERE tree_id IN ({marks})", chunk)
                    self._x(f"DELETE FROM arbor_tree WHERE id IN ({marks})", chunk)
            archived = [r[0] for r in self._all(
                "SELECT id FROM arbor_tree WHERE state = 'scheduled_delete' AND scheduled_deletion_at <= ? ORDER BY id",
                (archive_before,))]
            if archived:
                for chunk in _chunks(archived, 500):
                    marks = ",".join("?" * len(chunk))
                    self._x(f"UPDATE arbor_tree SET state = 'archived', archived_at = ?, updated_at = ? "
                            f"WHERE id IN ({marks})", [stamp, stamp, *chunk])
        return {"archived": archived, "purged": purged, "swept_at": stamp}

    # ------------------------------------------------------ export/import
    def export_tree(self, tree_id: str) -> dict[str, Any]:
        """The whole tree as a JSON-able document (any state), nodes in creation order."""
        row = self._tree_row(tree_id, allow_archived=True)
        tid = row[0]
        rows = self._all(f"SELECT {_NODE_COLS} FROM arbor_node n WHERE n.tree_id = ? ORDER BY n.seq", (tid,))
        ids = {r[0]: r[2] for r in rows}
        tree = self._tree_dict(row, ids=ids)
        nodes = []
        for r in rows:
            node = _node(r, tid, ids.get(r[1]))
            del node["tree_id"], node["position"]
            nodes.append(node)
        return {"format": EXPORT_FORMAT, "tree": tree, "nodes": nodes}

    def import_tree(self, document: dict[str, Any], *, new_ids: bool = False) -> dict[str, Any]:
        """Load a document written by :meth:`export_tree`; the ids are kept unless ``new_ids``."""
        tree, nodes = _check_document(document)
        tid = str(uuid.uuid4()) if new_ids else canonical_id(tree.get("id"), "tree.id")
        mapping: dict[str, str] = {}
        for node in nodes:
            mapping[node["id"]] = str(uuid.uuid4()) if new_ids else canonical_id(node["id"], "node id")
        if not new_ids:
            if self._one("SELECT 1 FROM arbor_tree WHERE id = ?", (tid,)) is not None:
                raise InvalidArgument(f"a tree with id {tid!r} already exists",
                                      "Import with new ids (`plexor arbor import FILE --new-ids`), or purge the existing tree.")
            clash = self._existing_node_ids(list(mapping.values()))
            if clash:
                raise InvalidArgument(f"node id {clash!r} already exists in this database",
                                      "Import with new ids (`plexor arbor import FILE --new-ids`).")
        root_id = tree.get("root")
        head_id = tree.get("head")
        if root_id not in mapping or head_id not in mapping:
            raise InvalidArgument("the document's tree.root and tree.head must name nodes of the document",
                                  "Use a file written by `plexor arbor export`.")
        refs = tree.get("refs") or {}
        owners = refs.get("owners") or {}
        if not isinstance(owners, dict) or not all(isinstance(v, int) and v > 0 for v in owners.values()):
            raise InvalidArgument("tree.refs.owners must map owner ids to positive counts", "Use an exported file.")
        state = tree.get("state", "active")
        if state not in STATES:
            raise InvalidArgument(f"tree.state {state!r} is not a tree state", f"Use one of: {', '.join(STATES)}.")
        now = iso_now()
        with self._write():
            self._x("INSERT INTO arbor_tree (id, state, ref_count, scheduled_deletion_at, archived_at, created_at, "
                    "updated_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (tid, state, sum(owners.values()), tree.get("scheduled_deletion_at"), tree.get("archived_at"),
                     tree.get("created_at") or now, tree.get("updated_at") or now,
                     json.dumps(tree.get("metadata") or {}, ensure_ascii=False)))
            first = self._reserve(len(nodes))
            seqs: dict[str, int] = {}
            positions: dict[int | None, int] = {}
            rows = []
            for i, node in enumerate(nodes):
                seq = first + i
                old_parent = node.get("parent")
                if old_parent is None:
                    parent_seq = None
                elif old_parent in seqs:
                    parent_seq = seqs[old_parent]
                else:
                    raise InvalidArgument(f"node {node['id']!r} names parent {old_parent!r}, which does not come "
                                          "before it in the document", "Use a file written by `plexor arbor export`.")
                seqs[node["id"]] = seq
                pos = positions.get(parent_seq, 0) if parent_seq is not None else 0
                positions[parent_seq] = pos + 1
                data = node["data"]
                meta = node.get("metadata") or {}
                if data["type"] == "external":
                    kind, text, hdl = "external", None, json.dumps(check_handle(data.get("handle")), ensure_ascii=False)
                else:
                    kind, text, hdl = "text", data.get("content", ""), None
                rows.append((seq, parent_seq, mapping[node["id"]], tid, pos, kind, _role_of(meta), text, hdl,
                             _dumps(meta), node.get("created_at") or now))
            self._insert_many("arbor_node", "seq, parent_seq, id, tree_id, position, kind, role, content, handle, "
                              "metadata, created_at", rows)
            self._x("UPDATE arbor_tree SET root_seq = ?, head_seq = ? WHERE id = ?", (seqs[root_id], seqs[head_id], tid))
            if owners:
                self._insert_many("arbor_owner", "tree_id, owner_id, count", [(tid, o, c) for o, c in owners.items()])
        self._after_bulk(len(rows))
        return self.get_tree(tid, allow_archived=True)

    def _existing_node_ids(self, ids: list[str]) -> str | None:
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            row = self._one(f"SELECT id FROM arbor_node WHERE id IN ({marks})", chunk)
            if row:
                return row[0]
        return None

    def complete_tree_ids(self, prefix: str, limit: int = 100) -> list[str]:
        """Ids of active trees starting with ``prefix`` (any case), most recently changed first, at most ``limit``.

        A prefix that no tree id could start with (anything but hex digits and
        dashes, or longer than an id) matches nothing.
        """
        prefix = prefix.strip().lower()
        if len(prefix) > 36 or prefix.strip(_ID_CHARS):
            return []
        rows = self._all("SELECT id FROM arbor_tree WHERE state = 'active' AND substr(id, 1, ?) = ? "
                         "ORDER BY updated_at DESC, id LIMIT ?", (len(prefix), prefix, limit))
        return [r[0] for r in rows]

    def resource_listing(self) -> list[dict[str, Any]]:
        """``resources/list`` entries: each active tree and its head."""
        rows = self._all("SELECT t.id, t.metadata, h.id FROM arbor_tree t LEFT JOIN arbor_node h ON h.seq = t.head_seq "
                         "WHERE t.state = 'active' ORDER BY t.created_at, t.id")
        out = []
        for tid, meta, head in rows:
            title = _loads(meta).get("title") or _loads(meta).get("name")
            label = f"{title} ({tid[:8]})" if isinstance(title, str) and title else f"tree {tid}"
            out.append({"uri": f"arbor://tree/{tid}", "name": f"Arbor {label}",
                        "description": "The tree's metadata, state, references, root and head."})
            out.append({"uri": f"arbor://tree/{tid}/head", "name": f"Arbor {label}: head",
                        "description": f"The node the conversation continues from (currently {head})."})
        return out


_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def uuid4_batch(n: int) -> list[str]:
    """``n`` random (version 4) UUID strings from one read of the OS random source.

    Several times faster than ``str(uuid.uuid4())`` per id, which matters for
    bulk appends of many thousands of nodes.
    """
    raw = os.urandom(16 * n).hex()
    variant = _VARIANT
    return [
        f"{raw[i:i + 8]}-{raw[i + 8:i + 12]}-4{raw[i + 13:i + 16]}-{variant[raw[i + 16]]}{raw[i + 17:i + 20]}-{raw[i + 20:i + 32]}"
        for i in range(0, 32 * n, 32)
    ]


class _MetadataEncoder:
    """JSON-encodes metadata, remembering the text of the common flat all-string objects ({"role": "user"})."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, ...], str] = {}

    def __call__(self, meta: dict[str, Any]) -> str:
        for value in meta.values():
            if type(value) is not str:
                return json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
        key = tuple(meta.items())
        text = self._seen.get(key)
        if text is None:
            text = self._seen[key] = json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
        return text


def _node(r: Any, tree_id: str, parent_id: str | None) -> dict[str, Any]:
    # r: seq, parent_seq, id, position, kind, role, content, handle, metadata, created_at
    if r[4] == "external":
        data: dict[str, Any] = {"type": "external", "handle": json.loads(r[7])}
    else:
        data = {"type": "text", "content": r[6] or ""}
    return {
        "id": r[2],
        "tree_id": tree_id,
        "parent": parent_id,
        "position": r[3],
        "data": data,
        "metadata": json.loads(r[8]) if r[8] else {},
        "created_at": r[9],
    }


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a large, acyclic result is built.

    Building tens of thousands of fresh dicts otherwise sets off dozens of
    young-generation collections that find nothing to free (and now and then
    a full one). Collection resumes afterwards; if it was already off (by the
    application, or by another thread inside this block) it is left alone.
    """
    was_on = gc.isenabled()
    if was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _check_owner(owner_id: Any) -> str:
    if not isinstance(owner_id, str) or not owner_id.strip():
        raise InvalidArgument(f"owner_id must be a non-empty string, got {owner_id!r}",
                              "Name who holds the reference, e.g. 'system' or a session id.")
    if len(owner_id) > 200:
        raise InvalidArgument("owner_id is longer than 200 characters", "Use a shorter owner id.")
    return owner_id


def _check_count(count: Any) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidArgument(f"count must be a positive whole number, got {count!r}", "Use 1 unless you hold several references.")


def _check_metadata(metadata: Any, what: str) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {metadata!r}", 'Pass e.g. {"role": "user"}.')
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} is not JSON-serialisable: {exc}", "Use only JSON values.") from None
    role = metadata.get("role")
    if role is not None and not isinstance(role, str):
        raise InvalidArgument(f"{what}.role must be a string, got {role!r}", 'Use e.g. "user", "assistant" or "system".')
    return dict(metadata)


def _check_document(document: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise InvalidArgument(f"not an Arbor export (expected \"format\": \"{EXPORT_FORMAT}\")",
                              "Use a file written by `plexor arbor export TREE_ID`.")
    tree, nodes = document.get("tree"), document.get("nodes")
    if not isinstance(tree, dict) or not isinstance(nodes, list) or not nodes:
        raise InvalidArgument("the export has no tree object or no nodes", "Use a file written by `plexor arbor export`.")
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("id"), str) or not isinstance(node.get("data"), dict):
            raise InvalidArgument(f"malformed node in the export: {str(node)[:80]}", "Use a file written by `plexor arbor export`.")
        if node["data"].get("type") not in ("text", "external"):
            raise InvalidArgument(f"node {node['id']!r} has data.type {node['data'].get('type')!r}",
                                  "Node data is {\"type\": \"text\", ...} or {\"type\": \"external\", ...}.")
    return tree, nodes
