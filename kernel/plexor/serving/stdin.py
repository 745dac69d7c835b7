"""What ``plexor serve`` on stdio does when stdin cannot carry a client.

Supervisors (systemd, ``docker run`` without ``-i``, nohup, cron) start a process with stdin on
``/dev/null``, closed, or opened for writing only; nothing will ever speak MCP there. Serving
stdio then would wait forever for a client that cannot come, so ``serve`` says so in one line
and exits 0 instead (a supervisor restarting it would only loop). An empty regular file is the
same case; a regular file with content is read as a client's messages.
"""

from __future__ import annotations

import os
import stat
import sys

__all__ = ["NO_CLIENT_HINT", "unusable_stdin"]

NO_CLIENT_HINT = ("nothing to serve on stdio. MCP clients launch `plexor serve` with a pipe on stdin; "
                  "to run it as a service, use `plexor serve --transport http`")


def unusable_stdin() -> str | None:
    """Why stdin (fd 0) cannot carry a client (``"is closed"``, ``"is /dev/null"``, ...), or ``None`` if it can."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else 0
        info = os.fstat(fd)
    except (OSError, ValueError, AttributeError):  # `<&-`: no fd 0 at all
        return "is closed"
    try:
        import fcntl

        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:  # nohup's stand-in for a terminal
            return "is not open for reading"
    except (ImportError, OSError):  # Windows has no fcntl; its consoles and pipes are readable
        pass
    if stat.S_ISCHR(info.st_mode) and not os.isatty(fd):
        try:
            null = os.stat(os.devnull)
        except OSError:
            return None
        if info.st_rdev == null.st_rdev:
            return "is /dev/null"
    if stat.S_ISREG(info.st_mode):
        try:
            at = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError:
            at = 0
        if info.st_size <= at:
            return "is an empty file"
    return None
