"""Trees: creating, reading, listing, metadata, the head, resource listings and completions."""

from __future__ import annotations

import json
import uuid
from typing import Any

from plexor import InvalidArgument
from plexor_arbor.checks import STATES, canonical_id, check_metadata, check_owner, iso_now, loads
from plexor_arbor.lookups import TREE_COLUMNS, StoreBase
from plexor_arbor.rows import TreeRow

__all__ = ["TreesMixin"]

_ID_CHARS = "0123456789abcdef-"


class TreesMixin(StoreBase):
    """The tree-level operations of :class:`~plexor_arbor.store.Store`."""

    def create_tree(self, metadata: dict[str, Any] | None = None, owner_id: str = "system") -> dict[str, Any]:
        """A new active tree with its root node; ``owner_id`` holds its first reference."""
        owner = check_owner(owner_id)
        meta = check_metadata(metadata, "metadata")
        tid = str(uuid.uuid4())
        root_id = str(uuid.uuid4())
        now = iso_now()
        with self.data.write():
            self.data.execute("INSERT INTO arbor_tree (id, state, ref_count, created_at, updated_at, metadata) "
                              "VALUES (?, 'active', 1, ?, ?, ?)", (tid, now, now, json.dumps(meta, ensure_ascii=False)))
            root_seq = self.data.value(
                "INSERT INTO arbor_node (parent_seq, id, tree_id, position, kind, role, content, handle, metadata, "
                "created_at) VALUES (NULL, ?, ?, 0, 'text', NULL, '', NULL, NULL, ?) RETURNING seq", (root_id, tid, now))
            self.data.execute("UPDATE arbor_tree SET root_seq = ?, head_seq = ? WHERE id = ?", (root_seq, root_seq, tid))
            self.data.execute("INSERT INTO arbor_owner (tree_id, owner_id, count) VALUES (?, ?, 1)", (tid, owner))
        return self.get_tree(tid)

    def head_id(self, tree_id: str) -> str:
        """The id of the tree's head node (the tree must not be archived); cheaper than :meth:`get_tree`."""
        head_seq = self._tree_row(tree_id).head_seq
        return self._ids_of([head_seq])[head_seq] if head_seq is not None else ""

    def get_tree(self, tree_id: str, *, allow_archived: bool = False) -> dict[str, Any]:
        from plexor_arbor.models import Node

        row = self._tree_row(tree_id, allow_archived=allow_archived)
        out = self._tree_dict(row)
        out["node_count"] = self.data.bound(Node.select().where(Node.tree == row.id)).count()
        return out

    def list_trees(self, state: str = "active", limit: int = 100, offset: int = 0) -> dict[str, Any]:
        from plexor_arbor.models import Tree

        if state not in STATES:
            raise InvalidArgument(f"state {state!r} is not a tree state", f"Use one of: {', '.join(STATES)}.")
        if limit < 1 or limit > 1000:
            raise InvalidArgument(f"limit {limit} is out of range", "Use a limit between 1 and 1000.")
        if offset < 0:
            raise InvalidArgument(f"offset {offset} is negative", "Use 0 for the first page.")
        total = self.data.bound(Tree.select().where(Tree.state == state)).count()
        rows = self.data.rows(
            TreeRow, f"SELECT {TREE_COLUMNS} FROM arbor_tree WHERE state = ? ORDER BY created_at, id LIMIT ? OFFSET ?",
            (state, limit, offset))
        ids = self._ids_of([s for r in rows for s in (r.root_seq, r.head_seq)])
        owners: dict[str, dict[str, int]] = {r.id: {} for r in rows}
        if rows:
            for tid, owner, count in self.data.execute(
                    f"SELECT tree_id, owner_id, count FROM arbor_owner WHERE tree_id IN ({self.data.marks(len(rows))}) "
                    "ORDER BY owner_id", [r.id for r in rows]).fetchall():
                owners[tid][owner] = count
        trees = [self._tree_dict(r, owners=owners[r.id], ids=ids) for r in rows]
        nxt = offset + len(rows)
        return {"state": state, "total": total, "trees": trees, "next_offset": nxt if nxt < total else None}

    def update_metadata(self, tree_id: str, metadata: dict[str, Any], merge: bool = False) -> dict[str, Any]:
        meta = check_metadata(metadata, "metadata")
        with self.data.write():
            self.data.lock_tree(canonical_id(tree_id, "tree_id"))
            row = self._tree_row(tree_id, need_active=True)
            if merge:
                current = loads(row.metadata)
                for key, value in meta.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
                meta = current
            self.data.execute("UPDATE arbor_tree SET metadata = ?, updated_at = ? WHERE id = ?",
                              (json.dumps(meta, ensure_ascii=False), iso_now(), row.id))
        return self.get_tree(row.id)

    # ------------------------------------------------------------------- head
    def get_head(self, tree_id: str) -> dict[str, Any]:
        row = self._tree_row(tree_id)
        assert row.head_seq is not None  # set when the tree is created
        out = self._node_dicts([self._node_row(row.head_seq)], row.id)[0]
        out["children"] = self._children_ids(row.head_seq)
        return out

    def set_head(self, tree_id: str, node_id: str) -> dict[str, Any]:
        tid = canonical_id(tree_id, "tree_id")
        with self.data.write():
            self.data.lock_tree(tid)
            self._tree_row(tid, need_active=True)
            seq, _ = self._node_ref(tid, node_id)
            self.data.execute("UPDATE arbor_tree SET head_seq = ?, updated_at = ? WHERE id = ?", (seq, iso_now(), tid))
        return self.get_head(tid)

    # --------------------------------------------------- listings, completion
    def complete_tree_ids(self, prefix: str, limit: int = 100) -> list[str]:
        """Ids of active trees starting with ``prefix`` (any case), most recently changed first, at most ``limit``.

        A prefix that no tree id could start with (anything but hex digits and
        dashes, or longer than an id) matches nothing.
        """
        import peewee

        from plexor_arbor.models import Tree

        prefix = prefix.strip().lower()
        if len(prefix) > 36 or prefix.strip(_ID_CHARS):
            return []
        query = (Tree.select(Tree.id)
                 .where((Tree.state == "active") & (peewee.fn.substr(Tree.id, 1, len(prefix)) == prefix))
                 .order_by(Tree.updated_at.desc(), Tree.id).limit(limit))
        return [str(tid) for tid in self.data.column(query)]

    def resource_listing(self, limit: int) -> list[dict[str, Any]]:
        """``resources/list`` entries, each tree and its head, for at most ``limit`` active trees.

        Pinned trees (metadata ``"pinned": true``) come first, most recently created first, then
        the most recently created others; older trees stay readable through the templates. The
        listing is bounded so that a database with thousands of trees does not flood clients
        that turn every listed resource into something for a model to choose from.
        """
        if limit <= 0:
            return []
        select = ("SELECT t.id, t.metadata, h.id FROM arbor_tree t LEFT JOIN arbor_node h ON h.seq = t.head_seq "
                  "WHERE t.state = 'active'")
        order = " ORDER BY t.created_at DESC, t.id DESC LIMIT ?"
        # The LIKE only narrows the candidates; the JSON decides.
        pinned = [r for r in self.data.execute(select + " AND t.metadata LIKE ?" + order,
                                               ('%"pinned"%', limit)).fetchall() if loads(r[1]).get("pinned") is True]
        chosen = {r[0] for r in pinned}
        recent = [r for r in self.data.execute(select + order, (limit + len(pinned),)).fetchall()
                  if r[0] not in chosen]
        out = []
        for tid, meta, head in (pinned + recent)[:limit]:
            described = loads(meta)
            title = described.get("title") or described.get("name")
            label = f"{title} ({tid[:8]})" if isinstance(title, str) and title else f"tree {tid}"
            out.append({"uri": f"arbor://tree/{tid}", "name": f"Arbor {label}",
                        "description": "The tree's metadata, state, references, root and head."})
            out.append({"uri": f"arbor://tree/{tid}/head", "name": f"Arbor {label}: head",
                        "description": f"The node the conversation continues from (currently {head})."})
        return out

