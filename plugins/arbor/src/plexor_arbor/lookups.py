"""The lookups every part of the store starts from: a tree's row, a node's key, ids by key.

:class:`StoreBase` holds the :class:`~plexor_arbor.dataaccess.DataAccess` and
these shared reads; the parts of :class:`~plexor_arbor.store.Store` (trees,
nodes, paths, subtrees, lifecycle, transfer) build on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from plexor import NotFound
from plexor_arbor.checks import TreeInactive, canonical_id, loads
from plexor_arbor.dataaccess import DataAccess
from plexor_arbor.rows import NodeRef, NodeRow, TreeRow, columns, node_dict

__all__ = ["NODE_COLUMNS", "TREE_COLUMNS", "StoreBase"]

TREE_COLUMNS = columns(TreeRow)
NODE_COLUMNS = columns(NodeRow, "n")


class StoreBase:
    """The database access and the lookups shared by every part of the store.

    :param db: the peewee database the kernel opened for the plugin.
    """

    def __init__(self, db: Any) -> None:
        self.data = DataAccess(db)
        self.db = db
        self.is_sqlite = self.data.is_sqlite
        self.is_postgres = self.data.is_postgres

    # ------------------------------------------------------------------ trees
    def _tree_row(self, tree_id: str, *, allow_archived: bool = False, need_active: bool = False) -> TreeRow:
        tid = canonical_id(tree_id, "tree_id")
        row = self.data.row(TreeRow, f"SELECT {TREE_COLUMNS} FROM arbor_tree WHERE id = ?", (tid,))
        if row is None:
            raise NotFound(f"no tree with id {tid!r}",
                           "Check the id; arbor_tree_list lists active trees, arbor_tree_list_scheduled and "
                           "arbor_tree_list_archived the others. Create one with arbor_tree_create.")
        if row.state == "archived" and not allow_archived:
            raise TreeInactive(
                f"tree {tid!r} is archived",
                "Read it with arbor_tree_get_archived, or bring it back with arbor_tree_claim "
                "(a claim makes it active again).",
                data={"tree_id": tid, "state": row.state},
            )
        if need_active and row.state != "active":
            raise TreeInactive(
                f"tree {tid!r} is scheduled for deletion (no owner holds a reference), so it cannot change",
                "Claim it first with arbor_tree_claim(tree_id, owner_id) to make it active again.",
                data={"tree_id": tid, "state": row.state},
            )
        return row

    def _ids_of(self, seqs: Iterable[int | None]) -> dict[int, str]:
        """Node ids by key, for the keys given (``None`` skipped)."""
        wanted = sorted({s for s in seqs if s is not None})
        out: dict[int, str] = {}
        for among, params in self.data.among("seq", wanted):
            out.update(self.data.mapping(f"SELECT seq, id FROM arbor_node WHERE {among}", params))
        return out

    def _owners(self, tree_id: str) -> dict[str, int]:
        return self.data.mapping("SELECT owner_id, count FROM arbor_owner WHERE tree_id = ? ORDER BY owner_id",
                                 (tree_id,))

    def _tree_dict(self, row: TreeRow, *, owners: dict[str, int] | None = None,
                   ids: dict[int, str] | None = None) -> dict[str, Any]:
        if ids is None:
            ids = self._ids_of([row.root_seq, row.head_seq])
        return {
            "id": row.id,
            "root": ids.get(row.root_seq) if row.root_seq is not None else None,
            "head": ids.get(row.head_seq) if row.head_seq is not None else None,
            "state": row.state,
            "refs": {"ref_count": row.ref_count, "owners": self._owners(row.id) if owners is None else owners},
            "scheduled_deletion_at": row.scheduled_deletion_at,
            "archived_at": row.archived_at,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "metadata": loads(row.metadata),
        }

    # ------------------------------------------------------------------ nodes
    def _node_ref(self, tree_id: str, node_id: str, what: str = "node_id") -> NodeRef:
        """``(key, canonical id)`` of a node of ``tree_id``, or not-found with guidance."""
        nid = canonical_id(node_id, what)
        found = self.data.execute("SELECT seq, tree_id FROM arbor_node WHERE id = ?", (nid,)).fetchone()
        if found is None:
            raise NotFound(f"no node with id {nid!r} in tree {tree_id!r}",
                           "Check the id; arbor_tree_get_skeleton lists every node of a tree, "
                           "arbor_context_list_leaves the ends of its branches.")
        seq, owner_tree = found
        if owner_tree != tree_id:
            raise NotFound(f"node {nid!r} belongs to tree {owner_tree!r}, not to tree {tree_id!r}",
                           "Pass the tree_id the node belongs to, or pick a node of this tree.")
        return NodeRef(int(seq), nid)

    def _node_row(self, seq: int) -> NodeRow:
        row = self.data.row(NodeRow, f"SELECT {NODE_COLUMNS} FROM arbor_node n WHERE n.seq = ?", (seq,))
        if row is None:  # purged between the lookup and this read
            raise NotFound("the node was deleted while it was being read", "Re-read the tree with arbor_tree_get.")
        return row

    def _children_ids(self, seq: int) -> list[str]:
        return self.data.values("SELECT id FROM arbor_node WHERE parent_seq = ? ORDER BY position", (seq,))

    def _node_dicts(self, rows: list[NodeRow], tree_id: str) -> list[dict[str, Any]]:
        parents = self._ids_of(r.parent_seq for r in rows)
        return [node_dict(r, tree_id, parents.get(r.parent_seq) if r.parent_seq is not None else None)
                for r in rows]
