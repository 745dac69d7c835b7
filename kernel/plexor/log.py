"""Logging: structlog, JSON lines, on stderr only.

Never configured at import time. The CLI calls :func:`configure`; a kernel
used without the CLI (tests, embedding) configures it on first use, so that
nothing is ever written to stdout, which carries the protocol under stdio.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover - typing only
    from structlog.typing import FilteringBoundLogger

__all__ = ["Logger", "configure", "get_logger", "wanted_level"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


_wanted: dict[str, int] = {}


def wanted_level(default: int) -> int:
    """The level :func:`configure` set (a stdlib number), or ``default`` before it was called."""
    return int(_wanted.get("level", default))


def configure(level: str | None = None, *, force: bool = False) -> None:
    """Send structlog's JSON lines and the stdlib's records to stderr at ``level``.

    The stdlib side is set at once; structlog itself is imported and set up on
    the first log call (importing it costs start-up time the handshake need not pay).
    """
    name = (level or os.environ.get("PLEXOR_LOG_LEVEL") or "info").lower()
    numeric = _LEVELS.get(name, logging.INFO)
    if _wanted and not force:
        return
    _wanted["level"] = numeric
    if "structlog" in sys.modules:
        _apply(numeric, force)
    # Libraries that use the stdlib (the SDK, uvicorn) go to stderr too, quieter.
    root = logging.getLogger()
    if not any(getattr(h, "_plexor", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler._plexor = True  # type: ignore[attr-defined]
        handler.setFormatter(_JsonFormatter())
        root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))


def _apply(numeric: int, force: bool = False) -> None:
    import structlog

    if structlog.is_configured() and not force:
        return
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


class Logger(Protocol):
    """A structlog bound logger, as the kernel and plugins use it: ``log.info("event", key=value, ...)``."""

    def bind(self, **values: object) -> Logger: ...

    def debug(self, event: str, *args: object, **kw: object) -> object: ...

    def info(self, event: str, *args: object, **kw: object) -> object: ...

    def warning(self, event: str, *args: object, **kw: object) -> object: ...

    def warn(self, event: str, *args: object, **kw: object) -> object: ...

    def error(self, event: str, *args: object, **kw: object) -> object: ...

    def exception(self, event: str, *args: object, **kw: object) -> object: ...

    def critical(self, event: str, *args: object, **kw: object) -> object: ...

    def fatal(self, event: str, *args: object, **kw: object) -> object: ...


class _LazyLogger:
    """A structlog logger that imports and configures structlog on its first call."""

    def __init__(self, name: str, context: dict[str, object] | None = None) -> None:
        self._name = name
        self._context = context or {}
        self._real: FilteringBoundLogger | None = None

    def bind(self, **values: object) -> Logger:
        """This logger with ``values`` on every line; structlog is still imported only on the first call."""
        if self._real is None:
            return _LazyLogger(self._name, {**self._context, **values})
        return self._real.bind(**values)

    def __getattr__(self, attr: str) -> Callable[..., object]:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._real is None:
            level = _METHOD_LEVELS.get(attr)
            if level is not None and _wanted and level < _wanted["level"] and "structlog" not in sys.modules:
                # Filtered out anyway: `plexor plugins` (critical) need not import structlog for a plugin's info line.
                return _drop
            import structlog

            if not structlog.is_configured():
                if not _wanted:
                    configure()
                _apply(_wanted["level"])
            real = structlog.get_logger(self._name)
            self._real = real.bind(**self._context) if self._context else real
        value: Callable[..., object] = getattr(self._real, attr)
        self.__dict__[attr] = value  # later calls skip this lookup
        return value


_METHOD_LEVELS = {**_LEVELS, "warn": 30, "exception": 40, "fatal": 50}


def _drop(*args: object, **kwargs: object) -> None:
    return None


class _StderrLogger:
    """Writes each rendered line to the *current* ``sys.stderr`` (which tests and daemons may swap)."""

    def __init__(self, *args: object) -> None:
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


def get_logger(name: str = "plexor") -> Logger:
    """A logger writing JSON lines to stderr; structlog is loaded on its first use."""
    return _LazyLogger(name)
