"""Reading a file inside a folder without ever leaving the folder, and without blocking.

The walk decides what to read from ``lstat`` data, but a file can be swapped
between the walk and the read: for a symbolic link to something outside the
folder, or for a FIFO that would block ``open`` forever. So every read here
opens each path component relative to its parent directory's descriptor with
``O_NOFOLLOW`` (a link anywhere on the path is refused, not followed), opens
the file itself with ``O_NONBLOCK``, and checks with ``fstat`` that what was
opened is a regular file, the same one ``lstat`` saw just before. On a
platform without ``dir_fd`` support the fallback opens by path and then checks
the descriptor's identity and real path instead.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
from pathlib import Path

__all__ = ["ReadRefused", "display_path", "name_problem", "read_inside", "scan_dir", "special_kind"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = os.open in os.supports_dir_fd and bool(_NOFOLLOW) and bool(_DIRECTORY)


class ReadRefused(Exception):
    """The file was not read; ``reason`` is the skip reason shown to the user, ``detail`` says more."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def special_kind(mode: int) -> str:
    """A readable name for a file type that is not a regular file."""
    for test, name in ((statmod.S_ISFIFO, "FIFO (named pipe)"), (statmod.S_ISSOCK, "socket"),
                       (statmod.S_ISCHR, "character device"), (statmod.S_ISBLK, "block device"),
                       (statmod.S_ISLNK, "symbolic link"), (statmod.S_ISDIR, "directory")):
        if test(mode):
            return name
    return "special file"


def name_problem(rel: str) -> str | None:
    """Why the relative path ``rel`` cannot be stored in the index, or ``None``.

    File names come from the OS as ``str`` with undecodable bytes escaped as
    lone surrogates; SQLite (and JSON) need real UTF-8.
    """
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8"
    return None


def display_path(rel: str) -> str:
    """``rel`` made storable: undecodable bytes shown as ``\\xNN``."""
    try:
        return rel.encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")


def read_inside(root: Path, rel: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes (at most ``limit + 1``) and ``fstat`` of the regular file ``root/rel``.

    Raises :class:`ReadRefused` when a component of the path is a symbolic
    link, the file is not a regular file, or it cannot be opened or read.
    """
    fd = _open_inside(root, rel) if _DIR_FD else _open_checked(root, rel)
    try:
        st = os.fstat(fd)
        if not statmod.S_ISREG(st.st_mode):
            raise ReadRefused("not a regular file", special_kind(st.st_mode))
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            try:
                piece = os.read(fd, min(left, 1 << 20))
            except OSError as exc:
                raise ReadRefused("unreadable", exc.strerror) from exc
            if not piece:
                break
            chunks.append(piece)
            left -= len(piece)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def scan_dir(root: Path, rel_dir: str) -> tuple[list[os.DirEntry[str]], int | None]:
    """The entries of the directory ``root/rel_dir``, reached without following links.

    Returns the entries and the directory's descriptor, which the caller closes
    after it is done with the entries (their ``stat`` uses it). Raises
    :class:`ReadRefused` when a component is a link or cannot be opened.
    """
    if not (_DIR_FD and os.scandir in os.supports_fd):  # pragma: no cover - platforms without dir_fd
        try:
            return sorted(os.scandir(root / rel_dir if rel_dir else root), key=lambda e: e.name), None
        except OSError as exc:
            raise ReadRefused("unreadable folder", exc.strerror) from exc
    dfd = _open_dirs(root, [p for p in rel_dir.split("/") if p])
    try:
        return sorted(os.scandir(dfd), key=lambda e: e.name), dfd
    except OSError as exc:
        os.close(dfd)
        raise ReadRefused("unreadable folder", exc.strerror) from exc


def _open_dirs(root: Path, parts: list[str]) -> int:
    """A descriptor of ``root/parts...``, opened one component at a time, never through a link."""
    if any(p in (".", "..") for p in parts):
        raise ReadRefused("unreadable", f"not a path inside the folder: {display_path('/'.join(parts))!r}")
    try:
        dfd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise ReadRefused("unreadable folder", exc.strerror) from exc
    try:
        for part in parts:
            try:
                nfd = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                raise _refusal(exc, part, dfd) from exc
            os.close(dfd)
            dfd = nfd
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _open_inside(root: Path, rel: str) -> int:
    parts = [p for p in rel.split("/") if p]
    if not parts:
        raise ReadRefused("unreadable", "an empty path")
    dfd = _open_dirs(root, parts[:-1])
    try:
        name = parts[-1]
        try:
            before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as exc:
            raise ReadRefused("unreadable", exc.strerror) from exc
        if not statmod.S_ISREG(before.st_mode):
            # Never open anything else: opening a FIFO blocks, opening a device can act on it.
            raise _kind_refusal(before.st_mode)
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _NOCTTY | _BINARY, dir_fd=dfd)
        except OSError as exc:
            raise _refusal(exc, name, dfd) from exc
        after = os.fstat(fd)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            os.close(fd)
            raise ReadRefused("changed while being read", "it was replaced between two checks; it is read next time")
        return fd
    finally:
        os.close(dfd)


def _open_checked(root: Path, rel: str) -> int:  # pragma: no cover - platforms without dir_fd (Windows)
    path = root / rel
    try:
        before = os.lstat(path)
    except OSError as exc:
        raise ReadRefused("unreadable", exc.strerror) from exc
    if not statmod.S_ISREG(before.st_mode):
        raise _kind_refusal(before.st_mode)
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY)
    except OSError as exc:
        raise ReadRefused("unreadable", exc.strerror) from exc
    after = os.fstat(fd)
    real = Path(os.path.realpath(path))
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) or not real.is_relative_to(root):
        os.close(fd)
        raise ReadRefused("symlink (not followed)", "the file was replaced by a link while being read")
    return fd


def _kind_refusal(mode: int) -> ReadRefused:
    if statmod.S_ISLNK(mode):
        return ReadRefused("symlink (not followed)", "the file was replaced by a link after the folder was listed")
    return ReadRefused("not a regular file", special_kind(mode))


def _refusal(exc: OSError, name: str, dfd: int) -> ReadRefused:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        st = None
    if st is not None and statmod.S_ISLNK(st.st_mode) or exc.errno in (errno.ELOOP, errno.EMLINK):
        return ReadRefused("symlink (not followed)", f"{display_path(name)!r} on the path is a symbolic link")
    return ReadRefused("unreadable", exc.strerror)
