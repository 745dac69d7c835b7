"""Which folders are searchable (chosen by the user only) and safe path resolution inside them.

Folders come from ``[folder-search] folders`` in ``plexor.toml`` (paths, or
tables ``{path = "...", name = "..."}``) and from ``folders.json`` in the
plugin's data directory, which ``plexor folder-search add/remove`` edit.
Tools never add folders.
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

__all__ = ["FolderSpec", "folders_file", "load_folders", "plain_text", "real_path", "resolve_inside", "save_cli_folders", "slug"]


@dataclass(frozen=True)
class FolderSpec:
    name: str
    root: Path  # resolved, absolute
    source: str  # "config" or "cli"

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


def read_cli_folders(data_dir: Path) -> list[dict[str, str]]:
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


def save_cli_folders(data_dir: Path, items: list[dict[str, str]]) -> None:
    path = folders_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"folders": items}, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _entry(item: Any, where: str) -> tuple[str, str | None]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, dict) and isinstance(item.get("path"), str):
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise ConfigError(f"folder name {name!r} in {where} must be a string", 'Write {path = "~/notes", name = "notes"}.')
        return item["path"], name
    raise ConfigError(
        f"folders entry {item!r} in {where} is neither a path nor a table with a path",
        'Write folders = ["~/notes", {path = "~/work", name = "work"}].',
    )


def load_folders(config_items: list[Any], data_dir: Path, warnings: list[str] | None = None) -> list[FolderSpec]:
    """Merge configured folders and CLI-added ones; names are unique (config wins a clash)."""
    out: list[FolderSpec] = []
    names: set[str] = set()
    roots: set[Path] = set()
    warn = warnings if warnings is not None else []
    sources = [(i, "config", "[folder-search] folders") for i in config_items] + [
        (i, "cli", str(folders_file(data_dir))) for i in read_cli_folders(data_dir)
    ]
    for item, source, where in sources:
        raw, name = _entry(item, where)
        root = real_path(Path(raw).expanduser())
        if root in roots:
            continue
        if not root.is_dir():
            warn.append(f"folder {raw!r} from {where} does not exist or is not a directory; it is ignored")
            continue
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
        out.append(FolderSpec(final, root, source))
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
