"""The bounds that keep one caller from exhausting the server for every other (``docs/security.md#limits``).

Each limit has a default a laptop user never meets, an environment variable that changes it, and a
refusal that names both. :func:`refuse` counts each refusal per limit; with telemetry on the counts
are the ``plexor_limit_refusals_total`` metric. A limit *per caller* is kept per :func:`principal`:
the OAuth subject (with its issuer and client), the static token, else the client's address.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LIMITS", "REFUSALS", "Limit", "declared_timeout", "describe", "overran", "principal", "refuse", "run_time", "value"]


@dataclass(frozen=True)
class Limit:
    """One bound: its metric label, the variable that sets it, its default, and what it counts."""

    name: str
    env: str
    default: float
    what: str
    most: float | None = None  # the largest value that can take effect (None: no ceiling)

    @property
    def whole(self) -> bool:
        """A count or a size is a whole number; only a time may be a fraction."""
        return not self.what.startswith("seconds")

    def text(self, number: float | None = None) -> str:
        shown = self.default if number is None else number
        return f"{shown:g} {self.what} ({self.env})"


_ALL = (
    Limit("nesting", "PLEXOR_MAX_NESTING", 200, "levels of JSON nesting below a message", most=200),
    Limit("echoed_length", "PLEXOR_MAX_ECHOED_LENGTH", 4096, "characters of a request id or progress token"),
    Limit("subscriptions", "PLEXOR_MAX_SUBSCRIPTIONS", 10_000, "resource URIs per session or listen stream"),
    Limit("uri_length", "PLEXOR_MAX_URI_LENGTH", 8192, "characters of a subscribed URI"),
    Limit("subscription_bytes_per_caller", "PLEXOR_MAX_SUBSCRIPTION_BYTES_PER_CALLER", 16 * 2**20,
          "bytes of subscribed URIs per caller (its sessions and listen streams together)"),
    Limit("listen_streams", "PLEXOR_MAX_LISTEN_STREAMS", 1024, "open listen streams in total"),
    Limit("listen_per_caller", "PLEXOR_MAX_LISTEN_PER_CALLER", 64, "open listen streams per caller"),
    Limit("sse_per_caller", "PLEXOR_MAX_SSE_PER_CALLER", 64, "open legacy SSE connections per caller"),
    Limit("event_store_session_bytes", "PLEXOR_EVENT_STORE_SESSION_BYTES", 64 * 2**20,
          "bytes of resumable events per session"),
    Limit("event_store_bytes", "PLEXOR_EVENT_STORE_BYTES", 256 * 2**20, "bytes of resumable events in total"),
    Limit("sessions_per_caller", "PLEXOR_MAX_SESSIONS_PER_CALLER", 256, "open stateful HTTP sessions per caller"),
    Limit("sessions", "PLEXOR_MAX_SESSIONS", 2048, "open stateful HTTP sessions in total"),
    Limit("session_idle_seconds", "PLEXOR_SESSION_IDLE_TIMEOUT", 1800,
          "seconds a stateful HTTP session may stay idle before it is closed"),
    Limit("tasks_per_caller", "PLEXOR_MAX_TASKS_PER_CALLER", 100, "tasks running per caller in one server process"),
    Limit("stored_tasks_per_caller", "PLEXOR_MAX_STORED_TASKS_PER_CALLER", 10_000, "unexpired tasks kept per caller"),
    Limit("stored_task_bytes_per_caller", "PLEXOR_MAX_STORED_TASK_BYTES_PER_CALLER", 256 * 2**20,
          "bytes of unexpired tasks (arguments and results) kept per caller"),
    Limit("task_arguments_bytes", "PLEXOR_MAX_TASK_ARGUMENTS_BYTES", 2**20, "bytes of a task's arguments"),
    Limit("task_result_bytes", "PLEXOR_MAX_TASK_RESULT_BYTES", 16 * 2**20, "bytes of a task's result"),
    Limit("auth_fetch_bytes", "PLEXOR_AUTH_FETCH_BYTES", 2**20,
          "bytes of an authorization server's answer (keys, metadata, introspection)"),
    Limit("auth_fetch_seconds", "PLEXOR_AUTH_FETCH_SECONDS", 10, "seconds for a whole fetch from the authorization server"),
    Limit("auth_fetch_backoff", "PLEXOR_AUTH_FETCH_BACKOFF", 60,
          "seconds at most between two tries while the signing keys cannot be loaded"),
    Limit("auth_introspections", "PLEXOR_AUTH_MAX_INTROSPECTIONS", 16, "token introspection requests in flight at once"),
    Limit("auth_recheck_seconds", "PLEXOR_AUTH_RECHECK_SECONDS", 60,
          "seconds an introspected token is trusted before the authorization server is asked again"),
    Limit("auth_refused_seconds", "PLEXOR_AUTH_REFUSED_CACHE_SECONDS", 10,
          "seconds a token found inactive is refused without asking the authorization server again"),
    Limit("run_seconds", "PLEXOR_REQUEST_TIMEOUT", 300,
          "seconds a request or a task may run, unless its tool declares longer (--request-timeout)"),
)
LIMITS: dict[str, Limit] = {limit.name: limit for limit in _ALL}
REFUSALS: Counter[str] = Counter()  # this process's refusals per limit (plexor_limit_refusals_total)


def value(name: str, environ: Mapping[str, str] | None = None) -> float:
    """The limit ``name`` as set (its variable) or its default; a bad value is a ``ConfigError`` naming the variable."""
    from plexor.errors import ConfigError

    limit = LIMITS[name]
    raw = (os.environ if environ is None else environ).get(limit.env, "").strip()
    if not raw:
        return limit.default
    try:
        number = float(raw)
    except ValueError:
        number = 0.0
    if (not (number > 0 and math.isfinite(number)) or (limit.whole and number != int(number))
            or (limit.most is not None and number > limit.most)):
        kind = "a positive whole number" if limit.whole else "a positive number"
        if limit.most is not None:
            kind += f" of at most {limit.most:g}"
        raise ConfigError(f"{limit.env}={raw!r} is not a valid limit",
                          f"Set {limit.env} to {kind} ({limit.what}; default {limit.default:g}), or unset it.")
    return number


def refuse(name: str, number: float, detail: str, fix: str = "") -> str:
    """Count a refusal of limit ``name`` (at ``number``) and say what was refused, the limit and its setting."""
    REFUSALS[name] += 1
    limit = LIMITS[name]
    advice = fix or "stay under it"
    return f"{detail}: the limit is {limit.text(number)}; {advice}, or raise {limit.env} on the server."


def run_time(server: float | None, declared: float | None) -> float | None:
    """How long a call or task may run: the server's limit (None: none, as on stdio), or the tool's own when longer."""
    if server is None:
        return None
    return max(server, declared) if declared is not None else server


def declared_timeout(timeout: object, what: str) -> float | None:
    """A tool's own run-time limit (``register(..., timeout=S)``), checked; a bad one fails its plugin."""
    from plexor.errors import PluginError

    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise PluginError(f"{what} declares timeout={timeout!r}",
                          "Pass the seconds a call of it may run (a positive number), or leave it out.")
    return float(timeout)


