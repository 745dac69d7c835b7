"""Every setting of folder-search, declared once: its type, default and help.

``plexor_add_config`` declares them from :data:`KEYS`, and the rest of the plugin
reads them through :class:`FolderSettings` (typed, with these defaults for a key
the settings object lacks), so a default is written nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plexor import ConfigSpec

__all__ = ["DEFAULTS", "KEYS", "MODELS", "FolderSettings", "Key", "declare"]


@dataclass(frozen=True)
class Key:
    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


KEYS: tuple[Key, ...] = (
    Key("folders", list, [], 'folders to index: ["~/notes", {path = "~/work", name = "work"}]; a table may also set '
        "model, include, exclude, max_file_size and watch for its folder ([[folder-search.folders]])"),
    Key("model", str, "wordllama", "embedding model: wordllama (default), minilm (extra [minilm]), multilingual "
        "(extra [multilingual]) or none", ("wordllama", "minilm", "multilingual", "none")),
    Key("fusion_weight", float, None, "weight of the semantic score in hybrid ranking (0..1); unset: the model's "
        "weight tuned on SciFact train (wordllama 0.4, minilm 0.7)"),
    Key("max_file_size", int, 10 * 1024 * 1024, "files larger than this many bytes are skipped"),
    Key("max_unpacked_size", int, 32 * 1024 * 1024,
        "DOCX, XLSX and PPTX files that would unpack to more than this many bytes are skipped (zip bombs)"),
    Key("extract_timeout", float, 30.0, "seconds one document's text extraction may take before it is skipped"),
    Key("exclude", list, [], "extra gitignore-style patterns to skip in every folder"),
    Key("include", list, [], "gitignore-style patterns a file must match to be indexed (empty: every file); "
        "a folder's own include replaces it"),
    Key("chunk_size", int, 1100, "target chunk length in characters"),
    Key("chunk_overlap", int, 150, "characters repeated between consecutive chunks of one section"),
    Key("watch", bool, True, "watch folders and re-index changed files within about a second"),
    Key("debounce_ms", int, 300, "quiet time before a burst of file changes is indexed as one batch"),
    Key("rescan_interval", float, 60.0, "seconds between checks of folders that failed or are unreachable (an "
        "unmounted drive), and between rescans of folders with watch = false; 0 turns rescanning off"),
)
#: The embedding models a folder (or the plugin) may choose.
MODELS: tuple[str, ...] = next(k.choices or () for k in KEYS if k.name == "model")
DEFAULTS: dict[str, Any] = {k.name: k.default for k in KEYS}


def declare(config: ConfigSpec) -> None:
    """Declare every key on the kernel's config spec (what ``plexor_add_config`` does)."""
    for k in KEYS:
        config.add(k.name, k.type, k.default, help=k.help, choices=list(k.choices) if k.choices else None)


@dataclass(frozen=True)
class FolderSettings:
    """The plugin's settings, typed; read from the kernel's settings with :meth:`read`."""

    data_dir: Path
    folders: tuple[Any, ...]
    model: str
    fusion_weight: float | None
    max_file_size: int
    max_unpacked_size: int
    extract_timeout: float
    exclude: tuple[str, ...]
    include: tuple[str, ...]
    chunk_size: int
    chunk_overlap: int
    watch: bool
    debounce_ms: int
    rescan_interval: float

    @classmethod
    def read(cls, settings: Mapping[str, Any], data_dir: Path | None = None) -> FolderSettings:
        """From a settings mapping (``plexor.Settings`` or a plain dict) and its ``data_dir``."""
        def get(key: str) -> Any:
            value = settings.get(key)
            return DEFAULTS[key] if value is None else value

        weight = settings.get("fusion_weight")
        for key in ("max_file_size", "max_unpacked_size", "extract_timeout", "chunk_size"):
            if not float(get(key)) > 0:
                from plexor import ConfigError

                raise ConfigError(f"[folder-search] {key} = {get(key)!r} must be greater than 0",
                                  f"Set {key} to a positive number or remove it to use the default, {DEFAULTS[key]}.")
        if float(get("rescan_interval")) < 0:
            from plexor import ConfigError

            raise ConfigError(f"[folder-search] rescan_interval = {get('rescan_interval')!r} must be 0 or more",
                              "Set it in seconds (60 by default), or 0 to turn rescanning off.")
        _check_patterns(get("include"), "include")
        _check_patterns(get("exclude"), "exclude")
        return cls(
            data_dir=Path(data_dir if data_dir is not None else getattr(settings, "data_dir")),  # noqa: B009
            folders=tuple(get("folders") or ()),
            model=str(get("model")),
            fusion_weight=None if weight is None else float(weight),
            max_file_size=int(get("max_file_size")),
            max_unpacked_size=int(get("max_unpacked_size")),
            extract_timeout=float(get("extract_timeout")),
            exclude=tuple(str(x) for x in get("exclude") or ()),
            include=tuple(str(x) for x in get("include") or ()),
            chunk_size=int(get("chunk_size")),
            chunk_overlap=int(get("chunk_overlap")),
            watch=bool(get("watch")),
            debounce_ms=int(get("debounce_ms")),
            rescan_interval=float(get("rescan_interval")),
        )


def _check_patterns(value: Any, key: str) -> None:
    from plexor import ConfigError
    from plexor_folder_search.folders import pattern_problem

    for pattern in value or ():
        problem = pattern_problem(str(pattern))
        if problem:
            raise ConfigError(f"the {key} pattern {pattern!r} in [folder-search] is not valid: {problem}",
                              "Write gitignore-style patterns such as '*.md', 'docs/' or 'build/**'.")
