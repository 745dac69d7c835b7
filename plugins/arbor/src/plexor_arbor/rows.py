"""The rows arbor reads, named: every query hands back one of these, never a bare tuple.

Each row type lists its columns once (``COLUMNS``), and the SQL that reads it
is written from that list, so a column cannot move without its name moving
with it. The node dictionaries the tools return are built here too, in one
place (:func:`node_dict`).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = [
    "HandleRow",
    "LabelRow",
    "NodeRef",
    "NodeRow",
    "PathNodeRow",
    "PathRow",
    "ShapeRow",
    "SubtreeRow",
    "TreeRow",
    "columns",
    "node_dict",
]


def columns(row_type: type[tuple[Any, ...]], alias: str = "") -> str:
    """The row type's columns as a SELECT list, each prefixed with ``alias.`` when given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in row_type._fields)  # type: ignore[attr-defined]


class NodeRef(NamedTuple):
    """A node found by its id: its key and its canonical id."""

    seq: int
    id: str


class TreeRow(NamedTuple):
    """One ``arbor_tree`` row."""

    id: str
    root_seq: int | None
    head_seq: int | None
    state: str
    ref_count: int
    scheduled_deletion_at: str | None
    archived_at: str | None
    created_at: str
    updated_at: str
    metadata: str | None


class NodeRow(NamedTuple):
    """One ``arbor_node`` row (all but its tree id, which the caller already knows)."""

    seq: int
    parent_seq: int | None
    id: str
    position: int
    kind: str
    role: str | None
    content: str | None
    handle: str | None
    metadata: str | None
    created_at: str


class SubtreeRow(NamedTuple):
    """A node of a subtree and its depth below the subtree's first node (what :meth:`Store.subtree` returns)."""

    seq: int
    parent_seq: int | None
    id: str
    position: int
    kind: str
    role: str | None
    content: str | None
    handle: str | None
    depth: int


class ShapeRow(NamedTuple):
    """A node's place in a subtree, without its text: what the drawing's layout needs."""

    seq: int
    parent_seq: int | None
    position: int
    depth: int


class LabelRow(NamedTuple):
    """What one drawn line shows: the start of the text (``content`` holds at most its first
    :data:`plexor_arbor.render.FETCH` characters; ``longer`` says whether there was more)."""

    seq: int
    id: str
    kind: str
    role: str | None
    content: str | None
    longer: bool
    handle: str | None


class HandleRow(NamedTuple):
    """An external node on a path: its id, its handle (JSON text) and its role."""

    id: str
    handle: str
    role: str | None


class PathNodeRow(NamedTuple):
    """A node on a path read one row per node, with its distance from the path's last node."""

    id: str
    position: int
    kind: str
    content: str | None
    handle: str | None
    metadata: str | None
    created_at: str
    up: int


class PathRow(NamedTuple):
    """A path root → node read as ONE row: the node count, then one string per column (see :mod:`paths`)."""

    size: int
    ids: str
    created: str
    metas: str
    bodies: str
    odd: str | None
    top: str | None
    root: str | None


def node_dict(row: NodeRow, tree_id: str, parent_id: str | None) -> dict[str, Any]:
    """The node as the tools return it."""
    if row.kind == "external":
        data: dict[str, Any] = {"type": "external", "handle": json.loads(row.handle or "{}")}
    else:
        data = {"type": "text", "content": row.content or ""}
    return {
        "id": row.id,
        "tree_id": tree_id,
        "parent": parent_id,
        "position": row.position,
        "data": data,
        "metadata": json.loads(row.metadata) if row.metadata else {},
        "created_at": row.created_at,
    }
