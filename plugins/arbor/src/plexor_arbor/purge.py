"""Purging one tree for good, now: the ``arbor_tree_purge`` tool and ``plexor arbor purge``.

The sweeper purges archived trees once their archive window has passed; this
is the way to do it at once, for one tree (to free its id for an import, or to
drop a conversation that must not be kept). An active tree is refused unless
the caller says ``force``: some owner still holds a reference to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from plexor import Context, InvalidArgument, PlexorError

if TYPE_CHECKING:  # pragma: no cover
    from plexor_arbor.store import Store

__all__ = ["PURGE_TOOLS", "purge_command", "purge_tree", "tree_purge"]

_PURGEABLE = ("archived", "scheduled_delete")


def purge_tree(store: Store, tree_id: str, *, force: bool = False) -> dict[str, Any]:
    """Delete the tree ``tree_id``, its nodes and its owners in one transaction; returns what was removed.

    Refuses an active tree unless ``force``, naming the owners that still hold it.
    """
    from plexor_arbor.checks import canonical_id
    from plexor_arbor.models import Node, Owner, Tree

    tid = canonical_id(tree_id, "tree_id")
    with store.data.write():
        store.data.lock_tree(tid)
        row = store._tree_row(tid, allow_archived=True)
        if row.state not in _PURGEABLE and not force:
            owners = store._owners(tid)
            held = ", ".join(f"{o} ({n})" for o, n in sorted(owners.items())) or "none"
            raise InvalidArgument(
                f"tree {tid!r} is {row.state}, so it is not purged without force (owners holding it: {held})",
                "Release its references with arbor_tree_release until it is scheduled for deletion, then purge it; "
                "or purge it anyway with force=true (`plexor arbor purge TREE_ID --force`).",
                data={"tree_id": tid, "state": row.state, "owners": owners},
            )
        nodes = int(store.data.value("SELECT COUNT(*) FROM arbor_node WHERE tree_id = ?", (tid,)) or 0)
        store.data.bound(Owner.delete().where(Owner.tree == tid)).execute()
        store.data.bound(Node.delete().where(Node.tree == tid)).execute()
        store.data.bound(Tree.delete().where(Tree.id == tid)).execute()
    return {"purged": tid, "previous_state": row.state, "nodes_deleted": nodes}


async def tree_purge(ctx: Context, tree_id: str, force: bool = False, confirm: bool = False) -> dict[str, Any]:
    """Delete a tree and all its nodes for good, now, instead of waiting for the sweeper.

    This cannot be undone (export it first with `plexor arbor export TREE_ID` to keep a copy), so the
    user confirms it: a client that supports elicitation is asked "Purge tree X (N nodes)?" and the tree
    goes only if the user accepts and confirms; with a client that cannot be asked, pass confirm=true
    once the user has agreed. Only trees that are archived or scheduled for deletion are purged; an
    active tree is refused unless force=true, because an owner still holds it. Returns the purged id,
    the state it was in and how many nodes were deleted.

    :param tree_id: the tree's id (a UUID).
    :param force: purge even an active tree that owners still hold.
    :param confirm: the user agreed to purge it; needed only when the client cannot ask the user itself.
    """
    import anyio

    from plexor_arbor.store import Store

    store = ctx.service(Store)
    tree = await anyio.to_thread.run_sync(lambda: store.get_tree(tree_id, allow_archived=True))
    if tree["state"] not in _PURGEABLE and not force:
        # Refused without a question (the store says why and how), as `plexor arbor purge` does.
        await anyio.to_thread.run_sync(lambda: purge_tree(store, tree_id, force=False))
    tid = tree["id"]
    if ctx.can_ask("elicitation"):  # the user answers, not the model: confirm=true does not skip the question
        got = await ctx.elicit(f"Purge tree {tid} ({tree['node_count']} nodes)? This cannot be undone.",
                               {"confirm": bool}, key=f"purge-{tid}")
        if got.get("action") != "accept" or (got.get("content") or {}).get("confirm") is not True:
            answer = "did not confirm it" if got.get("action") == "accept" else f"answered {got.get('action')!r}"
            raise PlexorError(f"tree {tid!r} was not purged: the user {answer}; nothing was deleted",
                              "Purge it only if the user asks for it again.",
                              data={"tree_id": tid, "action": got.get("action")})
    elif not confirm:
        raise InvalidArgument(
            f"purging tree {tid!r} ({tree['node_count']} nodes) cannot be undone, and this client cannot ask "
            "the user to confirm it",
            "Ask the user; if they agree, call arbor_tree_purge again with confirm=true.",
            data={"tree_id": tid, "state": tree["state"], "node_count": tree["node_count"]},
        )
    result = await anyio.to_thread.run_sync(lambda: purge_tree(store, tree_id, force=force))
    announce_gone(ctx.plugin, [result["purged"]], listed=result["previous_state"] == "active")
    return result


def announce_gone(plugin: Any, tree_ids: list[str], *, listed: bool) -> None:
    """Tell subscribers that these trees left (archived or purged); the listing changed if any was listed."""
    for tid in tree_ids:
        plugin.resource_updated(f"arbor://tree/{tid}")
        plugin.resource_updated(f"arbor://tree/{tid}/head")
    if listed:
        plugin.resource_list_changed()


PURGE_TOOLS: list[tuple[Any, dict[str, Any]]] = [
    (tree_purge, {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}),
]


@click.command(name="purge")
@click.argument("tree_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Purge even an active tree that owners still hold.")
def purge_command(tree_id: str, yes: bool, force: bool) -> None:
    """Delete the tree TREE_ID and all its nodes for good (archived or scheduled trees; --force for active ones).

    Asks first unless --yes. Export the tree first (`plexor arbor export TREE_ID -o FILE`) to keep a copy.
    """
    from plexor_arbor.cli import with_store

    def describe(store: Any, settings: Any) -> dict[str, Any]:
        return dict(store.get_tree(tree_id, allow_archived=True))

    tree = with_store(describe)
    if tree["state"] not in _PURGEABLE and not force:
        # The store refuses it too; saying so before the question spares a pointless prompt.
        with_store(lambda store, settings: purge_tree(store, tree_id, force=False))
    if not yes:
        click.confirm(f"Purge tree {tree['id']} ({tree['state']}, {tree['node_count']} nodes) for good?",
                      abort=True, err=True)
    result = with_store(lambda store, settings: purge_tree(store, tree_id, force=force))
    click.echo(f"purged tree {result['purged']} ({result['previous_state']}, {result['nodes_deleted']} nodes)")
