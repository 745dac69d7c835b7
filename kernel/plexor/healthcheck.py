"""``python -m plexor.healthcheck``: is the HTTP server on this machine ready? For supervisors and containers.

Asks ``GET /healthz`` (200 once the kernel is ready, 503 while starting or draining) with the bearer
token the server was given (``PLEXOR_TOKEN_FILE`` or ``PLEXOR_TOKEN``). Exit 0 when ready, 1 when
not (or not answering), 2 for a bad argument or an unreadable token file. ``--wait SECONDS`` polls
until ready (a systemd ``ExecStartPost=``: ``systemctl start`` returns once the server serves).
Standard library only, so a health probe costs little more than starting Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

__all__ = ["main", "probe"]

DEFAULT_URL = "http://127.0.0.1:8765/healthz"


def token_from_environment(environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The server's bearer token: the file named by ``PLEXOR_TOKEN_FILE``, else ``PLEXOR_TOKEN``."""
    path = environ.get("PLEXOR_TOKEN_FILE")
    if path:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or None
    return environ.get("PLEXOR_TOKEN") or None


def probe(url: str, token: str | None, timeout: float = 5.0) -> tuple[bool, str]:
    """``(ready, what was seen)`` for one ``GET`` of ``url``."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            body = json.loads(reply.read(65536) or b"{}")
            return True, f"ready ({body.get('state', 'ready')}, pid {body.get('pid', '?')})"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}" + (" (not ready: starting or draining)" if exc.code == 503 else "")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"no answer: {getattr(exc, 'reason', exc)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plexor.healthcheck", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("PLEXOR_HEALTH_URL", DEFAULT_URL),
                        help=f"the server's /healthz (default: PLEXOR_HEALTH_URL or {DEFAULT_URL})")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="poll until ready, this long at most")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        token = token_from_environment(os.environ)
    except OSError as exc:
        print(f"healthcheck: cannot read PLEXOR_TOKEN_FILE: {exc.strerror}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.wait
    while True:
        ready, seen = probe(args.url, token)
        if ready or time.monotonic() >= deadline:
            print(f"{args.url}: {seen}", file=sys.stderr)
            return 0 if ready else 1
        time.sleep(0.25)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
