"""Seeded fuzzing: malformed and mutated JSON-RPC over stdio (10,000 messages) and HTTP.

Afterwards the server is alive, every request that carried a usable id got exactly
one well-formed response, and stdout carried nothing but JSON-RPC.
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
N_HTTP = 600

METHODS = ["tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
           "prompts/get", "prompts/list", "completion/complete", "ping", "logging/setLevel", "no/such/method", ""]


def _valid(rng: random.Random, i: int) -> dict:
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
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": params}


def _deep(depth: int) -> str:
    return '{"a":[' * depth + "1" + "]}" * depth


def _mutate(rng: random.Random, msg: dict) -> tuple[bytes, object]:
    """One fuzzed line and the id a response must carry (None when no response is owed)."""
    kind = rng.randrange(14)
    m = json.loads(json.dumps(msg))
    if kind == 0:  # broken JSON
        raw = json.dumps(m)
        cut = rng.randrange(1, len(raw))
        return raw[:cut].encode(), None
    if kind == 1:  # invalid UTF-8 inside the line
        return b'{"jsonrpc":"2.0","id":' + str(m["id"]).encode() + b',"method":"\xff\xfe"}', None
    if kind == 2:  # wrong types everywhere
        m[rng.choice(["jsonrpc", "method", "params"])] = rng.choice([7, None, [], {"x": 1}, True])
        return json.dumps(m).encode(), None
    if kind == 3:  # huge ids
        m["id"] = rng.choice([10**40, -(10**30), "x" * 5000, 1.5e300])
        return json.dumps(m).encode(), None
    if kind == 4:  # deep nesting
        m["params"] = "@DEEP@"
        return json.dumps(m).replace('"@DEEP@"', _deep(rng.choice([50, 500, 3000]))).encode(), None
    if kind == 5:  # oversized line
        m.setdefault("params", {})["blob"] = "y" * rng.choice([100_000, 1_000_000])
        return json.dumps(m).encode(), m["id"]
    if kind == 6:  # a notification (no id): never answered
        m.pop("id")
        return json.dumps(m).encode(), None
    if kind == 7:  # random bytes
        return bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b" "), None
    if kind == 8:  # a response sent to the server
        return json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}).encode(), None
    if kind == 9:  # a batch (not part of the protocol any more)
        return json.dumps([m, m]).encode(), None
    if kind == 10:  # params of the wrong shape
        m["params"] = rng.choice([[1, 2], "s", 3])
        return json.dumps(m).encode(), None
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
def test_stdio_survives_ten_thousand_fuzzed_messages(tmp_path):
    rng = random.Random(SEED)
    proc = subprocess.Popen([sys.executable, "-m", "plexor", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=fixture_env(tmp_path))
    try:
        _drive_stdio(rng, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _drive_stdio(rng: random.Random, proc: subprocess.Popen) -> None:
    import time

    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    proc.stdin.write(json.dumps(INIT).encode() + b"\n" + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    owed: list[object] = [1]
    for i in range(N_STDIO):
        line, owed_id = _mutate(rng, _valid(rng, 1000 + i))
        proc.stdin.write(line + b"\n")
        if owed_id is not None:
            owed.append(owed_id)
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"last","method":"ping"}\n')
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
    for owed_id in owed:
        assert counts.get(json.dumps(owed_id)) == 1, f"request {owed_id!r} got {counts.get(json.dumps(owed_id), 0)} responses"


@pytest.mark.slow
def test_http_survives_mutated_bodies_and_headers(tmp_path):
    rng = random.Random(SEED + 1)
    with serve_http(tmp_path, "--max-body", "262144") as served, httpx.Client(timeout=30) as http:
        init = http.post(served.url, json=INIT, headers=MCP_HEADERS)
        sid = init.headers["mcp-session-id"]
        base = {**MCP_HEADERS, "mcp-session-id": sid}
        http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=base)
        statuses: dict[int, int] = {}
        for i in range(N_HTTP):
            line, owed_id = _mutate(rng, _valid(rng, 10 + i))
            headers = dict(base)
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
            if r.status_code == 200 and owed_id is not None and h in (4, 5, 6, 7):
                body = r.text
                if r.headers.get("content-type", "").startswith("text/event-stream"):
                    msgs = [json.loads(x[5:]) for x in body.splitlines() if x.startswith("data:") and x[5:].strip()]
                else:
                    msgs = [json.loads(body)]
                finals = [m for m in msgs if m.get("id") == owed_id]
                assert len(finals) == 1 and _well_formed(finals[0])
        # still serving, same session
        ok = http.post(served.url, json={"jsonrpc": "2.0", "id": "z", "method": "ping"}, headers=base)
        assert ok.status_code == 200 and '"id":"z"' in ok.text.replace(" ", "")
        assert served.proc.poll() is None
        assert len(statuses) > 2  # the mutations did reach different rejection paths
