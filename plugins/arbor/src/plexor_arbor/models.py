"""The Arbor schema as peewee models, and its numbered migrations.

Imported only from ``plexor_register_models`` (peewee is a heavy import).
The models declare the schema, and the store's simple queries are written
with them; every query (peewee's or raw SQL) runs through
:class:`plexor_arbor.dataaccess.DataAccess` on the database object the kernel
opened for this plugin, so none depends on which database a model class
happens to be bound to.

Nodes carry two identities: ``id`` is the public UUID, ``seq`` an integer key
used for parent links, because walking integer keys in a recursive query is
several times faster than walking 36-character strings.
"""

from __future__ import annotations

from typing import Any

import peewee

__all__ = ["MODELS", "Node", "Owner", "Tree", "migration_1"]


class _Base(peewee.Model):
    class Meta:
        database = None  # bound by the kernel to the plugin's database


class Tree(_Base):
    id = peewee.CharField(max_length=36, primary_key=True)
    root_seq = peewee.BigIntegerField(null=True)
    head_seq = peewee.BigIntegerField(null=True)
    state = peewee.CharField(max_length=20, default="active", index=True)
    ref_count = peewee.IntegerField(default=0)
    scheduled_deletion_at = peewee.CharField(max_length=32, null=True)
    archived_at = peewee.CharField(max_length=32, null=True)
    created_at = peewee.CharField(max_length=32)
    updated_at = peewee.CharField(max_length=32)
    metadata = peewee.TextField(default="{}")

    class Meta:
        table_name = "arbor_tree"


class Node(_Base):
    seq = peewee.BigAutoField()
    parent_seq = peewee.BigIntegerField(null=True)
    id = peewee.CharField(max_length=36, unique=True)
    tree = peewee.ForeignKeyField(Tree, column_name="tree_id", on_delete="CASCADE", index=True)
    position = peewee.IntegerField(default=0)
    kind = peewee.CharField(max_length=10, default="text")
    role = peewee.CharField(max_length=64, null=True)
    content = peewee.TextField(null=True)
    handle = peewee.TextField(null=True)
    metadata = peewee.TextField(null=True)
    created_at = peewee.CharField(max_length=32)

    class Meta:
        table_name = "arbor_node"
        # Sibling order, and the index the subtree query walks down.
        indexes = ((("parent_seq", "position"), True),)


class Owner(_Base):
    tree = peewee.ForeignKeyField(Tree, column_name="tree_id", on_delete="CASCADE")
    owner_id = peewee.CharField(max_length=200)
    count = peewee.IntegerField(default=0)

    class Meta:
        table_name = "arbor_owner"
        primary_key = peewee.CompositeKey("tree", "owner_id")


MODELS = [Tree, Node, Owner]


def migration_1(database: Any) -> None:
    """Version 1: the tree, node and owner tables."""
    with database.bind_ctx(MODELS):
        database.create_tables(MODELS, safe=True)
