"""Export and import: a whole tree as one JSON document (``plexor-arbor/1``), across databases.

An import checks the whole document before it writes anything, and every
problem is reported with what to do — a malformed document, a NUL character
(which PostgreSQL cannot store, so no backend accepts it), ids that exist
already — never as a database traceback.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from plexor import InvalidArgument
from plexor_arbor.checks import STATES, canonical_id, check_handle, check_text, dumps, iso_now, role_of
from plexor_arbor.lookups import NODE_COLUMNS
from plexor_arbor.nodes import NODE_INSERT
from plexor_arbor.rows import NodeRow, node_dict
from plexor_arbor.trees import TreesMixin

__all__ = ["EXPORT_FORMAT", "TransferMixin"]

EXPORT_FORMAT = "plexor-arbor/1"
_USE_EXPORT = "Use a file written by `plexor arbor export`."


class TransferMixin(TreesMixin):
    """Export and import, for :class:`~plexor_arbor.store.Store`."""

    def export_tree(self, tree_id: str) -> dict[str, Any]:
        """The whole tree as a JSON-able document (any state), nodes in creation order."""
        tree = self._tree_row(tree_id, allow_archived=True)
        rows = self.data.rows(NodeRow, f"SELECT {NODE_COLUMNS} FROM arbor_node n WHERE n.tree_id = ? ORDER BY n.seq",
                              (tree.id,))
        ids = {r.seq: r.id for r in rows}
        nodes = []
        for r in rows:
            node = node_dict(r, tree.id, ids.get(r.parent_seq) if r.parent_seq is not None else None)
            del node["tree_id"], node["position"]
            nodes.append(node)
        return {"format": EXPORT_FORMAT, "tree": self._tree_dict(tree, ids=ids), "nodes": nodes}

    def import_tree(self, document: dict[str, Any], *, new_ids: bool = False) -> dict[str, Any]:
        """Load a document written by :meth:`export_tree`; the ids are kept unless ``new_ids``."""
        tree, nodes = _check_document(document)
        tid = str(uuid.uuid4()) if new_ids else canonical_id(tree.get("id"), "tree.id")
        mapping: dict[str, str] = {}
        for node in nodes:
            mapping[node["id"]] = str(uuid.uuid4()) if new_ids else canonical_id(node["id"], "node id")
        if not new_ids:
            if self.data.value("SELECT 1 FROM arbor_tree WHERE id = ?", (tid,)) is not None:
                raise InvalidArgument(f"a tree with id {tid!r} already exists",
                                      "Import with new ids (`plexor arbor import FILE --new-ids`), "
                                      f"or purge the existing tree first (`plexor arbor purge {tid}`).")
            clash = self._existing_node_id(list(mapping.values()))
            if clash:
                raise InvalidArgument(f"node id {clash!r} already exists in this database",
                                      "Import with new ids (`plexor arbor import FILE --new-ids`).")
        root_id, head_id = tree.get("root"), tree.get("head")
        if root_id not in mapping or head_id not in mapping:
            raise InvalidArgument("the document's tree.root and tree.head must name nodes of the document", _USE_EXPORT)
        owners = (tree.get("refs") or {}).get("owners") or {}
        if not isinstance(owners, dict) or not all(isinstance(k, str) and isinstance(v, int) and v > 0
                                                   for k, v in owners.items()):
            raise InvalidArgument("tree.refs.owners must map owner ids to positive counts", _USE_EXPORT)
        for owner in owners:
            check_text(owner, "an owner id in tree.refs.owners")
        state = tree.get("state", "active")
        if state not in STATES:
            raise InvalidArgument(f"tree.state {state!r} is not a tree state", f"Use one of: {', '.join(STATES)}.")
        now = iso_now()
        try:
            with self.data.write():
                self.data.execute(
                    "INSERT INTO arbor_tree (id, state, ref_count, scheduled_deletion_at, archived_at, created_at, "
                    "updated_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (tid, state, sum(owners.values()), tree.get("scheduled_deletion_at"), tree.get("archived_at"),
                     tree.get("created_at") or now, tree.get("updated_at") or now,
                     json.dumps(tree.get("metadata") or {}, ensure_ascii=False)))
                first = self.data.reserve(len(nodes))
                rows, seqs = _node_rows(nodes, mapping, tid, first, now)
                self.data.insert_many("arbor_node", (*NODE_INSERT, "handle"), rows)
                self.data.execute("UPDATE arbor_tree SET root_seq = ?, head_seq = ? WHERE id = ?",
                                  (seqs[root_id], seqs[head_id], tid))
                if owners:
                    self.data.insert_many("arbor_owner", ("tree_id", "owner_id", "count"),
                                          [(tid, o, c) for o, c in owners.items()])
        except _database_errors() as exc:
            if "Operational" in type(exc).__name__ or "Interface" in type(exc).__name__:
                raise  # the database is down or busy: the plugin's error guidance says so
            raise InvalidArgument(
                f"the database refused the document: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}",
                "Nothing was imported. Check the document against a file written by `plexor arbor export` "
                "(ids, timestamps, texts); if it holds ids that exist here, import with --new-ids.",
            ) from None
        self.data.after_bulk(len(rows))
        return self.get_tree(tid, allow_archived=True)

    def _existing_node_id(self, ids: list[str]) -> str | None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found = self.data.value(f"SELECT id FROM arbor_node WHERE id IN ({self.data.marks(len(chunk))})", chunk)
            if found:
                return str(found)
        return None


def _database_errors() -> tuple[type[Exception], ...]:
    """What peewee and the drivers raise when a database refuses a statement (bulk loads use the driver's
    cursor directly, so its own exceptions come through unwrapped)."""
    import sqlite3

    import peewee

    errors: tuple[type[Exception], ...] = (peewee.DatabaseError, sqlite3.DatabaseError)
    try:
        import psycopg2
    except ImportError:  # pragma: no cover - SQLite only
        return errors
    return (*errors, psycopg2.DatabaseError)


def _node_rows(nodes: list[dict[str, Any]], mapping: dict[str, str], tid: str, first: int,
               now: str) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """The insert rows (NODE_INSERT's columns, then the handle) and each document id's new key."""
    seqs: dict[str, int] = {}
    positions: dict[int | None, int] = {}
    rows: list[tuple[Any, ...]] = []
    for i, node in enumerate(nodes):
        seq = first + i
        old_parent = node.get("parent")
        parent_seq: int | None
        if old_parent is None:
            parent_seq = None
        elif old_parent in seqs:
            parent_seq = seqs[old_parent]
        else:
            raise InvalidArgument(f"node {node['id']!r} names parent {old_parent!r}, which does not come "
                                  "before it in the document", _USE_EXPORT)
        seqs[node["id"]] = seq
        pos = positions.get(parent_seq, 0) if parent_seq is not None else 0
        positions[parent_seq] = pos + 1
        data, meta = node["data"], node.get("metadata") or {}
        if data["type"] == "external":
            kind, text, hdl = "external", None, json.dumps(check_handle(data.get("handle")), ensure_ascii=False)
        else:
            kind, text, hdl = "text", data.get("content", ""), None
        rows.append((seq, parent_seq, mapping[node["id"]], tid, pos, kind, role_of(meta), text, dumps(meta),
                     node.get("created_at") or now, hdl))
    return rows, seqs


def _check_document(document: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The tree and the nodes of an export, every field an import writes checked first."""
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise InvalidArgument(f"not an Arbor export (expected \"format\": \"{EXPORT_FORMAT}\")",
                              "Use a file written by `plexor arbor export TREE_ID`.")
    tree, nodes = document.get("tree"), document.get("nodes")
    if not isinstance(tree, dict) or not isinstance(nodes, list) or not nodes:
        raise InvalidArgument("the export has no tree object or no nodes", _USE_EXPORT)
    if tree.get("metadata") is not None and not isinstance(tree["metadata"], dict):
        raise InvalidArgument("tree.metadata must be an object", _USE_EXPORT)
    for key in ("created_at", "updated_at", "scheduled_deletion_at", "archived_at"):
        if tree.get(key) is not None and not isinstance(tree[key], str):
            raise InvalidArgument(f"tree.{key} must be a timestamp string, got {tree[key]!r}", _USE_EXPORT)
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("id"), str) or not isinstance(node.get("data"), dict):
            raise InvalidArgument(f"malformed node in the export: {str(node)[:80]}", _USE_EXPORT)
        nid, data = node["id"], node["data"]
        if data.get("type") not in ("text", "external"):
            raise InvalidArgument(f"node {nid!r} has data.type {data.get('type')!r}",
                                  "Node data is {\"type\": \"text\", ...} or {\"type\": \"external\", ...}.")
        if data["type"] == "text":
            content = data.get("content", "")
            if not isinstance(content, str):
                raise InvalidArgument(f"node {nid!r} has content {str(content)[:40]!r}, not a string", _USE_EXPORT)
            check_text(content, f"node {nid!r} content")
        meta = node.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise InvalidArgument(f"node {nid!r} has metadata that is not an object", _USE_EXPORT)
        role = (meta or {}).get("role")
        if isinstance(role, str):
            check_text(role, f"node {nid!r} metadata.role")
        if node.get("created_at") is not None and not isinstance(node["created_at"], str):
            raise InvalidArgument(f"node {nid!r} has created_at {node['created_at']!r}, not a timestamp string",
                                  _USE_EXPORT)
    return tree, nodes
