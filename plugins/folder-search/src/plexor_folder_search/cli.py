"""``plexor folder-search ...``: add, remove and list folders, index them, show status, search."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from plexor import PlexorError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor import Settings
    from plexor_folder_search.defaults import FolderSettings
    from plexor_folder_search.service import FolderService

NAME = "folder-search"


class InputError(click.ClickException):
    """An error the user fixes by changing the command line, a file given or the configuration (exit 2)."""

    exit_code = 2


def failure(text: str, exit_code: int = 1) -> click.ClickException:
    """A command's error: exit 1 when the operation failed or found nothing, 2 when the input must change."""
    return InputError(text) if exit_code == 2 else click.ClickException(text)


def cli_settings() -> Settings:
    """This plugin's settings as the server would see them, from the handle click carries in ``obj``."""
    try:
        settings: Settings = click.get_current_context().obj.settings
    except PlexorError as exc:
        raise failure(exc.render(), exc.exit_code) from exc
    return settings


def _config() -> FolderSettings:
    from plexor_folder_search.defaults import FolderSettings

    try:
        return FolderSettings.read(cli_settings())
    except PlexorError as exc:
        raise failure(exc.render(), exc.exit_code) from exc


def _service() -> FolderService:
    from plexor_folder_search.service import FolderService

    try:
        return FolderService(cli_settings()).open_as_is()
    except PlexorError as exc:
        raise failure(exc.render(), exc.exit_code) from exc


@click.group(NAME)
def group() -> None:
    """Search the documents in your folders: choose folders, index them, search from the terminal.

    Folders added here are stored in folders.json under Plexor's data directory and merged with
    [folder-search] folders from plexor.toml. A running server picks them up on its next rescan.
    """


def _folder_options(func: Any) -> Any:
    """The per-folder settings, shared by ``add`` and ``set``."""
    from plexor_folder_search.defaults import MODELS

    for option in reversed([
        click.option("--model", default=None, type=click.Choice(MODELS),
                     help="this folder's embedding model (default: the model setting)"),
        click.option("--include", "include", multiple=True, metavar="PATTERN",
                     help="index only files matching this gitignore-style pattern (repeatable)"),
        click.option("--exclude", "exclude", multiple=True, metavar="PATTERN",
                     help="also skip files matching this gitignore-style pattern (repeatable)"),
        click.option("--max-file-size", "max_file_size", type=click.IntRange(min=1), default=None, metavar="BYTES",
                     help="skip files larger than this (default: the max_file_size setting)"),
        click.option("--watch/--no-watch", "watch", default=None,
                     help="watch for changes (default: the watch setting); unwatched folders are rescanned "
                          "every rescan_interval"),
    ]):
        func = option(func)
    return func


def _entry_options(model: str | None, include: tuple[str, ...], exclude: tuple[str, ...],
                   max_file_size: int | None, watch: bool | None) -> dict[str, Any]:
    from plexor_folder_search.folders import pattern_problem

    out: dict[str, Any] = {}
    for key, patterns in (("include", include), ("exclude", exclude)):
        for pattern in patterns:
            problem = pattern_problem(pattern)
            if problem:
                raise click.BadParameter(f"{pattern!r} is not a valid pattern: {problem}; write gitignore-style "
                                         "patterns such as '*.md' or 'docs/'", param_hint=f"--{key}")
        if patterns:
            out[key] = list(patterns)
    for key, value in (("model", model), ("max_file_size", max_file_size), ("watch", watch)):
        if value is not None:
            out[key] = value
    return out


