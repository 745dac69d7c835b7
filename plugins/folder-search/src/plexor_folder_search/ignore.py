"""What is not indexed, and why: VCS, dependency, cache and venv folders, .gitignore files, excludes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plexor_folder_search.safefs import ReadRefused, read_inside

__all__ = ["CACHE_DIRS", "DEPENDENCY_DIRS", "VCS_DIRS", "IgnoreRules"]

VCS_DIRS = {".git", ".hg", ".svn", ".bzr", "_darcs", ".fossil"}
DEPENDENCY_DIRS = {"node_modules", "bower_components", "jspm_packages"}
CACHE_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".cache",
              ".gradle", ".next", ".parcel-cache", ".eggs"}

class IgnoreRules:
    """Decides what is not indexed: VCS, dependency, cache and venv folders, .gitignore, user excludes."""

    def __init__(self, root: Path, exclude: list[str], private: list[Path] | None = None,
                 include: list[str] | None = None) -> None:
        self.root = root
        self._specs: dict[str, tuple[float, Any]] = {}
        self._exclude = self._compile(exclude) if exclude else None
        # Only files matching one of these are indexed; directories are still entered ("*.md" is anywhere).
        self._include = self._compile(include) if include else None
        self._private = [p for p in (private or []) if p == root or p.is_relative_to(root)]

    @staticmethod
    def _compile(lines: list[str]) -> Any:
        import pathspec

        factory = getattr(pathspec, "GitIgnoreSpec", None)
        if factory is not None:
            return factory.from_lines(lines)
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)  # pragma: no cover - old pathspec

    def _gitignore(self, rel_dir: str) -> Any:
        rel = f"{rel_dir}/.gitignore" if rel_dir else ".gitignore"
        try:
            mtime = (self.root / rel).lstat().st_mtime
        except OSError:
            self._specs.pop(rel_dir, None)
            return None
        cached = self._specs.get(rel_dir)
        if cached and cached[0] == mtime:
            return cached[1]
        try:
            # Read like any file: a .gitignore that is a link (to anywhere) is not followed.
            data, _st = read_inside(self.root, rel, 1 << 20)
            spec = self._compile(data.decode("utf-8", errors="replace").splitlines())
        except ReadRefused:
            spec = None
        except Exception:  # noqa: BLE001 - a broken .gitignore must not stop indexing
            spec = None
        self._specs[rel_dir] = (mtime, spec)
        return spec

    @staticmethod
    def _decide(spec: Any, path: str) -> bool | None:
        check = getattr(spec, "check_file", None)
        if check is not None:
            result = check(path)
            return getattr(result, "include", None)
        return True if spec.match_file(path) else None  # pragma: no cover

    def dir_reason(self, rel: str, abs_path: Path) -> str | None:
        """Why the directory ``rel`` is skipped, or ``None``."""
        name = rel.rsplit("/", 1)[-1]
        if name in VCS_DIRS:
            return "version-control folder"
        if name in DEPENDENCY_DIRS:
            return "dependency folder"
        if name in CACHE_DIRS:
            return "cache folder"
        # What makes a virtual environment is its marker, not its name: CPython's own Lib/venv is source.
        if (abs_path / "pyvenv.cfg").exists() or (abs_path / "conda-meta").is_dir():
            return "virtual environment"
        if any(abs_path == p for p in self._private):
            return "Plexor's own data"
        return self._pattern_reason(rel, True)

    def _pattern_reason(self, rel: str, is_dir: bool) -> str | None:
        target = rel + "/" if is_dir else rel
        if self._exclude is not None and self._decide(self._exclude, target):
            return "excluded by the exclude setting"
        parts = rel.split("/")
        decision: bool | None = None
        for depth in range(len(parts)):
            base = "/".join(parts[:depth])
            spec = self._gitignore(base)
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            d = self._decide(spec, sub)
            if d is not None:
                decision = d
        return "ignored by .gitignore" if decision else None

    def file_reason(self, rel: str) -> str | None:
        reason = self._pattern_reason(rel, False)
        if reason is None and self._include is not None and not self._decide(self._include, rel):
            return "not matched by the include setting"
        return reason

    def tree_reason(self, rel: str) -> str | None:
        """Why nothing under the directory ``rel`` is indexed (it or an ancestor is skipped), or ``None``.

        ``include`` does not apply: it selects files, and a directory may hold matching ones.
        """
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            reason = self.dir_reason(sub, self.root / sub)
            if reason:
                return reason
        return self._pattern_reason(rel + "/x", False)

    def path_reason(self, rel: str) -> str | None:
        """For one path (from the watcher): check every ancestor directory, then the file itself."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            sub = "/".join(parts[:depth])
            reason = self.dir_reason(sub, self.root / sub)
            if reason:
                return reason
        return self.file_reason(rel)
