"""The audit trail: one JSON line per authorization decision, on stderr (``"logger": "plexor.audit"``).

Each line names who (subject, client, issuer, the token's ``jti``; never the token itself),
what (method, tool, URI or prompt, the scopes it needs), the profile, and the decision:
``allow``, or ``deny`` with a reason code (``no_token``, ``expired``, ``audience``, ``issuer``,
``signature``, ``unknown_key``, ``algorithm``, ``insufficient_scope``, ``not_in_profile``...).

The line is written directly, in the shape of the kernel's structlog lines (``event``, ``level``,
``timestamp``), at level info: an allowed call writes one, so it has to be cheap (about a third of
what a structlog call costs; see ``bench/auth.py``).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

__all__ = ["audit"]

INFO = 20


def _enabled() -> bool:
    from plexor import log

    return log.wanted_level(INFO) <= INFO


def audit(decision: str, *, reason: str | None = None, **fields: object) -> None:
    """Write one decision (``allow``/``deny``); fields that are None are left out."""
    if not _enabled():
        return
    record: dict[str, object] = {"event": "authorization", "logger": "plexor.audit", "audit": True, "decision": decision}
    if reason is not None:
        record["reason"] = reason
    record.update((k, v) for k, v in fields.items() if v is not None)
    record["level"] = "info"
    record["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    try:
        sys.stderr.write(json.dumps(record, default=str) + "\n")
    except (OSError, ValueError):  # a closed stderr must not fail the request
        pass