@group.command("add")
@click.argument("path", type=click.Path(file_okay=False, dir_okay=True, path_type=Path))
@click.option("--name", "name", default=None, help="a short name for the folder (default: its directory name)")
@_folder_options
def add(path: Path, name: str | None, model: str | None, include: tuple[str, ...], exclude: tuple[str, ...],
        max_file_size: int | None, watch: bool | None) -> None:
    """Make the folder PATH searchable, optionally with its own model, patterns, size limit and watching."""
    from plexor_folder_search.folders import load_folders, read_cli_folders, real_path, save_cli_folders

    config = _config()
    root = real_path(path.expanduser())
    if not root.is_dir():
        raise click.UsageError(f"{path} is not a directory")
    existing = load_folders(list(config.folders), config.data_dir)
    options = _entry_options(model, include, exclude, max_file_size, watch)
    for spec in existing:
        if spec.root == root:
            _already_added(spec, name, options)
            return
        if name and spec.name == name:
            raise failure(f"the name {name!r} is taken by {spec.root}; pick another with --name", 2)
    items = read_cli_folders(config.data_dir)
    entry: dict[str, Any] = {"path": str(root)}
    if name:
        entry["name"] = name
    entry.update(options)
    items.append(entry)
    save_cli_folders(config.data_dir, items)
    final = next((s.name for s in load_folders(list(config.folders), config.data_dir)
                  if s.root == root), name or root.name)
    click.echo(f"Added {final!r}: {root}")
    click.echo(f"Index it now with `plexor folder-search index {final}` (a running server indexes it on its next rescan).")


def _already_added(spec: Any, name: str | None, options: dict[str, Any]) -> None:
    """``add`` of a folder that is already there: fine (exit 0) unless the options ask for other settings (exit 2)."""
    current = spec.overrides()
    differ = {key: value for key, value in options.items() if current.get(key) != value}
    if name and name != spec.name:
        raise click.UsageError(f"{spec.root} is already a folder, named {spec.name!r} (from {spec.source}); a folder "
                               "cannot be renamed: `plexor folder-search remove` it and add it again with --name")
    if differ:
        now = ", ".join(f"{key}={json.dumps(current.get(key))}" for key in differ)
        fix = (f"`plexor folder-search set {spec.name}` with the options" if spec.source == "cli"
               else "its table in [folder-search] folders in plexor.toml (it comes from there)")
        raise click.UsageError(f"{spec.root} is already a folder, named {spec.name!r}, with other settings ({now}); "
                               f"to change them, use {fix}")
    click.echo(f"{spec.root} is already added, as {spec.name!r} (from {spec.source}); nothing to do.")


@group.command("set")
@click.argument("folder")
@_folder_options
@click.option("--reset", "reset", multiple=True, type=click.Choice(["model", "include", "exclude", "max_file_size",
                                                                    "watch"]),
              help="go back to the global setting for this key (repeatable)")
def set_cmd(folder: str, model: str | None, include: tuple[str, ...], exclude: tuple[str, ...],
            max_file_size: int | None, watch: bool | None, reset: tuple[str, ...]) -> None:
    """Change the settings of FOLDER (a name or path added with `add`).

    A new --model re-embeds only this folder, in the background: a running server applies it on its next
    rescan (every rescan_interval), otherwise at its next start or `index`; status shows the progress.
    """
    from plexor_folder_search.defaults import MODELS
    from plexor_folder_search.folders import load_folders, read_cli_folders, real_path, save_cli_folders

    config = _config()
    try:
        specs = load_folders(list(config.folders), config.data_dir, models=MODELS)
    except PlexorError as exc:
        raise failure(exc.render(), exc.exit_code) from exc
    wanted = real_path(Path(folder).expanduser())
    spec = next((s for s in specs if s.name == folder or s.root == wanted), None)
    if spec is None:
        names = ", ".join(s.name for s in specs) or "none"
        raise click.ClickException(f"no folder {folder!r}; folders: {names}")
    if spec.source == "config":
        raise failure(f"{spec.name!r} comes from [folder-search] folders in plexor.toml; set its options in its "
                      "table there", 2)
    changes = _entry_options(model, include, exclude, max_file_size, watch)
    if not changes and not reset:
        raise click.UsageError("nothing to change: give --model, --include, --exclude, --max-file-size, "
                               "--watch/--no-watch or --reset KEY")
    items = read_cli_folders(config.data_dir)
    for item in items:
        if real_path(Path(item["path"]).expanduser()) == spec.root:
            for key in reset:
                item.pop(key, None)
            item.update(changes)
    save_cli_folders(config.data_dir, items)
    click.echo(f"Updated {spec.name!r}: " + (json.dumps(changes) if changes else "") +
               (f" reset {', '.join(reset)}" if reset else ""))
    click.echo("A running server applies it on its next rescan (every rescan_interval seconds).")


