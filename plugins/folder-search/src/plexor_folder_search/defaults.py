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

__all__ = ["DEFAULTS", "KEYS", "FolderSettings", "Key", "declare"]


@dataclass(frozen=True)
class Key:
    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


KEYS: tuple[Key, ...] = (
    Key("folders", list, [], 'folders to index: ["~/notes", {path = "~/work", name = "work"}]'),
    Key("model", str, "wordllama", "embedding model: wordllama (default), minilm (extra [minilm]) or none",
        ("wordllama", "minilm", "none")),
    Key("fusion_weight", float, None, "weight of the semantic score in hybrid ranking (0..1); unset: the model's "
        "weight tuned on SciFact train (wordllama 0.4, minilm 0.7)"),
    Key("max_file_size", int, 10 * 1024 * 1024, "files larger than this many bytes are skipped"),
    Key("max_unpacked_size", int, 32 * 1024 * 1024,
        "DOCX, XLSX and PPTX files that would unpack to more than this many bytes are skipped (zip bombs)"),
    Key("extract_timeout", float, 30.0, "seconds one document's text extraction may take before it is skipped"),
    Key("exclude", list, [], "extra gitignore-style patterns to skip in every folder"),
    Key("chunk_size", int, 1100, "target chunk length in characters"),
    Key("chunk_overlap", int, 150, "characters repeated between consecutive chunks of one section"),
    Key("watch", bool, True, "watch folders and re-index changed files within about a second"),
    Key("debounce_ms", int, 300, "quiet time before a burst of file changes is indexed as one batch"),
)
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
    chunk_size: int
    chunk_overlap: int
    watch: bool
    debounce_ms: int

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
        return cls(
            data_dir=Path(data_dir if data_dir is not None else getattr(settings, "data_dir")),  # noqa: B009
            folders=tuple(get("folders") or ()),
            model=str(get("model")),
            fusion_weight=None if weight is None else float(weight),
            max_file_size=int(get("max_file_size")),
            max_unpacked_size=int(get("max_unpacked_size")),
            extract_timeout=float(get("extract_timeout")),
            exclude=tuple(str(x) for x in get("exclude") or ()),
            chunk_size=int(get("chunk_size")),
            chunk_overlap=int(get("chunk_overlap")),
            watch=bool(get("watch")),
            debounce_ms=int(get("debounce_ms")),
        )
