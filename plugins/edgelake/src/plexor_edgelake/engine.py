"""Running declared tools: arguments → command → request → checked reply → parsed, capped result.

Also builds, for each :class:`ToolDef`, the typed function the kernel registers
(its signature is what the kernel turns into the tool's input schema).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from plexor import Context, NotFound, Result
from plexor_edgelake import command as cmd
from plexor_edgelake.client import EdgeLakeClient, EdgeLakeError, Node, parse_nodes
from plexor_edgelake.parsers import ParseError, parse_reply
from plexor_edgelake.replies import check
from plexor_edgelake.toolspec import Catalog, ParamDef, ToolDef

__all__ = ["Engine", "make_tool_function"]

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
        )
        self.settings = settings
        self._plans: dict[str, _Plan] = {}

    def timeout_for(self, tool: ToolDef) -> float:
        if tool.timeout is not None:
            return tool.timeout
        return self.limits.network_timeout if tool.destination == "network" else self.limits.timeout

    def _plan(self, tool: ToolDef) -> _Plan:
        plan = self._plans.get(tool.name)
        if plan is None or plan.tool is not tool:
            plan = self._plans[tool.name] = _Plan.of(tool)
        return plan

    def render(self, tool: ToolDef, args: Mapping[str, Any]) -> str:
        """The command text for ``args`` (defaults applied by the kernel's validation)."""
        return self._render(tool, self._plan(tool), _plain_args(tool, args))

    def _render(self, tool: ToolDef, plan: _Plan, plain: dict[str, Any]) -> str:
        if plan.constant is not None:
            return plan.constant
        assert tool.command is not None
        values: dict[str, str | None] = {name: param.render(plain[name]) for name, param in tool.params.items()}
        for name, builder in tool.build.items():
            if builder == "select_statement" and plan.fast_select and values.get("table") is not None:
                # Every part was checked when its parameter was rendered just above: assemble, do not re-check.
                values[name] = cmd.assemble_select(values, plain.get("limit"))
            else:
                values[name] = cmd.BUILDERS[builder](plain)
        return cmd.render_command(tool.command, tool.clauses, values)

    async def run(self, tool: ToolDef, args: Mapping[str, Any], node_choice: str | None = None) -> Result:
        if tool.handler == "server_info":
            return Result(self.server_info())
        node = self.client.node(node_choice)
        plan = self._plan(tool)
        plain_args = _plain_args(tool, args)
        command = self._render(tool, plan, plain_args)
        reply = await self.client.send(
            node, tool.method, command, destination=tool.destination, headers=tool.headers,
            timeout=self.timeout_for(tool), read_only=tool.read_only,
        )
        body, relayed = check(reply, empty_ok=tool.empty_ok, destination=tool.destination)
        try:
            parsed = parse_reply(tool.parser, body, plain_args)
        except ParseError as exc:
            raise EdgeLakeError(
                f"EdgeLake node {node.label()} answered {command!r} with a reply the {tool.name} tool cannot "
                f"read: {exc}",
                "The reply's shape differs from what the tool's parser expects: for a tool of your own, "
                "check its parser in YAML (kind text passes the reply through); otherwise report it "
                "with the node's version (edgelake_node_status).",
                data={"node": node.name, "command": command, "reply_start": body[:200]},
            ) from None
        data = parsed.data
        guidance: list[str] = []
        rows = data.get(parsed.list_key) if parsed.list_key else None
        empty = (tool.parser or {}).get("empty")
        if empty and (rows == [] or (isinstance(rows, dict) and not rows)):
            fill = {k: ("" if v is None else str(v)) for k, v in plain_args.items()}
            raise NotFound(_fill(empty["message"], fill), _fill(empty.get("guidance") or "", fill) or None,
                           data={"node": node.name, "command": command})
        if isinstance(rows, list):
            total = len(rows)
            data["row_count"] = total
            cap = self.limits.max_rows
            if total > cap:
                data[parsed.list_key] = rows[:cap]  # type: ignore[index]
                data["truncated"] = True
                guidance.append(
                    f"The reply had {total} rows; the first {cap} are returned (the [edgelake] max_rows cap). "
                    "Narrow the request (where, group_by, a smaller limit) or raise max_rows."
                )
            else:
                data["truncated"] = False
        data["source"] = {"node": node.name, "command": command}
        if relayed:
            data["source"]["relayed_from"] = relayed
        text = parsed.text
        if text is not None and parsed.list_key and isinstance(rows, list):
            text = text if not data.get("truncated") else None
        if text is not None:
            stats = data.get("statistics")
            text = text + (f"\n\n{json.dumps(stats)}" if stats else "")
        return Result(data, text=text, guidance=guidance)

    def server_info(self) -> dict[str, Any]:
        from plexor_edgelake import __version__

        return {
            "plugin": PLUGIN,
            "version": __version__,
            "nodes": [{"name": n.name, "address": n.address, "default": i == 0} for i, n in enumerate(self.nodes)],
            "timeouts": {"local_commands": self.limits.timeout, "network_queries": self.limits.network_timeout,
                         "connect": float(self.settings["connect_timeout"])},
            "max_rows": self.limits.max_rows,
            "retries": {"count": self.client.retries, "backoff_seconds": self.client.backoff,
                        "applies_to": "connection failures of read-only commands"},
            "max_connections_per_node": self.client.max_connections,
            "user_agent": self.client.user_agent,
            "tool_files": self.catalog.files,
            "tools": [dict(t.describe(), name=f"edgelake_{t.name}",
                           timeout=None if t.handler else self.timeout_for(t))
                      for t in self.catalog.tools.values()],
            "client_stats": dict(self.client.stats),
        }

    async def aclose(self) -> None:
        await self.client.aclose()


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


def _plain_args(tool: ToolDef, args: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter's value (its default when not given) as plain JSON-like data."""
    out = {}
    for name, param in tool.params.items():
        value = args.get(name, param.default)
        out[name] = value if type(value) in _SCALARS else _plain(value)
    return out


_SCALARS = frozenset({str, int, float, bool, type(None)})


@dataclass
class _Plan:
    """What can be worked out once per tool instead of on every call."""

    tool: ToolDef
    constant: str | None  # the command of a tool without parameters or builders
    fast_select: bool     # its select_statement parts are parameters of the standard types

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


# --------------------------------------------------------------------------------------------------
# Tool functions with real signatures

_ORDER_ITEM: Any = None


def _order_item() -> Any:
    global _ORDER_ITEM
    if _ORDER_ITEM is None:
        import pydantic

        class OrderBy(pydantic.BaseModel):
            """One sort key."""

            model_config = pydantic.ConfigDict(extra="forbid")
            column: str = pydantic.Field(description="a column name, or an aggregate such as count(*)")
            direction: Literal["asc", "desc"] | None = pydantic.Field(  # noqa: UP007
                None, description="asc or desc (the node's default order is asc)"
            )

        _ORDER_ITEM = OrderBy
    return _ORDER_ITEM


def _annotation(p: ParamDef) -> Any:
    from typing import Annotated

    import pydantic

    t = p.type
    if t == "integer" or t == "number":
        base: Any = int if t == "integer" else float
        constraints = {}
        if p.minimum is not None:
            constraints["ge"] = p.minimum
        if p.maximum is not None:
            constraints["le"] = p.maximum
        ann: Any = Annotated[base, pydantic.Field(**constraints)] if constraints else base
    elif t == "boolean":
        ann = bool
    elif t == "enum":
        ann = Literal[p.choices]  # type: ignore[valid-type]
    elif t == "identifier_list":
        ann = list[str]
    elif t == "select_list":
        ann = str | list[str]
    elif t == "order_by":
        ann = list[_order_item()]  # type: ignore[misc]
    else:
        ann = str
    if not p.required and p.default is None:
        ann = ann | None
    return ann


def _param_doc(p: ParamDef) -> str:
    text = p.description or p.name
    if p.type == "identifier":
        text += " (a plain identifier: letters, digits and _" + (", or *" if p.wildcard else "") + ")"
    return text


def make_tool_function(tool: ToolDef, nodes_hint: str) -> Any:
    """A coroutine function whose signature declares the tool's parameters for the kernel."""
    names = list(tool.params)

    async def edgelake_tool(ctx: Context, **kwargs: Any) -> Result:
        engine = ctx.service(Engine)
        node = kwargs.pop("node", None)
        return await engine.run(tool, kwargs, node)

    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context}
    doc_lines = [tool.description, ""]
    ordered = [n for n in names if tool.params[n].required] + [n for n in names if not tool.params[n].required]
    for name in ordered:
        p = tool.params[name]
        ann = _annotation(p)
        default = inspect.Parameter.empty if p.required else p.default
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default))
        annotations[name] = ann
        doc_lines.append(f":param {name}: {_param_doc(p)}")
    if tool.handler is None:
        params.append(inspect.Parameter("node", inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None))
        annotations["node"] = str | None
        doc_lines.append(f":param node: which configured EdgeLake node to ask, by name or host:port (default: {nodes_hint})")
    annotations["return"] = Result
    edgelake_tool.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    edgelake_tool.__annotations__ = annotations
    edgelake_tool.__doc__ = "\n".join(doc_lines)
    edgelake_tool.__name__ = tool.name
    edgelake_tool.__qualname__ = f"edgelake.{tool.name}"
    return edgelake_tool
