"""What arbor accepts: ids, owners, counts, metadata, texts and handles, each refused with guidance.

Also the timestamp format (fixed-width UTC ISO-8601 strings, which compare in
SQL as text) and the JSON encoding of metadata.
"""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

from plexor import InvalidArgument, PlexorError

__all__ = [
    "STATES",
    "TreeInactive",
    "canonical_id",
    "check_count",
    "check_handle",
    "check_metadata",
    "check_owner",
    "check_text",
    "dumps",
    "iso",
    "iso_now",
    "loads",
    "role_of",
]

STATES = ("active", "scheduled_delete", "archived")


class TreeInactive(PlexorError):
    """The tree exists but is scheduled for deletion or archived, so it cannot change."""

    code = "tree_inactive"


def iso_now() -> str:
    """Now, as a fixed-width UTC ISO-8601 string (sorts like the time it names)."""
    return iso(datetime.datetime.now(datetime.UTC))


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_id(value: Any, what: str) -> str:
    """A UUID in its canonical lower-case form, or a clear error naming ``what``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{what} must be a UUID string, got {value!r}",
                              f"Pass the {what} exactly as a previous arbor call returned it.")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidArgument(
            f"{what} {value!r} is not a UUID",
            f"Pass the {what} exactly as a previous arbor call returned it "
            "(e.g. '3f2b8c1e-5d4a-4b7e-9c0d-2a1b3c4d5e6f'); arbor_tree_list lists the trees.",
        ) from None


def check_text(value: str, what: str) -> str:
    """Refuse a NUL character: PostgreSQL cannot store one in text, so no backend accepts it.

    Without this a text saved on SQLite could not be moved to PostgreSQL (an
    export would import there with a database error).
    """
    at = value.find("\x00")
    if at >= 0:
        raise InvalidArgument(
            f"{what} contains a NUL character (U+0000) at index {at}",
            "Arbor stores text on SQLite and PostgreSQL alike, and PostgreSQL cannot store NUL; remove it or "
            "replace it (e.g. with U+FFFD '\ufffd', or with an escape such as '\\\\0').",
        )
    return value


def check_owner(owner_id: Any) -> str:
    if not isinstance(owner_id, str) or not owner_id.strip():
        raise InvalidArgument(f"owner_id must be a non-empty string, got {owner_id!r}",
                              "Name who holds the reference, e.g. 'system' or a session id.")
    if len(owner_id) > 200:
        raise InvalidArgument("owner_id is longer than 200 characters", "Use a shorter owner id.")
    return check_text(owner_id, "owner_id")


def check_count(count: Any) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidArgument(f"count must be a positive whole number, got {count!r}",
                              "Use 1 unless you hold several references.")


def check_metadata(metadata: Any, what: str) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {metadata!r}", 'Pass e.g. {"role": "user"}.')
    try:
        json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} is not JSON-serialisable: {exc}", "Use only JSON values.") from None
    role = metadata.get("role")
    if role is not None and not isinstance(role, str):
        raise InvalidArgument(f"{what}.role must be a string, got {role!r}", 'Use e.g. "user", "assistant" or "system".')
    if role is not None:
        check_text(role, f"{what}.role")
    return dict(metadata)


def check_handle(handle: Any) -> dict[str, Any]:
    """Validate an external handle ``{source, source_version?, identifier, metadata?}``."""
    if not isinstance(handle, dict):
        raise InvalidArgument(f"handle must be an object, got {handle!r}",
                              'Pass {"source": "...", "identifier": "...", "source_version": "...", "metadata": {}}.')
    for key in ("source", "identifier"):
        if not isinstance(handle.get(key), str) or not handle[key].strip():
            raise InvalidArgument(f"handle.{key} must be a non-empty string, got {handle.get(key)!r}",
                                  f"Name the external {key}, e.g. "
                                  + ('"source": "files"' if key == "source" else '"identifier": "report.pdf#p3"') + ".")
    unknown = set(handle) - {"source", "source_version", "identifier", "metadata"}
    if unknown:
        raise InvalidArgument(f"handle has unknown keys {sorted(unknown)}",
                              "A handle has source, identifier, and optionally source_version and metadata.")
    version = handle.get("source_version")
    if version is not None and not isinstance(version, str):
        raise InvalidArgument(f"handle.source_version must be a string, got {version!r}", 'Use e.g. "1" or "2024-05-01".')
    meta = handle.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise InvalidArgument(f"handle.metadata must be an object, got {meta!r}", "Pass a JSON object or leave it out.")
    return {
        "source": handle["source"],
        "source_version": version,
        "identifier": handle["identifier"],
        "metadata": meta or {},
    }


def dumps(value: dict[str, Any] | None) -> str | None:
    """Compact JSON for a node's metadata; ``None`` for none."""
    if not value:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(text: str | None) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


def role_of(metadata: dict[str, Any] | None) -> str | None:
    """The role column: ``metadata.role`` (at most 64 characters), or ``None``."""
    role = (metadata or {}).get("role")
    return role[:64] if isinstance(role, str) and role.strip() else None
