"""Pure logic: chunking, tokens, path safety, ignore rules, snippets."""

from __future__ import annotations

import pytest

from plexor import InvalidArgument
from plexor_folder_search import tokens
from plexor_folder_search.chunking import chunk_text
from plexor_folder_search.folders import resolve_inside
from plexor_folder_search.ignore import IgnoreRules
from plexor_folder_search.search import fts_or, fts_phrase, make_snippet


def test_chunks_are_exact_slices_with_true_line_ranges():
    text = "".join(f"# Part {p}\n\n" + "".join(f"Sentence {p}.{i} about things.\n" for i in range(60)) + "\n"
                   for p in range(4))
    chunks = chunk_text(text, "markdown", size=600, overlap=100)
    lines = text.splitlines(keepends=True)
    for ch in chunks:
        assert text[ch.start_char : ch.end_char] == ch.text
        assert len(ch.text) <= 660
        assert lines[ch.start_line - 1].strip() == ch.text.splitlines()[0].strip()
        assert ch.heading.startswith("Part ")
    # Every line is covered, and a new part starts a new chunk at its heading.
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(lines) - 1
    starts = [c.text.splitlines()[0] for c in chunks]
    assert all(f"# Part {p}" in starts for p in range(4))
    # Overlap: consecutive chunks of one section share their boundary lines.
    same = [(a, b) for a, b in zip(chunks, chunks[1:], strict=False) if a.heading == b.heading]
    assert same and all(b.start_char < a.end_char for a, b in same)


def test_code_chunks_prefer_definition_boundaries():
    funcs = "".join(f"def f{i}(x):\n" + "    y = x + 1\n" * 20 + "    return y\n\n\n" for i in range(10))
    chunks = chunk_text(funcs, "code", size=1000, overlap=0)
    assert all(c.text.startswith("def f") for c in chunks)


def test_long_lines_are_cut_and_empty_text_has_no_chunks():
    assert chunk_text("   \n\n", "text") == []
    chunks = chunk_text("x" * 5000, "text", size=1000)
    assert len(chunks) == 5 and all(c.start_line == c.end_line == 1 for c in chunks)


def test_tokens_round_trip_and_refuse_foreign_queries():
    key = tokens.query_key("search", "notes", "q")
    assert tokens.decode(tokens.encode(key, 30), key) == 30
    assert tokens.decode(None, key) == 0
    with pytest.raises(InvalidArgument, match="different query"):
        tokens.decode(tokens.encode(tokens.query_key("other"), 5), key)
    for bad in ["nope", "fs1.!!!", "fs1." + "e30"]:
        with pytest.raises(InvalidArgument):
            tokens.decode(bad, key)


def test_resolve_inside_refuses_escapes(tmp_path):
    root = (tmp_path / "r").resolve()
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("x")
    (tmp_path / "out.txt").write_text("y")
    (root / "esc").symlink_to(tmp_path / "out.txt")
    assert resolve_inside(root, "a/f.txt")[1] == "a/f.txt"
    assert resolve_inside(root, "./a//f.txt")[1] == "a/f.txt"
    assert resolve_inside(root, str(root / "a" / "f.txt"))[1] == "a/f.txt"
    for bad in ["../out.txt", "a/../../out.txt", str(tmp_path / "out.txt"), "esc"]:
        with pytest.raises(InvalidArgument):
            resolve_inside(root, bad)


def test_ignore_rules(tmp_path):
    (tmp_path / ".gitignore").write_text("build/\n*.tmp\n!keep.tmp\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("")
    rules = IgnoreRules(tmp_path, ["*.bak"])
    assert rules.file_reason("x.tmp") == "ignored by .gitignore"
    assert rules.file_reason("keep.tmp") is None
    assert rules.file_reason("sub/local.txt") == "ignored by .gitignore"
    assert rules.file_reason("local.txt") is None
    assert rules.file_reason("a.bak") == "excluded by the exclude setting"
    assert rules.dir_reason("build", tmp_path / "build") == "ignored by .gitignore"
    assert rules.dir_reason("env", tmp_path / "env") == "virtual environment"
    assert rules.dir_reason("node_modules", tmp_path / "node_modules") == "dependency folder"
    assert rules.path_reason("build/out/x.py") == "ignored by .gitignore"


def test_query_building_and_snippets():
    assert fts_or("the retry of requests") == '"retry" OR "requests"'
    assert fts_or("the of") == '"the" OR "of"'
    assert fts_phrase('say "hi" now') == '"say hi now"'
    assert fts_phrase("->") is None
    body = "intro " * 100 + "The Connection   Pool keeps sockets. " + "outro " * 100
    snip, matched = make_snippet(body, ["connection pool"], "sockets")
    assert "**Connection   Pool**" in snip and "**sockets**" in snip and snip.startswith("…") and snip.endswith("…")
    assert matched == ["Connection   Pool", "sockets"]
