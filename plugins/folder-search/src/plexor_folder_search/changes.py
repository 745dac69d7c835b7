"""What a batch of watched paths changes: files to (re)index, files gone, skips, and paths to forget.

The watcher hands :meth:`~plexor_folder_search.indexer.Indexer.update_paths` the paths its events
named. :class:`PathChanges` sorts each one: a regular file new or changed since it was indexed is
work; a file deleted, replaced by something else or now excluded is gone; what is not indexed is a
skip with its reason; a directory is walked whole (what is below it is then done), and its old skip
records, like those of a path that is gone, are forgotten.
"""

from __future__ import annotations

import os
import stat as statmod
from dataclasses import dataclass, field
from pathlib import Path

from plexor_folder_search.batches import Work
from plexor_folder_search.ignore import IgnoreRules
from plexor_folder_search.safefs import display_path, name_problem, special_kind
from plexor_folder_search.walk import Skip, Walker, symlink_reason

__all__ = ["FileState", "PathChanges"]

#: What the index holds of a file: its id, size, mtime_ns and fingerprint.
FileState = tuple[int, int, int, str]


def _work(rel: str, size: int, mtime_ns: int, old: FileState | None) -> Work:
    return Work(rel, size, mtime_ns, old[0] if old else None, old[3] if old else None)


@dataclass
class PathChanges:
    """The sorted outcome of one batch of paths, filled by :meth:`add` one path at a time."""

    root: Path
    rules: IgnoreRules
    walker: Walker
    known: dict[str, FileState]
    work: list[Work] = field(default_factory=list)
    gone: dict[str, FileState] = field(default_factory=dict)
    skipped: list[Skip] = field(default_factory=list)
    forget: list[str] = field(default_factory=list)
    unchanged: int = 0
    seen: set[str] = field(default_factory=set)
    walked: list[str] = field(default_factory=list)  # directories walked whole: what is under them is done

    def add(self, rel: str) -> None:
        """Sort one path (relative to the folder) that an event named."""
        if rel in self.seen or any(rel.startswith(w + "/") for w in self.walked):
            return
        problem = name_problem(rel)
        if problem:
            self.skipped.append((display_path(rel), problem, "rename it to have it indexed", None, None))
            return
        abs_path = self.root / rel
        try:
            st: os.stat_result | None = abs_path.lstat()
        except OSError:
            st = None
        if st is not None and statmod.S_ISDIR(st.st_mode):
            self._directory(rel, abs_path)
            return
        self.seen.add(rel)
        old = self.known.get(rel)
        if st is None or not statmod.S_ISREG(st.st_mode):
            self._not_a_file(rel, abs_path, st, old)
            return
        reason = self.rules.path_reason(rel)
        pre = None if reason else self.walker.pre_skip(rel, st.st_size)
        if reason or pre:
            if old is not None:
                self.gone[rel] = old
            why, detail = (reason, None) if reason else pre  # type: ignore[misc]
            self.skipped.append((rel, why, detail, st.st_size, st.st_mtime_ns))
            return
        if old is not None and old[1] == st.st_size and old[2] == st.st_mtime_ns:
            self.unchanged += 1
            return
        self.work.append(_work(rel, st.st_size, st.st_mtime_ns, old))

    def _directory(self, rel: str, abs_path: Path) -> None:
        """Walk a directory whole: what it holds now is indexed, what the index held below it and it lacks is gone."""
        reason = self.rules.tree_reason(rel)
        prefix = rel + "/"
        sub_disk: dict[str, tuple[int, int]] = {}
        self.forget.append(rel)
        self.walked.append(rel)
        if not reason and not self.rules.dir_reason(rel, abs_path):
            sub_disk, sub_skips = self.walker.walk(start=rel)
            self.skipped.extend(sub_skips)
        for krel, kst in self.known.items():
            if krel.startswith(prefix) and krel not in sub_disk:
                self.gone[krel] = kst
        for frel, (size, mtime) in sub_disk.items():
            self.seen.add(frel)
            old = self.known.get(frel)
            if old is not None and old[1] == size and old[2] == mtime:
                continue
            self.work.append(_work(frel, size, mtime, old))

    def _not_a_file(self, rel: str, abs_path: Path, st: os.stat_result | None, old: FileState | None) -> None:
        """A path that is gone (a deleted file or directory) or is not a regular file (a link, a FIFO)."""
        if old is not None:
            self.gone[rel] = old
        prefix = rel + "/"
        for krel, kst in self.known.items():  # a deleted directory
            if krel.startswith(prefix):
                self.gone[krel] = kst
        self.forget.append(rel)
        if st is not None and statmod.S_ISLNK(st.st_mode):
            self.skipped.append((rel, *symlink_reason(str(abs_path), self.root), None, None))
        elif st is not None:
            self.skipped.append((rel, "not a regular file", special_kind(st.st_mode), None, None))
