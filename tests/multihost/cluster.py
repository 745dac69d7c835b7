"""Two hosts behind a real load balancer, on one machine: what tests/multihost and bench/multihost.py run.

- **Hosts** are network namespaces (``ip netns``), each joined to the root namespace by a veth pair
  (``10.213.N.1`` root side, ``10.213.N.2`` host side). Each runs ``plexor serve --transport http
  --stateless --workers W`` on its own address, with its own ``PLEXOR_HOME`` (no shared disk).
- **PostgreSQL** is the machine's (127.0.0.1:5432, trust auth); a fresh database per cluster. It
  listens on the root namespace's loopback only, which other namespaces cannot reach, so a small TCP
  relay (``relay.py``) listens on the root side of each veth and forwards to it.
- **The balancer** is HAProxy from Debian's packages (``setup.sh`` installs it), round robin per
  request, health-checking ``/healthz``, on 127.0.0.1 in the root namespace.
- **Secrets**: the hosts share the bearer token and the request-state key through the environment
  (``PLEXOR_TOKEN``, ``PLEXOR_STATE_KEY``), as separate machines would.

``Cluster.start(...)`` raises :class:`Unavailable` (the caller skips) when the machine lacks
something: not root or no ``ip netns``, no HAProxy and no way to install it, no PostgreSQL.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SITE = HERE / "site"
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
HOST_PORT = 8765
_SERIAL = itertools.count()


class Unavailable(Exception):
    """The machine cannot run the cluster (the reason is the message)."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def can_make_namespaces() -> str | None:
    """None when ``ip netns add`` works here, else why not."""
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    probe = f"plxprobe{os.getpid()}"
    try:
        proc = _run("ip", "netns", "add", probe, check=False)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is not installed"
    if proc.returncode != 0:
        return f"`ip netns add` is not permitted here: {proc.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


