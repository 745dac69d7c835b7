"""Paths root → node: the context to send to a model, its ids, and its external handles.

A path comes back from the database as ONE row, however deep the node is: the
node count, then per column one string — ids and timestamps joined by ",",
metadata and text (or an external node's handle; a text node's content is
never NULL) by the unit separator, "id:position:kind" for every node that is
not a plain first text child — and the ids of the walk's top node and of the
tree's root, which :meth:`PathsMixin.path_page` checks the strings against.

A path is read in pages of at most ``limit`` nodes, walking up from the node:
the walk stops after ``limit + 1`` nodes, so a page costs what it returns, not
what the whole path would. Its ``continue_from`` is the node to ask for next
(the path's part before the page).

SQLite walks RUNS rather than single nodes. A node is nearly always created
right after its parent (a conversation, an import), so its key is its parent's
key + 1; going down from a node, every row whose parent is the row just below
it is the next node of the path. Each step of the recursive query finds, in
one backward range scan of at most ``_RUN`` keys, the first row that breaks
that pattern (its parent is elsewhere, or it is a root): the rows from it up
to the step's start are all on the path, and the walk goes on from its parent
(or, when the whole block chains, from the row below the block). The runs are
read lowest key first (a parent's key is always below its children's), so the
rows come root first.

PostgreSQL walks node by node, carrying the columns through the walk (one
index lookup per node instead of two); each step adds exactly one row, so the
aggregates read the node first, the root last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import chain
from typing import Any

from plexor_arbor.lookups import StoreBase
from plexor_arbor.rows import HandleRow, PathNodeRow, PathRow

__all__ = ["IdsPage", "PathPage", "PathsMixin"]

_SEP = "\x1f"  # the unit separator: splits the per-column strings of a path
_ALL = 2**62  # "no limit" for the walk
_RUN = 512
_ODD = "CASE WHEN n.position <> 0 OR n.handle IS NOT NULL THEN n.id || ':' || n.position || ':' || n.kind END"
_AGGREGATES = (
    "COUNT(*), {agg}(n.id, ','), {agg}(n.created_at, ','), {agg}(COALESCE(n.metadata, ''), {sep}),"
    " {agg}(COALESCE(n.content, n.handle, ''), {sep}), {agg}(" + _ODD + ", ',')"
)
_BREAK = ("(SELECT s.seq FROM arbor_node s WHERE s.seq BETWEEN {top} - {run} AND {top}"
          " AND (s.parent_seq IS NULL OR s.parent_seq <> s.seq - 1) ORDER BY s.seq DESC LIMIT 1)")
_NEXT_TOP = f"(CASE WHEN r.b IS NULL THEN r.top - {_RUN} - 1 ELSE p.parent_seq END)"
_COVERED = f"r.n + r.top - COALESCE(r.b, r.top - {_RUN}) + 1"
# runs(top, b, n): a step starts at ``top``; ``b`` is the first break at or below it (NULL: none in the
# block); ``n`` counts the path's nodes the steps before it covered. ?1 the node's key, ?3 how many nodes
# to walk at least.
_RUNS_SQLITE = (
    "WITH RECURSIVE runs(top, b, n) AS ("
    " SELECT ?1, " + _BREAK.format(top="?1", run=_RUN) + ", 0"
    " UNION ALL"
    " SELECT " + _NEXT_TOP + ", " + _BREAK.format(top=_NEXT_TOP, run=_RUN) + ", " + _COVERED +
    " FROM runs r LEFT JOIN arbor_node p ON p.seq = r.b WHERE " + _NEXT_TOP + " IS NOT NULL AND " + _COVERED + " < ?3)"
)
_RUNS_FROM = (" FROM (SELECT COALESCE(b, top - " + str(_RUN) + ") AS lo, top AS hi FROM runs ORDER BY top) r"
              " JOIN arbor_node n ON n.seq BETWEEN r.lo AND r.hi")
_TOP_SQLITE = f"(SELECT id FROM arbor_node WHERE seq = (SELECT MIN(COALESCE(b, top - {_RUN})) FROM runs))"
_ROOT_ID = "(SELECT id FROM arbor_node WHERE seq = {p})"
_PATH_SQLITE = (_RUNS_SQLITE + " SELECT " + _AGGREGATES.format(agg="group_concat", sep="char(31)") + ", "
                + _TOP_SQLITE + ", " + _ROOT_ID.format(p="?2") + _RUNS_FROM)
# PostgreSQL: ? the node's key, ? how many nodes to walk at most, ? the root's key.
_PATH_POSTGRES = (
    "WITH RECURSIVE up(parent_seq, id, created_at, metadata, kind, content, handle, position, d) AS ("
    " SELECT parent_seq, id, created_at, metadata, kind, content, handle, position, 0 FROM arbor_node WHERE seq = ?"
    " UNION ALL"
    " SELECT n.parent_seq, n.id, n.created_at, n.metadata, n.kind, n.content, n.handle, n.position, up.d + 1"
    " FROM arbor_node n JOIN up ON n.seq = up.parent_seq WHERE up.d + 1 < ?)"
    " SELECT " + _AGGREGATES.format(agg="string_agg", sep="chr(31)") + ", NULL, " + _ROOT_ID.format(p="?")
    + " FROM up n"
)
_IDS_SQLITE = (_RUNS_SQLITE + " SELECT group_concat(n.id, ','), " + _TOP_SQLITE + ", " + _ROOT_ID.format(p="?2")
               + _RUNS_FROM)
_IDS_POSTGRES = (
    "WITH RECURSIVE up(parent_seq, id, d) AS ("
    " SELECT parent_seq, id, 0 FROM arbor_node WHERE seq = ?"
    " UNION ALL"
    " SELECT n.parent_seq, n.id, up.d + 1 FROM arbor_node n JOIN up ON n.seq = up.parent_seq WHERE up.d + 1 < ?)"
    " SELECT string_agg(id, ','), NULL, " + _ROOT_ID.format(p="?") + " FROM up"
)
_COUNT_SQLITE = _RUNS_SQLITE + " SELECT COUNT(*)" + _RUNS_FROM
_WALK = ("WITH RECURSIVE up(seq, parent_seq, depth) AS ("
         " SELECT seq, parent_seq, 0 FROM arbor_node WHERE seq = ?"
         " UNION ALL"
         " SELECT n.seq, n.parent_seq, up.depth + 1 FROM arbor_node n JOIN up ON n.seq = up.parent_seq)")
_COUNT_POSTGRES = _WALK + " SELECT COUNT(*) FROM up"


@dataclass
class IdsPage:
    """One page of a path's ids, root first, ending at the node asked for (fields as in :class:`PathPage`)."""

    ids: list[str]
    depth: int
    start_depth: int
    continue_from: str | None


