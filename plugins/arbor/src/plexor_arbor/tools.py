"""Arbor's MCP tools (the resource readers are in :mod:`plexor_arbor.resources`).

Every function here is registered by :mod:`plexor_arbor.plugin`; its
docstring is the description a model reads. They all work through the
:class:`~plexor_arbor.store.Store` that ``plexor_startup`` provided
(``ctx.service(Store)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NotRequired

# pydantic needs typing_extensions' TypedDict on Python < 3.12 to build the schema.
from typing_extensions import TypedDict

from plexor import Context, InvalidArgument, JSONObject, Result

if TYPE_CHECKING:  # pragma: no cover
    from plexor_arbor.store import Store

__all__ = ["TOOLS"]


class ExternalHandle(TypedDict):
    """A pointer to content kept elsewhere (a file, a document store, another server)."""

    # the docstrings below become the keys' descriptions; a plain dict is a pydantic ConfigDict
    __pydantic_config__ = {"use_attribute_docstrings": True}  # type: ignore[misc]

    source: str
    """where the content lives, e.g. "files" or another server's name."""
    identifier: str
    """what it is within the source, e.g. "report.pdf#p3"."""
    source_version: NotRequired[str | None]
    """which version of it, e.g. "2024-05-01" (null or left out: unversioned)."""
    metadata: NotRequired[JSONObject | None]
    """a JSON object written as a string, e.g. "{\\"pages\\": 3}"."""


def _store(ctx: Context) -> Store:
    from plexor_arbor.store import Store

    return ctx.service(Store)


def _changed(ctx: Context, tree_id: str, *, head: bool = False, node: str | None = None, listing: bool = False) -> None:
    """Tell subscribed clients which resources a write changed (and clients that list, when the listing did)."""
    plugin = ctx.plugin
    plugin.resource_updated(f"arbor://tree/{tree_id}")
    if head:
        plugin.resource_updated(f"arbor://tree/{tree_id}/head")
    if node:  # a new child changes its parent's "children"
        plugin.resource_updated(f"arbor://tree/{tree_id}/node/{node}")
    if listing:
        plugin.resource_list_changed()


# ------------------------------------------------------------------ trees
def tree_create(ctx: Context, metadata: JSONObject | None = None, owner_id: str = "system") -> dict[str, Any]:
    """Create a new conversation tree with an empty root node; the head starts at the root.

    Use this to start a conversation. Append messages with arbor_node_create_text
    (no ids needed: each new node continues from the head). The new tree holds
    one reference for ``owner_id``.
    Returns the tree: id, root, head, state, refs, timestamps and metadata.

    :param metadata: free metadata for the tree: a JSON object written as a string, e.g. "{\"title\": \"Trip planning\"}".
    :param owner_id: who holds the tree's first reference (release it with arbor_tree_release).
    """
    tree = _store(ctx).create_tree(metadata, owner_id)
    ctx.plugin.resource_list_changed()
    return tree


def tree_get(ctx: Context, tree_id: str) -> dict[str, Any]:
    """Get a tree's description: root and head node ids, state, reference counts per owner,
    scheduled deletion / archive times, metadata and node count.

    Works for active and scheduled-for-deletion trees; archived trees are read with
    arbor_tree_get_archived.

    :param tree_id: the tree's id (a UUID).
    """
    return _store(ctx).get_tree(tree_id)


def tree_get_skeleton(ctx: Context, tree_id: str) -> dict[str, Any]:
    """Get the shape of a tree without message contents: every node's id, parent, ordered
    children, kind (text or external) and role. Use it to find node ids cheaply.

    :param tree_id: the tree's id.
    """
    return _store(ctx).skeleton(tree_id)


def tree_list(
    ctx: Context,
    state: Literal["active", "scheduled_delete", "archived"] = "active",
    limit: int = 100,
    offset: int = 0,
) -> dict[str, Any]:
    """List trees in one state (default: active), oldest first, with their heads and references.

    Returns {"trees": [...], "total", "next_offset"}; pass next_offset back as offset for the next page.

    :param state: active, scheduled_delete or archived.
    :param limit: page size, 1-1000.
    :param offset: how many trees to skip (from next_offset).
    """
    return _store(ctx).list_trees(state, limit, offset)


