"""The ranking signals of a query retrieve (issue 12): the fitted fusion of cosine and BM25, and
the diversity of the list; each on small cases, on both backends (see conftest BOTH_BACKENDS)."""

from __future__ import annotations

import numpy as np
import pytest

from a2e_mem.backends import base
from a2e_mem.ops import diversify


def test_fusion_is_bounded_and_grows_with_each_signal():
    vector = np.array([-0.5, 0.0, 0.3, 0.3, 1.0, 1.0], dtype=np.float32)
    lexical = np.array([0.0, 0.0, 0.0, 0.5, 1.0, 3.0], dtype=np.float32)  # capped at 1 by the backends
    relevance = base.fuse(vector, lexical)
    assert np.all((relevance >= 0) & (relevance <= 1))
    assert relevance[0] == 0 and relevance[1] == 0  # a negative cosine counts as none
    assert relevance[2] == pytest.approx(base.VECTOR_WEIGHT * 0.3)  # no query word: what min_score cuts
    assert relevance[3] > relevance[2] and relevance[4] == pytest.approx(1.0) and relevance[5] == pytest.approx(1.0)
    weight, power = base.VECTOR_WEIGHT, base.LEXICAL_POWER
    assert relevance[3] == pytest.approx(weight * 0.3 + (1 - weight) * 0.5**power)
    assert base.fusion_formula() == f"{weight:g} * max(vector, 0) + {1 - weight:g} * lexical^{power:g}"


def test_fitted_constants_differ_from_the_hand_set_ones():
    """The constants come from bench/fit_fusion.py, not from the old hand-set 0.7 / 2 / none."""
    assert (base.VECTOR_WEIGHT, base.LEXICAL_POWER, diversify.DIVERSITY) != (0.7, 2.0, 0.0)
    assert 0 < base.VECTOR_WEIGHT < 1 and base.LEXICAL_POWER >= 1 and diversify.DIVERSITY > 0
    assert 0 <= diversify.SIMILAR < 1


