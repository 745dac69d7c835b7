"""Arbor's storage: every read and write of trees and nodes, through :class:`Store`.

:class:`Store` is assembled from parts a reader can find by name:

========================  ======================================================
:mod:`.dataaccess`        statements, named rows, transactions, bulk loads
:mod:`.rows`              the row types every query returns, and node dicts
:mod:`.checks`            what is accepted (ids, owners, metadata, texts, handles)
:mod:`.lookups`           a tree's row, a node's key, ids by key
:mod:`.trees`             create, read, list, metadata, the head
:mod:`.lifecycle`         claim, release, sweep
:mod:`.nodes`             create a node, append a chain, read nodes
:mod:`.paths`             context paths (paged), path ids, handles
:mod:`.subtrees`          the skeleton, and the drawing page by page
:mod:`.transfer`          export and import
========================  ======================================================

Rules the parts keep:

* a path (root to node) and a subtree each come from ONE recursive query;
* creating a node — the row, its position among its siblings, the tree's
  head — is one transaction, serialised per tree (``BEGIN IMMEDIATE`` on
  SQLite, ``SELECT ... FOR UPDATE`` on the tree row in PostgreSQL), so two
  server processes sharing a database never hand out the same position;
* timestamps are fixed-width UTC ISO-8601 strings, so they compare in SQL as
  text and need no conversion on the way out.
"""

from __future__ import annotations

from typing import Any

from plexor_arbor.checks import STATES, TreeInactive, iso_now
from plexor_arbor.lifecycle import LifecycleMixin
from plexor_arbor.nodes import NodesMixin, uuid4_batch
from plexor_arbor.paths import PathPage, PathsMixin
from plexor_arbor.subtrees import SubtreesMixin
from plexor_arbor.transfer import EXPORT_FORMAT, TransferMixin

__all__ = [
    "EXPORT_FORMAT",
    "STATES",
    "PathPage",
    "Store",
    "TreeInactive",
    "iso_now",
    "uuid4_batch",
]


class Store(TransferMixin, LifecycleMixin, NodesMixin, PathsMixin, SubtreesMixin):
    """Trees and nodes in one plugin database (SQLite or PostgreSQL).

    :param db: the peewee database the kernel opened for the plugin.
    """

    def __init__(self, db: Any) -> None:
        super().__init__(db)
