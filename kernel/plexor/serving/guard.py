"""ASGI checks in front of every HTTP route (``/mcp``, ``/sse``, ``/messages/``, ``/healthz``).

- ``HostOriginGuard``: DNS-rebinding protection. The Host and Origin headers are parsed (host
  and port) and matched exactly against the allow-lists, never by prefix, so
  ``Host: 127.0.0.1:8765@evil.example`` is refused (421), as is a foreign Origin (403).
- ``BearerAuth``: ``Authorization: Bearer <token>``, the scheme case-insensitive (RFC 7235);
  more than one Authorization header is refused (400) rather than one of them winning.
- ``AnswerIds``: a body the SDK refuses with 400 and ``"id": null`` is answered with the
  request's own id and a message that says what was wrong (``plexor.serving.wire``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AnswerIds", "BearerAuth", "HostOriginGuard", "default_allow_lists", "is_loopback",
           "parse_host", "parse_origin"]

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}|\*))?$")
_ORIGIN = re.compile(r"^(https?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}|\*))?$")


def parse_host(value: str) -> tuple[str, str | None] | None:
    """``host[:port]`` as (lower-case host, port or None); None when it is not exactly that."""
    m = _HOST.match(value.strip())
    return (m.group(1).lower(), m.group(2)) if m else None


def parse_origin(value: str) -> tuple[str, str, str | None] | None:
    """``scheme://host[:port]`` as (scheme, host, port or None); None for anything else (a path, userinfo, "null")."""
    m = _ORIGIN.match(value.strip())
    return (m.group(1).lower(), m.group(2).lower(), m.group(3)) if m else None


def _port_ok(allowed: str | None, given: str | None) -> bool:
    return allowed == "*" or allowed == given


