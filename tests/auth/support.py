"""What the authorization tests share: the real authorization server, a served Plexor, a headless user agent.

- :func:`authorization_server` starts oidc-provider (npm, pinned; ``tests/auth/setup.sh`` installs
  it) with an RSA key this module generates, so tests can also mint tokens the server would never
  issue and check Plexor refuses them.
- :func:`served_plexor` runs ``plexor serve --transport http`` as a resource server of it, with
  the ``ledger`` test plugin (``tests/auth/site``), which appends every call it receives to a file.
- :func:`client` is the SDK's own client over Streamable HTTP with a bearer token, in either era, and
  :func:`raw` sends a request as it goes on the wire (a task-augmented call, a plugin's own method).
- :func:`user_agent` plays the person at the browser: it follows the authorization URL, submits
  the login and consent forms, and returns the code and state from the final redirect.
"""

from __future__ import annotations

import contextlib
import html.parser
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SITE = HERE / "site"
CACHE = Path(os.environ.get("PLEXOR_AUTH_CACHE") or REPO / ".cache" / "oidc-provider")
SCOPES = ["ledger:read", "ledger:write", "ledger:admin", "plexor:read"]
REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the user agent stops at the redirect


def free_port() -> int:
    """A free port below Linux's ephemeral range (32768+), so it stays free until the server binds it.

    The port is chosen before the server starts (the authorization server's configuration names the
    resource URL with it); one from the ephemeral range could be taken meanwhile by any outgoing
    connection (npm installing the provider, the tests' own clients).
    """
    import random

    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000 on 127.0.0.1")