@group.command("remove")
@click.argument("folder")
def remove(folder: str) -> None:
    """Stop searching FOLDER (a name or path) and delete its index; the files themselves are untouched."""
    from plexor_folder_search.folders import load_folders, read_cli_folders, real_path, save_cli_folders

    config = _config()
    data_dir = config.data_dir
    specs = load_folders(list(config.folders), data_dir)
    wanted = real_path(Path(folder).expanduser())
    spec = next((s for s in specs if s.name == folder or s.root == wanted), None)
    if spec is None:
        names = ", ".join(s.name for s in specs) or "none"
        raise click.ClickException(f"no folder {folder!r}; folders: {names}")
    if spec.source == "config":
        raise failure(f"{spec.name!r} comes from [folder-search] folders in plexor.toml; remove it there", 2)
    items = [i for i in read_cli_folders(data_dir) if real_path(Path(i["path"]).expanduser()) != spec.root]
    save_cli_folders(data_dir, items)
    index = data_dir / "indexes" / spec.index_name
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(index) + suffix)
        if p.exists():
            p.unlink()
    click.echo(f"Removed {spec.name!r} ({spec.root}) and its index.")


@group.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_cmd(as_json: bool) -> None:
    """List the searchable folders."""
    service = _service()
    try:
        data = service.list_folders()
    finally:
        service.stop()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if not data["folders"]:
        click.echo("No folders yet. Add one with `plexor folder-search add PATH`.")
    for f in data["folders"]:
        click.echo(f"{f['name']:<20} {f.get('documents', 0):>7} documents  {f['path']}  ({f['source']})")


@group.command("index")
@click.argument("folder", required=False)
@click.option("--force", is_flag=True, help="forget the index and rebuild it from scratch")
def index(folder: str | None, force: bool) -> None:
    """Index FOLDER (a name or path; default: every folder), showing a progress bar.

    Only new and changed files are read; unchanged ones are skipped by their size, time and fingerprint.
    """
    service = _service()
    try:
        try:
            targets = [service.folder(folder)] if folder else list(service.folders.values())
        except PlexorError as exc:
            raise failure(exc.render(), exc.exit_code) from exc
        if not targets:
            raise click.ClickException("no folders to index; add one with `plexor folder-search add PATH`")
        for st in targets:
            bar: Any = None
            state = {"done": 0}

            def progress(done: int, total: int, message: str, st: Any = st, state: dict[str, int] = state) -> None:
                nonlocal bar
                if bar is None and total:
                    bar = click.progressbar(length=total, label=f"{st.name}", file=sys.stderr, show_pos=True)
                    bar.__enter__()
                    state["done"] = 0
                if bar is not None:
                    step = min(done, bar.length) - state["done"]
                    if step > 0:
                        bar.update(step)
                        state["done"] += step
                    if done >= bar.length:
                        bar.__exit__(None, None, None)
                        bar = None

            report = service.index_folder(st, progress=progress, force=force)
            if bar is not None:
                bar.__exit__(None, None, None)
            if report is None:
                raise click.ClickException(f"indexing {st.name} failed: {st.error}")
            r = report.as_dict()
            click.echo(f"{st.name}: {r['indexed']} indexed, {r['unchanged']} unchanged, {r['moved']} moved, "
                       f"{r['deleted']} deleted, {r['skipped']} skipped, {r['errors']} errors in {r['seconds']} s")
    finally:
        service.stop()


