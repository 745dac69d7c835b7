"""`server.json` (the MCP Registry's listing of Plexor) is valid against the registry's own published schema
(kept as test data in tests/bundle/registry/, with its source and version), and names this version."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from plexor import __version__

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "tests" / "bundle" / "registry" / "server.schema.json").read_text(encoding="utf-8"))


def _errors(document: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document))


def test_server_json_is_valid_for_the_mcp_registry():
    server = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    assert _errors(server) == []
    assert server["$schema"] == SCHEMA["$id"]  # the schema version it is checked against
    assert server["version"] == __version__
    assert [(p["registryType"], p["identifier"], p["version"]) for p in server["packages"]] == [("pypi", "plexor", __version__)]


def test_the_schema_refuses_what_the_registry_would():
    server = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    broken = {**server, "name": "plexor", "description": "x" * 101,
              "packages": [{**server["packages"][0], "version": "latest"}]}
    errors = _errors(broken)
    assert any(e.startswith("name:") for e in errors), errors
    assert any(e.startswith("description:") for e in errors), errors
    assert any(e.startswith("packages/0:") for e in errors), errors