@dataclass
class PathPage:
    """One page of a path: ``nodes`` root first, ending at the node asked for.

    ``depth`` is that node's depth (the root's is 0), ``start_depth`` the first
    node's, and ``continue_from`` the node whose path comes before this page
    (``None`` when the page starts at the root).
    """

    nodes: list[dict[str, Any]]
    depth: int
    start_depth: int
    continue_from: str | None


class PathsMixin(StoreBase):
    """Path reads, for :class:`~plexor_arbor.store.Store`."""

    def path(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        """The nodes from the root to ``node_id``, in order, from ONE recursive query (the whole path)."""
        return self.path_page(tree_id, node_id).nodes

    def path_page(self, tree_id: str, node_id: str, limit: int | None = None,
                  max_chars: int | None = None) -> PathPage:
        """The last ``limit`` nodes (default: all) of the path root → ``node_id``, root first.

        With ``max_chars`` the page also stops before the node whose text and metadata would take it past
        that many characters (it always holds the node asked for).

        The strings of the one-row read are split and the node dicts built in
        one pass; equal metadata strings are parsed once (each node still gets
        a dict of its own). A text that contains the separator character is
        detected (the pieces no longer add up) and the path is read again row
        by row, as is any result not in path order.
        """
        tree = self._tree_row(tree_id)
        tid = tree.id
        seq, nid = self._node_ref(tid, node_id)
        want = _ALL if limit is None else limit + 1
        if self.is_sqlite:
            agg = self.data.row(PathRow, _PATH_SQLITE, (seq, tree.root_seq, want))
        else:
            agg = self.data.row(PathRow, _PATH_POSTGRES, (seq, want, tree.root_seq))
        assert agg is not None  # an aggregate always returns a row
        ids, created = agg.ids.split(","), agg.created.split(",")
        metas, bodies = agg.metas.split(_SEP), agg.bodies.split(_SEP)
        if not self.is_sqlite:  # PostgreSQL hands the walk's order back: the node first
            ids.reverse()
            created.reverse()
            metas.reverse()
            bodies.reverse()
        count = agg.size
        in_order = (len(ids) == len(created) == len(metas) == len(bodies) == count and ids[-1] == nid
                    and (agg.top is None or ids[0] == agg.top))
        at_root = ids[0] == agg.root
        start = count - min(count, limit if limit is not None else count)
        if not in_order or (start == 0 and not at_root):
            return self._page_by_rows(tid, seq, limit, max_chars)
        if max_chars is not None and sum(map(len, bodies)) + sum(map(len, metas)) > max_chars:
            start = _within(start, max_chars, [len(b) + len(m) for b, m in zip(bodies, metas, strict=True)])
        parsed = {m: json.loads(m) for m in set(metas[start:]) if m}
        parsed[""] = {}
        first_parent = ids[start - 1] if start else None
        out = [
            {"id": i, "tree_id": tid, "parent": p, "position": 0, "data": {"type": "text", "content": b},
             "metadata": parsed[m].copy(), "created_at": c}
            for i, p, c, m, b in zip(ids[start:], chain((first_parent,), ids[start:]), created[start:],
                                     metas[start:], bodies[start:], strict=False)
        ]
        if agg.odd:
            where = {i: k for k, i in enumerate(ids[start:])}
            for item in agg.odd.split(","):
                odd_id, position, kind = item.split(":")
                k = where.get(odd_id)
                if k is None:  # before this page
                    continue
                node = out[k]
                node["position"] = int(position)
                if kind == "external":
                    node["data"] = {"type": "external", "handle": json.loads(node["data"]["content"])}
        depth = count - 1 if at_root else self._depth(seq)
        return PathPage(out, depth, depth - len(out) + 1, first_parent)

    def _depth(self, seq: int) -> int:
        """The depth of the node with key ``seq`` (a walk to the root that returns only its length)."""
        if self.is_sqlite:
            return int(self.data.value(_COUNT_SQLITE, (seq, None, _ALL))) - 1
        return int(self.data.value(_COUNT_POSTGRES, (seq,))) - 1

    def _page_by_rows(self, tid: str, seq: int, limit: int | None, max_chars: int | None) -> PathPage:
        nodes = self._path_by_rows(tid, seq)
        depth = len(nodes) - 1
        start = len(nodes) - min(len(nodes), limit if limit is not None else len(nodes))
        if max_chars is not None:
            sizes = [len(json.dumps(n["data"], ensure_ascii=False)) + len(json.dumps(n["metadata"])) for n in nodes]
            start = _within(start, max_chars, sizes)
        page = nodes[start:]
        return PathPage(page, depth, depth - len(page) + 1, page[0]["parent"])

    def _path_by_rows(self, tid: str, seq: int) -> list[dict[str, Any]]:
        """The same path, one row per node: the rare fallback of :meth:`path` (and how paths were read before)."""
        rows = self.data.rows(
            PathNodeRow,
            _WALK + " SELECT n.id, n.position, n.kind, n.content, n.handle, n.metadata, n.created_at, up.depth"
                    " FROM up JOIN arbor_node n ON n.seq = up.seq", (seq,))
        # Root first; sorting here (linear on the walk's order) beats an ORDER BY that copies every row.
        rows.sort(key=lambda r: r.up, reverse=True)
        out: list[dict[str, Any]] = []
        parsed: dict[str, dict[str, Any]] = {}
        parent_id = None
        for r in rows:
            if r.metadata:
                meta = parsed.get(r.metadata)
                if meta is None:
                    meta = parsed[r.metadata] = json.loads(r.metadata)
                meta = meta.copy()
            else:
                meta = {}
            if r.kind == "external":
                data: dict[str, Any] = {"type": "external", "handle": json.loads(r.handle or "{}")}
            else:
                data = {"type": "text", "content": r.content or ""}
            out.append({"id": r.id, "tree_id": tid, "parent": parent_id, "position": r.position, "data": data,
                        "metadata": meta, "created_at": r.created_at})
            parent_id = r.id
        return out

    def path_ids(self, tree_id: str, node_id: str) -> list[str]:
        """The ids from the root to ``node_id``, from ONE recursive query returning them as one string."""
        return self.path_ids_page(tree_id, node_id).ids

    def path_ids_page(self, tree_id: str, node_id: str, limit: int | None = None) -> IdsPage:
        """The last ``limit`` ids (default: all) of the path root → ``node_id``, root first; the walk stops
        after ``limit + 1`` nodes, as :meth:`path_page`'s does."""
        tree = self._tree_row(tree_id)
        seq, nid = self._node_ref(tree.id, node_id)
        want = _ALL if limit is None else limit + 1
        if self.is_sqlite:
            joined, top, root = self.data.execute(_IDS_SQLITE, (seq, tree.root_seq, want)).fetchone()
        else:
            joined, top, root = self.data.execute(_IDS_POSTGRES, (seq, want, tree.root_seq)).fetchone()
        ids: list[str] = joined.split(",")
        if not self.is_sqlite:
            ids.reverse()
        count = len(ids)
        start = count - min(count, limit if limit is not None else count)
        at_root = ids[0] == root
        if ids[-1] != nid or (top is not None and ids[0] != top) or (start == 0 and not at_root):
            # Not in path order: read them again, explicitly ordered.
            ids = self.data.values(_WALK + " SELECT n.id FROM up JOIN arbor_node n ON n.seq = up.seq"
                                           " ORDER BY up.depth DESC", (seq,))
            count, at_root = len(ids), True
            start = count - min(count, limit if limit is not None else count)
        depth = count - 1 if at_root else self._depth(seq)
        page = ids[start:] if start else ids
        return IdsPage(page, depth, depth - len(page) + 1, ids[start - 1] if start else None)

    def handles(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        """External handles on the path root → ``node_id``, in path order."""
        tid = self._tree_row(tree_id).id
        seq, _ = self._node_ref(tid, node_id)
        rows = self.data.rows(HandleRow, _WALK + " SELECT n.id, n.handle, n.role FROM up JOIN arbor_node n"
                                                 " ON n.seq = up.seq WHERE n.kind = 'external'"
                                                 " ORDER BY up.depth DESC", (seq,))
        return [{"node_id": r.id, "handle": json.loads(r.handle), "role": r.role} for r in rows]


def _within(start: int, max_chars: int, sizes: list[int]) -> int:
    """The first index from which ``sizes[index:]`` (at least the last one) stays within ``max_chars``."""
    if sum(sizes[start:]) <= max_chars:
        return start
    k = len(sizes) - 1
    total = sizes[k]
    while k > start and total + sizes[k - 1] <= max_chars:
        k -= 1
        total += sizes[k]
    return k
