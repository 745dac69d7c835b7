"""Which folders are searchable (chosen by the user only) and safe path resolution inside them.

Folders come from ``[folder-search] folders`` in ``plexor.toml`` (paths, or
tables ``{path = "...", name = "...", model = "...", ...}``, also written as
``[[folder-search.folders]]``) and from ``folders.json`` in the plugin's data
directory, which ``plexor folder-search add/remove`` edit. A table may override
the global ``model``, ``include``, ``exclude``, ``max_file_size`` and ``watch``
for its folder (:data:`FOLDER_KEYS`). Tools never add folders.

A folder that does not exist right now (an unmounted drive) is kept: its index
stays searchable and the service retries it on a schedule.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from plexor import ConfigError, InvalidArgument, NotFound

__all__ = ["FOLDER_KEYS", "FolderSpec", "folders_file", "load_folders", "parse_entry", "plain_text", "real_path",
           "resolve_inside", "save_cli_folders", "slug"]

#: The keys a folder's table may have: its path and name, and the settings it may override.
FOLDER_KEYS = ("path", "name", "model", "include", "exclude", "max_file_size", "watch")


@dataclass(frozen=True)
class FolderSpec:
    name: str
    root: Path  # resolved, absolute
    source: str  # "config" or "cli"
    #: Per-folder overrides; ``None`` (or empty) means the global setting.
    model: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()  # added to the global exclude patterns
    max_file_size: int | None = None
    watch: bool | None = None

    def overrides(self) -> dict[str, Any]:
        """The settings this folder sets itself (for status and the CLI)."""
        out: dict[str, Any] = {}
        for key in FOLDER_KEYS[2:]:
            value = getattr(self, key)
            if value is not None and value != ():
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    @property
    def index_name(self) -> str:
        digest = hashlib.sha1(str(self.root).encode("utf-8")).hexdigest()[:10]
        return f"{slug(self.name)}-{digest}.sqlite3"


def plain_text(value: str, what: str) -> str:
    """``value`` if it can be encoded as UTF-8; JSON can carry unpaired surrogates (``"\\ud800"``), which cannot."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} contains an unpaired surrogate (U+D800 to U+DFFF), which is not text",
                              f"Pass {what} as ordinary text.") from None
    return value


def real_path(path: Path) -> Path:
    """``path`` with every link resolved, as far as they resolve.

    Unlike ``Path.resolve()`` on Python 3.11 this never raises on a link loop (``RuntimeError``), so a
    loop is refused or reported like any other path that leads nowhere.
    """
    return Path(os.path.realpath(path))


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "folder"


def folders_file(data_dir: Path) -> Path:
    return data_dir / "folders.json"


def read_cli_folders(data_dir: Path) -> list[dict[str, Any]]:
    path = folders_file(data_dir)
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}",
                          "Fix or delete that file; re-add folders with `plexor folder-search add PATH`.") from exc
    items = data.get("folders", []) if isinstance(data, dict) else []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("path"), str)]


