"""Reference inference for the static embedder in store/models/static/ (numpy + tokenizers only).

Recipe (identical to model2vec's ``StaticModel.encode`` with its defaults):

1. cut each text to its first ``config["max_chars"]`` characters;
2. ``tokenizer.encode_batch(texts, add_special_tokens=False)`` with padding and
   truncation off, then keep the first ``config["max_tokens"]`` ids;
3. drop ids in ``config["skip_token_ids"]`` (the [UNK] id);
4. look up the int8 rows and dequantise: ``row = q[id] * scales[id]``;
5. mean over the remaining tokens (a text with none gives the zero vector);
6. L2-normalise (the zero vector stays zero).

Run it as a script to time loading and throughput on this machine::

    python scripts/static_reference.py [--dir store/models/static] [--n 10000]
"""

from __future__ import annotations

import argparse
import json
import time
from functools import cache
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

CHUNK_TOKENS = 1024
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "store" / "models" / "static"


class StaticEmbedder:
    """A static token-embedding table with mean pooling."""

    def __init__(self, tokenizer: Tokenizer, table: np.ndarray, scales: np.ndarray, config: dict):
        """Wrap already-loaded parts; ``table`` may be int8 (with scales) or float (scales of 1)."""
        self.tokenizer = tokenizer
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.table = table
        self.scales = scales.astype(np.float32)
        self.config = config
        self.skip_ids = np.asarray(config["skip_token_ids"], dtype=np.int64)

    @classmethod
    def load(cls, model_dir: Path | str = DEFAULT_DIR) -> StaticEmbedder:
        """Load the runtime files from ``model_dir``."""
        model_dir = Path(model_dir)
        return cls(
            Tokenizer.from_file(str(model_dir / "tokenizer.json")),
            np.load(model_dir / "embeddings.npy"),
            np.load(model_dir / "scales.npy"),
            json.loads((model_dir / "config.json").read_text()),
        )

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Steps 1-2 of the recipe: the ids of each text, before skipping [UNK]."""
        max_chars, max_tokens = self.config["max_chars"], self.config["max_tokens"]
        encodings = self.tokenizer.encode_batch([t[:max_chars] for t in texts], add_special_tokens=False)
        return [e.ids[:max_tokens] for e in encodings]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return an ``(n, dim)`` float32 array of L2-normalised text embeddings."""
        ids = self.token_ids(list(texts))
        n = len(ids)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(n), lengths)
        keep = ~np.isin(flat, self.skip_ids)
        flat, owner = flat[keep], owner[keep]
        counts = np.bincount(owner, minlength=n)
        ends = np.cumsum(counts)
        starts = ends - counts

        out = np.zeros((n, self.table.shape[1]), dtype=np.float32)
        # Pool about CHUNK_TOKENS tokens at a time (whole texts): small temporaries
        # are several times faster than dequantising a big batch in one go.
        bounds = np.unique(np.r_[0, np.searchsorted(ends, np.arange(0, flat.size, CHUNK_TOKENS), "right"), n])
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            texts_here = a + np.flatnonzero(counts[a:b])
            if texts_here.size == 0:
                continue
            chunk = flat[starts[a] : ends[b - 1]]
            rows = self.table[chunk].astype(np.float32)
            rows *= self.scales[chunk, None]
            sums = np.add.reduceat(rows, starts[texts_here] - starts[a], axis=0)
            out[texts_here] = sums / counts[texts_here, None]
        if self.config.get("normalize", True):
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out


@cache
def _default_embedder() -> StaticEmbedder:
    return StaticEmbedder.load(DEFAULT_DIR)


def embed(texts: list[str]) -> np.ndarray:
    """Embed ``texts`` with the files in store/models/static/: ``(n, 256)`` float32, L2-normalised."""
    return _default_embedder().embed(texts)


def _benchmark(model_dir: Path, n: int) -> None:
    """Print cold-load time and embedding throughput on ``n`` synthetic sentences."""
    t0 = time.perf_counter()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    t1 = time.perf_counter()
    table, scales = np.load(model_dir / "embeddings.npy"), np.load(model_dir / "scales.npy")
    t2 = time.perf_counter()
    embedder = StaticEmbedder(tokenizer, table, scales, json.loads((model_dir / "config.json").read_text()))
    print(f"load: Tokenizer.from_file {1e3 * (t1 - t0):.1f} ms, np.load {1e3 * (t2 - t1):.1f} ms")

    rng = np.random.default_rng(0)
    words = [w for w in tokenizer.get_vocab() if w.isalpha() and len(w) > 2]
    for n_words in (12, 100):
        texts = [" ".join(rng.choice(words, n_words)) + "." for _ in range(n)]
        embedder.embed(texts[:100])  # warm-up
        t = time.perf_counter()
        vecs = embedder.embed(texts)
        dt = time.perf_counter() - t
        print(f"embed {n} sentences of {n_words} words: {dt:.2f} s = {n / dt:,.0f} sentences/s {vecs.shape}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Time the static embedder.")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--n", type=int, default=10_000)
    args = parser.parse_args()
    _benchmark(args.dir, args.n)
