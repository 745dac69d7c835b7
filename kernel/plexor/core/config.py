"""Paths, the config file, and resolving each plugin's settings (the types are in :mod:`plexor.settings`).

All directories come from :func:`paths`: platformdirs by default, everything
under ``$PLEXOR_HOME`` when that is set (tests rely on it). Settings are read
from ``plexor.toml`` in the config directory (one table per plugin) and
overridden by ``PLEXOR_<PLUGIN>_<KEY>`` environment variables.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from plexor.errors import ConfigError
from plexor.limits import LIMITS
from plexor.settings import ConfigSpec, Settings

__all__ = ["KERNEL_VARIABLES", "LOG_LEVELS", "Paths", "check_log_level", "env_name", "load_config_file", "paths",
           "resolve_settings", "unknown_names"]

APP = "plexor"

# Every PLEXOR_* variable the kernel itself reads; a plugin's are PLEXOR_<PLUGIN>_<KEY> of its settings.
KERNEL_VARIABLES = (
    "PLEXOR_HOME", "PLEXOR_PLUGINS", "PLEXOR_DISABLE", "PLEXOR_LOG_LEVEL", "PLEXOR_SEPARATOR", "PLEXOR_START_WAIT",
    "PLEXOR_PAGE_SIZE", "PLEXOR_TOKEN", "PLEXOR_TOKEN_FILE", "PLEXOR_HEALTH_URL", "PLEXOR_ALLOWED_ORIGINS", "PLEXOR_ALLOWED_HOSTS", "PLEXOR_OTEL",
    "PLEXOR_OTEL_RECORD_ARGUMENTS", "PLEXOR_HTTP_OPTIONS", "PLEXOR_DATABASE_URL",
    "PLEXOR_AUTH_ISSUER", "PLEXOR_RESOURCE_URL",
    "PLEXOR_STATE_KEY", "PLEXOR_STATE_KEY_FILE", "PLEXOR_STATE_KEY_PREVIOUS", "PLEXOR_STATE_KEY_PREVIOUS_FILE", "PLEXOR_EVENT_STORE",
    *(limit.env for limit in LIMITS.values()),
)
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class Paths:
    """Where Plexor keeps its files."""

    config_dir: Path
    data_dir: Path
    log_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "plexor.toml"

    def plugin_data_dir(self, plugin: str) -> Path:
        return self.data_dir / plugin


def paths(environ: Mapping[str, str] | None = None) -> Paths:
    """Resolve the config, data and log directories (``PLEXOR_HOME`` puts all of them under one folder)."""
    env = os.environ if environ is None else environ
    home = env.get("PLEXOR_HOME")
    if home:
        root = Path(home).expanduser()
        return Paths(root / "config", root / "data", root / "logs")
    import platformdirs

    return Paths(
        Path(platformdirs.user_config_dir(APP)),
        Path(platformdirs.user_data_dir(APP)),
        Path(platformdirs.user_log_dir(APP)),
    )


def env_name(plugin: str, key: str) -> str:
    """``PLEXOR_<PLUGIN>_<KEY>``: upper case, dashes as underscores."""
    return f"PLEXOR_{plugin}_{key}".upper().replace("-", "_").replace(".", "_")


def load_config_file(path: Path) -> dict[str, object]:
    """Read ``plexor.toml``; a missing file is an empty config, a broken one a :class:`ConfigError`."""
    if not path.exists():
        return {}
    import tomllib

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML: {exc}",
            "Fix the syntax (tables look like [arbor], values like key = \"value\"), "
            "or move the file away to start from defaults.",
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", "Check the file's permissions.") from exc


def resolve_settings(
    spec: ConfigSpec,
    table: Mapping[str, object],
    config_path: Path,
    data_dir: Path,
    environ: Mapping[str, str],
) -> Settings:
    """Combine defaults, the plugin's table and environment overrides, validating each value."""
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    for key, setting in spec.settings.items():
        values[key] = setting.default
        sources[key] = "default"
    for key, raw in table.items():
        declared = spec.settings.get(key)
        if declared is None:
            near = difflib.get_close_matches(key, list(spec.settings), n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            known = ", ".join(sorted(spec.settings)) or "none"
            warnings.append(
                f"unknown setting {key!r} in [{spec.plugin}] of {config_path}; it is ignored.{hint} Known: {known}"
            )
            continue
        values[key] = declared.coerce(raw, f"[{spec.plugin}] of {config_path}")
        sources[key] = str(config_path)
    for key, setting in spec.settings.items():
        name = env_name(spec.plugin, key)
        if name in environ:
            values[key] = setting.coerce(environ[name], f"environment variable {name}")
            sources[key] = name
    return Settings(spec.plugin, values, data_dir, sources, warnings)


def check_log_level(environ: Mapping[str, str]) -> None:
    """``PLEXOR_LOG_LEVEL`` must name a level; anything else is a :class:`ConfigError` listing them."""
    raw = environ.get("PLEXOR_LOG_LEVEL")
    if raw is not None and raw.strip().lower() not in LOG_LEVELS:
        near = difflib.get_close_matches(raw.strip().lower(), LOG_LEVELS, n=1)
        raise ConfigError(f"PLEXOR_LOG_LEVEL={raw!r} is not a log level" + (f"; did you mean {near[0]!r}?" if near else ""),
                          f"Use one of: {', '.join(LOG_LEVELS)}.")


def unknown_names(environ: Mapping[str, str], config: Mapping[str, object], config_path: Path,
                  plugins: Mapping[str, list[str] | None]) -> list[str]:
    """Warnings for tables of ``plexor.toml`` and ``PLEXOR_*`` variables that nothing reads.

    ``plugins`` maps each plugin to its setting keys, or to None when they are unknown (it was disabled
    or failed before declaring them): its variables are then not judged.
    """
    out = []
    for table in config:
        if table not in plugins:
            near = difflib.get_close_matches(table, list(plugins), n=1)
            out.append(f"unknown table [{table}] in {config_path}; it is ignored."
                       + (f" Did you mean [{near[0]}]?" if near else f" Plugins: {', '.join(sorted(plugins))}."))
    known = set(KERNEL_VARIABLES)
    unjudged = []
    for plugin, keys in plugins.items():
        if keys is None:
            unjudged.append(env_name(plugin, ""))
        known.update(env_name(plugin, key) for key in keys or [])
    for var in environ:
        if not var.startswith("PLEXOR_") or var in known or any(var.startswith(p) for p in unjudged):
            continue
        near = difflib.get_close_matches(var, sorted(known), n=1, cutoff=0.8)
        out.append(f"unknown environment variable {var}; it is ignored."
                   + (f" Did you mean {near[0]}?" if near else " See `plexor --help` and each plugin's settings."))
    return out