def overran(what: str, seconds: float, server: float) -> str:
    """Count a request or task cancelled at its run-time limit ``seconds`` and say which limit it was (the server's,
    or its tool's own when that is longer) and how to raise it."""
    REFUSALS["run_seconds"] += 1
    if seconds > server:
        return (f"{what} took longer than its tool's own limit of {seconds:g} s (the timeout it declares) and was "
                f"cancelled{_MAY_STAND}. Narrow the request; the tool's author can declare a longer timeout.")
    return (f"{what} took longer than the server's limit of {seconds:g} s and was cancelled{_MAY_STAND}. Narrow the "
            "request, or start the server with a larger --request-timeout (PLEXOR_REQUEST_TIMEOUT).")


# a sync tool's thread cannot be interrupted and runs to its end (plexor.core.dispatch); an async one stops where it was
_MAY_STAND = ", though what it did may stand (check before repeating a change)"


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, what it bounds) of every limit, for documentation and ``--help``."""
    return [(limit.env, f"{limit.default:g}", limit.what) for limit in _ALL]


def principal(scope: Mapping[str, object] | None) -> str:
    """Who a request is, for per-caller limits: the OAuth principal, the static token, else the client's address.

    The principal comes from the ``plexor_principal`` hook (the auth plugin answers with the one the
    guard derives for task ownership, ``Access.principal``: issuer, subject and client); without a
    token every local client at one address is one caller.
    """
    if not scope:
        return "local"
    named = scope.get("plexor.principal")  # the plexor_principal hook's answer (plexor.serving.features)
    if named:
        return str(named)
    access = scope.get("plexor.access")  # plexor.features.auth.guard.ACCESS_KEY, set when OAuth is on
    headers = scope.get("headers") or ()
    if getattr(access, "subject", None) or (isinstance(headers, Iterable) and any(k == b"authorization" for k, _ in headers)):
        return "token"  # the static --token: every holder is the same caller
    client = scope.get("client")  # ASGI: (host, port), or None
    return f"address:{client[0]}" if isinstance(client, Sequence) and client else "local"

class PerCaller:
    """How many of one kind of thing each caller holds open, refused past ``limit`` (a caller is a principal)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: Counter[str] = Counter()

    def take(self, who: str) -> bool:
        if self.held[who] >= self.limit:
            return False
        self.held[who] += 1
        return True

    def give_back(self, who: str) -> None:
        self.held[who] -= 1
        if self.held[who] <= 0:
            del self.held[who]
