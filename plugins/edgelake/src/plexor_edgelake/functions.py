"""The typed function the kernel registers for each declared tool: its signature is the tool's input schema."""

from __future__ import annotations

import inspect
from typing import Any, Literal

from plexor import Context, Result
from plexor_edgelake.toolspec import ParamDef, ToolDef

__all__ = ["make_tool_function"]


# --------------------------------------------------------------------------------------------------
# Tool functions with real signatures

_ORDER_ITEM: Any = None


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _order_item() -> Any:
    global _ORDER_ITEM
    if _ORDER_ITEM is None:
        from typing import Annotated

        import pydantic

        class OrderBy(pydantic.BaseModel):
            """One sort key."""

            model_config = pydantic.ConfigDict(extra="forbid")
            column: str = pydantic.Field(description="a column name, or an aggregate such as count(*)")
            direction: Annotated[Literal["asc", "desc"] | None, pydantic.BeforeValidator(_lower)] = pydantic.Field(
                None, description="asc or desc, in any case (the node's default order is asc)"
            )

        _ORDER_ITEM = OrderBy
    return _ORDER_ITEM


def _annotation(p: ParamDef) -> Any:
    from typing import Annotated

    import pydantic

    t = p.type
    if t == "integer" or t == "number":
        base: Any = int if t == "integer" else float
        constraints: dict[str, Any] = {}
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
    elif t in ("policy_types", "destination"):
        ann = str | list[str]
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
        from plexor_edgelake.engine import Engine

        engine = ctx.service(Engine)
        node = kwargs.pop("node", None)
        dry_run = bool(kwargs.pop("dry_run", False))
        return await engine.run(tool, kwargs, node, dry_run)

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
        params.append(inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=False))
        annotations["dry_run"] = bool
        doc_lines.append(":param dry_run: true to send nothing and get the request back instead: as REST "
                         "(method, URL, headers), as a curl command and as the node's CLI command")
    annotations["return"] = Result
    edgelake_tool.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    edgelake_tool.__annotations__ = annotations
    edgelake_tool.__doc__ = "\n".join(doc_lines)
    edgelake_tool.__name__ = tool.name
    edgelake_tool.__qualname__ = f"edgelake.{tool.name}"
    return edgelake_tool
