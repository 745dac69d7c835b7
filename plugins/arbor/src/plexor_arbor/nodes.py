"""Nodes: creating one, appending a chain in bulk, and reading a node, its children, parent and the leaves.

Creating a node — the row, its position among its siblings, the tree's head —
is one transaction, serialised per tree, so two server processes sharing a
database never hand out the same position.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from typing import Any

from plexor import InvalidArgument
from plexor_arbor.checks import canonical_id, check_handle, check_metadata, check_text, dumps, iso_now, role_of
from plexor_arbor.lookups import NODE_COLUMNS, StoreBase
from plexor_arbor.rows import NodeRow, node_dict

__all__ = ["NODE_INSERT", "NodesMixin", "uuid4_batch"]

#: The columns a bulk insert of nodes fills, in the order of its row tuples.
NODE_INSERT = ("seq", "parent_seq", "id", "tree_id", "position", "kind", "role", "content", "metadata", "created_at")

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


class MetadataEncoder:
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


class NodesMixin(StoreBase):
    """Node creation and single-node reads, for :class:`~plexor_arbor.store.Store`."""

    def _next_position(self, parent_seq: int) -> int:
        return int(self.data.value("SELECT COALESCE(MAX(position) + 1, 0) FROM arbor_node WHERE parent_seq = ?",
                                   (parent_seq,)))

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
        meta = check_metadata(metadata, "metadata")
        text: str | None
        if handle is not None:
            kind, text, hdl = "external", None, json.dumps(check_handle(handle), ensure_ascii=False)
        else:
            if not isinstance(content, str):
                raise InvalidArgument(f"content must be a string, got {content!r}", "Pass the message text.")
            kind, text, hdl = "text", check_text(content, "content"), None
        nid = str(uuid.uuid4())
        now = iso_now()
        with self.data.write():
            self.data.lock_tree(tid)
            tree = self._tree_row(tid, need_active=True)
            if parent is None:
                assert tree.head_seq is not None  # set when the tree is created
                parent_seq = tree.head_seq
                parent_id = self._ids_of([parent_seq]).get(parent_seq)
            else:
                parent_seq, parent_id = self._node_ref(tid, parent, "parent")
            row = NodeRow(0, parent_seq, nid, self._next_position(parent_seq), kind, role_of(meta), text, hdl,
                          dumps(meta), now)
            seq = self.data.value(
                "INSERT INTO arbor_node (parent_seq, id, tree_id, position, kind, role, content, handle, metadata, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (parent_seq, nid, tid, row.position, kind, row.role, text, hdl, row.metadata, now))
            self.data.execute("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (seq, now, tid))
        return node_dict(row._replace(seq=seq), tid, parent_id)

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
        with self.data.write():
            self.data.lock_tree(tid)
            tree = self._tree_row(tid, need_active=True)
            if parent is None:
                assert tree.head_seq is not None  # set when the tree is created
                parent_seq = tree.head_seq
            else:
                parent_seq = self._node_ref(tid, parent, "parent").seq
            position = self._next_position(parent_seq)
            first = self.data.reserve(len(items))
            rows: list[tuple[Any, ...]] = []
            prev = parent_seq
            seq = first
            encode = MetadataEncoder()
            ids = uuid4_batch(len(items))
            for nid, (content, meta) in zip(ids, items, strict=True):
                if type(content) is not str:
                    raise InvalidArgument(f"item {seq - first} has content {content!r}, not a string",
                                          "Pass (text, metadata) pairs.")
                if "\x00" in content:
                    check_text(content, f"item {seq - first} content")
                # The tuple's order is NODE_INSERT's.
                if meta:
                    role = meta.get("role")
                    rows.append((seq, prev, nid, tid, position, "text",
                                 check_text(role[:64], "metadata.role") if type(role) is str else None,
                                 content, encode(meta), now))
                else:
                    rows.append((seq, prev, nid, tid, position, "text", None, content, None, now))
                prev = seq
                seq += 1
                position = 0
            self.data.insert_many("arbor_node", NODE_INSERT, rows)
            self.data.execute("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (prev, now, tid))
        self.data.after_bulk(len(rows))
        return {"tree_id": tid, "count": len(rows), "first": ids[0], "last": ids[-1]}

    # ------------------------------------------------------------------ reads
    def get_node(self, tree_id: str, node_id: str) -> dict[str, Any]:
        tid = self._tree_row(tree_id).id
        seq, _ = self._node_ref(tid, node_id)
        node = self._node_dicts([self._node_row(seq)], tid)[0]
        node["children"] = self._children_ids(seq)
        return node

    def children(self, tree_id: str, node_id: str) -> list[dict[str, Any]]:
        tid = self._tree_row(tree_id).id
        seq, nid = self._node_ref(tid, node_id)
        rows = self.data.rows(NodeRow, f"SELECT {NODE_COLUMNS} FROM arbor_node n WHERE n.parent_seq = ? "
                                       "ORDER BY n.position", (seq,))
        return [node_dict(r, tid, nid) for r in rows]

    def parent(self, tree_id: str, node_id: str) -> dict[str, Any] | None:
        tid = self._tree_row(tree_id).id
        seq, _ = self._node_ref(tid, node_id)
        row = self.data.row(NodeRow, f"SELECT {NODE_COLUMNS} FROM arbor_node n JOIN arbor_node c "
                                     "ON c.parent_seq = n.seq WHERE c.seq = ?", (seq,))
        return None if row is None else self._node_dicts([row], tid)[0]

    def leaves(self, tree_id: str) -> list[dict[str, Any]]:
        """Nodes without children (the ends of each branch), in creation order."""
        tid = self._tree_row(tree_id).id
        rows = self.data.rows(
            NodeRow, f"SELECT {NODE_COLUMNS} FROM arbor_node n WHERE n.tree_id = ? AND NOT EXISTS "
                     "(SELECT 1 FROM arbor_node c WHERE c.parent_seq = n.seq) ORDER BY n.seq", (tid,))
        return self._node_dicts(rows, tid)