async def refuse_http(send: Send, status: int, error: str, message: str, guidance: str,
                      headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": error, "message": message, "guidance": guidance}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class HostOriginGuard:
    """Refuse a Host (421) or Origin (403) that is not on the allow-lists, on every route."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str], origins: Iterable[str]) -> None:
        self.app = app
        self.hosts = [h for h in (parse_host(x) for x in hosts) if h is not None]
        self.origins = [o for o in (parse_origin(x) for x in origins) if o is not None]
        # Verdicts per raw header value: a client sends the same Host (and Origin) on every request,
        # so the parse and the allow-list scan run once per value, not once per request.
        self._hosts_seen: dict[bytes, bool] = {}
        self._origins_seen: dict[bytes, bool] = {}

    def host_allowed(self, value: str) -> bool:
        given = parse_host(value)
        return given is not None and any(h == given[0] and _port_ok(p, given[1]) for h, p in self.hosts)

    def origin_allowed(self, value: str) -> bool:
        given = parse_origin(value)
        return given is not None and any(
            s == given[0] and h == given[1] and _port_ok(p, given[2]) for s, h, p in self.origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts: list[bytes] = []
        origins: list[bytes] = []
        for k, v in scope.get("headers") or ():
            if k == b"host":
                hosts.append(v)
            elif k == b"origin":
                origins.append(v)
        if len(hosts) != 1 or not _verdict(self._hosts_seen, hosts[0], self.host_allowed):
            shown = hosts[0].decode("latin-1")[:80] if hosts else "(none)"
            await refuse_http(send, 421, "misdirected_request", f"Host {shown!r} is not allowed",
                          "Connect through an address the server was started for, or start it with "
                          "--allow-host HOST[:PORT] (or PLEXOR_ALLOWED_HOSTS) to allow this one.")
            return
        if len(origins) > 1 or (origins and not _verdict(self._origins_seen, origins[0], self.origin_allowed)):
            shown = origins[0].decode("latin-1")[:80]
            await refuse_http(send, 403, "forbidden_origin", f"Origin {shown!r} is not allowed",
                          "Start the server with --allow-origin URL (or PLEXOR_ALLOWED_ORIGINS) to allow "
                          "a web page from this origin.")
            return
        await self.app(scope, receive, send)


_SEEN_MAX = 256  # distinct header values remembered per guard; past that the memory starts over


def _verdict(seen: dict[bytes, bool], value: bytes, allowed: Callable[[str], bool]) -> bool:
    """``allowed(value)`` for a raw header value, remembered (the allow-lists never change after start)."""
    verdict = seen.get(value)
    if verdict is None:
        verdict = allowed(value.decode("latin-1"))
        if len(seen) >= _SEEN_MAX:  # a client cycling through Host values cannot grow it without bound
            seen.clear()
        seen[value] = verdict
    return verdict


def default_allow_lists(host: str, extra_hosts: Iterable[str], extra_origins: Iterable[str]) -> tuple[list[str], list[str]]:
    """Loopback names on any port, the bound host, plus what the user added."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*",
               "http://127.0.0.1", "http://localhost", "http://[::1]"]
    if host not in ("0.0.0.0", "::") and not is_loopback(host):
        named = f"[{host}]" if ":" in host.strip("[]") else host
        hosts += [f"{named}:*", named]
        origins += [f"http://{named}:*", f"https://{named}:*", f"http://{named}", f"https://{named}"]
    return hosts + list(extra_hosts), origins + list(extra_origins)


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """Every HTTP request needs exactly one ``Authorization: Bearer <token>`` with the right token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = [v for k, v in scope.get("headers") or () if k == b"authorization"]
        if len(given) > 1:
            await refuse_http(send, 400, "bad_request", "more than one Authorization header",
                          "Send exactly one 'Authorization: Bearer <token>' header.")
            return
        scheme, _, token = (given[0] if given else b"").strip().partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.token):
            await refuse_http(send, 401, "unauthorized", "missing or wrong bearer token",
                          "Send 'Authorization: Bearer <token>' with the token the server was started with "
                          "(--token or PLEXOR_TOKEN).", [(b"www-authenticate", b'Bearer realm="plexor"')])
            return
        await self.app(scope, receive, send)


class AnswerIds:
    """A POST the SDK refuses with 400 and ``"id": null`` gets the request's id and a clear message.

    The body is kept as the app reads it; only a 400 JSON answer is held back and, when the
    request carried a readable id (or the SDK's text was a raw validation report), rewritten.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        held: Message | None = None  # a 400 (or a 202 turned 400) response start, until its body is complete
        held_body = b""
        replace: bytes | None = None  # the body that replaces the held one, whatever the SDK wrote

        async def keep(message_receive: Receive = receive) -> Message:
            message = await message_receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        async def answer(message: Message) -> None:
            nonlocal held, held_body, replace
            if message["type"] == "http.response.start" and message["status"] == 202:
                stray = _stray(b"".join(chunks))  # the SDK took a request with an unusable id for a notification
                if stray is not None:
                    held = {**message, "status": 400, "headers": [(b"content-type", b"application/json")]}
                    held_body, replace = b"", stray
                    return
            if message["type"] == "http.response.start" and message["status"] == 400:
                held = message
                held_body = b""
                return
            if held is not None and message["type"] == "http.response.body":
                held_body += message.get("body", b"")
                if message.get("more_body"):
                    return
                start, body = held, _rewritten(held_body, b"".join(chunks))
                held, held_body = None, b""
                if replace is not None:
                    body, replace = replace, None
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, keep, answer)


def _stray(request: bytes) -> bytes | None:
    from plexor.serving.wire import stray_id

    reply = stray_id(request.decode("utf-8", "replace"))
    return None if reply is None else json.dumps(reply.wire()).encode()


def _rewritten(answer: bytes, request: bytes) -> bytes:
    from plexor.serving.wire import diagnose

    try:
        sent = json.loads(answer)
    except ValueError:
        return answer
    if not isinstance(sent, dict) or sent.get("id") is not None or not isinstance(sent.get("error"), dict):
        return answer
    replies = diagnose(request)
    leaky = str(sent["error"].get("message", "")).startswith("Validation error")
    if not replies or (all(r.id is None for r in replies) and not leaky):
        return answer
    wire = [r.wire() for r in replies]
    return json.dumps(wire[0] if len(wire) == 1 else wire).encode()