def ensure_haproxy() -> str:
    """The haproxy binary, installed by setup.sh when missing; raises Unavailable when it cannot be."""
    proc = subprocess.run(["bash", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=600)
    if proc.returncode == 3:
        raise Unavailable(proc.stderr.strip())
    if proc.returncode != 0:
        raise RuntimeError(f"tests/multihost/setup.sh failed: {proc.stderr.strip()}")
    return "haproxy"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_connect(dbname: str = "test") -> Any:
    try:
        import psycopg2
    except ImportError as exc:
        raise Unavailable("psycopg2 is not installed (pip install psycopg2-binary)") from exc
    try:
        conn = psycopg2.connect(dbname=dbname, connect_timeout=3, **PG)
    except psycopg2.OperationalError as exc:
        raise Unavailable(f"PostgreSQL is not reachable on 127.0.0.1:5432: {str(exc).strip()}") from exc
    conn.autocommit = True
    return conn


@dataclass
class Host:
    name: str  # the network namespace
    index: int
    home: Path
    proc: subprocess.Popen[bytes] | None = None
    stderr_path: Path | None = None
    workers: int = 2

    @property
    def address(self) -> str:
        return f"10.213.{self.index}.2"

    @property
    def gateway(self) -> str:
        return f"10.213.{self.index}.1"

    def worker_pids(self) -> list[int]:
        """The uvicorn worker processes of this host's server (children of the supervisor; with one
        worker, the server process itself)."""
        assert self.proc is not None
        if self.workers == 1:
            return [self.proc.pid]
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        pids = []
        for pid in map(int, text.split()):  # workers, not multiprocessing's resource tracker
            with contextlib.suppress(OSError):
                if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    pids.append(pid)
        return pids

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""


@dataclass
class Cluster:
    root: Path
    workers: int = 2
    hosts_count: int = 2
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    state_key: str = field(default_factory=lambda: secrets.token_hex(32))
    plugins: str = "multihost,arbor"
    database: str = ""
    port: int = 0
    hosts: list[Host] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    server_close: bool = True  # a new connection to a host per request (spreads requests over its workers)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _tag: str = ""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Cluster:
        why = can_make_namespaces()
        if why:
            raise Unavailable(why)
        self.haproxy = ensure_haproxy()
        serial = next(_SERIAL)  # several clusters in one process (the bench) get their own names and subnets
        self._tag = f"pm{os.getpid() % 100000}{chr(97 + serial % 26)}"
        self.database = f"plexor_mh_{os.getpid()}_{secrets.token_hex(3)}"
        conn = _pg_connect()
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{self.database}"')
        conn.close()
        try:
            base = ((os.getpid() + 7 * serial) % 60) * 4 + 10
            self.hosts = [Host(f"{self._tag}h{i}", base + i, self.root / f"host{i}", workers=self.workers)
                          for i in range(self.hosts_count)]
            for host in self.hosts:
                self._make_namespace(host)
            self._start_relay()
            self.port = free_port()
            for host in self.hosts:
                self._start_host(host)
            for host in self.hosts:
                self._wait_ready(host)
            self._start_balancer()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for host in self.hosts:
            if host.proc is not None and host.proc.poll() is None:
                host.proc.send_signal(signal.SIGTERM)
        for proc in [h.proc for h in self.hosts if h.proc is not None] + self._procs:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for host in self.hosts:  # deleting the namespace deletes its veth pair too
            _run("ip", "netns", "del", host.name, check=False)
            _run("ip", "link", "del", f"{host.name}r", check=False)
        if self.database:
            with contextlib.suppress(Exception):
                conn = _pg_connect()
                with conn.cursor() as cur:
                    cur.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
                conn.close()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ parts
    def _make_namespace(self, host: Host) -> None:
        outer, inner = f"{host.name}r", f"{host.name}n"
        _run("ip", "netns", "add", host.name)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _run("ip", "link", "set", inner, "netns", host.name)
        _run("ip", "addr", "add", f"{host.gateway}/30", "dev", outer)
        _run("ip", "link", "set", outer, "up")
        ns = ("ip", "netns", "exec", host.name)
        _run(*ns, "ip", "addr", "add", f"{host.address}/30", "dev", inner)
        _run(*ns, "ip", "link", "set", inner, "up")
        _run(*ns, "ip", "link", "set", "lo", "up")
        _run(*ns, "ip", "route", "add", "default", "via", host.gateway)

    def _start_relay(self) -> None:
        listen = ",".join(f"{h.gateway}:{PG['port']}" for h in self.hosts)
        proc = subprocess.Popen([sys.executable, str(HERE / "relay.py"), listen, f"{PG['host']}:{PG['port']}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._procs.append(proc)
        line = proc.stdout.readline() if proc.stdout else b""
        if line.strip() != b"ready":
            raise RuntimeError(f"the PostgreSQL relay did not start: {proc.stderr.read().decode() if proc.stderr else ''}")

    def database_url(self, host: Host | None = None) -> str:
        where = host.gateway if host is not None else PG["host"]
        return f"postgresql://{PG['user']}@{where}:{PG['port']}/{self.database}"

    @property
    def public_host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.public_host}/mcp"

    def host_env(self, host: Host) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
        env.update({
            "PLEXOR_HOME": str(host.home), "PLEXOR_PLUGINS": self.plugins, "PLEXOR_LOG_LEVEL": "warning",
            "PLEXOR_TOKEN": self.token, "PLEXOR_STATE_KEY": self.state_key,
            "PLEXOR_DATABASE_URL": self.database_url(host), "PLEXOR_ARBOR_DATABASE_URL": self.database_url(host),
            "PLEXOR_ALLOWED_HOSTS": self.public_host, "MULTIHOST_NAME": host.name,
            "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), env.get("PYTHONPATH", "")) if p),
        })
        env.update(self.extra_env)
        return env

    def _start_host(self, host: Host) -> None:
        host.home.mkdir(parents=True, exist_ok=True)
        host.stderr_path = host.home / "serve.err"
        with open(host.stderr_path, "wb") as err:
            host.proc = subprocess.Popen(
                ["ip", "netns", "exec", host.name, sys.executable, "-m", "plexor", "serve", "--transport", "http",
                 "--stateless", "--workers", str(self.workers), "--host", host.address, "--port", str(HOST_PORT),
                 "--grace", "5", *self.extra_args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=self.host_env(host))

    def healthz(self, host: Host) -> dict[str, Any]:
        req = urllib.request.Request(f"http://{host.address}:{HOST_PORT}/healthz",
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=3) as resp:  # noqa: S310 - the test's own host
            return dict(json.loads(resp.read()))

    def _wait_ready(self, host: Host, wait: float = 60.0) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            assert host.proc is not None
            if host.proc.poll() is not None:
                raise RuntimeError(f"plexor serve on {host.name} exited {host.proc.returncode}: {host.stderr()}")
            with contextlib.suppress(OSError, ValueError):
                if self.healthz(host)["kernel"]["state"] == "ready" and len(host.worker_pids()) >= self.workers:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"plexor serve on {host.name} never became ready: {host.stderr()}")

    def balancer_config(self) -> str:
        servers = "\n".join(f"    server {h.name} {h.address}:{HOST_PORT} check inter 500ms fall 2 rise 1"
                            for h in self.hosts)
        close = ("    # A new connection to the host for every request, so the host's kernel hands it to any of its\n"
                 "    # workers (kept-alive connections would pin a client's requests to one worker per host).\n"
                 "    option http-server-close\n") if self.server_close else ""
        return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 30s
    option redispatch
    retries 2

frontend mcp
    bind 127.0.0.1:{self.port}
    default_backend plexor

backend plexor
    balance roundrobin
{close}    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host {self.public_host} hdr Authorization "Bearer {self.token}"
    http-check expect status 200
{servers}
"""

    def _start_balancer(self) -> None:
        cfg = self.root / "haproxy.cfg"
        cfg.write_text(self.balancer_config())
        _run(self.haproxy, "-c", "-f", str(cfg))
        err = open(self.root / "haproxy.err", "wb")  # noqa: SIM115 - kept open for the process's life
        proc = subprocess.Popen([self.haproxy, "-db", "-f", str(cfg)], stdout=err, stderr=err)
        self._procs.append(proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"haproxy exited {proc.returncode}: {(self.root / 'haproxy.err').read_text()}")
            with contextlib.suppress(OSError):
                req = urllib.request.Request(f"http://{self.public_host}/healthz",
                                             headers={"Authorization": f"Bearer {self.token}"})
                with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310 - loopback
                    if resp.status == 200:
                        return
            time.sleep(0.1)
        raise RuntimeError(f"haproxy never answered: {(self.root / 'haproxy.err').read_text()}")

    # ------------------------------------------------------------------ clients
    def client(self, mode: str = "auto", **kwargs: Any) -> Any:
        """The SDK's MCP client through the balancer (``mode``: "auto" for 2026-07-28, "legacy" for 2025-11-25)."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"})
        return Client(streamable_http_client(self.url, http_client=http), mode=mode, **kwargs)

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A query on the cluster's database, from the root namespace."""
        conn = _pg_connect(self.database)
        try:
            with conn.cursor() as cur:
                cur.execute(query, params)
                return list(cur.fetchall()) if cur.description else []
        finally:
            conn.close()
