"""Reading tool files: YAML parsed once per content (a JSON cache spares PyYAML), shipped tools then the user's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from plexor import ConfigError
from plexor_edgelake.toolspec import CACHE_VERSION, SHIPPED, Catalog, validate_document

__all__ = ["load_catalog"]


def _read_yaml(path: Path, raw: bytes) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"the EdgeLake tools file {path} is not valid YAML{where}: {problem}",
            "Fix the YAML syntax (indentation, quotes around templates with ':' or '{'), "
            "or remove tools_file from [edgelake] in plexor.toml.",
        ) from None


def _parse_cached(path: Path, raw: bytes, cache_dir: Path | None) -> Any:
    """Parse ``raw``; a JSON copy keyed by the content's hash spares importing PyYAML at the next start."""
    digest = hashlib.sha256(raw).hexdigest()[:32]
    cache = cache_dir / f"tools-{digest}.v{CACHE_VERSION}.json" if cache_dir is not None else None
    if cache is not None:
        try:
            return json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    doc = _read_yaml(path, raw)
    if cache is not None:
        try:
            text = json.dumps(doc)
            cache_dir.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(cache)
        except (OSError, TypeError, ValueError):
            pass  # not JSON-able (YAML dates...) or read-only: parse again next time
    return doc


def load_catalog(user_file: Path | None = None, *, cache_dir: Path | None = None, shipped: Path = SHIPPED) -> Catalog:
    """The shipped tools, then the user's file on top (a tool of the same name replaces the shipped one;
    ``name: {enabled: false}`` removes it). Any problem raises :class:`ConfigError` listing all of them."""
    raw = shipped.read_bytes()
    tools, _, problems = validate_document(_parse_cached(shipped, raw, cache_dir), "shipped")
    if problems:  # pragma: no cover - guarded by the test suite
        raise ConfigError(f"the shipped tools.yaml is invalid: {'; '.join(problems)}", "Reinstall plexor-edgelake.")
    files = [str(shipped)]
    if user_file is not None:
        path = Path(user_file).expanduser()
        try:
            user_raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the EdgeLake tools file {path} ([edgelake] tools_file): {exc.strerror or exc}",
                "Fix the path in [edgelake] tools_file (or PLEXOR_EDGELAKE_TOOLS_FILE), or remove the setting.",
            ) from None
        user_tools, disabled, user_problems = validate_document(_parse_cached(path, user_raw, cache_dir), str(path))
        if user_problems:
            listing = "\n".join(f"  - {p}" for p in user_problems)
            raise ConfigError(
                f"the EdgeLake tools file {path} has {len(user_problems)} problem"
                f"{'s' if len(user_problems) > 1 else ''}:\n{listing}",
                "Fix these entries (the README's 'Your own tools' section describes every key), or remove "
                "tools_file from [edgelake] in plexor.toml; the plugin does not start with a half-valid file.",
                data={"file": str(path), "problems": user_problems},
            )
        for name in disabled:
            tools.pop(name, None)
        tools.update(user_tools)
        files.append(str(path))
    return Catalog(tools, files)
