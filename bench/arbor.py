"""Arbor benchmarks: bulk appends vs raw inserts, deep context paths, rendering, on SQLite and PostgreSQL.

Run:  python bench/arbor.py [--nodes 100000] [--repeat 3] [--pg-url URL | --no-postgres]

Side by side in one run, for each backend:

* appending N nodes (a linear conversation) through the plugin's storage
  layer (``Store.append_chain``: one transaction, ids, positions, head) vs the
  anchor: raw ``sqlite3`` ``executemany`` of the very same rows into the same
  schema (on PostgreSQL the anchor is psycopg2's ``execute_values``), each
  into a fresh database; target ≤ 3x;
* the context path (root → node, full nodes) of a node at depth 10,000:
  p50 over 30 reads; target ≤ 20 ms. Beside it, interleaved read for read,
  the same path read one row per node (the plugin's fallback, and how
  paths were read before), so the gain shows even on a busy machine. The
  conversation was appended in one go, so its keys are consecutive (what
  the SQLite walk reads a block at a time); the worst case, a conversation
  whose every node was written between two nodes of another tree, is
  measured too;
* rendering a 10,000-node tree (100 conversations of 100 messages with
  branches, mixed-length and multi-byte text, roles) through ``Store.render``
  in one page as large as the tree: p50 of 10; target ≤ 200 ms; beside it the
  default first page (2,000 lines), what ``arbor_tree_render`` returns;
* for information: the same path as ids only (``arbor_node_get_path``), which
  shows the recursive query's own share, and single-node creation (one
  transaction each) per second.

Each figure is measured through a real kernel with the arbor plugin; the
PostgreSQL runs use a schema of their own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

import anyio

os.environ.setdefault("PLEXOR_LOG_LEVEL", "error")

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
NODE_COLS = "seq, parent_seq, id, tree_id, position, kind, role, content, handle, metadata, created_at"


def _kernel_env(home: str, url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLEXOR_")}
    env.update(PLEXOR_HOME=home, PLEXOR_PLUGINS="arbor", PLEXOR_ARBOR_SWEEP_INTERVAL="0", PLEXOR_LOG_LEVEL="error")
    if url:
        env["PLEXOR_ARBOR_DATABASE_URL"] = url
    return env


class Backend:
    """A started kernel with the arbor plugin on one backend; ``store`` is the plugin's storage layer."""

    def __init__(self, name: str, url: str | None) -> None:
        self.name = name
        self.url = url
        self.home = tempfile.mkdtemp(prefix=f"arbor-bench-{name}-")
        self.kernel: Any = None
        self.store: Any = None

    async def __aenter__(self) -> Backend:
        from plexor.core.kernel import Kernel

        self.kernel = Kernel(environ=_kernel_env(self.home, self.url))
        await self.kernel.start()
        rec = self.kernel.plugin("arbor")
        if rec.state.value != "ready":
            raise SystemExit(f"arbor did not start on {self.name}: {rec.error}")
        from plexor_arbor.store import Store

        self.store = rec.handle.service(Store)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.kernel.stop()


def _items(n: int) -> list[tuple[str, dict[str, Any] | None]]:
    roles = ("user", "assistant")
    return [(f"message {i}: " + "lorem ipsum " * (i % 7), {"role": roles[i % 2]}) for i in range(n)]


# ------------------------------------------------------------------ appends
def bench_appends(backend: Backend, n: int) -> tuple[float, str]:
    tree = backend.store.create_tree({"bench": "appends"})
    items = _items(n)
    started = time.perf_counter()
    backend.store.append_chain(tree["id"], items)
    return time.perf_counter() - started, tree["id"]


def _rows_of(backend: Backend, tree_id: str) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
    db = backend.store.db
    p = db.param
    rows = db.execute_sql(f"SELECT {NODE_COLS} FROM arbor_node WHERE tree_id = {p} AND parent_seq IS NOT NULL "
                          "ORDER BY seq", (tree_id,)).fetchall()
    tree = db.execute_sql(f"SELECT id, state, ref_count, created_at, updated_at, metadata FROM arbor_tree "
                          f"WHERE id = {p}", (tree_id,)).fetchone()
    return rows, tree


