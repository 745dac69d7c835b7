"""``plexor_find_tools``: with a profile that says ``search = true``, a model can find tools outside it.

A profile keeps a client's tool list short; this one extra tool lets the model look for the rest
by words (names and descriptions), among the tools the token's scopes allow, and call what it
finds: with ``search`` on, a profile narrows what is *listed*, not what may be called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from plexor.features.auth.scopes import Access, ScopePolicy

__all__ = ["FIND_TOOLS", "find_tools", "find_tools_wire"]

FIND_TOOLS = "plexor_find_tools"
_WORD = re.compile(r"[a-z0-9]+")


def find_tools_wire() -> dict[str, object]:
    """The tool as ``tools/list`` shows it."""
    return {
        "name": FIND_TOOLS,
        "description": ("Find tools that are not in your list: give a few words about what you need (e.g. "
                        "'delete tree', 'search documents'). Returns matching tools with their descriptions and "
                        "input schemas; you may call any of them by name."),
        "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string", "description": "words describing the task"},
            "limit": {"type": "integer", "description": "most tools to return (default 10)", "minimum": 1, "maximum": 50}},
            "required": ["query"]},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


def find_tools(access: Access, policy: ScopePolicy, arguments: Mapping[str, object]) -> dict[str, object]:
    """The result of a call: tools whose name or description share words with the query, best first."""
    query = arguments.get("query")
    limit = arguments.get("limit", 10)
    if not isinstance(query, str) or not query.strip():
        text = "query must be a non-empty string, e.g. {\"query\": \"delete tree\"}"
        return {"content": [{"type": "text", "text": text}], "isError": True,
                "structuredContent": {"error": {"message": text, "kind": "invalid_argument"}}}
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        limit = 10
    words = set(_WORD.findall(query.lower()))
    scored = []
    for spec in policy.kernel.registry.tools.values():
        if access.missing(policy.tool(spec)):
            continue  # the token could not call it: not offered
        haystack = set(_WORD.findall(f"{spec.name} {spec.description}".lower()))
        score = len(words & haystack)
        if score:
            scored.append((-score, spec.name, spec))
    found: list[dict[str, object]] = []
    lines = []
    for _, _, spec in sorted(scored, key=lambda item: (item[0], item[1]))[:limit]:
        lines.append(f"- {spec.name}: {spec.description.splitlines()[0] if spec.description else ''}")
        found.append({"name": spec.name, "description": spec.description, "inputSchema": spec.signature.input_schema,
                      "inProfile": access.profile is None or access.profile.admits(spec.name, spec.plugin, policy.tool(spec))})
    text = "\n".join(lines) if lines else f"no tool matches {query!r}; try other words"
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"tools": found}, "isError": False}
