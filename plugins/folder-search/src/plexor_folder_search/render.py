"""Text renderings of tool results, shared by the tools and the CLI (standard library only)."""

from __future__ import annotations

from typing import Any

__all__ = ["render_explore", "render_hits"]


def render_hits(data: dict[str, Any], doc_level: bool = False, more: str | None = None) -> str:
    """Search results (passages, or documents when ``doc_level``) one per line, with paging and notes.

    ``more`` replaces the line that says how to get the next page (the CLI shows its own command).
    """
    lines = []
    mode = data.get("mode", "")
    total = data["total"]
    noun = ("document" if doc_level else "match") if total == 1 else ("documents" if doc_level else "matches")
    head = f"{total} {noun} in folder {data['folder']!r} ({mode})"
    if data.get("partial"):
        prog = data.get("indexing", {})
        head += f"; still indexing, {round(prog.get('fraction', 0) * 100)}% done, results may be incomplete"
    lines.append(head)
    for i, r in enumerate(data["results"], start=data["offset"] + 1):
        if doc_level:
            b = r["best_chunk"]
            lines.append(f"{i}. {r['path']} (score {r['score']}) lines {b['lines'][0]}-{b['lines'][1]}: {b['snippet']}")
        else:
            lines.append(f"{i}. {r['path']}#{r['chunk_id']} lines {r['lines'][0]}-{r['lines'][1]} (score {r['score']}): {r['snippet']}")
    if data.get("continuation_token"):
        lines.append(more or f"More: pass continuation_token={data['continuation_token']!r}")
    for note in data.get("notes", []):
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def render_explore(data: dict[str, Any]) -> str:
    """One directory level as a small tree, with the skipped counts."""
    lines = [f"{data['folder']}/{data['sub_path']} ({data['documents']} documents)".replace("//", "/")]
    entries = data["entries"]
    for i, e in enumerate(entries):
        branch = "└── " if i == len(entries) - 1 else "├── "
        lines.append(branch + e["name"] + (f" ({e['documents']})" if e["type"] == "directory" else ""))
    if data["truncated"]:
        lines.append("… (more entries; use sub_path to look inside a directory)")
    if data["skipped"]:
        lines.append("skipped: " + ", ".join(f"{n} {r}" for r, n in data["skipped"].items()))
    return "\n".join(lines)
