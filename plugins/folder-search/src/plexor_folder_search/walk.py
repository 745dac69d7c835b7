"""Listing a folder: every indexable file with its size and time, and everything skipped with its reason.

Links are never followed; a symbolic link, a FIFO or a device, a name that is
not UTF-8, an ignored path, a binary or oversized file is reported as a skip.
One odd entry is reported, never allowed to fail the folder.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
from pathlib import Path

from plexor_folder_search.extract import kind_of
from plexor_folder_search.ignore import IgnoreRules
from plexor_folder_search.safefs import ReadRefused, display_path, name_problem, scan_dir, special_kind

__all__ = ["Skip", "Walker", "symlink_reason"]

# (path, reason, detail, size, mtime_ns) of something not indexed
Skip = tuple[str, str, str | None, int | None, int | None]


class Walker:
    """Walks the folder ``root`` under ``rules``."""

    def __init__(self, root: Path, rules: IgnoreRules, max_file_size: int) -> None:
        self.root = root
        self.rules = rules
        self.max_file_size = max_file_size

    def walk(self, start: str = "") -> tuple[dict[str, tuple[int, int]], list[Skip]]:
        """Every indexable file ``rel -> (size, mtime_ns)`` and the skips ``(rel, reason, detail, size, mtime)``.

        ``start`` is a directory (relative to the folder) to walk instead of the whole folder.
        """
        files: dict[str, tuple[int, int]] = {}
        skipped: list[Skip] = []
        stack = [start]
        while stack:
            rel_dir = stack.pop()
            try:
                # Opened component by component: a directory swapped for a link is refused, not entered.
                entries, dfd = scan_dir(self.root, rel_dir)
            except ReadRefused as exc:
                skipped.append(((rel_dir + "/") if rel_dir else ".", exc.reason, exc.detail, None, None))
                continue
            try:
                for entry in entries:
                    rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                    try:
                        self._walk_entry(entry, rel, files, skipped, stack)
                    except Exception as exc:  # noqa: BLE001 - one odd entry must never fail its folder
                        skipped.append((display_path(rel), "unreadable", f"{type(exc).__name__}: {exc}", None, None))
            finally:
                if dfd is not None:
                    os.close(dfd)
        return files, skipped

    def _walk_entry(self, entry: os.DirEntry[str], rel: str, files: dict[str, tuple[int, int]],
                    skipped: list[Skip], stack: list[str]) -> None:
        problem = name_problem(rel)
        if problem:
            skipped.append((display_path(rel), problem, "rename it to have it indexed", None, None))
            return
        try:
            if entry.is_symlink():
                skipped.append((rel, *symlink_reason(str(self.root / rel), self.root), None, None))
                return
            if entry.is_dir(follow_symlinks=False):
                reason = self.rules.dir_reason(rel, self.root / rel)
                if reason:
                    skipped.append((rel + "/", reason, None, None, None))
                else:
                    stack.append(rel)
                return
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            skipped.append((rel, "unreadable", exc.strerror, None, None))
            return
        if not statmod.S_ISREG(st.st_mode):
            skipped.append((rel, "not a regular file", special_kind(st.st_mode), None, None))
            return
        reason = self.rules.file_reason(rel)
        if reason:
            skipped.append((rel, reason, None, st.st_size, st.st_mtime_ns))
            return
        pre = self.pre_skip(rel, st.st_size)
        if pre:
            skipped.append((rel, pre[0], pre[1], st.st_size, st.st_mtime_ns))
            return
        files[rel] = (st.st_size, st.st_mtime_ns)

    def pre_skip(self, rel: str, size: int) -> tuple[str, str | None] | None:
        if kind_of(rel) is None:
            return ("binary file", None)
        if size > self.max_file_size:
            return ("too large", f"{size} bytes; the limit is max_file_size = {self.max_file_size}")
        return None


def symlink_reason(path: str, root: Path) -> tuple[str, str | None]:
    """Why a symbolic link in the folder is not indexed (links are never followed)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ("symlink loop", None)
        return ("broken symlink", exc.strerror)
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(root):
        return ("symlink pointing outside the folder", str(target))
    return ("symlink (its target is indexed at its own path)", None)


