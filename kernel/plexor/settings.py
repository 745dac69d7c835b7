"""The settings a plugin declares (:class:`ConfigSpec`) and reads (:class:`Settings`).

These are plugin API (exported from ``plexor``); the kernel fills them in from
``plexor.toml`` and ``PLEXOR_<PLUGIN>_<KEY>`` (:mod:`plexor.core.config`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from plexor.errors import ConfigError

__all__ = ["ConfigSpec", "Setting", "Settings"]


_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list", dict: "table"}


@dataclass(frozen=True)
class Setting:
    """One declared setting: its key, type, default and help text."""

    key: str
    type: type
    default: object = None
    help: str = ""
    choices: tuple[object, ...] | None = None

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.type, getattr(self.type, "__name__", str(self.type)))

    def coerce(self, value: object, source: str) -> object:
        """Check and convert ``value``; ``source`` (a file or variable) is named in any error."""
        if value is None:
            return None
        out: object
        if isinstance(value, str) and self.type is not str:
            out = self._from_text(value, source)
        else:
            out = value
        if self.type is float and isinstance(out, int) and not isinstance(out, bool):
            out = float(out)
        if self.type is Path and isinstance(out, str):
            out = Path(out).expanduser()
        if self.type is bool and not isinstance(out, bool):
            self._fail(value, source)
        if self.type in (int, float) and (isinstance(out, bool) or not isinstance(out, (int, float))):
            self._fail(value, source)
        if self.type is int and isinstance(out, float):
            self._fail(value, source)
        if self.type in (str, list, dict) and not isinstance(out, self.type):
            self._fail(value, source)
        if self.choices is not None and out not in self.choices:
            raise ConfigError(
                f"{self.key} = {value!r} in {source} is not one of the allowed values",
                f"Use one of: {', '.join(map(str, self.choices))}.",
            )
        return out

    def _from_text(self, text: str, source: str) -> object:
        t = self.type
        if t is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            self._fail(text, source)
        if t is int:
            try:
                return int(text.strip(), 0)
            except ValueError:
                self._fail(text, source)
        if t is float:
            try:
                return float(text.strip())
            except ValueError:
                self._fail(text, source)
        if t is list:
            stripped = text.strip()
            if stripped.startswith("["):
                try:
                    return json.loads(stripped)
                except json.JSONDecodeError:
                    self._fail(text, source)
            return [part.strip() for part in stripped.split(",") if part.strip()]
        if t is dict:
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                self._fail(text, source)
        return text

    def _fail(self, value: object, source: str) -> NoReturn:
        hint = {
            bool: "true or false",
            int: "a whole number such as 30",
            float: "a number such as 1.5",
            list: 'a list such as ["a", "b"] (in an environment variable: a,b)',
            dict: "a table (in an environment variable: a JSON object)",
        }.get(self.type, f"a {self.type_name}")
        article = "an" if self.type_name[:1] in "aeiou" else "a"
        raise ConfigError(
            f"{self.key} = {value!r} in {source} is not {article} {self.type_name}",
            f"Set {self.key} to {hint}.",
            data={"key": self.key, "source": source},
        )


_RESERVED = frozenset({"plugin", "data_dir", "sources", "warnings", "get", "items", "keys", "values"})


class ConfigSpec:
    """What ``plexor_add_config`` receives: the plugin declares its keys here."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.settings: dict[str, Setting] = {}

    def add(
        self,
        key: str,
        type: type = str,  # noqa: A002 - mirrors the declaration people write
        default: object = None,
        help: str = "",  # noqa: A002
        choices: Sequence[object] | None = None,
    ) -> None:
        """Declare ``key`` with its ``type`` (str, int, float, bool, list, dict, Path) and ``default``."""
        from plexor.errors import PluginError

        if not key.replace("_", "").isalnum():
            raise PluginError(f"plugin {self.plugin!r} declares a setting named {key!r}",
                              "Setting names are letters, digits and underscores.")
        if key in _RESERVED:
            raise PluginError(f"plugin {self.plugin!r} declares a setting named {key!r}, which is reserved",
                              f"Pick another name; {', '.join(sorted(_RESERVED))} are attributes of Settings.")
        if key in self.settings:
            raise PluginError(f"setting {key!r} is declared twice by plugin {self.plugin!r}", "Declare each key once.")
        self.settings[key] = Setting(key, type, default, help, tuple(choices) if choices is not None else None)


class Settings(Mapping[str, Any]):  # each value has the type its plugin declared: a plugin uses it as that type
    """A plugin's validated settings; read as ``settings["key"]`` or ``settings.key``.

    ``data_dir`` is the plugin's own folder under the data directory;
    ``sources`` says where each value came from (default, file, variable).
    """

    def __init__(
        self,
        plugin: str,
        values: Mapping[str, object],
        data_dir: Path,
        sources: dict[str, str] | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self.plugin = plugin
        self._values = dict(values)
        self.data_dir = data_dir
        self.sources = dict(sources or {})
        self.warnings = list(warnings or [])

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __repr__(self) -> str:
        return f"Settings({self.plugin!r}, {self._values!r})"
