"""Tools of the user's own YAML file: added, overriding, disabled — and refused clearly when broken."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from standin import StandIn

from plexor import ConfigError
from plexor_edgelake.toolspec import SHIPPED, load_catalog, method_for, validate_document

pytestmark = pytest.mark.anyio

USER_TOOLS = textwrap.dedent("""
    version: 1
    tools:
      version:
        description: The node's EdgeLake version and name.
        command: get version where format = mcp
        parser: {kind: json, key: version}
      table_list:
        description: Tables of a database as the node's own text table.
        params:
          database: {type: identifier, required: true, description: the database}
        command: get tables where dbms = {database}
        parser: {kind: table, fill_down: [Database], key: tables}
      local_sql:
        description: Run a select on this node only.
        params:
          database: {type: identifier, required: true}
          table: {type: identifier, required: true}
        command: sql {database} format = json "select * from {table}"
        destination: local
        timeout: 0.5
        parser: query
      reload:
        description: Ask the node to print a table's columns on its console (it answers nothing).
        command: info table mydb temperature columns
        empty_ok: true
        parser: text
      node_status:
        description: The node's status line, as text.
        command: get status
        parser: {kind: text, key: status}
      info_table: {enabled: false}
    """)


def write(tmp_path: Path, text: str, name: str = "my-tools.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


async def test_user_tools_work_without_code(edgelake: Any, node: StandIn, tmp_path: Path) -> None:
    path = write(tmp_path, USER_TOOLS)
    async with edgelake(tools_file=str(path)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"edgelake_version", "edgelake_table_list", "edgelake_local_sql", "edgelake_reload"} <= names
        assert "edgelake_info_table" not in names and "edgelake_query" in names
        version = await client.call_tool("edgelake_version", {})
        assert version.structured_content["version"] == {"version": "EdgeLake Version: 1.4.2604",
                                                          "node_name": "el-test@127.0.0.1:32048"}
        tables = await client.call_tool("edgelake_table_list", {"database": "mydb"})
        assert [t["Table name"] for t in tables.structured_content["tables"]] == ["bulk", "humidity", "temperature"]
        assert {t["Database"] for t in tables.structured_content["tables"]} == {"mydb"}
        rows = await client.call_tool("edgelake_local_sql", {"database": "mydb", "table": "humidity"})
        assert rows.structured_content["row_count"] == 240 and rows.structured_content["statistics"]["nodes"] == 0
        missing = await client.call_tool("edgelake_local_sql", {"database": "mydb", "table": "no_such_table"})
        assert missing.is_error and "error 29: No metadata info" in missing.content[0].text
        reload = await client.call_tool("edgelake_reload", {})
        assert not reload.is_error and reload.structured_content["text"] == ""
        status = await client.call_tool("edgelake_node_status", {})
        assert status.structured_content["status"] == "el-test@127.0.0.1:32048 running"
        info = (await client.call_tool("edgelake_server_info", {})).structured_content
        assert info["tool_files"][-1] == str(path)
        sources = {t["name"]: t["source"] for t in info["tools"]}
        assert sources["edgelake_version"] == str(path) and sources["edgelake_query"] == "shipped"
    sent = [(r.method, r.command, r.destination) for r in node.requests]
    assert ("POST", "info table mydb temperature columns", "") in sent
    assert ("GET", 'sql mydb format = json "select * from humidity"', "") in sent
    assert ("GET", "get tables where dbms = mydb", "") in sent


async def test_a_user_tool_timeout(edgelake: Any, node: StandIn, tmp_path: Path) -> None:
    node.delays["sql "] = 2
    async with edgelake(tools_file=str(write(tmp_path, USER_TOOLS))) as client:
        r = await client.call_tool("edgelake_local_sql", {"database": "mydb", "table": "t"})
    assert r.is_error and "within 0.5 s" in r.content[0].text


async def test_tools_file_from_the_environment(plexor: Any, node: StandIn, tmp_path: Path) -> None:
    path = write(tmp_path, USER_TOOLS)
    env = {"PLEXOR_EDGELAKE_TOOLS_FILE": str(path), "PLEXOR_EDGELAKE_NODES": node.address}
    async with plexor.client(installed=["edgelake"], env=env) as client:
        r = await client.call_tool("edgelake_version", {})
        assert not r.is_error


BROKEN = textwrap.dedent("""
    tools:
      Bad-Name: {description: x, command: get status}
      no_description: {command: get status}
      both: {description: x, command: get status, handler: server_info}
      get_info:
        description: info over GET
        command: info table {database} {table} columns
        method: GET
        params:
          database: {type: identifier, required: true}
          table: {type: identifier, required: true}
      undeclared:
        description: a placeholder without a parameter
        command: blockchain get {policy}
      optional_in_command:
        description: optional placeholder in the main command
        params: {dbms: {type: identifier}}
        command: get tables where dbms = {dbms}
      bad_parser:
        description: unknown parser
        command: get status
        parser: {kind: xml}
      bad_enum:
        description: enum with a dangerous choice
        params: {fmt: {type: enum, choices: ['json" & exit']}}
        command: get status where format = {fmt}
      typo:
        description: misspelt key
        command: get status
        parsr: text
      clause_without_placeholder:
        description: a clause that always applies
        command: get status
        clauses: [where format = json]
      bad_default:
        description: default of the wrong type
        params: {n: {type: integer, default: lots}}
        command: get status
      header:
        description: sets a reserved header
        command: get status
        headers: {destination: network}
    """)


def test_every_problem_of_a_broken_file_is_listed(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    with pytest.raises(ConfigError) as err:
        load_catalog(path)
    message = err.value.message
    assert str(path) in message and "12 problems" in message
    for expected in [
        "tools.Bad-Name: tool names are lower-case",
        "tools.no_description.description: required",
        "tools.both: give exactly one of command",
        "tools.get_info.method: the node refuses 'info'... over GET (error 156)",
        "tools.undeclared.command: the placeholder {policy} is not a parameter",
        "tools.optional_in_command.command: {dbms} is optional with no default",
        "tools.bad_parser.parser: kind 'xml'",
        "tools.bad_enum.params.fmt: an enum needs choices",
        "tools.typo: unknown key 'parsr' (did you mean 'parser'?)",
        "tools.clause_without_placeholder.clauses[0]",
        "tools.bad_default.params.n: the default 'lots' is invalid",
        "tools.header.headers: 'destination' cannot be set here",
    ]:
        assert expected in message, expected
    assert "Fix these entries" in (err.value.guidance or "")


def test_yaml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "tools:\n  x:\n    description: [unclosed\n    command: get status\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line \d+, column \d+"):
        load_catalog(path)


def test_unreadable_or_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the EdgeLake tools file"):
        load_catalog(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="'tools' must be a mapping"):
        load_catalog(write(tmp_path, "version: 1\n"))
    with pytest.raises(ConfigError, match="version 2 is not supported"):
        load_catalog(write(tmp_path, "version: 2\ntools: {a: {description: x, command: get status}}\n"))


async def test_a_broken_file_fails_the_plugin_and_nothing_else(plexor: Any, plexor_config: Any, node: StandIn, tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    plexor_config({"edgelake": {"nodes": [node.address], "tools_file": str(path)}})
    async with plexor.client(installed=["edgelake"]) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not any(n.startswith("edgelake_") for n in names)
        plugins = {p["name"]: p for p in (await client.call_tool("plexor_plugins", {})).structured_content["plugins"]}
        assert plugins["edgelake"]["state"] == "failed"
        assert "the EdgeLake tools file" in plugins["edgelake"]["error"] and "12 problems" in plugins["edgelake"]["error"]
        r = await client.call_tool("edgelake_query", {})
        assert r.is_error
        assert not (await client.call_tool("plexor_health", {})).is_error


def test_the_shipped_file_is_valid_and_complete() -> None:
    import yaml

    tools, disabled, problems = validate_document(yaml.safe_load(SHIPPED.read_text()), "shipped")
    assert problems == [] and disabled == set()
    assert set(tools) == {"list_databases", "list_tables", "get_schema", "query", "node_status", "server_info",
                          "blockchain_get", "info_table", "get_data_nodes", "get_nodes", "monitor_nodes",
                          "get_root_policies", "get_policy_children", "list_connections", "list_local_databases",
                          "help_index", "help_topic", "help_command"}
    assert tools["info_table"].cases["partitions"].method == "POST" and tools["info_table"].read_only is True
    assert tools["info_table"].cases["columns"].method == "GET"
    assert tools["query"].destination == "{destination}" and tools["query"].timeout is None
    assert all(t.method == "GET" for n, t in tools.items() if n not in ("info_table", "server_info"))


def test_methods_follow_the_node() -> None:
    assert method_for("sql {database} format = json") == "GET"
    assert method_for("get status") == "GET" and method_for("blockchain get table") == "GET"
    assert method_for("info table a b columns") == "POST"
    assert method_for("blockchain reload metadata") == "POST"
    assert method_for("set debug on") == "POST"


def test_parsed_yaml_is_cached_so_pyyaml_is_not_imported_at_every_start(tmp_path: Path) -> None:
    user = write(tmp_path, USER_TOOLS)
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from plexor_edgelake.toolspec import load_catalog
        catalog = load_catalog(Path({str(user)!r}), cache_dir=Path({str(tmp_path / 'cache')!r}))
        print(len(catalog.tools), 'yaml' in sys.modules)
    """)
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert first == ["21", "True"] and second == ["21", "False"]


