"""``plexor arbor ...``: sweep, export and import from a terminal.

Each command works through the plugin's handle: the same configuration and
the same database (SQLite or PostgreSQL) as the server, with no kernel started.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = ["arbor", "with_store"]


class InputError(click.ClickException):
    """An error the user fixes by changing the command line, a file given or the configuration (exit 2)."""

    exit_code = 2


def failure(text: str, exit_code: int = 1) -> click.ClickException:
    """A command's error: exit 1 when the operation failed or found nothing, 2 when the input must change."""
    return InputError(text) if exit_code == 2 else click.ClickException(text)


def with_store(func: Callable[[Any, Any], Any]) -> Any:
    """Run ``func(store, settings)`` on the plugin's database, reached through the handle in click's ``obj``."""
    from plexor import PlexorError
    from plexor_arbor.store import Store

    plugin = click.get_current_context().obj
    try:
        return func(Store(plugin.database), plugin.settings)
    except PlexorError as exc:
        raise failure(exc.render(), exc.exit_code) from None


@click.group(name="arbor")
def arbor() -> None:
    """Arbor conversation trees: sweep the lifecycle, export and import trees as JSON."""


@arbor.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def sweep(as_json: bool) -> None:
    """Archive trees scheduled longer than scheduled_window; purge trees archived longer than archive_window."""

    def run(store: Any, settings: Any) -> dict[str, Any]:
        result: dict[str, Any] = store.sweep(settings["scheduled_window"], settings["archive_window"])
        result["scheduled_window"] = settings["scheduled_window"]
        result["archive_window"] = settings["archive_window"]
        return result

    result = with_store(run)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"archived {len(result['archived'])} tree(s), purged {len(result['purged'])} tree(s)")
    for tid in result["archived"]:
        click.echo(f"  archived {tid}")
    for tid in result["purged"]:
        click.echo(f"  purged   {tid}")


@arbor.command(name="export")
@click.argument("tree_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file (default: stdout).")
def export_cmd(tree_id: str, output: Path | None) -> None:
    """Write the tree TREE_ID (any state) as JSON: the tree and every node in creation order."""
    document = with_store(lambda store, settings: store.export_tree(tree_id))
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"exported tree {document['tree']['id']} ({len(document['nodes'])} nodes) to {output}", err=True)


@arbor.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--new-ids", is_flag=True, help="Give the tree and its nodes fresh ids (to copy a tree that exists here).")
def import_cmd(file: Path, new_ids: bool) -> None:
    """Load a tree from FILE (written by `plexor arbor export`; '-' reads stdin)."""
    try:
        raw = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except OSError as exc:
        raise failure(f"cannot read {file}: {exc.strerror}", 2) from None
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise failure(f"{file} is not JSON ({exc}); use a file written by `plexor arbor export`", 2) from None
    tree = with_store(lambda store, settings: store.import_tree(document, new_ids=new_ids))
    click.echo(f"imported tree {tree['id']} ({tree['node_count']} nodes, state {tree['state']})")
