"""Searching, reading and paging through a real kernel and a real MCP client."""

from __future__ import annotations

import pytest
from conftest import call, error_text, wait_ready

pytestmark = pytest.mark.anyio
INSTALLED = ["folder-search"]


async def test_search_by_meaning_and_exact_terms(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)]}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["model"]["name"] == "wordllama-l2_supercat-256" and info["search"]["fusion_weight"] == 0.4
        r = await call(client, "folders_search_content", semantic_concepts="how often does the client try again after a failure")
        assert r["mode"] == "hybrid" and r["partial"] is False
        top = r["results"][0]
        assert top["path"] == "docs/retry.md"
        assert top["score_parts"]["keyword"] >= 0 and top["score_parts"]["semantic"] is not None
        assert top["lines"][0] >= 1 and top["lines"][1] >= top["lines"][0]
        # Exact phrases must appear; the snippet marks them.
        r = await call(client, "folders_search_content", exact_terms=["exponential backoff"])
        assert [x["path"] for x in r["results"]] == ["docs/retry.md"]
        assert "**exponential backoff**" in r["results"][0]["snippet"]
        r = await call(client, "folders_search_content", exact_terms=["backoff exponential"])
        assert r["results"] == []
        # Case-insensitive, and combined with concepts.
        r = await call(client, "folders_search_content", exact_terms=["CONNECTIONPOOL"], semantic_concepts="sockets")
        assert [x["path"] for x in r["results"]] == ["src/pool.py"]
        r = await call(client, "folders_search_content", exact_terms=["connectionpool"])
        assert [x["path"] for x in r["results"]] == ["src/pool.py"]
        # The chunk id leads to the whole passage.
        hit = r["results"][0]
        chunks = await call(client, "folders_get_chunks", path=hit["path"], chunk_ids=[hit["chunk_id"]])
        assert "class ConnectionPool" in chunks["chunks"][0]["text"]
        assert chunks["chunks"][0]["lines"] == hit["lines"]
        # No query at all is refused with guidance.
        text = await error_text(client, "folders_search_content")
        assert "semantic_concepts" in text and "exact_terms" in text


async def test_every_format_is_indexed_and_skips_have_reasons(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "max_file_size": 60000}})
    big = corpus / "big.txt"
    big.write_text("wombatbig " * 10000)
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        for word, path in [("zeppelin", "report.docx"), ("marzipan", "stock.xlsx"), ("hovercraft", "deck.pptx"),
                           ("quokka", "manual.pdf"), ("basaltic", "docs/page.html"), ("suckers", "docs/garden.rst"),
                           ("saffron", "notes.txt")]:
            r = await call(client, "folders_search_content", exact_terms=[word])
            assert [x["path"] for x in r["results"]] == [path], word
        # Script content of HTML is not text.
        assert (await call(client, "folders_search_content", exact_terms=["hidden"]))["results"] == []
        # Nothing from skipped places is searchable.
        for word in ["wombatcore", "wombatnode", "wombatvenv", "wombatsecret", "wombatlog", "wombatbig"]:
            assert (await call(client, "folders_search_content", exact_terms=[word]))["results"] == [], word
        skipped = info["folders"][0]["skipped"]
        for reason in ["version-control folder", "dependency folder", "virtual environment", "ignored by .gitignore",
                       "binary file", "too large", "corrupt or unreadable document"]:
            assert skipped.get(reason), (reason, skipped)
        assert info["folders"][0]["last_scan"]["errors"] >= 1  # broken.pdf reported, indexing went on
        meta = await call(client, "folders_get_document_metadata", path="docs/retry.md")
        assert meta["kind"] == "markdown" and meta["title"] == "Retry policy"
        assert meta["headings"] == ["Retry policy", "Settings", "Timeouts"]
        assert meta["outline"][1] == {"level": 2, "title": "Settings", "line": 5}
        meta = await call(client, "folders_get_document_metadata", path="deck.pptx")
        assert meta["kind"] == "pptx" and "Slide 1: Roadmap" in meta["headings"]
        text = await error_text(client, "folders_get_document_metadata", path="broken.pdf")
        assert "not indexed" in text and "corrupt" in text


