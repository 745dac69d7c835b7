"""Running declared tools: arguments → command → request → checked reply → parsed, capped result.

Also builds, for each :class:`ToolDef`, the typed function the kernel registers
(its signature is what the kernel turns into the tool's input schema).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plexor import InvalidArgument, NotFound, Result
from plexor_edgelake import command as cmd
from plexor_edgelake import queries as q
from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node, parse_nodes
from plexor_edgelake.parsers import ParseError, parse_reply
from plexor_edgelake.replies import check
from plexor_edgelake.toolspec import Catalog, ToolDef

__all__ = ["Engine", "make_tool_function"]

from plexor_edgelake.functions import make_tool_function  # noqa: E402 - re-exported for the plugin module

PLUGIN = "edgelake"


@dataclass
class Limits:
    timeout: float
    network_timeout: float
    max_rows: int


class Engine:
    """What a running plugin holds: the catalog of tools, the client and the limits."""

    def __init__(self, catalog: Catalog, settings: Mapping[str, Any]) -> None:
        self.catalog = catalog
        self.nodes: list[Node] = parse_nodes(settings.get("nodes"))
        self.limits = Limits(float(settings["timeout"]), float(settings["network_timeout"]), int(settings["max_rows"]))
        self.client = EdgeLakeClient(
            self.nodes,
            user_agent=settings["user_agent"],
            connect_timeout=float(settings["connect_timeout"]),
            max_connections=int(settings["max_connections"]),
            retries=int(settings["retries"]),
            backoff=float(settings["backoff"]),
            max_reply_bytes=int(settings.get("max_reply_bytes", 64 * 1024 * 1024)),
        )
        self.settings = settings
        self._plans: dict[int, _Plan] = {}
        self.types = q.TypeCache()

    def timeout_for(self, tool: ToolDef, destination: str | None = None) -> float:
        if tool.timeout is not None:
            return tool.timeout
        dest = destination if destination is not None else tool.destination
        return self.limits.network_timeout if dest and dest != "local" else self.limits.timeout

    def _plan(self, tool: ToolDef) -> _Plan:
        plan = self._plans.get(id(tool))
        if plan is None or plan.tool is not tool:
            plan = self._plans[id(tool)] = _Plan.of(tool)
        return plan

    def render(self, tool: ToolDef, args: Mapping[str, Any]) -> str:
        """The command text for ``args`` (defaults applied by the kernel's validation)."""
        plain = _plain_args(tool, args)
        tool = _case(tool, plain)
        return self._render(tool, self._plan(tool), plain, _destination(tool, plain))[0]

    def _render(self, tool: ToolDef, plan: _Plan, plain: dict[str, Any], destination: str | None,
                types: Mapping[str, str] | None = None) -> tuple[str, Any]:
        """The command, and the SQL built for it (its ``renames``, ``order``, ``limit``), if any."""
        if plan.constant is not None:
            return plan.constant, None
        key = _render_key(plain, destination) if types is None else None
        if key is not None and key in plan.rendered:
            return plan.rendered[key]  # the same arguments again: the same command (rendering is pure)
        assert tool.command is not None
        values: dict[str, str | None] = {name: param.render(plain[name]) for name, param in tool.params.items()}
        network = destination is not None
        sql = None
        for name, builder in tool.build.items():
            if builder == "select_statement" and plan.fast_select and values.get("table") is not None:
                # Every part was checked when its parameter was rendered just above: assemble, do not re-check.
                values[name] = sql = cmd.assemble_select(values, plain.get("limit"), network, types)
            else:
                values[name] = cmd.BUILDERS[builder](plain, network, types)
                sql = values[name] if builder == "select_statement" else sql
        rendered = cmd.render_command(tool.command, tool.clauses, values), sql
        if key is not None:
            if len(plan.rendered) >= _RENDERED_MAX:
                plan.rendered.clear()
            plan.rendered[key] = rendered
        return rendered

    async def run(self, tool: ToolDef, args: Mapping[str, Any], node_choice: str | None = None,
                  dry_run: bool = False) -> Result:
        if tool.handler == "server_info":
            return Result(self.server_info(_plain_args(tool, args).get("tool")))
        node = self.client.node(node_choice)
        plain_args = _plain_args(tool, args)
        tool = _case(tool, plain_args)
        destination = _destination(tool, plain_args)
        query = plain_args.get("table") is not None and "select_statement" in tool.build.values()
        types = None
        if query and q.needs_types(plain_args, destination is not None):
            for name, param in tool.params.items():  # refuse bad arguments before asking the node anything
                param.render(plain_args[name])
            types = (self.types.get((node.name, str(plain_args["database"]), str(plain_args["table"])))[1]
                     if dry_run else await q.column_types(self, node, plain_args))  # a dry run sends nothing
        command, sql = self._render(tool, self._plan(tool), plain_args, destination, types)
        renames = getattr(sql, "renames", None)
        if destination == "network" and not command.startswith("sql "):
            raise _not_to_network(tool, command)
        if tool.targets and destination is None:
            destination = "<nodes from: " + tool.targets + ">" if dry_run else await self._targets(tool, node)
        if dry_run:
            return Result(self.show(node, tool, command, destination))
        reply = await self.client.send(
            node, tool.method, command, destination=destination, headers=tool.headers,
            timeout=self.timeout_for(tool, destination or "local"), read_only=tool.read_only,
        )
        body, relayed = check(reply, empty_ok=tool.empty_ok, destination=destination)
        parsed = self._parse(tool, node, reply, command, body, plain_args, relayed, query and bool(destination), query)
        data = parsed.data
        guidance: list[str] = []
        if query:
            warnings = await self._finish_query(node, data, sql, plain_args, types, destination is not None)
            if warnings:
                data["warnings"] = warnings
            if getattr(sql, "order", None):
                parsed.text = None  # the node's table is in the order it sent: the rows are the answer
        rows = data.get(parsed.list_key) if parsed.list_key else None
        if renames and isinstance(rows, list):
            _rename(rows, renames)
        empty = (tool.parser or {}).get("empty")
        if empty and rows in ([], {}, ""):
            fill = {k: ("" if v is None else str(v)) for k, v in plain_args.items()}
            raise NotFound(_fill(empty["message"], fill), _fill(empty.get("guidance") or "", fill) or None,
                           data={"node": node.name, "command": command})
        if isinstance(rows, list):
            self._cap(data, rows, parsed.list_key, guidance)
        data["source"] = {"node": node.name, "command": command}
        if destination:
            data["source"]["destination"] = destination
        if relayed:
            data["source"]["relayed_from"] = relayed
        text = parsed.text
        if text is not None and parsed.list_key and isinstance(rows, list):
            text = text if not data.get("truncated") else None
        if text is not None:
            stats = data.get("statistics")
            text = text + (f"\n\n{json.dumps(stats)}" if stats else "")
        return Result(data, text=text, guidance=guidance)

    def _parse(self, tool: ToolDef, node: Node, reply: Any, command: str, body: str, plain: dict[str, Any],
               relayed: str | None, network_query: bool, query: bool) -> Any:
        """The reply parsed by the tool's parser, or an error saying why it cannot be read."""
        try:
            return parse_reply(tool.parser, body, plain, relayed, typed_later=query)
        except ParseError as exc:
            if network_query:
                raise q.invalid_network_json(reply, body, str(exc)) from None
            raise EdgeLakeError(
                f"EdgeLake node {node.label()} answered {command!r} with a reply the {tool.name} tool cannot "
                f"read: {exc}",
                "The reply's shape differs from what the tool's parser expects: for a tool of your own, "
                "check its parser in YAML (kind text passes the reply through); otherwise report it "
                "with the node's version (edgelake_node_status).",
                data={"node": node.name, "command": command, "reply_start": body[:200]},
            ) from None

    def _cap(self, data: dict[str, Any], rows: list[Any], key: str | None, guidance: list[str]) -> None:
        """``row_count``, and the rows cut to ``max_rows`` (``truncated``, with guidance) when there are more."""
        total = len(rows)
        data["row_count"] = total
        cap = self.limits.max_rows
        if total > cap:
            data[key or "rows"] = rows[:cap]
            data["truncated"] = True
            guidance.append(
                f"The reply had {total} rows; the first {cap} are returned (the [edgelake] max_rows cap). "
                "Narrow the request (where, group_by, a smaller limit) or raise max_rows."
            )
        else:
            data["truncated"] = False

    async def _finish_query(self, node: Node, data: dict[str, Any], sql: Any, plain: dict[str, Any],
                            types: Mapping[str, str] | None, network: bool) -> list[str]:
        """The rows made right (typed by the schema, NULLs, ordered here); types read only when needed."""
        rows = data.get("rows")
        table_format = plain.get("format") == "table"
        blank = "" if not network else None  # how the node writes NULL in JSON: "" locally, null over the network
        if types is None and isinstance(rows, list) and rows and (
                table_format or any(blank in r.values() for r in rows if isinstance(r, dict))):
            types = await q.column_types(self, node, plain)
        return q.finish(data, sql, plain, types, table_format, network)

    async def _targets(self, tool: ToolDef, node: Node) -> str:
        """The destination from the tool's ``targets`` command: its IP:Port list, each node once."""
        assert tool.targets is not None
        reply = await self.client.send(node, "GET", tool.targets, timeout=self.limits.timeout)
        body, _ = check(reply)
        found = list(dict.fromkeys(a.strip() for a in body.replace("\r\n", ",").split(",") if a.strip()))
        if not found:
            raise NotFound(f"the network's metadata names no nodes ({tool.targets!r} answered nothing)",
                           "The node's metadata may not be synced yet; retry in a moment, or give the nodes "
                           "as IP:Port.", data={"node": node.name, "command": tool.targets})
        return ",".join(found)

    def show(self, node: Node, tool: ToolDef, command: str, destination: str | None) -> dict[str, Any]:
        """The request as REST, curl and the node's CLI, without sending it (dry run)."""
        headers = {"command": command, "User-Agent": self.client.user_agent}
        if destination:
            headers["destination"] = destination
        headers.update(tool.headers)
        url = f"http://{node.address}/"
        curl = " ".join([f"curl -X {tool.method} {_sh(url)}"] + [f"-H {_sh(f'{k}: {v}')}" for k, v in headers.items()])
        cli = command if not destination else (f"run client ({destination}) {command}" if destination != "network"
                                               else f"run client () {command}")
        return {"dry_run": True, "node": node.name,
                "rest": {"method": tool.method, "url": url, "headers": headers},
                "curl": curl, "cli": cli}

    def server_info(self, only: str | None = None) -> dict[str, Any]:
        """The plugin's setup; with ``only``, the tools list holds that one tool."""
        from plexor_edgelake import __version__

        tools = list(self.catalog.tools.values())
        if only is not None and only.strip():
            tools = [self.catalog.tools[_tool_key(only, self.catalog)]]
        return {
            "plugin": PLUGIN,
            "version": __version__,
            "nodes": [{"name": n.name, "address": n.address, "default": i == 0} for i, n in enumerate(self.nodes)],
            "timeouts": {"local_commands": self.limits.timeout, "network_queries": self.limits.network_timeout,
                         "connect": float(self.settings["connect_timeout"])},
            "max_rows": self.limits.max_rows,
            "retries": {"count": self.client.retries, "backoff_seconds": self.client.backoff,
                        "applies_to": "connection failures of read-only commands"},
            "max_calls_in_flight_per_node": self.client.max_connections,
            "connections": "one per request (the node closes each connection after its reply)",
            "max_reply_bytes": self.client.max_reply_bytes,
            "user_agent": self.client.user_agent,
            "tool_files": self.catalog.files,
            "tools": [dict(t.describe(), name=f"edgelake_{t.name}",
                           timeout=None if t.handler or t.cases else self.timeout_for(t, t.destination))
                      for t in tools],
            "client_stats": dict(self.client.stats),
        }

    async def aclose(self) -> None:
        await self.client.aclose()


def _not_to_network(tool: ToolDef, command: str) -> InvalidArgument:
    name = tool.destination_param or "destination"
    return InvalidArgument(
        f"argument {name!r} = 'network' cannot be used with {command!r}: only sql queries can be sent to "
        "the network (the node answers other commands with error 155)",
        "Give the nodes as IP:Port (edgelake_get_nodes lists them), or leave it out"
        + (" to ask every node of the network." if tool.targets else " to ask this node."),
        data={"argument": name, "command": command})


def _tool_key(given: str, catalog: Catalog) -> str:
    """The catalog name of the tool ``given`` names ("query", "edgelake_query", "edgelake.query"), or not found."""
    key = given.strip().lower()
    for prefix in ("edgelake_", "edgelake."):
        if key.startswith(prefix) and key[len(prefix):] in catalog.tools:
            key = key[len(prefix):]
    if key in catalog.tools:
        return key
    import difflib

    names = sorted(catalog.tools)
    near = difflib.get_close_matches(key.removeprefix("edgelake_").removeprefix("edgelake."), names, n=1)
    hint = f"Did you mean 'edgelake_{near[0]}'? " if near else ""
    raise NotFound(f"no EdgeLake tool named {given!r}",
                   f"{hint}Tools: {', '.join('edgelake_' + n for n in names)}. A tool disabled in your "
                   "[edgelake] tools_file is not listed; leave tool out to see them all.",
                   data={"tools": [f"edgelake_{n}" for n in names]})


def _case(tool: ToolDef, plain: Mapping[str, Any]) -> ToolDef:
    """The tool itself, or the case its enum parameter picks."""
    if not tool.cases:
        return tool
    return tool.cases[str(plain.get(tool.case_param or ""))]


def _destination(tool: ToolDef, plain: Mapping[str, Any]) -> str | None:
    """The destination header for this call: the tool's, or its destination parameter's value."""
    name = tool.destination_param
    if name is None:
        return tool.destination
    value = plain.get(name)
    if value in (None, "", []):
        return None
    rendered = tool.params[name].render(value)
    return None if rendered == "local" else rendered


def _sh(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _fill(text: str, values: Mapping[str, str]) -> str:
    try:
        return text.format_map(_Default(values))
    except (ValueError, IndexError):
        return text


class _Default(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _rename(rows: list[Any], renames: Mapping[str, str]) -> None:
    """Rename the result keys the query had to change (see ``dialect.adapt``) back to the names asked for."""
    for row in rows:
        for alias, original in renames.items():
            if isinstance(row, dict) and alias in row:
                row[original] = row.pop(alias)


def _plain_args(tool: ToolDef, args: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter's value (its default when not given) as plain JSON-like data."""
    out = {}
    for name, param in tool.params.items():
        value = args.get(name, param.default)
        out[name] = value if type(value) in _SCALARS else _plain(value)
    return out


_SCALARS = frozenset({str, int, float, bool, type(None)})
_RENDERED_MAX = 256  # rendered commands remembered per tool


def _render_key(plain: Mapping[str, Any], destination: str | None) -> tuple[Any, ...] | None:
    """What a rendered command depends on besides the tool (and the column types, when known: not cached),
    or None when a value is not a plain scalar; the types are part of the key, so ``1`` is not ``True``."""
    types = tuple(map(type, plain.values()))
    if not _SCALARS.issuperset(types):
        return None
    return destination, tuple(plain.items()), types


@dataclass
class _Plan:
    """What can be worked out once per tool instead of on every call."""

    tool: ToolDef
    constant: str | None  # the command of a tool without parameters or builders
    fast_select: bool     # its select_statement parts are parameters of the standard types
    rendered: dict[tuple[Any, ...], tuple[str, Any]] = field(default_factory=dict)  # by _render_key

    @classmethod
    def of(cls, tool: ToolDef) -> _Plan:
        constant = None
        if tool.command is not None and not tool.params and not tool.build:
            constant = cmd.render_command(tool.command, tool.clauses, {})
        types = {name: p.type for name, p in tool.params.items()}
        table = tool.params.get("table")
        fast = (table is not None and table.type == "identifier" and not table.wildcard
                and all(types.get(name, want) == want for name, want in cmd.SELECT_PART_TYPES.items()))
        return cls(tool, constant, fast)