def test_plugin_module_imports_only_plexor_and_the_standard_library() -> None:
    code = ("import sys, plexor_edgelake.plugin; "
            "print(sorted(m for m in ('yaml', 'h11', 'pydantic', 'plexor_edgelake.engine', 'plexor_edgelake.client') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def _readme_tools(tmp_path: Path) -> Path:
    import re

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    return write(tmp_path, block.group(1), "readme-tools.yaml")


async def test_the_readme_example_runs_cases_and_targets_without_code(edgelake: Any, node: StandIn, tmp_path: Path) -> None:
    async with edgelake(tools_file=str(_readme_tools(tmp_path))) as client:
        r = await client.call_tool("edgelake_operator_load", {})
        assert not r.is_error, r.content[0].text
        rows = r.structured_content["nodes"]
        other = await client.call_tool("edgelake_operator_load", {"what": "resources", "nodes": "127.0.0.1:32048"})
    assert rows == [{"node": "127.0.0.1:32048", "Core 1": 0.0, "Core 2": 0.0, "Average": 0.0}]
    assert [(q.command, q.destination) for q in node.requests] == [
        ("blockchain get operator bring.ip_port", ""),
        ("get cpu usage where format = json", "127.0.0.1:32048"),
        ("get node resources where format = json", "127.0.0.1:32048"),
    ]
    assert other.structured_content["nodes"][0]["host"] == "vm"


def test_cases_and_targets_are_validated(tmp_path: Path) -> None:
    bad = write(tmp_path, textwrap.dedent("""\
        version: 1
        tools:
          one:
            description: x
            params:
              what: {type: enum, choices: [a, b]}
              nodes: {type: string}
            cases:
              param: what
              a: {command: get status, colour: red}
              c: {command: get version}
            targets: get status {nodes}
          two:
            description: y
            params:
              kind: {type: string}
            cases: {param: kind, x: {command: get status}}
          three:
            description: z
            command: get status
            targets: blockchain get operator bring.ip_port
          four:
            description: w
            command: get status where format = json
            destination: network
    """))
    with pytest.raises(ConfigError) as err:
        load_catalog(bad)
    text = err.value.message
    assert "tools.one.cases: no entry for what = 'b'" in text
    assert "tools.one.cases.a: unknown key 'colour'" in text
    assert "tools.one.cases: 'c' is not a choice of what" in text
    assert "tools.two.cases.param: 'kind' must be a parameter of type enum" in text
    assert "tools.three.targets: needs destination: {param}" in text
    assert "tools.four.destination: only sql commands can be sent to the network" in text
