"""Change notifications across processes (plexor.features.state.bus): a client connected to one worker hears a
change made in another, on one SQLite data directory and on PostgreSQL, in both protocol eras.

Real `plexor serve` processes with the multi-host fixture plugin (``multihost_touch`` publishes
``resources/updated`` for ``mh://board`` and says which process served it), real SDK clients.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

import anyio
import pytest
from conformance.serving import serve_http

from plexor.features.state import open_state
from plexor.features.state.bus import PostgresBus, SqliteBus, install
from plexor.notify import Event, Notifier

pytestmark = pytest.mark.anyio
SITE = str(Path(__file__).resolve().parent / "multihost" / "site")
ENV = {"PLEXOR_PLUGINS": "multihost", "PYTHONPATH": SITE}


@contextlib.contextmanager
def scratch_database():
    """A fresh PostgreSQL database on 127.0.0.1:5432 (skips when there is none), dropped afterwards."""
    psycopg2 = pytest.importorskip("psycopg2")
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="test", connect_timeout=3)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable on 127.0.0.1:5432: {exc}")
    conn.autocommit = True
    name = f"plexor_bus_{secrets.token_hex(4)}"
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


async def _touch(url: str) -> int:
    """One touch through a new connection (so the workers' shared socket may give it to either); its pid."""
    from mcp import Client

    async with Client(url, mode="auto") as client:
        result = await client.call_tool("multihost_touch", {})
    assert not result.is_error, result
    return int(result.structured_content["pid"])


async def _listener_hears_every_worker(url: str) -> None:
    from mcp import Client

    async with Client(url, mode="auto") as listener, listener.listen(resource_subscriptions=["mh://board"]) as sub:
        touched: list[int] = []
        for _ in range(40):
            touched.append(await _touch(url))
            with anyio.fail_after(5, shield=False):  # a change made in a worker the stream is not on is heard too
                event = await sub.__anext__()
            assert getattr(event, "uri", None) == "mh://board", event
            if len(set(touched)) >= 2 and len(touched) >= 6:
                break
        assert len(set(touched)) == 2, f"every touch landed on one worker ({touched}): nothing crossed processes"


async def test_sqlite_a_listener_on_one_worker_hears_changes_made_in_the_other(tmp_path):
    with serve_http(tmp_path, "--stateless", "--workers", "2", env=ENV) as served:
        await _listener_hears_every_worker(served.url)
    assert (tmp_path / "data" / "plexor.sqlite3").exists()


@pytest.mark.postgres
async def test_postgres_a_listener_on_one_worker_hears_changes_made_in_the_other(tmp_path):
    with scratch_database() as url, serve_http(tmp_path, "--stateless", "--workers", "2",
                                                env={**ENV, "PLEXOR_DATABASE_URL": url}) as served:
        await _listener_hears_every_worker(served.url)


async def _a_2025_session_hears_the_other_server(home_a: Path, home_b: Path, env: dict[str, str]) -> None:
    """A stateful 2025-11-25 session subscribed on server A; the change is made on server B."""
    from mcp import Client

    heard: list[str] = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            heard.append(root.params.uri)

    with serve_http(home_a, env=env) as a, serve_http(home_b, "--stateless", env=env) as b:
        async with Client(a.url, mode="legacy", message_handler=on_message) as session:
            with pytest.warns(Warning, match="resources/subscribe is removed"):
                await session.subscribe_resource("mh://board")
            other_pid = await _touch(b.url)
            assert other_pid != a.proc.pid and other_pid == b.proc.pid
            with anyio.fail_after(5):
                while not heard:
                    await anyio.sleep(0.02)
            assert heard == ["mh://board"]
            async with Client(b.url, mode="auto") as other:  # an unsubscribed URI is not sent
                await other.call_tool("multihost_touch", {"uri": "mh://elsewhere"})
            await anyio.sleep(0.5)
            assert heard == ["mh://board"]


@pytest.mark.postgres
async def test_postgres_a_2025_session_hears_a_change_made_by_another_server(tmp_path):
    """Two servers sharing only PostgreSQL (no disk)."""
    with scratch_database() as url:
        await _a_2025_session_hears_the_other_server(tmp_path / "a", tmp_path / "b",
                                                     {**ENV, "PLEXOR_DATABASE_URL": url})


async def test_sqlite_stateful_servers_sharing_their_event_store_hear_each_other(tmp_path):
    """Two single-process servers on one data directory join the bus when they share their event store."""
    await _a_2025_session_hears_the_other_server(tmp_path, tmp_path, {**ENV, "PLEXOR_EVENT_STORE": "shared"})


async def _bus_pair(make):
    """Two notifiers on two backends (as two processes would have); each hears the other once, itself once."""
    one, two = Notifier(), Notifier()
    first, second = make(), make()
    install(one, first)
    install(two, second)
    got_one: list[Event] = []
    got_two: list[Event] = []
    one.subscribe(got_one.append)
    two.subscribe(got_two.append)
    await one.start()
    await two.start()
    try:
        one.publish("resources/updated", {"uri": "x://1"})
        two.publish("tools/list_changed")
        with anyio.fail_after(5):
            while len(got_one) < 2 or len(got_two) < 2:
                await anyio.sleep(0.01)
        await anyio.sleep(0.3)  # nothing more arrives: no echo of one's own events
        expected = [Event("resources/updated", {"uri": "x://1"}), Event("tools/list_changed", {})]
        assert sorted(got_one, key=str) == sorted(got_two, key=str) == sorted(expected, key=str)
        assert first.sent == second.sent == 1 and first.heard == second.heard == 1
    finally:
        await one.close()
        await two.close()


async def test_sqlite_bus_carries_events_between_two_backends_without_echo(tmp_path):
    await _bus_pair(lambda: SqliteBus(open_state(tmp_path)))


async def test_sqlite_bus_without_wakeups_still_delivers_by_polling(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")  # the socket directory cannot be made: polling only

    def make() -> SqliteBus:
        return SqliteBus(open_state(tmp_path), poll=0.05, socket_dir=blocked / "sockets")

    await _bus_pair(make)


@pytest.mark.postgres
async def test_postgres_bus_carries_events_between_two_backends_without_echo():
    with scratch_database() as url:
        await _bus_pair(lambda: PostgresBus(url))


@pytest.mark.postgres
async def test_postgres_bus_listens_again_after_its_connection_is_killed():
    """The LISTEN connection dropped (a database restart, a failover): the bus reconnects and hears again."""
    import psycopg2

    with scratch_database() as url:
        one, two = Notifier(), Notifier()
        listening = PostgresBus(url, retry=0.1)
        install(one, listening)
        install(two, PostgresBus(url))
        got: list[Event] = []
        one.subscribe(got.append)
        await one.start()
        await two.start()
        try:
            admin = psycopg2.connect(url)
            admin.autocommit = True
            with admin.cursor() as cur:
                cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                            "'plexor-bus' AND query LIKE 'LISTEN%%' AND datname = current_database()")
                assert cur.fetchall(), "no LISTEN connection to kill"
            admin.close()
            with anyio.fail_after(10):
                while listening.listening.is_set():  # it notices the loss...
                    await anyio.sleep(0.02)
                while not listening.listening.is_set():  # ...and listens again
                    await anyio.sleep(0.02)
            two.publish("prompts/list_changed")
            with anyio.fail_after(5):
                while not got:
                    await anyio.sleep(0.02)
            assert got == [Event("prompts/list_changed", {})]
        finally:
            await one.close()
            await two.close()