def save_cli_folders(data_dir: Path, items: list[dict[str, Any]]) -> None:
    path = folders_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"folders": items}, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _patterns(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} = {value!r} in {where} must be a list of patterns",
                          f'Write {key} = ["*.md", "docs/**"] (gitignore-style patterns).')
    for pattern in value:
        problem = pattern_problem(pattern)
        if problem:
            raise ConfigError(f"the {key} pattern {pattern!r} in {where} is not valid: {problem}",
                              "Write gitignore-style patterns such as '*.md', 'docs/' or 'build/**'.")
    return tuple(value)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable gitignore-style pattern, or ``None``."""
    if not pattern.strip():
        return "it is empty"
    if "\x00" in pattern:
        return "it contains a NUL character"
    try:
        import pathspec

        factory = getattr(pathspec, "GitIgnoreSpec", None)  # what ignore.IgnoreRules compiles patterns with
        if factory is not None:
            factory.from_lines([pattern])
        else:  # pragma: no cover - old pathspec
            pathspec.PathSpec.from_lines("gitwildmatch", [pattern])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a bad pattern
        return str(exc) or type(exc).__name__
    return None


def parse_entry(item: Any, where: str, models: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """``(path, options)`` of one folders entry; every problem is a :class:`ConfigError` saying how to fix it.

    ``models`` are the valid model names (checked when given).
    """
    if isinstance(item, str):
        return item, {}
    if not (isinstance(item, dict) and isinstance(item.get("path"), str)):
        raise ConfigError(
            f"folders entry {item!r} in {where} is neither a path nor a table with a path",
            'Write folders = ["~/notes", {path = "~/work", name = "work"}], or [[folder-search.folders]] tables '
            'with path = "...".',
        )
    import difflib

    for key in item:
        if key not in FOLDER_KEYS:
            near = difflib.get_close_matches(str(key), FOLDER_KEYS, n=1)
            hint = f"Did you mean {near[0]!r}? " if near else ""
            raise ConfigError(f"unknown key {key!r} in the folder {item['path']!r} in {where}",
                              f"{hint}A folder's table takes: {', '.join(FOLDER_KEYS)}.")
    opts: dict[str, Any] = {}
    name = item.get("name")
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"folder name {name!r} in {where} must be a non-empty string",
                              'Write {path = "~/notes", name = "notes"}.')
        opts["name"] = name
    model = item.get("model")
    if model is not None:
        if not isinstance(model, str) or (models and model not in models):
            near = difflib.get_close_matches(str(model), models, n=1) if models else []
            hint = f"Did you mean {near[0]!r}? " if near else ""
            raise ConfigError(f"unknown model {model!r} for the folder {item['path']!r} in {where}",
                              f"{hint}Valid models: {', '.join(models)}.")
        opts["model"] = model
    for key in ("include", "exclude"):
        if item.get(key) is not None:
            opts[key] = _patterns(item[key], key, where)
    size = item.get("max_file_size")
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ConfigError(f"max_file_size = {size!r} for the folder {item['path']!r} in {where} must be a "
                              "positive whole number of bytes", "Write max_file_size = 5000000, or leave it out.")
        opts["max_file_size"] = size
    watch = item.get("watch")
    if watch is not None:
        if not isinstance(watch, bool):
            raise ConfigError(f"watch = {watch!r} for the folder {item['path']!r} in {where} must be true or false",
                              "Write watch = false to index this folder only at startup and on each rescan.")
        opts["watch"] = watch
    return item["path"], opts


def load_folders(config_items: list[Any], data_dir: Path, warnings: list[str] | None = None,
                 models: tuple[str, ...] = ()) -> list[FolderSpec]:
    """Merge configured folders and CLI-added ones; names are unique (config wins a clash).

    A folder that does not exist now is kept (with a warning): it may be a drive that is not mounted.
    """
    out: list[FolderSpec] = []
    names: set[str] = set()
    roots: set[Path] = set()
    warn = warnings if warnings is not None else []
    sources = [(i, "config", "[folder-search] folders") for i in config_items] + [
        (i, "cli", str(folders_file(data_dir))) for i in read_cli_folders(data_dir)
    ]
    for item, source, where in sources:
        raw, opts = parse_entry(item, where, models)
        name = opts.pop("name", None)
        root = real_path(Path(raw).expanduser())
        if root in roots:
            continue
        if root.exists() and not root.is_dir():
            warn.append(f"folder {raw!r} from {where} is not a directory; it is ignored")
            continue
        if not root.exists():
            warn.append(f"folder {raw!r} from {where} is not reachable now; it is retried on every rescan "
                        "and its index is kept")
        base = name or root.name or "root"
        final = base
        n = 2
        while final in names:
            if name:
                warn.append(f"folder name {name!r} is used twice; the one for {root} is called {base}-{n}")
            final = f"{base}-{n}"
            n += 1
        names.add(final)
        roots.add(root)
        out.append(FolderSpec(final, root, source, **opts))
    return out


def resolve_inside(root: Path, relpath: str | None, *, must_exist: bool = True) -> tuple[Path, str]:
    """Resolve ``relpath`` inside ``root``; refuse anything that could leave it.

    Returns ``(absolute path, normalised relative posix path)``. Refuses ``..``
    components, absolute paths outside ``root`` and symlinks whose target lies
    outside ``root``.
    """
    text = plain_text((relpath or "").strip(), "the path")
    if "\x00" in text:
        raise InvalidArgument("the path contains a NUL character", "Pass a plain relative path such as 'docs/intro.md'.")
    candidate = Path(text).expanduser() if text else Path("")
    if candidate.is_absolute():
        resolved = real_path(candidate)
        rel = resolved.relative_to(root) if resolved.is_relative_to(root) else None
        if rel is None:
            try:
                rel = candidate.relative_to(root)
            except ValueError:
                raise InvalidArgument(
                    f"the path {text!r} is outside the folder {str(root)!r}",
                    "Pass a path relative to the folder (as list_documents shows them); only configured folders are readable.",
                ) from None
        text = rel.as_posix()
    parts = PurePosixPath(text.replace("\\", "/")).parts
    if ".." in parts:
        raise InvalidArgument(
            f"the path {relpath!r} contains '..'",
            "Paths may not climb out of the folder; pass a path relative to the folder without '..'.",
        )
    clean = "/".join(p for p in parts if p not in ("", ".", "/"))
    full = root / clean if clean else root
    real = real_path(full)
    if real != root and not real.is_relative_to(root):
        raise InvalidArgument(
            f"the path {clean!r} is a symbolic link that leads outside the folder",
            "Only files inside the configured folder are readable; open the target's own folder instead.",
        )
    if must_exist and not full.exists():
        raise NotFound(f"no file or directory {clean!r} in the folder", "Use list_documents or explore to see what is there.")
    return full, clean