async def test_pagination_of_passages_and_documents(plexor, plexor_config, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(23):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\nThe lighthouse keeper wrote entry {i}.\n" + "filler words\n" * i)
    plexor_config({"folder-search": {"folders": [{"path": str(folder), "name": "notes"}]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        for tool, args, key in [
            ("folders_search_content", {"exact_terms": ["lighthouse keeper"]}, "chunk"),
            ("folders_find_documents", {"query": "lighthouse keeper"}, "doc"),
        ]:
            seen: list[str] = []
            token = None
            pages = 0
            while True:
                r = await call(client, tool, folder="notes", limit=5, continuation_token=token, **args)
                pages += 1
                assert r["total"] == 23
                seen += [x["path"] for x in r["results"]]
                token = r["continuation_token"]
                if token is None:
                    assert r["has_more"] is False
                    break
            assert pages == 5 and len(seen) == 23 and len(set(seen)) == 23, key
        first = await call(client, "folders_find_documents", folder="notes", query="lighthouse", limit=5)
        text = await error_text(client, "folders_find_documents", folder="notes", query="other words",
                                continuation_token=first["continuation_token"])
        assert "different query" in text
        text = await error_text(client, "folders_find_documents", folder="notes", query="x", continuation_token="garbage")
        assert "continuation_token" in text
        docs = await call(client, "folders_list_documents", folder="notes", limit=10)
        assert docs["total"] == 23 and len(docs["documents"]) == 10 and docs["documents"][0]["path"] == "note00.md"
        docs2 = await call(client, "folders_list_documents", folder="notes", limit=10, continuation_token=docs["continuation_token"])
        assert docs2["documents"][0]["path"] == "note10.md"


async def test_reading_documents_is_bounded_and_paginated(plexor, plexor_config, tmp_path):
    folder = tmp_path / "books"
    (folder / "ch").mkdir(parents=True)
    body = "".join(f"Line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(600))
    (folder / "ch" / "long.txt").write_text(body)
    (folder / "ch" / "short.md").write_text("# Short\n\ntext\n")
    (folder / "top.txt").write_text("top level\n")
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        await wait_ready(client)
        parts = []
        token = None
        while True:
            r = await call(client, "folders_get_document_text", path="ch/long.txt", max_chars=5000, continuation_token=token)
            assert len(r["text"]) <= 5000
            parts.append(r["text"])
            token = r["continuation_token"]
            if not token:
                break
        assert "".join(parts) == body and len(parts) > 5
        text = await error_text(client, "folders_get_document_text", path="ch/long.txt", max_chars=10**7)
        assert "max_chars" in text
        tree = await call(client, "folders_explore")
        names = {e["name"]: e for e in tree["entries"]}
        assert names["ch/"]["documents"] == 2 and "top.txt" in names and tree["documents"] == 3
        sub = await call(client, "folders_explore", sub_path="ch")
        assert sorted(e["name"] for e in sub["entries"]) == ["long.txt", "short.md"]
        flat = await call(client, "folders_list_documents", recursive=False)
        assert [d["path"] for d in flat["documents"]] == ["top.txt"]
        folders = await call(client, "folders_list_folders")
        assert folders["folders"][0]["name"] == "books" and folders["folders"][0]["documents"] == 3


async def test_paths_outside_the_folder_are_refused(plexor, plexor_config, tmp_path):
    folder = tmp_path / "safe"
    folder.mkdir()
    (folder / "ok.txt").write_text("fine\n")
    outside = tmp_path / "private.txt"
    outside.write_text("the secret password is hunter2\n")
    (folder / "link.txt").symlink_to(outside)
    (folder / "linkdir").symlink_to(tmp_path)
    plexor_config({"folder-search": {"folders": [str(folder)]}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["folders"][0]["skipped"]["symlink pointing outside the folder"] == 2
        assert (await call(client, "folders_search_content", exact_terms=["hunter2"]))["results"] == []
        for path in ["../private.txt", str(outside), "link.txt", "linkdir/private.txt", "sub/../../private.txt"]:
            text = await error_text(client, "folders_get_document_text", path=path)
            assert "hunter2" not in text
            assert any(w in text for w in ("'..'", "outside the folder")), (path, text)
        text = await error_text(client, "folders_list_documents", sub_path="../")
        assert "'..'" in text
        text = await error_text(client, "folders_search_content", folder="nosuch", exact_terms=["x"])
        assert "no folder named 'nosuch'" in text and "safe" in text
        ok = await call(client, "folders_get_document_text", path=str(folder / "ok.txt"))
        assert ok["text"] == "fine\n"


async def test_keyword_search_works_without_a_model(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "model": "none"}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["model"]["available"] is False and info["search"]["mode"] == "keyword-only"
        r = await call(client, "folders_search_content", semantic_concepts="retries backoff")
        assert r["mode"] == "keyword-only" and r["results"][0]["path"] == "docs/retry.md"
        assert r["results"][0]["score_parts"]["semantic"] is None
        assert "keyword-only" in r["notes"][0]


async def test_no_folders_configured_gives_guidance(plexor, plexor_config):
    plexor_config({"folder-search": {}})
    async with plexor.client(installed=INSTALLED) as client:
        r = await call(client, "folders_list_folders")
        assert r["folders"] == [] and "plexor folder-search add" in r["notes"][0]
        text = await error_text(client, "folders_search_content", semantic_concepts="x")
        assert "plexor folder-search add" in text


async def test_fusion_weight_setting_overrides_the_models_own(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "fusion_weight": 1.0}})
    async with plexor.client(installed=INSTALLED) as client:
        info = await wait_ready(client)
        assert info["search"]["fusion_weight"] == 1.0
        # Semantic only: the score is the min-max scaled cosine, so the nearest passage scores exactly 1.
        r = await call(client, "folders_search_content", semantic_concepts="eruptions of molten rock")
        assert r["results"][0]["path"] == "docs/page.html" and r["results"][0]["score"] == 1.0
        assert [x["score"] for x in r["results"]] == sorted((x["score"] for x in r["results"]), reverse=True)
