"""The secrets that processes serving the same data share: the request-state key ring.

A multi-round request (SEP-2322) carries its state sealed under a key; any process
holding the key accepts the next round. On one host the key lives in the data
directory (``<data>/request-state.key``, mode 0600, made on first use), so
``--workers``, the daemon and a restarted server agree. Hosts that share no disk
get it from configuration instead:

``PLEXOR_STATE_KEY``
    the key itself (at least 32 bytes; hex is decoded: ``openssl rand -hex 32``);
``PLEXOR_STATE_KEY_FILE``
    a file holding it (a mounted secret); further lines are previous keys;
``PLEXOR_STATE_KEY_PREVIOUS`` / ``PLEXOR_STATE_KEY_PREVIOUS_FILE``
    keys still accepted, never used to seal: set the old key here while rolling a
    new one out, and remove it once the request-state lifetime (one hour) has passed.

The first key of the ring seals; every key unseals (the SDK's ``RequestStateSecurity``).
"""

from __future__ import annotations

import os
import secrets
import string
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from plexor.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from plexor.log import Logger

__all__ = ["KEY_FILE", "KEY_VARIABLES", "MIN_KEY_BYTES", "configured_keys", "parse_key", "request_state_keys"]

KEY_FILE = "request-state.key"
MIN_KEY_BYTES = 32
KEY_VARIABLES = ("PLEXOR_STATE_KEY", "PLEXOR_STATE_KEY_FILE", "PLEXOR_STATE_KEY_PREVIOUS",
                 "PLEXOR_STATE_KEY_PREVIOUS_FILE")
_MAKE = "make one with `openssl rand -hex 32` (or python -c 'import secrets; print(secrets.token_hex(32))')"


def parse_key(text: str, source: str) -> bytes:
    """One key as written by an operator: hex is decoded, anything else is taken as its UTF-8 bytes.

    Raises :class:`ConfigError` naming ``source`` when it is shorter than 32 bytes.
    """
    text = text.strip()
    if len(text) % 2 == 0 and text and all(c in string.hexdigits for c in text):
        key = bytes.fromhex(text)
    else:
        key = text.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"{source} holds a {len(key)}-byte key; a request-state key needs at least {MIN_KEY_BYTES} bytes",
                          f"Give every host the same strong key: {_MAKE}.")
    return key


def _read_keys(path_text: str, source: str) -> list[bytes]:
    path = Path(path_text).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}={path_text} cannot be read: {exc.strerror or exc}",
                          "Point it at a readable file holding the key (one line; further lines are previous keys), "
                          f"or unset it to keep the key in the data directory. To create one: {_MAKE}.") from exc
    lines = [line for line in (raw.strip() for raw in text.splitlines()) if line and not line.startswith("#")]
    if not lines:
        raise ConfigError(f"{source}={path_text} is empty", f"Write the key on its first line: {_MAKE}.")
    return [parse_key(line, f"line {n} of {path_text} ({source})") for n, line in enumerate(lines, 1)]


def configured_keys(environ: Mapping[str, str]) -> tuple[list[bytes], list[bytes]] | None:
    """(current ring, previous keys) from the environment, or None when no key is configured."""
    raw, file = environ.get("PLEXOR_STATE_KEY", "").strip(), environ.get("PLEXOR_STATE_KEY_FILE", "").strip()
    if raw and file:
        raise ConfigError("both PLEXOR_STATE_KEY and PLEXOR_STATE_KEY_FILE are set",
                          "Set one of them: the key itself, or the path of a file holding it.")
    previous: list[bytes] = []
    prev_raw = environ.get("PLEXOR_STATE_KEY_PREVIOUS", "").strip()
    if prev_raw:
        previous += [parse_key(part, "PLEXOR_STATE_KEY_PREVIOUS") for part in prev_raw.split(",") if part.strip()]
    prev_file = environ.get("PLEXOR_STATE_KEY_PREVIOUS_FILE", "").strip()
    if prev_file:
        previous += _read_keys(prev_file, "PLEXOR_STATE_KEY_PREVIOUS_FILE")
    if raw:
        return [parse_key(raw, "PLEXOR_STATE_KEY")], previous
    if file:
        return _read_keys(file, "PLEXOR_STATE_KEY_FILE"), previous
    if previous:
        return [], previous
    return None


def request_state_keys(environ: Mapping[str, str], data_dir: Path, log: Logger | None = None) -> list[bytes]:
    """The key ring for ``requestState``: ``[sealing key, *keys still accepted]``.

    From the environment when a key is configured (see the module docstring), else the
    data directory's key file (made on first use). Raises :class:`ConfigError` for a
    configured key that is missing, unreadable or too short.
    """
    configured = configured_keys(environ)
    if configured is not None and configured[0]:
        ring = configured[0] + configured[1]
    else:
        # Only previous keys configured: the data directory's key seals, they are still accepted.
        ring = [_data_dir_key(data_dir, log)] + (configured[1] if configured else [])
    unique: list[bytes] = []
    for key in ring:
        if key not in unique:
            unique.append(key)
    return unique


def _data_dir_key(data_dir: Path, log: Logger | None) -> bytes:
    """``<data>/request-state.key``, made atomically on first use; a per-process key when it cannot be kept."""
    path = data_dir / KEY_FILE
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        if log is not None:
            log.warning("requeststate_key_unreadable", path=str(path), error=str(exc),
                        hint="delete the file to have a new key made; using a per-process key")
        return os.urandom(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)  # atomic, and never replaces a key another process made first
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as exc:
        if log is not None:
            log.warning("requeststate_key_not_saved", path=str(path), error=str(exc),
                        hint="multi-round requests will not survive a restart or span --workers; "
                             "set PLEXOR_STATE_KEY or PLEXOR_STATE_KEY_FILE")
        return os.urandom(32)
