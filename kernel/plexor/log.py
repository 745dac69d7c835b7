"""Logging: structlog, JSON lines, on stderr only.

Never configured at import time. The CLI calls :func:`configure`; a kernel
used without the CLI (tests, embedding) configures it on first use, so that
nothing is ever written to stdout, which carries the protocol under stdio.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

__all__ = ["configure", "get_logger"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def configure(level: str | None = None, *, force: bool = False) -> None:
    """Send structlog's JSON lines and the stdlib's records to stderr at ``level``."""
    import structlog

    if structlog.is_configured() and not force:
        return
    name = (level or os.environ.get("PLEXOR_LOG_LEVEL") or "info").lower()
    numeric = _LEVELS.get(name, logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(default=str),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_StderrLogger,
        cache_logger_on_first_use=True,
    )
    # Libraries that use the stdlib (the SDK, uvicorn) go to stderr too, quieter.
    root = logging.getLogger()
    if not any(getattr(h, "_plexor", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler._plexor = True  # type: ignore[attr-defined]
        handler.setFormatter(_JsonFormatter())
        root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))


class _StderrLogger:
    """Writes each rendered line to the *current* ``sys.stderr`` (which tests and daemons may swap)."""

    def __init__(self, *args: Any) -> None:
        pass

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        import json

        out = {"logger": record.name, "level": record.levelname.lower(), "event": record.getMessage()}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def get_logger(name: str = "plexor") -> Any:
    """A structlog logger writing JSON to stderr (configuring structlog if nobody has)."""
    import structlog

    if not structlog.is_configured():
        configure()
    return structlog.get_logger(name)
