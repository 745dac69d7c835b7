"""Subtrees: the skeleton of a tree, and its drawing, page by page.

A subtree comes from ONE recursive query walking down the parent links. The
drawing reads it in two steps: the shape of the whole subtree (keys, parents,
positions, depths: a few dozen bytes a node), then, for the lines of the
requested page only, the start of each text (:data:`~plexor_arbor.render.FETCH`
characters) and its role. A page of a drawing thus costs memory in proportion
to what it shows, however long its texts are.
"""

from __future__ import annotations

from typing import Any

from plexor import InvalidArgument
from plexor_arbor.lookups import StoreBase
from plexor_arbor.render import FETCH, draw_page, label, layout, root_label
from plexor_arbor.rows import LabelRow, ShapeRow, SubtreeRow, TreeRow

__all__ = ["RENDER_LIMIT", "RENDER_MAX_CHARS", "SubtreesMixin"]

#: Lines of a drawing per page by default, and at most.
RENDER_LIMIT = 2_000
RENDER_LIMIT_MAX = 10_000
#: Characters of a drawing per page at most (the reply carries the drawing twice, as text and as data).
RENDER_MAX_CHARS = 400_000

_DOWN = ("WITH RECURSIVE down(seq, depth) AS ("
         " SELECT seq, 0 FROM arbor_node WHERE seq = ?"
         " UNION ALL"
         " SELECT n.seq, down.depth + 1 FROM arbor_node n JOIN down ON n.parent_seq = down.seq{limit})")
_SHAPE = ("WITH RECURSIVE down(seq, parent_seq, position, depth) AS ("
          " SELECT seq, parent_seq, position, 0 FROM arbor_node WHERE seq = ?"
          " UNION ALL"
          " SELECT n.seq, n.parent_seq, n.position, down.depth + 1 FROM arbor_node n"
          " JOIN down ON n.parent_seq = down.seq{limit})"
          " SELECT seq, parent_seq, position, depth FROM down ORDER BY parent_seq, position")
_LABELS = (f"SELECT seq, id, kind, role, substr(content, 1, {FETCH}), length(content) > {FETCH}, "
           "substr(handle, 1, 65536) FROM arbor_node WHERE {among}")


class SubtreesMixin(StoreBase):
    """Subtree reads and drawings, for :class:`~plexor_arbor.store.Store`."""

    def subtree(self, tree_id: str, node_id: str | None = None, max_depth: int | None = None,
                *, allow_archived: bool = False) -> tuple[TreeRow, list[SubtreeRow]]:
        """``(tree_row, rows)``: the subtree under ``node_id`` (default: the root) from ONE recursive query.

        With ``max_depth`` the query stops one level below it, so a drawing can say what was left out.
        """
        tree = self._tree_row(tree_id, allow_archived=allow_archived)
        start = tree.root_seq if node_id is None else self._node_ref(tree.id, node_id).seq
        params: list[Any] = [start]
        if max_depth is not None:
            params.append(int(max_depth))
        rows = self.data.rows(
            SubtreeRow,
            _DOWN.format(limit="" if max_depth is None else " WHERE down.depth <= ?")
            + " SELECT n.seq, n.parent_seq, n.id, n.position, n.kind, n.role, n.content, n.handle, down.depth"
              " FROM down JOIN arbor_node n ON n.seq = down.seq", params)
        return tree, rows

    def skeleton(self, tree_id: str, excerpt: int | None = None) -> dict[str, Any]:
        """The shape of the tree: every node's id, parent, children, kind and role; with ``excerpt``, also the
        first ``excerpt`` characters of its content (a handle's for an external node) and its length."""
        tree, rows = self.subtree(tree_id)
        ids = {r.seq: r.id for r in rows}
        kids: dict[int, list[tuple[int, str]]] = {}
        for r in rows:
            if r.parent_seq is not None:
                kids.setdefault(r.parent_seq, []).append((r.position, r.id))
        nodes = []
        for r in sorted(rows, key=lambda r: r.seq):
            node: dict[str, Any] = {
                "id": r.id,
                "parent": ids.get(r.parent_seq) if r.parent_seq is not None else None,
                "children": [nid for _, nid in sorted(kids.get(r.seq, []))],
                "kind": r.kind,
                "role": r.role,
            }
            if excerpt is not None:
                text = (r.content if r.kind == "text" else r.handle) or ""
                node.update(excerpt=text[:excerpt], length=len(text))
            nodes.append(node)
        out = self._tree_dict(tree, ids=ids)
        out["node_count"] = len(nodes)
        return {"tree": out, "nodes": nodes}

    def render(self, tree_id: str, node_id: str | None = None, max_depth: int | None = None, *,
               offset: int = 0, limit: int = RENDER_LIMIT, max_chars: int = RENDER_MAX_CHARS) -> dict[str, Any]:
        """One page of the drawing of the tree (or of the subtree under ``node_id``).

        Returns the tree, root, head and start ids, the drawing (``rendering``), the nodes drawn, and the
        paging: ``offset``, ``limit``, ``next_offset`` (``None`` on the last page) and ``total_lines``.
        """
        if max_depth is not None and max_depth < 0:
            raise InvalidArgument(f"max_depth must be 0 or more, got {max_depth}", "Leave it out to draw every level.")
        if offset < 0:
            raise InvalidArgument(f"offset must be 0 or more, got {offset}",
                                  "Use 0 for the first page, then the next_offset a page returned.")
        if not 1 <= limit <= RENDER_LIMIT_MAX:
            raise InvalidArgument(f"limit must be between 1 and {RENDER_LIMIT_MAX}, got {limit}",
                                  f"Use at most {RENDER_LIMIT_MAX} lines a page; next_offset gives the next page.")
        tree = self._tree_row(tree_id)
        assert tree.root_seq is not None and tree.head_seq is not None  # set when the tree is created
        start = tree.root_seq if node_id is None else self._node_ref(tree.id, node_id).seq
        params: list[Any] = [start] if max_depth is None else [start, max_depth]
        shape = self.data.stream(ShapeRow, _SHAPE.format(limit="" if max_depth is None else " WHERE down.depth <= ?"),
                                 params)
        root_seq = tree.root_seq
        page = draw_page(layout(shape, start, max_depth, ordered=True), lambda seqs: self._labels(seqs, root_seq),
                         offset=offset, limit=limit, max_chars=max_chars)
        ids = self._ids_of([tree.root_seq, tree.head_seq, start])
        return {
            "tree_id": tree.id,
            "root": ids.get(tree.root_seq),
            "head": ids.get(tree.head_seq),
            "start": ids.get(start),
            "nodes_drawn": page.drawn,
            "max_depth": max_depth,
            "rendering": page.text,
            "offset": offset,
            "limit": limit,
            "next_offset": page.next_offset,
            "total_lines": page.total_lines,
        }

    def _labels(self, seqs: list[int], root_seq: int) -> dict[int, str]:
        """The text of each of these nodes' lines."""
        out: dict[int, str] = {}
        for among, params in self.data.among("seq", seqs):
            for r in self.data.rows(LabelRow, _LABELS.format(among=among), params):
                out[r.seq] = (root_label(r.seq == root_seq, r.kind, r.role, r.content)
                              or label(r.kind, r.role, r.content, r.handle, more=bool(r.longer)))
        return out
