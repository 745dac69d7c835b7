"""Match counts that say how many passages are results (not the candidate cap), and paging from the CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import call, wait_ready

INSTALLED = ["folder-search"]

TOPICS = {
    "bread": "Sourdough bread needs a lively starter, flour, water and salt, and a long proof before baking.",
    "terns": "The migration of arctic terns spans both poles each year, the longest journey of any bird.",
    "treaty": "The treaty was signed in 1648 and ended thirty years of war in Europe.",
    "pods": "Kubernetes schedules pods onto nodes according to their resource requests and limits.",
    "sonnet": "A sonnet has fourteen lines, often in iambic pentameter, and ends with a couplet.",
}


def topic_folder(root: Path, per_topic: int = 12) -> Path:
    """``per_topic`` one-passage notes on each of five unrelated subjects."""
    root.mkdir()
    for name, text in TOPICS.items():
        for i in range(per_topic):
            (root / f"{name}{i:02d}.md").write_text(f"# {name.title()} {i}\n\n{text}\n", encoding="utf-8")
    return root


@pytest.mark.anyio
async def test_counts_are_the_results_that_passed_the_floor(plexor, plexor_config, tmp_path):
    folder = topic_folder(tmp_path / "topics")
    plexor_config({"folder-search": {"folders": [{"path": str(folder), "name": "topics"}], "watch": False}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["search"]["mode"] == "hybrid"  # the semantic side is on: its neighbours are candidates
        # Nonsense: every passage is some distance from it, none is a match.
        r = await call(client, "folders_search_content", semantic_concepts="qwxzv flurbo grimble")
        assert r["total"] == 0 and r["results"] == [] and r["has_more"] is False
        assert "no passage contains a word of the query" in r["notes"][-1]
        text = (await client.call_tool("folders_search_content", {"semantic_concepts": "qwxzv flurbo grimble"}))
        assert text.content[0].text.startswith("0 matches in folder 'topics'")
        # A word of one subject: its twelve passages, not all sixty.
        r = await call(client, "folders_search_content", semantic_concepts="sourdough", limit=100)
        assert r["total"] == len(r["results"]) == 12
        assert {x["path"][:5] for x in r["results"]} == {"bread"}
        # By meaning alone (no word in common): the subject's passages, and the count is what can be paged.
        r = await call(client, "folders_search_content", semantic_concepts="container orchestration", limit=100)
        assert 12 <= r["total"] == len(r["results"]) < 60
        assert {x["path"][:4] for x in r["results"][:12]} == {"pods"}
        docs = await call(client, "folders_find_documents", query="qwxzv flurbo grimble")
        assert docs["total"] == 0 and docs["results"] == []


def test_cli_pages_with_the_command_it_prints(plexor_home, tmp_path):
    from plexor.testing import plugin_cli

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(23):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\nThe lighthouse keeper wrote entry {i}.\n",
                                                encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(plugin_cli(), ["folder-search", "add", str(folder), "--name", "notes"]).exit_code == 0
    assert runner.invoke(plugin_cli(), ["folder-search", "index"]).exit_code == 0

    args = ["folder-search", "search", "--exact", "lighthouse keeper", "--limit", "5"]
    seen: list[str] = []
    pages = 0
    while True:
        r = runner.invoke(plugin_cli(), args)
        assert r.exit_code == 0, r.output
        pages += 1
        lines = r.output.splitlines()
        assert lines[0] == "23 matches in folder 'notes' (hybrid)"
        seen += [line.split(". ", 1)[1].split("#", 1)[0] for line in lines[1:] if line[:1].isdigit()]
        more = [line for line in lines if line.startswith("More: ")]
        if not more:
            break
        command = shlex.split(more[0][len("More: "):])
        assert command[:5] == ["plexor", "folder-search", "search", "--exact", "lighthouse keeper"]
        assert "--cursor" in command
        args = command[1:]  # run exactly what was printed
    assert pages == 5 and len(seen) == 23 and len(set(seen)) == 23

    # The printed command also works for a query that looks like an option, and for documents.
    r = runner.invoke(plugin_cli(), ["folder-search", "search", "--documents", "--limit", "20", "--", "-lighthouse"])
    assert r.exit_code == 0, r.output
    more = next(line for line in r.output.splitlines() if line.startswith("More: "))
    command = shlex.split(more[len("More: "):])
    assert command[-2:] == ["--", "-lighthouse"] and "--documents" in command
    r = runner.invoke(plugin_cli(), command[1:])
    assert r.exit_code == 0 and r.output.splitlines()[1].startswith("21. "), r.output

    # A cursor of another search, or no cursor at all, is a usage error that names --cursor.
    token = command[command.index("--cursor") + 1]
    r = runner.invoke(plugin_cli(), ["folder-search", "search", "keeper", "--cursor", token])
    assert r.exit_code == 2 and "--cursor" in r.output and "not a cursor of this search" in r.output
    r = runner.invoke(plugin_cli(), ["folder-search", "search", "keeper", "--cursor", "garbage"])
    assert r.exit_code == 2 and "--cursor" in r.output
