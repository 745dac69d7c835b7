"""Seeded fuzzing: malformed and mutated JSON-RPC over stdio and HTTP, in both protocol eras.

Over stdio 10,000 messages after the 2025-11-25 handshake and 5,000 in the 2026-07-28 era
(each request carries its envelope, the first is server/discover); over Streamable HTTP 600
bodies and headers per era, stateful and stateless (--stateless); over legacy SSE 600 bodies,
whose answers ride the event stream. Mutations include broken JSON, invalid UTF-8, wrong envelope types, huge
ids, deep nesting, oversized lines, batches, params that are arrays, strings, numbers or
null, unknown fields, huge numbers, and responses sent to the server. Afterwards the server
is alive, every request that carried a readable id got exactly one well-formed answer (the
counts are per id: zero unanswered, none twice), responses sent to the server got none, and
stdout carried nothing but JSON-RPC.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading

import httpx
import pytest
from conformance.serving import INIT, MCP_HEADERS, fixture_env, serve_http

SEED = 20261122
N_STDIO = 10_000
N_STDIO_MODERN = 5_000
N_HTTP = 600

METHODS = ["tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
           "prompts/get", "prompts/list", "completion/complete", "ping", "logging/setLevel", "no/such/method", ""]
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _valid(rng: random.Random, i: int, modern: bool = False) -> dict:
    method = rng.choice(METHODS)
    params = {
        "tools/call": {"name": rng.choice(["test_echo", "plexor_health", "test_nope", "test_slow"]),
                       "arguments": rng.choice([{"text": "x"}, {}, {"seconds": 0}, {"text": 5}])},
        "resources/read": {"uri": rng.choice(["test://static-text", "test://template/7/data", "nope://x"])},
        "prompts/get": {"name": rng.choice(["test_simple_prompt", "test_nope"])},
        "logging/setLevel": {"level": rng.choice(["info", "loud"])},
        "completion/complete": {"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
                                "argument": {"name": "id", "value": "4"}},
    }.get(method, {})
    if modern:
        params = {**params, "_meta": dict(ENVELOPE)}
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": params}


def _deep(depth: int) -> str:
    return '{"a":[' * depth + "1" + "]}" * depth


NEVER = "never"  # a message that must get no answer at all (a response sent to the server)


def _mutate(rng: random.Random, msg: dict) -> tuple[bytes, object]:
    """One fuzzed line and the id exactly one answer must carry (None: no readable id; NEVER: none owed)."""
    kind = rng.randrange(18)
    m = json.loads(json.dumps(msg))
    if kind == 0:  # broken JSON: no readable id
        raw = json.dumps(m)
        cut = rng.randrange(1, len(raw))
        return raw[:cut].encode(), None
    if kind == 1:  # invalid UTF-8 inside the line (the id is still readable)
        return b'{"jsonrpc":"2.0","id":' + str(m["id"]).encode() + b',"method":"\xff\xfe"}', m["id"]
    if kind == 2:  # wrong types in the envelope
        m[rng.choice(["jsonrpc", "method", "params"])] = rng.choice([7, None, [], {"x": 1}, True])
        return json.dumps(m).encode(), m["id"]
    if kind == 3:  # huge ids, each still unique (a float is no id at all)
        i = m["id"]
        m["id"] = rng.choice([10**40 + i, -(10**30) - i, "x" * 5000 + str(i), 1.5e300])
        return json.dumps(m).encode(), None if isinstance(m["id"], float) else m["id"]
    if kind == 4:  # deep nesting
        m["params"] = "@DEEP@"
        return json.dumps(m).replace('"@DEEP@"', _deep(rng.choice([50, 500, 3000]))).encode(), m["id"]
    if kind == 5:  # oversized line
        m.setdefault("params", {})["blob"] = "y" * rng.choice([100_000, 1_000_000])
        return json.dumps(m).encode(), m["id"]
    if kind == 6:  # a notification (no id): never answered
        m.pop("id")
        return json.dumps(m).encode(), None
    if kind == 7:  # random bytes
        return bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b" "), None
    if kind == 8:  # a response sent to the server: never answered
        return json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}).encode(), NEVER
    if kind == 9:  # a batch (not part of the protocol any more): its id answered once
        return json.dumps([m, m]).encode(), m["id"]
    if kind == 10:  # params that are not an object: an array, a string, a number
        m["params"] = rng.choice([[1, 2], "s", 3, -1.5, True])
        return json.dumps(m).encode(), m["id"]
    if kind == 11:  # params null
        m["params"] = None
        return json.dumps(m).encode(), m["id"]
    if kind == 12:  # unknown fields, in the envelope and in params
        m[rng.choice(["extra", "ID", "Method"])] = rng.choice([1, "x", None, {"y": []}])
        if isinstance(m.get("params"), dict):
            m["params"]["unknownField"] = rng.choice([1, [1], {"z": None}])
        return json.dumps(m).encode(), m["id"]
    if kind == 13:  # huge numbers where numbers go
        m.setdefault("params", {})["n"] = "@NUM@"
        number = rng.choice(["1e400", "-1e400", "1" + "0" * 400, "1e-400"])
        return json.dumps(m).replace('"@NUM@"', number).encode(), m["id"]
    if kind == 14:  # arrays and nulls where objects go inside params
        params = m.setdefault("params", {})
        params[rng.choice(["arguments", "_meta", "ref", "argument"])] = rng.choice([[1], None, "s"])
        return json.dumps(m).encode(), m["id"]
    # untouched, well-formed request: must be answered exactly once
    return json.dumps(m).encode(), m["id"]


def _well_formed(resp: dict) -> bool:
    if resp.get("jsonrpc") != "2.0":
        return False
    if "result" in resp:
        return isinstance(resp["result"], dict) and "error" not in resp
    err = resp.get("error")
    return isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str)


@pytest.mark.slow
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_stdio_survives_ten_thousand_fuzzed_messages(tmp_path, era):
    rng = random.Random(SEED)
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=fixture_env(tmp_path))
    try:
        _drive_stdio(rng, proc, modern=era == "2026-07-28")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _drive_stdio(rng: random.Random, proc: subprocess.Popen, modern: bool) -> None:
    import time

    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    if modern:  # the first request decides the era: a 2026-07-28 envelope, no handshake
        first = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}}
        proc.stdin.write(json.dumps(first).encode() + b"\n")
    else:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n" + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    owed: list[object] = [1]
    never: list[object] = []
    for i in range(N_STDIO_MODERN if modern else N_STDIO):
        line, owed_id = _mutate(rng, _valid(rng, 1000 + i, modern))
        proc.stdin.write(line + b"\n")
        if owed_id is NEVER:
            never.append(1000 + i)
        elif owed_id is not None:
            owed.append(owed_id)
    last = {"jsonrpc": "2.0", "id": "last", "method": "ping", "params": {"_meta": ENVELOPE} if modern else {}}
    proc.stdin.write(json.dumps(last).encode() + b"\n")
    owed.append("last")
    proc.stdin.flush()
    # Wait until the final ping is answered, then check the process is alive and close stdin.
    deadline = time.monotonic() + 240
    while not any(b'"id":"last"' in ln for ln in list(lines)):
        assert proc.poll() is None, "the server died under fuzzing"
        assert time.monotonic() < deadline, "the server stopped answering"
        time.sleep(0.1)
    assert proc.poll() is None
    proc.stdin.close()
    proc.wait(60)
    reader.join(10)
    responses = [json.loads(ln) for ln in lines]  # stdout carried nothing but JSON lines
    assert all(isinstance(r, dict) and r.get("jsonrpc") == "2.0" for r in responses)
    answered = [r for r in responses if "id" in r]
    assert all(_well_formed(r) for r in answered)
    counts: dict = {}
    for r in answered:
        key = json.dumps(r["id"])
        counts[key] = counts.get(key, 0) + 1
    unanswered = [i for i in owed if counts.get(json.dumps(i), 0) == 0]
    twice = [i for i in owed if counts.get(json.dumps(i), 0) > 1]
    assert unanswered == [] and twice == [], f"{len(unanswered)} unanswered ids {unanswered[:10]}, {len(twice)} answered twice"
    assert [i for i in never if json.dumps(i) in counts] == []  # responses sent to the server are never answered


def _messages(r: httpx.Response) -> list:
    """The JSON-RPC messages of one HTTP answer: an SSE stream, one JSON object, or an array of them."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(x[5:]) for x in r.text.splitlines() if x.startswith("data:") and x[5:].strip()]
    if r.headers.get("content-type", "").startswith("application/json") and r.content:
        body = r.json()
        return body if isinstance(body, list) else [body]
    return []