def tree_list_scheduled(ctx: Context, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """List trees scheduled for deletion (no owner holds a reference any more), with the time each
    was scheduled. The sweeper archives them after the scheduled window; a claim rescues one.

    :param limit: page size, 1-1000.
    :param offset: how many trees to skip.
    """
    return _store(ctx).list_trees("scheduled_delete", limit, offset)


def tree_list_archived(ctx: Context, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """List archived trees (and only those), with the time each was archived. The sweeper purges
    them after the archive window; read one with arbor_tree_get_archived, restore it with arbor_tree_claim.

    :param limit: page size, 1-1000.
    :param offset: how many trees to skip.
    """
    return _store(ctx).list_trees("archived", limit, offset)


def tree_get_archived(ctx: Context, tree_id: str) -> dict[str, Any]:
    """Read a tree in any state, archived included: its description and every node (id, parent,
    data, metadata, created_at) in creation order. Use it to inspect an archived tree before
    deciding to restore it with arbor_tree_claim.

    :param tree_id: the tree's id.
    """
    doc = _store(ctx).export_tree(tree_id)
    return {"tree": doc["tree"], "nodes": doc["nodes"]}


def tree_update_metadata(ctx: Context, tree_id: str, metadata: JSONObject, merge: bool = False) -> dict[str, Any]:
    """Replace a tree's metadata, or merge keys into it with merge=true (a key set to null is removed).

    :param tree_id: the tree's id (must be active).
    :param metadata: the new metadata: a JSON object written as a string, e.g. "{\"title\": \"Trip\"}".
    :param merge: merge into the existing metadata instead of replacing it.
    """
    tree = _store(ctx).update_metadata(tree_id, metadata, merge)
    _changed(ctx, tree["id"], listing=True)  # the listing shows the title, and pinned trees first
    return tree


def tree_claim(ctx: Context, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
    """Add references to a tree for an owner. A tree scheduled for deletion or archived becomes
    active again. Returns the tree with its new reference counts and its previous_state.

    :param tree_id: the tree's id.
    :param owner_id: who holds the references (a session, a user, a job).
    :param count: how many references to add (at least 1).
    """
    tree = _store(ctx).claim(tree_id, owner_id, count)
    _changed(ctx, tree["id"], listing=tree.get("previous_state") != "active")
    return tree


def tree_release(ctx: Context, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
    """Release references an owner holds on a tree (never more than it holds). When no references
    remain, the tree is scheduled for deletion; the sweeper archives it later. Returns the tree.

    :param tree_id: the tree's id.
    :param owner_id: the owner giving references back.
    :param count: how many references to release (at least 1).
    """
    tree = _store(ctx).release(tree_id, owner_id, count)
    _changed(ctx, tree["id"], listing=tree["state"] != "active")
    return tree


def tree_get_head(ctx: Context, tree_id: str) -> dict[str, Any]:
    """Get the tree's head: the node the conversation continues from (the most recently created
    node unless moved with arbor_tree_set_head), with its data and ordered children.

    :param tree_id: the tree's id.
    """
    return _store(ctx).get_head(tree_id)


def tree_set_head(ctx: Context, tree_id: str, node_id: str) -> dict[str, Any]:
    """Move the tree's head to a node, so that the next node created without a parent continues
    from there (this is how a branch is started from an earlier message). Returns the new head node.

    :param tree_id: the tree's id (must be active).
    :param node_id: any node of the tree.
    """
    head = _store(ctx).set_head(tree_id, node_id)
    _changed(ctx, head["tree_id"], head=True)
    return head


def tree_render(
    ctx: Context,
    tree_id: str,
    node_id: str | None = None,
    max_depth: int | None = None,
    offset: int = 0,
    limit: int = 2000,
) -> Result:
    """Draw a tree (or the subtree under node_id) as text with box drawing, one line per node:
    the role as a prefix ("User: Hello"), long text cut to 57 characters plus "...", newlines
    shown as ↵ and other control characters escaped, external nodes as [source:identifier].
    A long chain of single replies is drawn as "↳ ..." lines without indenting further.
    Use it to show a conversation's branches. A big tree comes in pages: when next_offset is
    not null, call again with offset=next_offset for the following lines.

    :param tree_id: the tree's id.
    :param node_id: draw only the subtree under this node (default: the whole tree).
    :param max_depth: draw at most this many levels below the starting node (0 = the node alone).
    :param offset: lines of the drawing to skip (0 for the first page, then next_offset).
    :param limit: lines per page, 1-10000.
    """
    data = _store(ctx).render(tree_id, node_id, max_depth, offset=offset, limit=limit)
    more = data["next_offset"]
    guidance = [] if more is None else [
        f"Lines {offset + 1}-{more} of {data['total_lines']}: call arbor_tree_render again with offset={more} "
        "for the next page."]
    return Result(data, text=data["rendering"], guidance=guidance)


# ------------------------------------------------------------------ nodes
def node_create_text(
    ctx: Context,
    tree_id: str,
    content: str,
    parent: str | None = None,
    metadata: JSONObject | None = None,
) -> dict[str, Any]:
    """Append a text message to a tree. Without parent it continues from the tree's head, so a
    linear conversation needs no ids; with parent it starts a branch there. The head moves to the
    new node. Returns the node (id, parent, position among siblings, data, metadata, created_at).

    :param tree_id: the tree's id (must be active).
    :param content: the message text.
    :param parent: the node to answer (default: the head).
    :param metadata: a JSON object written as a string, e.g. "{\"role\": \"user\"}"; its "role" (system, user,
        assistant, tool...) is shown by arbor_tree_render.
    """
    node = _store(ctx).create_node(tree_id, content=content, parent=parent, metadata=metadata)
    _changed(ctx, node["tree_id"], head=True, node=node["parent"])
    return node


def node_create_external(
    ctx: Context,
    tree_id: str,
    handle: ExternalHandle,
    parent: str | None = None,
    metadata: JSONObject | None = None,
) -> dict[str, Any]:
    """Append a node that points at content kept elsewhere (a file, a document, another server's
    resource) instead of holding text. Like arbor_node_create_text it continues from the head
    unless parent is given, and moves the head. arbor_context_get_handles collects these.

    :param tree_id: the tree's id (must be active).
    :param handle: where the content is: source and identifier, optionally source_version and metadata (a JSON
        object written as a string).
    :param parent: the node to attach to (default: the head).
    :param metadata: a JSON object written as a string, e.g. "{\"role\": \"tool\"}".
    """
    node = _store(ctx).create_node(tree_id, handle=dict(handle), parent=parent, metadata=metadata)
    _changed(ctx, node["tree_id"], head=True, node=node["parent"])
    return node


def node_get(ctx: Context, tree_id: str, node_id: str) -> dict[str, Any]:
    """Get one node: its data, metadata, parent, position and ordered children ids.

    :param tree_id: the tree's id.
    :param node_id: the node's id.
    """
    return _store(ctx).get_node(tree_id, node_id)


def node_get_children(ctx: Context, tree_id: str, node_id: str) -> dict[str, Any]:
    """Get a node's children in creation order (the first reply first, later branches after).

    :param tree_id: the tree's id.
    :param node_id: the parent node's id.
    """
    return {"tree_id": tree_id, "node_id": node_id, "children": _store(ctx).children(tree_id, node_id)}


def node_get_parent(ctx: Context, tree_id: str, node_id: str) -> dict[str, Any]:
    """Get a node's parent node; {"parent": null} for the root.

    :param tree_id: the tree's id.
    :param node_id: the node's id.
    """
    return {"tree_id": tree_id, "node_id": node_id, "parent": _store(ctx).parent(tree_id, node_id)}


def node_get_path(ctx: Context, tree_id: str, node_id: str, limit: int = 100_000) -> dict[str, Any]:
    """Get the ids of the nodes from the root to a node, in order (root first, the node last).

    A path longer than limit comes in pages that end at the node, like arbor_context_get_path's:
    start_depth is the first id's depth, continue_from the node to ask for next (null at the root).

    :param tree_id: the tree's id.
    :param node_id: the node the path ends at.
    :param limit: at most this many ids (the ones nearest the node), 1-1000000.
    """
    if not 1 <= limit <= 1_000_000:
        raise InvalidArgument(f"limit must be between 1 and 1000000, got {limit}",
                              "Use at most 1000000 ids a page; continue_from leads to the part before.")
    page = _store(ctx).path_ids_page(tree_id, node_id, limit)
    return {"tree_id": tree_id, "node_id": node_id, "path": page.ids, "depth": page.depth,
            "start_depth": page.start_depth, "continue_from": page.continue_from}


# ---------------------------------------------------------------- context
def context_list_leaves(ctx: Context, tree_id: str) -> dict[str, Any]:
    """List the leaves of a tree (nodes without children: the end of each branch), in creation
    order. Each leaf is a conversation you could continue; get its context with arbor_context_get_path.

    :param tree_id: the tree's id.
    """
    leaves = _store(ctx).leaves(tree_id)
    return {"tree_id": tree_id, "leaves": leaves, "count": len(leaves)}


#: Characters of text and metadata in one page of a context path, at most (the node itself always comes).
PATH_MAX_CHARS = 4_000_000


def context_get_path(ctx: Context, tree_id: str, node_id: str | None = None, limit: int = 10_000) -> dict[str, Any]:
    """Get the conversation context for a node: the full nodes (data, metadata) from the root to it,
    in order. This is what to send to a model to continue from that node.

    A path longer than limit (or than about 4 million characters of text) comes in pages that
    end at the node: the result holds the nodes nearest it, start_depth is the first one's depth,
    and continue_from names the node to pass as node_id for the part before (null once the page
    starts at the root).

    :param tree_id: the tree's id.
    :param node_id: the node the context ends at (default: the tree's head).
    :param limit: at most this many nodes (the ones nearest the node), 1-100000.
    """
    if not 1 <= limit <= 100_000:
        raise InvalidArgument(f"limit must be between 1 and 100000, got {limit}",
                              "Use at most 100000 nodes a page; continue_from leads to the part before.")
    store = _store(ctx)
    if node_id is None:
        node_id = store.head_id(tree_id)
    page = store.path_page(tree_id, node_id, limit, PATH_MAX_CHARS)
    return {"tree_id": tree_id, "node_id": page.nodes[-1]["id"], "nodes": page.nodes, "depth": page.depth,
            "start_depth": page.start_depth, "continue_from": page.continue_from}


def context_get_handles(ctx: Context, tree_id: str, node_id: str | None = None) -> dict[str, Any]:
    """Get the external handles on the path from the root to a node, in path order: the outside
    content a model needs to fetch to have the whole context.

    :param tree_id: the tree's id.
    :param node_id: the node the path ends at (default: the tree's head).
    """
    store = _store(ctx)
    if node_id is None:
        node_id = store.head_id(tree_id)
    handles = store.handles(tree_id, node_id)
    return {"tree_id": tree_id, "node_id": node_id, "handles": handles, "count": len(handles)}


_RO = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
_W = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
_WI = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
_READS: tuple[Callable[..., Any], ...] = (
    tree_get, tree_get_skeleton, tree_list, tree_list_scheduled, tree_list_archived, tree_get_archived,
    tree_get_head, tree_render, node_get, node_get_children, node_get_parent, node_get_path,
    context_list_leaves, context_get_path, context_get_handles)
_WRITES: tuple[Callable[..., Any], ...] = (tree_create, tree_claim, node_create_text, node_create_external)
_IDEMPOTENT: tuple[Callable[..., Any], ...] = (tree_update_metadata, tree_set_head)
TOOLS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    *((f, _RO) for f in _READS),
    *((f, _W) for f in _WRITES),
    *((f, _WI) for f in _IDEMPOTENT),
    (tree_release, {**_W, "destructiveHint": True}),
]
