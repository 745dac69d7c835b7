"""What authorization costs: server CPU per tool call, OAuth (JWT, cached JWKS) vs the static bearer token.

    python bench/auth.py [--calls 2000] [--rounds 5]

Two servers, started together and measured in the same run, each `plexor serve --transport http
--stateless --json-response` with the `ledger` test plugin (tests/auth/site) at the default log
level (info, so the audit line is written):
  * static  - `--token T`: the anchor, the static bearer check of a local server
  * oauth   - `[plexor.auth]` issuer and resource: every request's JWT checked (signature, issuer,
              audience, expiry) against the JWKS of an issuer this script serves (stdlib http.server),
              fetched once and cached; the call's scopes checked against its tool (the JSON-RPC body is
              read), the list middleware and one audit line per call.
Rows:
  * static          - the anchor
  * oauth, one token - a client reusing its access token, as clients do (the verified token is cached)
  * oauth, new token - a fresh token per call: the signature is verified every time (the worst case)
Then the auth layer alone, in this process: AccessGuard (token from its cache, body read and checked,
audit line written) vs BearerAuth, around an app that only reads the body.
Each row is one keep-alive connection posting `tools/call ledger_balance` sequentially (2025-11-25,
stateless). Rounds rotate the rows' order. The server's CPU comes from /proc; prints each round, then
per row the median CPU per call, its difference from static (what authorization adds) and the ratio.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from http_load import cpu_seconds, free_port, wait_up  # noqa: E402

SITE = HERE.parent / "tests" / "auth" / "site"
HOST = "127.0.0.1"
TOKEN = "bench-static-token"


class Issuer:
    """A signing key, and its metadata and JWKS on a stdlib HTTP server (all Plexor fetches)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        public.update(kid="bench", use="sig", alg="RS256")
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        documents = {"/.well-known/oauth-authorization-server": {"issuer": self.url, "jwks_uri": f"{self.url}/jwks"},
                     "/jwks": {"keys": [public]}}
        self.fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                issuer.fetches += 1
                body = json.dumps(documents.get(self.path, {})).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def mint(self, resource: str, n: int) -> str:
        import jwt

        now = int(time.time())
        return jwt.encode({"iss": self.url, "aud": resource, "sub": "bench", "client_id": "bench", "jti": f"j{n}",
                           "scope": "ledger:read plexor:read", "iat": now, "exp": now + 3600},
                          self.key, algorithm="RS256", headers={"kid": "bench", "typ": "at+jwt"})