@pytest.mark.slow
@pytest.mark.parametrize(("era", "mode"), [("2025-11-25", "stateful"), ("2026-07-28", "stateful"),
                                           ("2025-11-25", "stateless"), ("2026-07-28", "stateless")])
def test_http_survives_mutated_bodies_and_headers(tmp_path, era, mode):
    rng = random.Random(SEED + 1)
    modern = era == "2026-07-28"
    flags = ("--stateless",) if mode == "stateless" else ()
    with serve_http(tmp_path, "--max-body", "262144", *flags) as served, httpx.Client(timeout=30) as http:
        if modern:  # no handshake: every request carries its envelope
            base = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28"}
        elif mode == "stateless":  # no session: each request stands alone
            base = dict(MCP_HEADERS)
        else:
            init = http.post(served.url, json=INIT, headers=MCP_HEADERS)
            base = {**MCP_HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
            http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=base)
        statuses: dict[int, int] = {}
        unanswered, twice = [], []
        for i in range(N_HTTP):
            msg = _valid(rng, 10 + i, modern)
            line, owed_id = _mutate(rng, msg)
            headers = dict(base)
            if modern:
                headers["Mcp-Method"] = msg["method"] or "none"
                if msg["method"] in ("tools/call", "prompts/get"):
                    headers["Mcp-Name"] = msg["params"]["name"]
            h = rng.randrange(8)
            if h == 0:
                headers["Content-Type"] = rng.choice(["text/plain", "application/xml", ""])
            elif h == 1:
                headers["Accept"] = rng.choice(["text/html", "*/*", ""])
            elif h == 2:
                headers["mcp-session-id"] = rng.choice(["bogus", "", "x" * 300])
            elif h == 3:
                headers["MCP-Protocol-Version"] = rng.choice(["1999-01-01", "garbage", ""])
            r = http.post(served.url, content=line, headers=headers)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code < 500, (r.status_code, line[:200], headers, r.text[:300])
            if h < 4 or owed_id is None or r.status_code == 413:
                continue  # refused for its headers or its size (unread), or no readable id: an HTTP error is the answer
            finals = [m for m in _messages(r) if m.get("id") == (10 + i if owed_id is NEVER else owed_id)]
            if owed_id is NEVER:
                assert finals == [] and r.status_code in (202, 400), (r.status_code, r.text[:300])
            elif not finals:
                unanswered.append((owed_id if not isinstance(owed_id, str) else owed_id[:20], r.status_code, line[:120]))
            elif len(finals) > 1:
                twice.append(owed_id)
            else:
                assert _well_formed(finals[0]), finals[0]
        assert unanswered == [] and twice == [], f"{len(unanswered)} unanswered: {unanswered[:5]}; {len(twice)} twice"
        # still serving, same session
        method = "server/discover" if modern else "ping"  # 2026-07-28 has no ping over HTTP
        ping = {"jsonrpc": "2.0", "id": "z", "method": method, "params": {"_meta": ENVELOPE} if modern else {}}
        ok = http.post(served.url, json=ping, headers={**base, "Mcp-Method": method} if modern else base)
        assert ok.status_code == 200 and '"id":"z"' in ok.text.replace(" ", "")
        assert served.proc.poll() is None
        assert len(statuses) > 2  # the mutations did reach different rejection paths


