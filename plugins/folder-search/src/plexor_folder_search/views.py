"""The results view (an MCP App) that hosts speaking MCP Apps show for search_content and find_documents.

The page is built from ``plugins/folder-search/app/`` by ``apps/build.mjs`` and shipped in the wheel as
``plexor_folder_search/apps/results.html``; nothing is fetched when it runs (see docs/apps.md). It
pages with the tools themselves and opens documents through the ``folders://`` resources.
"""

from __future__ import annotations

APP_URI = "ui://folder-search/results.html"


def read_app() -> str:
    """The results view's HTML: ranked passages with their matched terms, opened in their documents."""
    from importlib.resources import files

    return files("plexor_folder_search").joinpath("apps/results.html").read_text(encoding="utf-8")