def unit(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_a_near_copy_gives_way_to_a_distinct_entry(monkeypatch):
    monkeypatch.setattr(diversify, "DIVERSITY", 0.2)
    monkeypatch.setattr(diversify, "SIMILAR", 0.0)
    relevance = np.array([0.60, 0.59, 0.50])
    vectors = unit([1, 0, 0], [1, 0.01, 0], [0, 1, 0])  # the second is a copy of the first
    order, penalty, like = diversify.diversify(relevance, vectors, 3)
    assert order.tolist() == [0, 2, 1]
    assert penalty[0] == 0 and penalty[1] == 0 and penalty[2] == pytest.approx(0.2, abs=1e-3)
    assert like.tolist() == [-1, -1, 0]
    # far enough apart in relevance, the copy keeps its place
    order, _, _ = diversify.diversify(np.array([0.60, 0.59, 0.30]), vectors, 3)
    assert order.tolist() == [0, 1, 2]


def test_only_likeness_above_the_threshold_counts(monkeypatch):
    monkeypatch.setattr(diversify, "DIVERSITY", 0.2)
    monkeypatch.setattr(diversify, "SIMILAR", 0.8)
    relevance = np.array([0.60, 0.59, 0.58])
    vectors = unit([1, 0, 0], [0.7, 0.71, 0], [1, 0.01, 0])  # cosine to the first: 0.70, then ~1.0
    order, penalty, like = diversify.diversify(relevance, vectors, 3)
    assert order.tolist() == [0, 1, 2] and penalty[1] == 0  # 0.70 is not a copy
    assert penalty[2] == pytest.approx(0.2, abs=1e-3) and like[2] == 0
    order, _, _ = diversify.diversify(np.array([0.60, 0.59, 0.50]), vectors[[0, 2, 1]], 3)
    assert order.tolist() == [0, 2, 1]  # the copy (cosine ~1) gives way
    assert "(cosine - 0.8) / 0.2" in diversify.rule()


def test_without_diversity_the_order_is_relevance_and_ties_keep_their_order(monkeypatch):
    vectors = unit([1, 0], [1, 0], [1, 0])
    monkeypatch.setattr(diversify, "DIVERSITY", 0.0)
    assert diversify.diversify(np.array([0.5, 0.5, 0.4]), vectors, 3)[0].tolist() == [0, 1, 2]
    monkeypatch.setattr(diversify, "DIVERSITY", 0.2)
    order, _, _ = diversify.diversify(np.array([0.5, 0.5, 0.5]), unit([1, 0], [0, 1], [0, 1]), 2)
    assert order.tolist() == [0, 1]  # equal gains: the earlier (newer) first
    assert diversify.diversify(np.array([0.5, 0.4]), unit([1, 0], [0, 1]), 1)[0].tolist() == [0]


def test_retrieve_lists_a_distinct_entry_before_a_copy_and_explains_it(service, monkeypatch):
    monkeypatch.setattr(diversify, "DIVERSITY", 2.0)  # strong, so that the small case shows it
    monkeypatch.setattr(diversify, "SIMILAR", 0.0)
    scope = service.scope("div", "a")
    service.store(scope, [
        {"key": "a", "content": "lisbon flight in march", "tier": "semantic"},
        {"key": "b", "content": "lisbon flight in march", "tier": "semantic"},  # a copy of a
        {"key": "c", "content": "march flight to lisbon was cancelled", "tier": "semantic"},
    ])  # fmt: skip
    found = service.retrieve(scope, query="lisbon flight march", explain=True, limit=3)["entries"]
    assert [e["key"]["key"] for e in found] == ["a", "c", "b"]
    assert found[2]["relevance"] > found[1]["relevance"]  # relevance is kept: only the order changed
    assert "diversity" not in found[0]["explain"]
    for entry in found[1:]:
        why = entry["explain"]["diversity"]
        assert why["like"] == {"key": "a"} and 0 < why["penalty"] <= 2.0 and "cosine" in why["rule"]
    assert found[2]["explain"]["diversity"]["penalty"] > found[1]["explain"]["diversity"]["penalty"]
    for entry in found:
        e = entry["explain"]
        assert e["fusion"] == base.fusion_formula()
        fused = base.fuse(np.array([e["vector"]]), np.array([e["lexical"]]))[0]
        assert entry["relevance"] == pytest.approx(float(fused), abs=1e-5)
    monkeypatch.setattr(diversify, "DIVERSITY", 0.0)
    plain = service.retrieve(scope, query="lisbon flight march", limit=3, explain=True)["entries"]
    assert [e["key"]["key"] for e in plain] == ["a", "b", "c"]  # by relevance alone the copy comes first
    assert all("diversity" not in e["explain"] for e in plain)


def test_min_score_still_cuts_on_relevance_with_diversity(service):
    scope = service.scope("div", "b")
    texts = ["garden project report", "garden project report again", "garden project", "garden report",
             "project notes", "garden", "unrelated words entirely"]  # fmt: skip
    service.store(scope, [{"key": str(i), "content": t, "tier": "semantic"} for i, t in enumerate(texts)])
    every = service.retrieve(scope, query="garden project report", limit=7)["entries"]
    assert len({e["relevance"] for e in every}) >= 5
    floor = sorted(e["relevance"] for e in every)[-4] - 1e-6  # the best four pass
    kept = service.retrieve(scope, query="garden project report", limit=7, min_score=floor)
    assert kept["total"] == len(kept["entries"]) == 4
    assert all(e["relevance"] >= floor for e in kept["entries"])


def test_a_shorter_list_is_the_head_of_a_longer_one(service, monkeypatch):
    """A benchmark reads recall@5 and @10 from `limit=5` and `limit=10`: each used to be chosen from
    a pool of twice its length, so near-copies filled a short list that a longer one replaced
    with other entries (outside audit S24: the first 5 of 50 differed from `limit=5`)."""
    monkeypatch.setattr(diversify, "DIVERSITY", 2.0)  # strong, so that the small case shows it
    monkeypatch.setattr(diversify, "SIMILAR", 0.0)
    scope = service.scope("div", "c")
    copies = [{"key": f"copy{i}", "content": "lisbon flight in march", "tier": "semantic"} for i in range(8)]
    others = [
        {"key": f"other{i}", "content": f"lisbon {word} trip", "tier": "semantic"}
        for i, word in enumerate(["march", "flight", "hotel", "museum", "tram", "beach", "food", "music"])
    ]
    service.store(scope, copies + others)
    longest = [e["key"]["key"] for e in service.retrieve(scope, query="lisbon flight march", limit=25)["entries"]]
    assert any(k.startswith("other") for k in longest[:4])  # diversity moved a distinct entry up
    for limit in range(1, 26):
        found = service.retrieve(scope, query="lisbon flight march", limit=limit)
        assert [e["key"]["key"] for e in found["entries"]] == longest[:limit], limit
        assert found["total"] == 16


def test_gains_equal_to_the_shown_decimals_keep_the_callers_order(monkeypatch):
    """Two copies of a text differ in the last bits of their cosine, and which copy gets which
    bits depends on where each is stored: the listing followed those bits, so a store and its
    import listed two copies in opposite orders (outside audit 30d). Gains are compared as shown."""
    monkeypatch.setattr(diversify, "DIVERSITY", 0.2)
    vectors = unit([1, 0], [1, 0], [0, 1])
    order, _, _ = diversify.diversify(np.array([0.5, 0.5 + 1e-8, 0.1]), vectors, 3)
    assert order.tolist() == [0, 1, 2]  # the first of the equals, as the caller ordered them


@pytest.mark.files_only  # no store
def test_an_explained_cosine_stays_in_its_range():
    """float32 products of unit vectors pass 1 by rounding: `--explain` showed a cosine of
    1.000116 (outside audit 32d)."""
    from a2e_mem.ops.a2e import _explanation

    vector, lexical = np.array([1.000116, -1.00002, 0.5], dtype=np.float32), np.zeros(3, dtype=np.float32)
    part = base.Candidates(lambda i: {}, np.arange(3), vector, vector, lexical, np.zeros(3), 3, path="exact")
    assert [_explanation(part, row, {})["vector"] for row in range(3)] == [1.0, -1.0, 0.5]