def sqlite_anchor(source_file: str, rows: list[tuple[Any, ...]], tree: tuple[Any, ...]) -> float:
    """Raw sqlite3: the same schema (copied from the plugin's file), the same pragmas, one executemany."""
    src = sqlite3.connect(source_file)
    ddl = [r[0] for r in src.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name LIKE 'arbor_%' "
                                     "ORDER BY type DESC")]
    src.close()
    path = tempfile.mktemp(prefix="arbor-anchor-", suffix=".sqlite3")
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = wal", "synchronous = normal", "foreign_keys = 1", "cache_size = -16000"):
        conn.execute(f"PRAGMA {pragma}")
    for stmt in ddl:
        conn.execute(stmt)
    conn.execute("INSERT INTO arbor_tree (id, state, ref_count, created_at, updated_at, metadata) VALUES (?,?,?,?,?,?)",
                 tree)
    # The plugin's chain hangs under the tree's root node (seq of the first row's parent): insert that too.
    conn.execute(f"INSERT INTO arbor_node ({NODE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                 (rows[0][1], None, str(uuid.uuid4()), tree[0], 0, "text", None, "", None, None, tree[3]))
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO arbor_node ({NODE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return elapsed


def pg_anchor(url: str, rows: list[tuple[Any, ...]], tree: tuple[Any, ...]) -> float:
    """Raw psycopg2 execute_values of the same rows into a copy of the plugin's tables in a fresh schema."""
    import psycopg2
    from psycopg2.extras import execute_values

    base, _, _ = url.partition("?")
    schema = f"arbor_anchor_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(base)
    conn.autocommit = True
    cur = conn.cursor()
    source_schema = url.split("search_path%3D", 1)[1]
    cur.execute(f'CREATE SCHEMA "{schema}"')
    try:
        for table in ("arbor_tree", "arbor_node"):
            cur.execute(f'CREATE TABLE "{schema}".{table} (LIKE "{source_schema}".{table} INCLUDING ALL)')
        cur.execute(f'ALTER TABLE "{schema}".arbor_node ADD FOREIGN KEY (tree_id) REFERENCES "{schema}".arbor_tree (id)')
        cur.execute(f'INSERT INTO "{schema}".arbor_tree (id, state, ref_count, created_at, updated_at, metadata) '
                    "VALUES (%s,%s,%s,%s,%s,%s)", tree)
        conn.autocommit = False
        started = time.perf_counter()
        execute_values(cur, f'INSERT INTO "{schema}".arbor_node ({NODE_COLS}) VALUES %s', rows, page_size=2000)
        conn.commit()
        elapsed = time.perf_counter() - started
    finally:
        conn.autocommit = True
        cur.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.close()
    return elapsed


def settle(backend: Backend) -> None:
    """Reads are measured in a steady state: on PostgreSQL, vacuum the freshly loaded tables now rather
    than let autovacuum do it in the middle of the timed reads."""
    if backend.name != "sqlite":
        db = backend.store.db
        db.execute_sql("VACUUM (ANALYZE) arbor_node")
        db.execute_sql("VACUUM (ANALYZE) arbor_tree")


# -------------------------------------------------------------------- paths
def bench_path_ids(backend: Backend, tree_id: str, depth: int, reps: int = 30) -> float:
    """The same recursive query returning ids only (``arbor_node_get_path``): the query's own share."""
    store = backend.store
    node_id = store.db.execute_sql(
        f"SELECT id FROM arbor_node WHERE tree_id = {store.db.param} ORDER BY seq LIMIT 1 OFFSET {depth}",
        (tree_id,)).fetchone()[0]
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        store.path_ids(tree_id, node_id)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_path(backend: Backend, tree_id: str, depth: int, reps: int = 30) -> tuple[float, float, float, int]:
    """p50 of ``Store.path`` (one row of per-column strings) and, interleaved with it so both see the same
    machine, of the row-per-node read of the same path (``Store._path_by_rows``, the fallback); also the
    p50 of the CPU time the calling thread spent in ``Store.path`` (on SQLite that is all of the work,
    the database engine included, so it shows the cost apart from waiting for a busy CPU)."""
    store = backend.store
    ids = store.db.execute_sql(
        f"SELECT id FROM arbor_node WHERE tree_id = {store.db.param} ORDER BY seq LIMIT 1 OFFSET {depth}",
        (tree_id,)).fetchone()
    node_id = ids[0]
    seq = store._node_ref(tree_id, node_id)[0]
    times, row_times, cpu_times = [], [], []
    nodes: list[Any] = []
    for _ in range(reps):
        cpu = time.thread_time()
        started = time.perf_counter()
        nodes = store.path(tree_id, node_id)
        times.append(time.perf_counter() - started)
        cpu_times.append(time.thread_time() - cpu)
        started = time.perf_counter()
        by_rows = store._path_by_rows(tree_id, seq)
        row_times.append(time.perf_counter() - started)
    if by_rows != nodes:
        raise SystemExit("the two path reads disagree")
    return statistics.median(times), statistics.median(row_times), statistics.median(cpu_times), len(nodes) - 1


def interleaved_trees(backend: Backend, depth: int) -> tuple[str, str]:
    """Two conversations of ``depth`` messages written turn about, so no node's key follows its
    parent's: the worst case for the SQLite path walk, which then moves one node per step.
    Returns (tree id, id of its node at ``depth``). Rows go in directly, in one transaction."""
    from plexor_arbor.store import iso_now, uuid4_batch

    store = backend.store
    a, b = store.create_tree({"bench": "interleaved"}), store.create_tree({"bench": "interleaved"})
    with store.data.write():
        first = store.data.reserve(2 * depth)
        seqs = {a["id"]: store._node_ref(a["id"], a["root"])[0], b["id"]: store._node_ref(b["id"], b["root"])[0]}
        rows = []
        now = iso_now()
        ids = uuid4_batch(2 * depth)
        roles = ("user", "assistant")
        for i in range(2 * depth):
            tree = (a, b)[i % 2]["id"]
            seq = first + i
            meta = json.dumps({"role": roles[(i // 2) % 2]}, separators=(",", ":"))
            rows.append((seq, seqs[tree], ids[i], tree, 0, "text", roles[(i // 2) % 2],
                         f"message {i // 2}: " + "lorem ipsum " * (i % 7), meta, now))
            seqs[tree] = seq
        store.data.insert_many("arbor_node", ("seq", "parent_seq", "id", "tree_id", "position", "kind", "role",
                                              "content", "metadata", "created_at"), rows)
    store.data.after_bulk(len(rows))
    return a["id"], rows[-2][2]


def bench_path_interleaved(backend: Backend, depth: int, reps: int = 30) -> tuple[float, float]:
    """p50 of ``Store.path`` and of the row-per-node read, interleaved, on the worst-case layout."""
    tree_id, node_id = interleaved_trees(backend, depth)
    store = backend.store
    seq = store._node_ref(tree_id, node_id)[0]
    times, row_times = [], []
    nodes: list[Any] = []
    for _ in range(reps):
        started = time.perf_counter()
        nodes = store.path(tree_id, node_id)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        by_rows = store._path_by_rows(tree_id, seq)
        row_times.append(time.perf_counter() - started)
    if by_rows != nodes or len(nodes) != depth + 1:
        raise SystemExit("the two path reads disagree on the interleaved tree")
    return statistics.median(times), statistics.median(row_times)


# ------------------------------------------------------------------- render
def render_document(n: int = 10_000, conversations: int = 100, seed: int = 7) -> dict[str, Any]:
    """An export document: ``conversations`` threads under the root, branching now and then."""
    from plexor_arbor.store import EXPORT_FORMAT, iso_now

    rnd = random.Random(seed)
    now = iso_now()
    root = str(uuid.uuid4())
    nodes = [{"id": root, "parent": None, "data": {"type": "text", "content": ""}, "metadata": {}, "created_at": now}]
    texts = ["Hello!", "Could you explain how recursive queries work in SQL?", "Sure — " + "details " * 12,
             "日本語のテキストも表示できますか？" * 3, "Emoji 🎉👨‍👩‍👧 " * 8, "Line one\nline two\nline three"]
    per = (n - 1) // conversations
    made = 1
    for _ in range(conversations):
        thread: list[str] = []
        for j in range(per if made + per <= n else n - made):
            if not thread:
                parent = root
            elif rnd.random() < 0.1:
                parent = rnd.choice(thread)  # a branch from an earlier message
            else:
                parent = thread[-1]
            nid = str(uuid.uuid4())
            if rnd.random() < 0.05:
                data: dict[str, Any] = {"type": "external", "handle": {"source": "files", "identifier": f"doc{j}.pdf"}}
            else:
                data = {"type": "text", "content": rnd.choice(texts)}
            nodes.append({"id": nid, "parent": parent, "data": data,
                          "metadata": {"role": "user" if j % 2 == 0 else "assistant"}, "created_at": now})
            thread.append(nid)
            made += 1
    while made < n:
        nodes.append({"id": str(uuid.uuid4()), "parent": root, "data": {"type": "text", "content": "extra"},
                      "metadata": {}, "created_at": now})
        made += 1
    tid = str(uuid.uuid4())
    tree = {"id": tid, "root": root, "head": nodes[-1]["id"], "state": "active",
            "refs": {"ref_count": 1, "owners": {"bench": 1}}, "metadata": {"bench": "render"},
            "created_at": now, "updated_at": now}
    return {"format": EXPORT_FORMAT, "tree": tree, "nodes": nodes}


def bench_render(backend: Backend, reps: int = 10) -> tuple[float, int, int, float]:
    """p50 of drawing the whole 10,000-node tree in one page (``Store.render`` with a page as large as the
    tree: the shape query, the layout, the texts of every line), and p50 of the default first page."""
    doc = render_document()
    tree = backend.store.import_tree(doc)
    times, first_page = [], []
    data: dict[str, Any] = {}
    for _ in range(reps):
        started = time.perf_counter()
        data = backend.store.render(tree["id"], limit=10_000, max_chars=10**9)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        backend.store.render(tree["id"])
        first_page.append(time.perf_counter() - started)
    return statistics.median(times), data["nodes_drawn"], len(data["rendering"]), statistics.median(first_page)


def bench_single(backend: Backend, n: int = 1000) -> float:
    tree = backend.store.create_tree({"bench": "single"})
    started = time.perf_counter()
    for i in range(n):
        backend.store.create_node(tree["id"], content=f"message {i}", metadata={"role": "user"})
    return n / (time.perf_counter() - started)


# --------------------------------------------------------------------- main
async def run_backend(name: str, url: str | None, nodes: int, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": name}
    plugin_times, anchor_times = [], []
    tree_for_paths = None
    for i in range(repeat):
        # A fresh database per repetition, so every run inserts into the same starting state.
        run_url = url
        schema = None
        if url:
            schema, run_url = _pg_schema(url)
        async with Backend(name, run_url) as b:
            elapsed, tree_id = bench_appends(b, nodes)
            rows, tree = _rows_of(b, tree_id)
            if name == "sqlite":
                source = os.path.join(b.home, "data", "arbor", "arbor.sqlite3")
                anchor = sqlite_anchor(source, rows, tree)
            else:
                anchor = pg_anchor(run_url, rows, tree)
            plugin_times.append(elapsed)
            anchor_times.append(anchor)
            del rows  # the anchor's copy of the rows is the benchmark's memory, not the plugin's
            gc.collect()
            if i == repeat - 1:
                settle(b)
                out["path_p50"], out["path_rows_p50"], out["path_cpu_p50"], out["path_depth"] = bench_path(
                    b, tree_id, min(10_000, nodes))
                out["path_ids_p50"] = bench_path_ids(b, tree_id, min(10_000, nodes))
                out["render_p50"], out["render_nodes"], out["render_chars"], out["render_page_p50"] = bench_render(b)
                out["path_mixed_p50"], out["path_mixed_rows_p50"] = bench_path_interleaved(b, min(10_000, nodes))
                out["single_per_s"] = bench_single(b)
                tree_for_paths = tree_id
        if schema:
            _drop_schema(url, schema)
    out["append_plugin"] = statistics.median(plugin_times)
    out["append_anchor"] = statistics.median(anchor_times)
    out["tree"] = tree_for_paths
    return out


def _pg_schema(url: str) -> tuple[str, str]:
    import psycopg2

    schema = f"arbor_bench_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(url, connect_timeout=3)
    conn.autocommit = True
    conn.cursor().execute(f'CREATE SCHEMA "{schema}"')
    conn.close()
    sep = "&" if "?" in url else "?"
    return schema, f"{url}{sep}options=-csearch_path%3D{schema}"


def _drop_schema(url: str, schema: str) -> None:
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    conn.cursor().execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.close()


def _pg_available(url: str) -> str | None:
    try:
        import psycopg2

        psycopg2.connect(url, connect_timeout=3).close()
        return None
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}".strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes appended (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="append repetitions, median reported (default 3)")
    parser.add_argument("--pg-url", default=os.environ.get("ARBOR_BENCH_POSTGRES", DEFAULT_PG))
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    backends: list[tuple[str, str | None]] = [("sqlite", None)]
    if not args.no_postgres:
        why = _pg_available(args.pg_url)
        if why:
            print(f"PostgreSQL skipped: {why}", file=sys.stderr)
        else:
            backends.append(("postgresql", args.pg_url))
    load_before = os.getloadavg()[0]
    results = [anyio.run(run_backend, name, url, args.nodes, args.repeat) for name, url in backends]
    load_after = os.getloadavg()[0]

    print(f"\nArbor benchmark — {args.nodes:,} appended nodes, median of {args.repeat}; Python {sys.version.split()[0]}, "
          f"SQLite {sqlite3.sqlite_version}; {os.cpu_count()} CPUs, load average {load_before:.2f} before, "
          f"{load_after:.2f} after\n")
    print("| backend | measure | Plexor arbor | anchor | ratio | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        anchor_name = "raw sqlite3 executemany" if r["backend"] == "sqlite" else "raw psycopg2 execute_values"
        ratio = r["append_plugin"] / r["append_anchor"]
        print(f"| {r['backend']} | append {args.nodes:,} nodes | {r['append_plugin'] * 1000:.0f} ms | "
              f"{r['append_anchor'] * 1000:.0f} ms ({anchor_name}) | {ratio:.2f}x | ≤ 3x |")
        print(f"| {r['backend']} | context path, depth {r['path_depth']:,} (p50) | {r['path_p50'] * 1000:.1f} ms | "
              f"{r['path_rows_p50'] * 1000:.1f} ms (one row per node) | {r['path_p50'] / r['path_rows_p50']:.2f}x | ≤ 20 ms |")
        if r["backend"] == "sqlite":
            print(f"| {r['backend']} | context path, depth {r['path_depth']:,}: CPU time of the calling thread (p50) | "
                  f"{r['path_cpu_p50'] * 1000:.1f} ms | — | — | (info) |")
        print(f"| {r['backend']} | context path, depth {r['path_depth']:,}, two trees written turn about (p50) | "
              f"{r['path_mixed_p50'] * 1000:.1f} ms | {r['path_mixed_rows_p50'] * 1000:.1f} ms (one row per node) | "
              f"{r['path_mixed_p50'] / r['path_mixed_rows_p50']:.2f}x | (worst case) |")
        print(f"| {r['backend']} | path ids only, depth {r['path_depth']:,} (p50) | {r['path_ids_p50'] * 1000:.1f} ms | "
              "— | — | (info) |")
        print(f"| {r['backend']} | render {r['render_nodes']:,}-node tree (p50) | {r['render_p50'] * 1000:.1f} ms | "
              f"— | — | ≤ 200 ms |")
        print(f"| {r['backend']} | render, default first page of the same tree (p50) | "
              f"{r['render_page_p50'] * 1000:.1f} ms | — | — | (info) |")
        print(f"| {r['backend']} | single-node creation (own transaction each) | {r['single_per_s']:.0f} nodes/s | "
              "— | — | (info) |")


if __name__ == "__main__":
    main()