def install_provider() -> Path:
    """Run setup.sh (skips the test where node/npm are missing); the cache directory."""
    done = subprocess.run(["bash", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=600)
    if done.returncode == 3:
        pytest.skip(f"oidc-provider cannot be installed here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    # Copied under another name and renamed: a provider another test (pytest-xdist worker) is starting
    # meanwhile reads the whole old file or the whole new one, never a half-written one.
    partial = CACHE / f"provider.mjs.{os.getpid()}"
    shutil.copy(HERE / "provider.mjs", partial)
    os.replace(partial, CACHE / "provider.mjs")
    return CACHE


def rsa_jwk(kid: str) -> tuple[Any, dict[str, Any]]:
    """A fresh RSA key and its private JWK (what the authorization server signs with)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key))
    jwk.update(kid=kid, use="sig", alg="RS256")
    return key, jwk


class Issuer:
    """A bare authorization server: its metadata and a JWKS over HTTP (a stdlib server in a thread).

    The test publishes keys and signs tokens with PyJWT itself (:meth:`token`); ``stop`` ends it.
    """

    def __init__(self, resource: str) -> None:
        import http.server
        import threading

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.resource = resource
        self.keys: list[dict[str, Any]] = []
        self.fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                docs = {"/.well-known/oauth-authorization-server": {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"},
                        "/jwks": {"keys": issuer.keys}}
                if self.path == "/jwks":
                    issuer.fetches += 1
                body = json.dumps(docs.get(self.path, {})).encode()
                self.send_response(200 if self.path in docs else 404)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, kid: str) -> Any:
        key, private = rsa_jwk(kid)
        self.keys.append({k: v for k, v in private.items() if k in ("kty", "n", "e", "kid", "use", "alg")})
        return key

    def token(self, key: Any, kid: str, drop: tuple[str, ...] = (), **claims: Any) -> str:
        import jwt

        now = int(time.time())
        body = {"iss": self.url, "aud": self.resource, "sub": "s", "scope": "a:read", "exp": now + 60, **claims}
        for name in drop:
            body.pop(name, None)
        return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class AuthServer:
    issuer: str
    resource: str
    key: Any
    kid: str
    proc: subprocess.Popen[bytes]
    log: Path

    def mint(self, claims: dict[str, Any] | None = None, *, key: Any = None, kid: str | None = None,
             alg: str = "RS256", drop: tuple[str, ...] = ()) -> str:
        """A JWT access token like the server's, with ``claims`` changed (for the negative tests)."""
        import jwt

        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.resource, "sub": "mallory", "client_id": "minted",
                "scope": " ".join(SCOPES), "iat": now, "exp": now + 300, "jti": f"minted-{now}"}
        body.update(claims or {})
        for name in drop:
            body.pop(name, None)
        return jwt.encode(body, key if key is not None else self.key, algorithm=alg,
                          headers={"kid": kid if kid is not None else self.kid, "typ": "at+jwt"})


@contextlib.contextmanager
def authorization_server(tmp: Path, resource: str, *, access_ttl: int = 300, format: str = "jwt") -> Iterator[AuthServer]:
    cache = install_provider()
    port = free_port()
    key, jwk = rsa_jwk("as-key-1")
    config = tmp / "as-config.json"
    config.write_text(json.dumps({"port": port, "resource": resource, "scopes": SCOPES, "jwks": {"keys": [jwk]},
                                  "access_ttl": access_ttl, "format": format}))
    log = tmp / "as.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(["node", str(cache / "provider.mjs"), str(config)], stdout=subprocess.PIPE, stderr=err,
                                cwd=cache)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("listening "), f"oidc-provider did not start: {line!r} {log.read_text()}"
        yield AuthServer(line.split()[1], resource, key, "as-key-1", proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def register_client(issuer: str, **metadata: Any) -> dict[str, Any]:
    """Dynamic client registration (RFC 7591) at the authorization server; its answer."""
    import httpx

    body = {"redirect_uris": [REDIRECT], "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": "none", **metadata}
    r = httpx.post(f"{issuer}/reg", json=body, timeout=10)
    assert r.status_code == 201, r.text
    return dict(r.json())


def obtain_token(issuer: str, resource: str, scope: str) -> dict[str, Any]:
    """The authorization code flow with PKCE, by hand: register, authorize (the user agent), exchange."""
    import base64
    import hashlib
    import secrets
    from urllib.parse import urlencode

    import httpx

    client = register_client(issuer)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT, "scope": scope,
             "resource": resource, "state": "s1", "code_challenge": challenge, "code_challenge_method": "S256"}
    answer = user_agent(f"{issuer}/auth?{urlencode(query)}")
    assert answer.get("state") == "s1" and "code" in answer, answer
    r = httpx.post(f"{issuer}/token", data={"grant_type": "authorization_code", "code": answer["code"],
                                            "redirect_uri": REDIRECT, "client_id": client["client_id"],
                                            "code_verifier": verifier, "resource": resource}, timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


@dataclass
class Plexor:
    base: str
    url: str
    record: Path
    stderr_path: Path
    static: str = "static-test-token"
    extra: dict[str, Any] = field(default_factory=dict)

    def calls(self) -> list[dict[str, Any]]:
        """What the ledger plugin received, in order."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def audit(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("audit") is True:
                    out.append(record)
        return out


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def ledger_stdio(home: Path, *args: str) -> tuple[Any, Path]:
    """``python -m plexor ARGS`` over stdio (the SDK's ``StdioServerParameters``) with only the ledger plugin and
    a ``health`` profile that admits only ``plexor_health``, and the file the ledger records its calls in."""
    sys.path.insert(0, str(REPO / "tests"))
    from conformance.serving import fixture_env
    from mcp import StdioServerParameters

    (home / "config").mkdir(parents=True)
    record = home / "calls.jsonl"
    (home / "config" / "plexor.toml").write_text(
        f"[ledger]\nrecord = {json.dumps(str(record))}\n[plexor.profiles.health]\ntools = [\"plexor_health\"]\n")
    env = fixture_env(home, PLEXOR_PLUGINS="ledger", PYTHONPATH=os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]))
    return StdioServerParameters(command=sys.executable, args=["-m", "plexor", *args], env=env), record


@contextlib.contextmanager
def served_plexor(home: Path, port: int, *, auth: dict[str, Any] | None = None, profiles: dict[str, Any] | None = None,
                  args: tuple[str, ...] = (), static: str | None = "static-test-token",
                  env: dict[str, str] | None = None) -> Iterator[Plexor]:
    """``plexor serve --transport http --port PORT`` with the ledger plugin, as a resource server when ``auth``."""
    sys.path.insert(0, str(REPO / "tests"))
    from conformance.serving import serve_http

    home.mkdir(parents=True, exist_ok=True)
    record = home / "calls.jsonl"
    lines = ["[ledger]", f"record = {json.dumps(str(record))}"]
    if auth:
        lines += ["[plexor.auth]", *(f"{k} = {toml_value(v)}" for k, v in auth.items())]
    for name, body in (profiles or {}).items():
        lines += [f"[plexor.profiles.{name}]", *(f"{k} = {toml_value(v)}" for k, v in body.items())]
    (home / "config").mkdir(exist_ok=True)
    (home / "config" / "plexor.toml").write_text("\n".join(lines) + "\n")
    env = {"PLEXOR_PLUGINS": "ledger", "PLEXOR_LOG_LEVEL": "info",
           "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    extra = ("--token", static) if static else ()
    with serve_http(home, "--port", str(port), *extra, *args, env=env, token=static) as served:
        yield Plexor(served.base, served.url, record, served.stderr_path, static or "")


TASKS = "io.modelcontextprotocol/tasks"


@contextlib.asynccontextmanager
async def client(url: str, bearer: str, era: str, **headers: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from plexor.features.tasks.client import TasksClient

    mode = "legacy" if era == "2025-11-25" else era
    extensions = [TasksClient()] if era != "2025-11-25" else []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}", **headers}, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode, extensions=extensions) as c:
        yield c


async def raw(c: Any, method: str, params: dict[str, Any], *, era: str) -> dict[str, Any]:
    """A request as sent on the wire (the typed API has no task-augmented call); in 2026-07-28 with the
    tasks extension declared in the request's ``_meta``, as a tasks-aware client sends it."""
    from plexor.features.tasks.client import task_request

    if era == "2025-11-25":  # the SDK's 2025-11-25 session checks results by method: it refuses a task's
        answer: dict[str, Any] = await c.session._dispatcher.send_raw_request(method, params, {})
        return answer
    params = {**params, "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}
    return await task_request(c.session, method, params)



class _Forms(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action") or "", "fields": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value") or ""


def user_agent(authorization_url: str, *, login: str = "alice") -> dict[str, str]:
    """Follow ``authorization_url`` like a browser whose user logs in and consents; the redirect's query."""
    import httpx

    with httpx.Client(follow_redirects=False, timeout=10.0) as browser:
        response = browser.get(authorization_url)
        for _ in range(20):
            if response.status_code in (302, 303):
                location = urljoin(str(response.url), response.headers["location"])
                if location.startswith(REDIRECT):
                    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
                response = browser.get(location)
                continue
            assert response.status_code == 200, f"{response.status_code} {response.text[:500]}"
            parser = _Forms()
            parser.feed(response.text)
            form = parser.forms[0]
            fields = dict(form["fields"])
            if fields.get("prompt") == "login":
                fields.update(login=login, password="any")
            response = browser.post(urljoin(str(response.url), form["action"]), data=fields)
    raise AssertionError("the authorization server never redirected back")