@group.command("status")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def status(as_json: bool) -> None:
    """Show each folder's index: documents, chunks, size, skipped files by reason; and the model."""
    service = _service()
    try:
        info = service.server_info()
        examples = service.skipped_examples()
    finally:
        service.stop()
    if as_json:
        info["skipped_examples"] = examples
        click.echo(json.dumps(info, indent=2))
        return
    m = info["model"]
    click.echo(f"model: {m.get('name', m['setting'])}" + ("" if m.get("available", True) else f" (unavailable: {m.get('reason')}; {m.get('fix')})"))
    click.echo(f"search: {info['search']['mode']}, fusion weight {info['search']['fusion_weight']}")
    for f in info["folders"]:
        click.echo(f"\n{f['name']}  {f['path']}")
        if f.get("settings"):
            click.echo("  settings: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in f["settings"].items()))
        if f.get("state") not in (None, "ready"):
            click.echo(f"  state: {f['state']}" + (f", {f['message']}" if f.get("message") else "")
                       + (f" ({f['done']} of {f['total']})" if f.get("total") else ""))
        if not f.get("reachable", True):
            since = f.get("rescan", {}).get("unreachable_since")
            click.echo("  unreachable" + (f" since {since}" if since else "") + "; its index is kept")
        if "error" in f:
            click.echo(f"  error: {f['error']}")
            continue
        click.echo(f"  {f.get('documents', 0)} documents, {f.get('chunks', 0)} chunks, index {f.get('index_bytes', 0) / 1e6:.1f} MB")
        for reason, n in sorted(f.get("skipped", {}).items()):
            ex = "; ".join(examples.get(f["name"], {}).get(reason, []))
            click.echo(f"  skipped {n:>5} {reason}: {ex}")
    for w in info["warnings"]:
        click.echo(f"warning: {w}")


@group.command("search")
@click.argument("query", required=False, default="")
@click.option("--folder", default=None, help="folder name or path (default: the only folder)")
@click.option("--exact", "exact", multiple=True, help="a phrase that must appear (repeatable)")
@click.option("--limit", default=10, show_default=True, help="number of results")
@click.option("--documents", is_flag=True, help="rank whole documents instead of passages")
@click.option("--cursor", default=None, metavar="TOKEN",
              help="the next page: the cursor the previous page printed (same query and options)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def search(query: str, folder: str | None, exact: tuple[str, ...], limit: int, documents: bool,
           cursor: str | None, as_json: bool) -> None:
    """Search the indexed folders for QUERY (by meaning and keywords) from the terminal.

    A page ends with the command that prints the next one (the same search with --cursor).
    """
    from plexor_folder_search.render import render_hits

    if not query and not exact:
        raise click.UsageError("give a QUERY, --exact PHRASE, or both")
    service = _service()
    try:
        if documents:
            data = service.find_documents(folder, query, limit, cursor)
        else:
            data = service.search_content(folder, query or None, list(exact), limit, cursor)
    except PlexorError as exc:
        if cursor and "continuation_token" in exc.message:
            raise click.BadParameter(
                f"{cursor!r} is not a cursor of this search; pass it exactly as the previous page printed it, "
                "with the same QUERY, --folder, --exact and --documents (or leave --cursor out for the first page)",
                param_hint="--cursor") from None
        raise failure(exc.render(), exc.exit_code) from exc
    finally:
        service.stop()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    token = data.get("continuation_token")
    more = None
    if token:
        more = "More: " + next_page_command(query, folder, exact, limit, documents, token)
    click.echo(render_hits(data, doc_level=documents, more=more))


def next_page_command(query: str, folder: str | None, exact: tuple[str, ...], limit: int, documents: bool,
                      cursor: str) -> str:
    """The command line that prints the page after this one: the same search with ``--cursor``."""
    import shlex

    words = ["plexor", NAME, "search"]
    if folder:
        words += ["--folder", folder]
    for phrase in exact:
        words += ["--exact", phrase]
    if limit != 10:
        words += ["--limit", str(limit)]
    if documents:
        words.append("--documents")
    words += ["--cursor", cursor]
    if query:
        words += (["--"] if query.startswith("-") else []) + [query]  # a query like "-v" is not an option
    return shlex.join(words)
