"""The tree viewer (an MCP App): its ``ui://`` page and the app-only tool that feeds it.

The page is built from ``plugins/arbor/app/`` by ``apps/build.mjs`` and shipped in the wheel as
``plexor_arbor/apps/tree.html``; nothing is fetched when it runs (see docs/apps.md).
"""

from __future__ import annotations

from typing import Any

from plexor import Context

APP_URI = "ui://arbor/tree.html"
EXCERPT_MAX = 400


def read_app() -> str:
    """The tree viewer's HTML: the conversation tree drawn as a tree, for hosts that show MCP Apps."""
    from importlib.resources import files

    return files("plexor_arbor").joinpath("apps/tree.html").read_text(encoding="utf-8")


def tree_view(ctx: Context, tree_id: str, excerpt: int = 80) -> dict[str, Any]:
    """Everything the tree viewer draws in one call: the tree (root, head, state) and every node's id,
    parent, ordered children, kind, role and the first characters of its content.

    :param tree_id: the tree's id.
    :param excerpt: characters of each node's content to include, 0-400.
    """
    from plexor import InvalidArgument

    if not 0 <= excerpt <= EXCERPT_MAX:
        raise InvalidArgument(f"excerpt must be 0-{EXCERPT_MAX}, got {excerpt}", "Pass excerpt=80, for example.")
    from plexor_arbor.tools import _store

    return _store(ctx).skeleton(tree_id, excerpt=excerpt)