def start(home: Path, port: int, toml: str, extra: list[str]) -> subprocess.Popen[bytes]:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "plexor.toml").write_text(toml)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=str(home), PLEXOR_PLUGINS="ledger", PLEXOR_LOG_LEVEL="info",
               PYTHONPATH=os.pathsep.join([str(SITE), env.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--stateless", "--json-response",
                             "--port", str(port), *extra], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_up(port, proc)
    return proc


def drive(port: int, tokens: list[str], pid: int) -> float:
    """Server CPU seconds per call for len(tokens) sequential calls on one connection."""
    conn = http.client.HTTPConnection(HOST, port)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "ledger_balance", "arguments": {"account": "a"}}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    before = cpu_seconds(pid)
    for token in tokens:
        conn.request("POST", "/mcp", body, {**headers, "Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        reply = response.read()
        if response.status != 200 or b'"balance":42' not in reply.replace(b" ", b""):
            raise SystemExit(f"call failed: {response.status} {reply[:300]!r}")
    used = cpu_seconds(pid) - before
    conn.close()
    return used / len(tokens)


def in_process(issuer: Issuer, calls: int, rounds: int) -> None:
    """The auth layers alone around an app that only reads the body: AccessGuard (+ audit) vs BearerAuth."""
    import asyncio

    os.environ.update(PLEXOR_PLUGINS="ledger", PLEXOR_HOME=tempfile.mkdtemp())
    sys.path.insert(0, str(SITE))
    from plexor.core.kernel import Kernel
    from plexor.features.auth import auth_config
    from plexor.features.auth.guard import AccessGuard
    from plexor.features.auth.jwks import JwtVerifier
    from plexor.features.auth.scopes import ScopePolicy
    from plexor.log import configure
    from plexor.serving.guard import BearerAuth

    configure("info")
    kernel = Kernel()
    kernel.load()
    resource = "http://127.0.0.1:1/mcp"
    config = auth_config({"issuer": issuer.url, "resource": resource})

    async def app(scope: dict, receive: object, send: object) -> None:
        await receive()  # type: ignore[operator]

    oauth = AccessGuard(app, ScopePolicy(kernel, {}), config, {}, verifier=JwtVerifier(config), static_token=None,
                        max_body=1 << 22)
    static = BearerAuth(app, TOKEN)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "ledger_balance", "arguments": {"account": "a"}}}).encode()

    def scope(token: str) -> dict:
        return {"type": "http", "method": "POST", "path": "/mcp",
                "headers": [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"application/json")]}

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            raise SystemExit(f"refused: {message['status']}")

    async def run(layer: object, token: str, n: int) -> float:
        sc = scope(token)
        started = time.process_time()
        for _ in range(n):
            await layer(sc, receive, send)  # type: ignore[operator]
        return (time.process_time() - started) / n

    one = issuer.mint(resource, 0)
    saved = sys.stderr
    sys.stderr = open(os.devnull, "w")  # the audit lines: written (the cost counts), not shown
    try:
        asyncio.run(run(oauth, one, 200))
        results: dict[str, list[float]] = {"static (BearerAuth)": [], "oauth (AccessGuard + audit)": []}
        for _ in range(rounds):
            results["static (BearerAuth)"].append(asyncio.run(run(static, TOKEN, calls)))
            results["oauth (AccessGuard + audit)"].append(asyncio.run(run(oauth, one, calls)))
    finally:
        sys.stderr.close()
        sys.stderr = saved
    base = statistics.median(results["static (BearerAuth)"])
    print(f"\nthe auth layer alone, in process, CPU per request (median of {rounds} x {calls}):")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"  {name:28} {med * 1e6:7.1f} us  +{(med - base) * 1e6:6.1f} us vs static")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    issuer = Issuer()
    with tempfile.TemporaryDirectory() as tmp:
        static_port, oauth_port = free_port(), free_port()
        resource = f"http://{HOST}:{oauth_port}/mcp"
        servers = {
            "static": start(Path(tmp) / "static", static_port, "", ["--token", TOKEN]),
            "oauth": start(Path(tmp) / "oauth", oauth_port,
                           f'[plexor.auth]\nissuer = "{issuer.url}"\nresource = "{resource}"\n', []),
        }
        try:
            one = issuer.mint(resource, 0)
            fresh = iter(range(1, 10**9))
            rows = {
                "static": lambda n: drive(static_port, [TOKEN] * n, servers["static"].pid),
                "oauth, one token": lambda n: drive(oauth_port, [one] * n, servers["oauth"].pid),
                "oauth, new token": lambda n: drive(oauth_port, [issuer.mint(resource, next(fresh)) for _ in range(n)],
                                                    servers["oauth"].pid),
            }
            for run in rows.values():  # warm up: imports, the JWKS fetch, first-call paths
                run(200)
            fetched = issuer.fetches
            results: dict[str, list[float]] = {name: [] for name in rows}
            names = list(rows)
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for name in order:
                    results[name].append(rows[name](args.calls))
                print(f"round {r + 1}: " + ", ".join(f"{n} {results[n][-1] * 1e6:.0f} us" for n in names), flush=True)
            base = statistics.median(results["static"])
            print(f"\nserver CPU per call, median of {args.rounds} rounds of {args.calls} calls "
                  f"(JWKS fetches during the measured rounds: {issuer.fetches - fetched}):")
            for name in names:
                med = statistics.median(results[name])
                spread = f"{min(results[name]) * 1e6:.0f}-{max(results[name]) * 1e6:.0f}"
                print(f"  {name:18} {med * 1e6:7.1f} us  ({spread})  +{(med - base) * 1e6:6.1f} us vs static  "
                      f"{med / base:.3f}x")
            in_process(issuer, args.calls, args.rounds)
            print(f"load average: {os.getloadavg()[0]:.2f}")
        finally:
            for proc in servers.values():
                proc.terminate()
                proc.wait(30)
            issuer.server.shutdown()


if __name__ == "__main__":
    main()
