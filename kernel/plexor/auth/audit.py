"""The audit trail: one JSON line per authorization decision, on the ``plexor.audit`` logger.

Each line names who (subject, client, issuer, the token's ``jti``; never the token itself),
what (method, tool, URI or prompt, the scopes it needs), the profile, and the decision:
``allow``, or ``deny`` with a reason code (``no_token``, ``expired``, ``audience``, ``issuer``,
``signature``, ``unknown_key``, ``algorithm``, ``insufficient_scope``, ``not_in_profile``...).
"""

from __future__ import annotations

from typing import Any

from plexor.log import get_logger

__all__ = ["audit"]

_log = get_logger("plexor.audit")


def audit(decision: str, *, reason: str | None = None, **fields: Any) -> None:
    """Log one decision (``allow``/``deny``); fields that are None are left out."""
    record = {k: v for k, v in fields.items() if v is not None}
    if reason is not None:
        record["reason"] = reason
    _log.info("authorization", audit=True, decision=decision, **record)
