"""Opaque continuation tokens for paginated tools.

A token is ``fs1.`` plus URL-safe base64 of a small JSON object: which tool
and query it belongs to (a hash) and where the next page starts. Passing a
token to another query, or a damaged one, is refused with guidance.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from plexor import InvalidArgument

__all__ = ["decode", "encode", "query_key"]

_PREFIX = "fs1."


def query_key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def encode(key: str, offset: int) -> str:
    raw = json.dumps({"k": key, "o": offset}, separators=(",", ":")).encode("utf-8")
    return _PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(token: str | None, key: str) -> int:
    """The offset stored in ``token`` (0 when there is none); refuses tokens of another query."""
    if not token:
        return 0
    bad = InvalidArgument(
        "continuation_token is not a token this tool issued",
        "Pass the continuation_token exactly as the previous page returned it, or omit it to get the first page.",
    )
    if not token.startswith(_PREFIX):
        raise bad
    body = token[len(_PREFIX):]
    try:
        data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        offset = int(data["o"])
        their_key = str(data["k"])
    except (ValueError, KeyError, TypeError):
        raise bad from None
    if their_key != key:
        raise InvalidArgument(
            "continuation_token belongs to a different query or tool",
            "Repeat the call with exactly the same arguments as the page that returned the token, "
            "or omit continuation_token to start again.",
        )
    if offset < 0:
        raise bad
    return offset
