"""SciFact nDCG@10 through the MCP tool, as a client sees it.

A real ``plexor serve`` subprocess with the folder-search plugin, reached over stdio by the MCP SDK's client;
each query is sent as ``semantic_concepts`` to ``folders_search_content`` with ``limit=10`` once the index is warm
(``folders_get_server_info`` says ``ready``, and every answer is checked to carry no ``partial`` flag); the
ten passages' files, in order and each counted once, are the ranked documents. That is stricter than
bench/folder_search.py's in-process figure, which ranks whole documents (a document's second passage there
makes room for another document).

Run: nice -n 10 python bench/folder_search_tool.py [--model wordllama] [--split test] [--home /tmp/fs-tool]
(the index is kept under --home, so a second run only checks the files).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from folder_search import SCIFACT, load_qrels, ndcg10  # noqa: E402

from plexor.testing import Harness, write_config  # noqa: E402


def scifact_folder(dest: Path) -> Path:
    if not dest.exists():
        dest.mkdir(parents=True)
        with open(SCIFACT / "corpus.jsonl") as fh:
            for line in fh:
                doc = json.loads(line)
                (dest / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    return dest


async def run(home: Path, model: str, splits: list[str], weight: float | None) -> dict[str, object]:
    folder = scifact_folder(home.parent / "scifact-corpus")
    # No watcher and no periodic rescan: the index stays as it is once warm.
    settings: dict[str, object] = {"folders": [str(folder)], "model": model, "watch": False, "rescan_interval": 0}
    if weight is not None:
        settings["fusion_weight"] = weight
    write_config(home, {"folder-search": settings})
    queries = {}
    with open(SCIFACT / "queries.jsonl") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    out: dict[str, object] = {"model": model}
    async with Harness(home).stdio_client(installed=["folder-search"]) as client:
        t0 = time.perf_counter()
        while True:
            info = (await client.call_tool("folders_get_server_info", {})).structured_content
            if info["state"] == "ready":
                break
            await anyio.sleep(1.0)
        out["ready_after_s"] = round(time.perf_counter() - t0, 1)
        out["embedder"] = info["model"].get("name")
        out["fusion_weight"] = info["search"]["fusion_weight"]
        for split in splits:
            qrels = load_qrels(split)
            scores, times = [], []
            for qid, rel in qrels.items():
                while True:
                    t = time.perf_counter()
                    r = await client.call_tool("folders_search_content",
                                               {"semantic_concepts": queries[qid], "limit": 10})
                    elapsed = time.perf_counter() - t
                    data = r.structured_content
                    assert not r.is_error, r.content
                    if not data.get("partial"):
                        break
                    await anyio.sleep(1.0)  # the index is being brought up to date: ask again when it is
                times.append(elapsed)
                docs: list[str] = []
                for hit in data["results"]:
                    d = hit["path"][:-4]
                    if d not in docs:
                        docs.append(d)
                scores.append(ndcg10(docs, rel))
            times.sort()
            out[split] = {"ndcg@10": round(sum(scores) / len(scores), 4), "queries": len(scores),
                          "p50_ms": round(times[len(times) // 2] * 1000, 1)}
            print(json.dumps(out), file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="wordllama")
    ap.add_argument("--split", default="test", help="test, train or test,train")
    ap.add_argument("--weight", type=float, default=None, help="fusion_weight (default: the model's own)")
    ap.add_argument("--home", type=Path, default=None, help="PLEXOR_HOME to keep the index in")
    args = ap.parse_args()
    home = args.home or Path(f"/tmp/fs-tool/{args.model}")
    home.mkdir(parents=True, exist_ok=True)
    print(json.dumps(anyio.run(run, home, args.model, args.split.split(","), args.weight)))


if __name__ == "__main__":
    main()
