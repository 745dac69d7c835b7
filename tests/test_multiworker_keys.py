"""The request-state key from configuration: hosts that share no disk accept each other's rounds; rotation.

Real `plexor serve --transport http` processes, each with its own PLEXOR_HOME (no shared disk),
and raw 2026-07-28 rounds on the wire.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conformance.serving import fixture_env, modern_post, serve_http

from plexor.errors import ConfigError
from plexor.features.state.keys import parse_key, request_state_keys

CALL = {"name": "test_input_required_result_request_state", "arguments": {}}
ANSWER = {"confirm": {"action": "accept", "content": {"ok": True}}}
OLD = "a1" * 32
NEW = "b2" * 32


def _first_round(served) -> str:
    status, reply = modern_post(served, "tools/call", CALL, name=CALL["name"])
    assert status == 200 and reply["result"]["resultType"] == "input_required", reply
    return reply["result"]["requestState"]


def _retry(served, state: str) -> dict:
    _, reply = modern_post(served, "tools/call", {**CALL, "requestState": state, "inputResponses": ANSWER},
                           name=CALL["name"])
    return reply


def _accepted(reply: dict) -> bool:
    if "result" in reply and "state-ok" in reply["result"]["content"][0]["text"]:
        return True
    assert reply["error"]["code"] == -32602 and "Invalid or expired requestState" in reply["error"]["message"], reply
    return False


def test_hosts_sharing_no_disk_accept_each_others_rounds_with_a_configured_key(tmp_path):
    key = {"PLEXOR_STATE_KEY": NEW}
    with serve_http(tmp_path / "host-a", env=key) as a:
        state = _first_round(a)
    with serve_http(tmp_path / "host-b", env=key) as b:
        assert _accepted(_retry(b, state))
    # The configured key is used, not one made in the data directory.
    assert not (tmp_path / "host-a" / "data" / "request-state.key").exists()
    with serve_http(tmp_path / "host-c") as c:  # no key configured: its own data-directory key refuses it
        assert not _accepted(_retry(c, state))
    key_file = tmp_path / "secret" / "state.key"
    key_file.parent.mkdir()
    key_file.write_text(f"# mounted secret\n{NEW}\n")
    with serve_http(tmp_path / "host-d", env={"PLEXOR_STATE_KEY_FILE": str(key_file)}) as d:
        assert _accepted(_retry(d, state))  # the same key from a file


def test_rotation_accepts_the_previous_key_and_seals_with_the_new_one(tmp_path):
    with serve_http(tmp_path / "old", env={"PLEXOR_STATE_KEY": OLD}) as old:
        sealed_old = _first_round(old)
    rolling = {"PLEXOR_STATE_KEY": NEW, "PLEXOR_STATE_KEY_PREVIOUS": OLD}
    with serve_http(tmp_path / "rolling", env=rolling) as rolled:
        assert _accepted(_retry(rolled, sealed_old))  # a round begun before the roll-out still finishes
        sealed_new = _first_round(rolled)
    with serve_http(tmp_path / "new-only", env={"PLEXOR_STATE_KEY": NEW}) as new:
        assert _accepted(_retry(new, sealed_new))  # it sealed with the new key
        assert not _accepted(_retry(new, sealed_old))  # once the previous key is removed, old state is refused
    # A key file holds the ring too: the first line seals, later lines are still accepted.
    ring = tmp_path / "ring.key"
    ring.write_text(f"{NEW}\n{OLD}\n")
    with serve_http(tmp_path / "file-ring", env={"PLEXOR_STATE_KEY_FILE": str(ring)}) as filed:
        assert _accepted(_retry(filed, sealed_old)) and _accepted(_retry(filed, sealed_new))
    # Only a previous key configured: the data directory's key seals and the previous one is still accepted.
    with serve_http(tmp_path / "file-ring", env={"PLEXOR_STATE_KEY_PREVIOUS": OLD}) as local:
        assert _accepted(_retry(local, sealed_old)) and not _accepted(_retry(local, sealed_new))


def test_key_forms_and_the_ring(tmp_path):
    assert parse_key(NEW, "X") == bytes.fromhex(NEW)  # hex is decoded
    passphrase = "correct horse battery staple and then some more words"
    assert parse_key(passphrase, "X") == passphrase.encode()  # anything else is its bytes
    ring = request_state_keys({"PLEXOR_STATE_KEY": NEW, "PLEXOR_STATE_KEY_PREVIOUS": f"{OLD},{NEW}"}, tmp_path)
    assert ring == [bytes.fromhex(NEW), bytes.fromhex(OLD)]  # sealing key first, duplicates dropped
    local = request_state_keys({}, tmp_path)
    assert len(local) == 1 and (tmp_path / "request-state.key").exists()
    assert request_state_keys({}, tmp_path) == local  # made once, then read


@pytest.mark.parametrize(("env", "words"), [
    ({"PLEXOR_STATE_KEY": "abcd"}, "PLEXOR_STATE_KEY holds a 2-byte key; a request-state key needs at least 32 bytes"),
    ({"PLEXOR_STATE_KEY": NEW, "PLEXOR_STATE_KEY_FILE": "/x"}, "both PLEXOR_STATE_KEY and PLEXOR_STATE_KEY_FILE are set"),
    ({"PLEXOR_STATE_KEY_FILE": "/nonexistent/state.key"}, "PLEXOR_STATE_KEY_FILE=/nonexistent/state.key cannot be read"),
    ({"PLEXOR_STATE_KEY": NEW, "PLEXOR_STATE_KEY_PREVIOUS": "short"}, "PLEXOR_STATE_KEY_PREVIOUS holds a 5-byte key"),
])
def test_a_bad_key_setting_is_refused_at_start_with_guidance(tmp_path, env, words):
    with pytest.raises(ConfigError) as err:
        request_state_keys(env, tmp_path)
    said = err.value.render()
    assert words in said and ("openssl rand -hex 32" in said or "Set one of them" in said), said
    proc = subprocess.run([sys.executable, "-m", "plexor", "serve", "--transport", "http", "--port", "0"],
                          env=fixture_env(tmp_path, **env), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert not (tmp_path / "data" / "request-state.key").exists()


def test_an_empty_key_file_is_refused(tmp_path):
    empty = tmp_path / "empty.key"
    empty.write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="is empty"):
        request_state_keys({"PLEXOR_STATE_KEY_FILE": str(empty)}, tmp_path)