@pytest.mark.slow
def test_sse_transport_answers_every_readable_id_once(tmp_path):
    """Legacy SSE (GET /sse, POST /messages/): answers ride the event stream; each owed id exactly once."""
    import time

    rng = random.Random(SEED + 2)
    with serve_http(tmp_path, "--transport", "sse", "--max-body", "262144") as served, \
            httpx.Client(timeout=30) as http, http.stream("GET", f"{served.base}/sse") as stream:
        lines = stream.iter_lines()
        endpoint = next(ln[5:].strip() for ln in lines if ln.startswith("data:"))
        post_url = served.base + endpoint
        got: list[dict] = []

        def read() -> None:
            try:
                for ln in lines:
                    if ln.startswith("data:") and ln[5:].strip():
                        got.append(json.loads(ln[5:]))
            except (httpx.HTTPError, ValueError):
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        http.post(post_url, content=json.dumps(INIT), headers={"Content-Type": "application/json"})
        http.post(post_url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                  headers={"Content-Type": "application/json"})
        owed: list[object] = [1]
        never: list[object] = []
        sent: dict = {}
        for i in range(N_HTTP):
            line, owed_id = _mutate(rng, _valid(rng, 10 + i))
            r = http.post(post_url, content=line, headers={"Content-Type": "application/json"})
            assert r.status_code < 500, (r.status_code, line[:200], r.text[:300])
            if r.status_code == 413:
                continue  # refused unread for its size: the HTTP error is the answer
            if owed_id is NEVER:
                never.append(10 + i)
            elif owed_id is not None:
                if r.status_code == 400 and _messages(r):  # refused at the door: the answer is in the body
                    got.extend(_messages(r))
                else:
                    owed.append(owed_id)
                    sent[json.dumps(owed_id)] = (r.status_code, line[:150])
        http.post(post_url, content=json.dumps({"jsonrpc": "2.0", "id": "last", "method": "ping"}),
                  headers={"Content-Type": "application/json"})
        owed.append("last")
        deadline = time.monotonic() + 120
        while not any(m.get("id") == "last" for m in list(got)):
            assert time.monotonic() < deadline, "the SSE stream stopped answering"
            time.sleep(0.05)
        settle = time.monotonic() + 10  # calls of test_slow (1 s) may still be running: their answers follow
        while time.monotonic() < settle and not {json.dumps(i) for i in owed} <= {json.dumps(m.get("id")) for m in got}:
            time.sleep(0.05)
        assert served.proc.poll() is None
    answered = [m for m in got if "id" in m]
    assert all(_well_formed(m) for m in answered)
    counts: dict = {}
    for m in answered:
        counts[json.dumps(m["id"])] = counts.get(json.dumps(m["id"]), 0) + 1
    unanswered = [i for i in owed if counts.get(json.dumps(i), 0) == 0]
    twice = [i for i in owed if counts.get(json.dumps(i), 0) > 1]
    assert unanswered == [] and twice == [], f"{len(unanswered)} unanswered {[sent.get(json.dumps(i)) for i in unanswered[:12]]}, {len(twice)} twice {twice[:5]}"
    assert [i for i in never if json.dumps(i) in counts] == []
