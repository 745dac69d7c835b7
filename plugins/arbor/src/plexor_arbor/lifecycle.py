"""A tree's lifetime: references per owner (claim, release) and the sweep that archives and purges."""

from __future__ import annotations

import datetime
import json
from typing import Any

from plexor import InvalidArgument
from plexor_arbor.checks import canonical_id, check_count, check_owner, iso, iso_now
from plexor_arbor.trees import TreesMixin

__all__ = ["LifecycleMixin"]


class LifecycleMixin(TreesMixin):
    """Reference counting and sweeping, for :class:`~plexor_arbor.store.Store`."""

    def _held(self, tree_id: str, owner: str) -> int | None:
        from plexor_arbor.models import Owner

        query = Owner.select(Owner.count).where((Owner.tree == tree_id) & (Owner.owner_id == owner))
        held = self.data.bound(query).scalar()
        return None if held is None else int(held)

    def claim(self, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
        """Add ``count`` references for ``owner_id``; a scheduled or archived tree becomes active again."""
        from plexor_arbor.models import Owner, Tree

        owner = check_owner(owner_id)
        check_count(count)
        tid = canonical_id(tree_id, "tree_id")
        with self.data.write():
            self.data.lock_tree(tid)
            previous = self._tree_row(tid, allow_archived=True).state
            if self._held(tid, owner) is None:
                self.data.bound(Owner.insert(tree=tid, owner_id=owner, count=count)).execute()
            else:
                self.data.bound(Owner.update(count=Owner.count + count)
                                .where((Owner.tree == tid) & (Owner.owner_id == owner))).execute()
            self.data.bound(Tree.update(ref_count=Tree.ref_count + count, state="active", scheduled_deletion_at=None,
                                        archived_at=None, updated_at=iso_now()).where(Tree.id == tid)).execute()
        out = self.get_tree(tid)
        out["previous_state"] = previous
        return out

    def release(self, tree_id: str, owner_id: str, count: int = 1) -> dict[str, Any]:
        """Drop ``count`` of ``owner_id``'s references; at zero references the tree is scheduled for deletion."""
        from plexor_arbor.models import Owner, Tree

        owner = check_owner(owner_id)
        check_count(count)
        tid = canonical_id(tree_id, "tree_id")
        with self.data.write():
            self.data.lock_tree(tid)
            row = self._tree_row(tid, allow_archived=True)
            held = self._held(tid, owner) or 0
            if count > held:
                owners = self._owners(tid)
                raise InvalidArgument(
                    f"owner {owner!r} holds {held} reference{'s' if held != 1 else ''} to tree {tid!r} "
                    f"and cannot release {count}",
                    (f"Release at most {held}. " if held else "")
                    + f"Current owners: {json.dumps(owners) if owners else 'none'} (ref_count {row.ref_count}).",
                    data={"owner_id": owner, "held": held, "requested": count, "owners": owners},
                )
            mine = (Owner.tree == tid) & (Owner.owner_id == owner)
            if held == count:
                self.data.bound(Owner.delete().where(mine)).execute()
            else:
                self.data.bound(Owner.update(count=Owner.count - count).where(mine)).execute()
            now = iso_now()
            remaining = row.ref_count - count
            if remaining <= 0:
                change = Tree.update(ref_count=0, state="scheduled_delete", scheduled_deletion_at=now, updated_at=now)
            else:
                change = Tree.update(ref_count=remaining, updated_at=now)
            self.data.bound(change.where(Tree.id == tid)).execute()
        return self.get_tree(tid, allow_archived=True)

    def sweep(self, scheduled_window: float, archive_window: float,
              now: datetime.datetime | None = None) -> dict[str, Any]:
        """Archive trees scheduled longer than ``scheduled_window`` seconds; purge trees archived longer than
        ``archive_window`` seconds. Returns the ids of both."""
        from plexor_arbor.models import Node, Owner, Tree

        moment = now or datetime.datetime.now(datetime.UTC)
        stamp = iso(moment)
        archive_before = iso(moment - datetime.timedelta(seconds=scheduled_window))
        purge_before = iso(moment - datetime.timedelta(seconds=archive_window))
        with self.data.write():
            # Purge first, so a tree archived in this sweep waits its full archive window.
            purged = [str(tid) for tid in self.data.column(
                Tree.select(Tree.id).where((Tree.state == "archived") & (Tree.archived_at <= purge_before))
                .order_by(Tree.id))]
            for chunk in _chunks(purged, 500):
                self.data.bound(Owner.delete().where(Owner.tree.in_(chunk))).execute()
                self.data.bound(Node.delete().where(Node.tree.in_(chunk))).execute()
                self.data.bound(Tree.delete().where(Tree.id.in_(chunk))).execute()
            archived = [str(tid) for tid in self.data.column(
                Tree.select(Tree.id).where((Tree.state == "scheduled_delete")
                                           & (Tree.scheduled_deletion_at <= archive_before))
                .order_by(Tree.id))]
            for chunk in _chunks(archived, 500):
                self.data.bound(Tree.update(state="archived", archived_at=stamp, updated_at=stamp)
                                .where(Tree.id.in_(chunk))).execute()
        return {"archived": archived, "purged": purged, "swept_at": stamp}


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
