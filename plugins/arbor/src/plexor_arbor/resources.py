"""Arbor's resources: the readers of ``arbor://tree/...``, the listing and the ``{tree_id}`` completion.

Registered by :mod:`plexor_arbor.plugin`; like the tools they work through the
:class:`~plexor_arbor.store.Store` that ``plexor_startup`` provided.
"""

from __future__ import annotations

from typing import Any

from plexor import Context
from plexor_arbor.tools import _store

__all__ = ["RESOURCE_TEMPLATES", "complete_tree_id", "list_resources"]


def read_tree(ctx: Context, tree_id: str) -> dict[str, Any]:
    """A tree's description: root, head, state, references, timestamps and metadata."""
    return _store(ctx).get_tree(tree_id, allow_archived=True)


def read_node(ctx: Context, tree_id: str, node_id: str) -> dict[str, Any]:
    """One node of a tree: data, metadata, parent, position and ordered children."""
    return _store(ctx).get_node(tree_id, node_id)


def read_head(ctx: Context, tree_id: str) -> dict[str, Any]:
    """The node a tree's conversation continues from."""
    return _store(ctx).get_head(tree_id)


def list_resources(ctx: Context) -> list[dict[str, Any]]:
    return _store(ctx).resource_listing(int(ctx.settings["listed_trees"]))


async def complete_tree_id(value: str, ctx: Context) -> list[str]:
    """``completion/complete`` for ``{tree_id}``: active tree ids starting with what was typed (any case),
    most recently changed first, at most 100."""
    import anyio

    return await anyio.to_thread.run_sync(_store(ctx).complete_tree_ids, value)


RESOURCE_TEMPLATES = [
    ("arbor://tree/{tree_id}", read_tree, "Arbor tree"),
    ("arbor://tree/{tree_id}/node/{node_id}", read_node, "Arbor node"),
    ("arbor://tree/{tree_id}/head", read_head, "Arbor tree head"),
]
