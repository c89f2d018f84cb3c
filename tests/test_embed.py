"""The embedders: the static table follows model2vec's recipe, minilm runs the pinned ONNX model,
hash is exact; all return unit rows, and a text with no tokens gives a zero row."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from a2e_mem.embed import MiniLMEmbedder, StaticEmbedder, get_embedder
from a2e_mem.errors import InvalidInput

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["The user prefers concise Python code", "We adopted a greyhound from the shelter", "", "🙂", "word " * 700]


def unit_or_zero(rows: np.ndarray) -> bool:
    norms = np.linalg.norm(rows, axis=1)
    return bool(np.all((np.abs(norms - 1) < 1e-4) | (norms == 0)))


def test_static_matches_the_reference_recipe():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import static_reference
    finally:
        sys.path.pop(0)
    embedder = StaticEmbedder()
    batch = embedder.embed(TEXTS)
    assert batch.shape == (5, 256) and batch.dtype == np.float32 and unit_or_zero(batch)
    assert np.allclose(batch, static_reference.embed(TEXTS), atol=1e-5)
    assert np.allclose(embedder.embed(TEXTS[:1]), batch[:1], atol=1e-6)  # one text: the fast path
    assert not batch[2].any()  # no tokens at all


def test_static_puts_paraphrases_closer_than_unrelated_text():
    a, b, c = StaticEmbedder().embed(
        ["which pet did they bring home from the rescue", TEXTS[1], "quarterly tax report"]
    )
    assert a @ b > a @ c


def test_hash_embedder_is_deterministic_and_named_by_dimension():
    assert np.array_equal(get_embedder("hash").embed(TEXTS), get_embedder("hash").embed(TEXTS))
    assert get_embedder("hash").name == "hash" and get_embedder("hash:32").dim == 32
    assert get_embedder("hash:32").name == "hash:32"
    with pytest.raises(InvalidInput):
        get_embedder("word2vec")


def test_minilm_runs_the_pinned_model():
    embedder = MiniLMEmbedder()
    rows = embedder.embed(TEXTS[:3])
    assert rows.shape == (3, 384) and unit_or_zero(rows[:2])
    question, answer, other = embedder.embed(["Which pet did they adopt?", TEXTS[1], "tax report due friday"])
    assert question @ answer > question @ other + 0.1
