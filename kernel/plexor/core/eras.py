"""The two protocol eras, told apart in one place.

The 2025-11-25 era has a handshake (``initialize``) and sessions; from 2026-07-28 on every request
is stateless (``server/discover``, the version in each request's ``_meta``). Versions are ISO dates,
so a later era compares greater.
"""

from __future__ import annotations

__all__ = ["STATELESS_ERA", "is_stateless", "stateless_era"]

STATELESS_ERA = "2026-07-28"


def is_stateless(version: str | None) -> bool:
    """Whether protocol ``version`` is of the stateless era (``None`` or empty: the handshake era)."""
    return bool(version) and str(version) >= STATELESS_ERA


def stateless_era(ctx: object) -> bool:
    """Whether the request of ``ctx`` (the SDK's request context) is of the stateless era."""
    return is_stateless(getattr(ctx, "protocol_version", None))
