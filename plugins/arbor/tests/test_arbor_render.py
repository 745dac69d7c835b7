"""The renderer's pure rules: truncation by characters, newlines, roles, externals, box drawing."""

from __future__ import annotations

import json

from plexor_arbor.render import clip, draw, label


def test_short_text_is_kept_and_sixty_characters_is_not_cut():
    assert clip("Hello") == "Hello"
    assert clip("x" * 60) == "x" * 60
    assert clip("x" * 61) == "x" * 57 + "..."
    assert len(clip("y" * 500)) == 60


def test_multibyte_text_is_cut_by_characters_never_bytes():
    assert clip("🎉" * 61) == "🎉" * 57 + "..."
    assert clip("漢" * 100) == "漢" * 57 + "..."
    assert clip("日本語" * 20) == "日本語" * 20  # 60 characters, 180 bytes: kept
    mixed = "aé漢🎉" * 20
    assert clip(mixed) == mixed[:57] + "..."


def test_grapheme_clusters_are_never_split():
    family = "👨‍👩‍👧"  # three people joined by zero-width joiners: one character
    assert clip(family * 61) == family * 57 + "..."
    accented = "e\u0301"  # e + combining acute accent
    assert clip(accented * 61) == accented * 57 + "..."
    flag = "🇯🇵"  # two regional indicators
    assert clip(flag * 70) == flag * 57 + "..."
    thumbs = "👍🏽"  # emoji + skin tone modifier
    assert clip(thumbs * 60) == thumbs * 60  # 120 code points, 60 characters: kept
    assert clip(thumbs * 61) == thumbs * 57 + "..."


def test_newlines_show_as_return_symbols():
    assert clip("one\ntwo") == "one↵two"
    assert clip("one\r\ntwo\rthree") == "one↵two↵three"
    assert clip("a\n" * 40) == ("a↵" * 40)[:57] + "..."


def test_labels_carry_the_role_and_externals_their_handle():
    assert label("text", "user", "Hello", None) == "User: Hello"
    assert label("text", "assistant", "Hi", None) == "Assistant: Hi"
    assert label("text", None, "no role", None) == "no role"
    handle = json.dumps({"source": "files", "identifier": "a.pdf", "source_version": None, "metadata": {}})
    assert label("external", None, None, handle) == "[files:a.pdf]"
    assert label("external", "tool", None, {"source": "web", "identifier": "https://x"}) == "Tool: [web:https://x]"


def _row(seq, parent, position, content, depth, role=None, kind="text", handle=None):
    return (seq, parent, f"id{seq}", position, kind, role, content, handle, depth)


def test_draw_orders_siblings_by_position_and_draws_boxes():
    rows = [
        _row(1, None, 0, "", 0),
        _row(2, 1, 0, "a", 1),
        _row(5, 2, 1, "a2", 2),
        _row(4, 2, 0, "a1", 2),
        _row(3, 1, 1, "b", 1),
        _row(6, 3, 0, "b1", 2),
    ]
    text, drawn = draw(rows, 1, root_seq=1)
    assert text.splitlines() == [
        "(root)",
        "├── a",
        "│   ├── a1",
        "│   └── a2",
        "└── b",
        "    └── b1",
    ]
    assert drawn == 6


def test_draw_handles_very_deep_chains_iteratively():
    depth = 5000
    rows = [_row(1, None, 0, "", 0)] + [_row(i, i - 1, 0, f"n{i}", i - 1) for i in range(2, depth + 1)]
    text, drawn = draw(rows, 1, root_seq=1)
    lines = text.splitlines()
    assert drawn == depth and len(lines) == depth
    # The chain is indented for its first levels, then drawn flat: the drawing grows with the number of
    # nodes, not with its square (it used to indent every level: 50 MB for this chain).
    assert lines[:5] == ["(root)", "└── n2", "    └── n3", "        └── n4", "            ↳ n5"]
    assert lines[-1] == " " * 12 + "↳ n5000"
    assert len(text) < 20 * depth
