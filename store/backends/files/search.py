"""Hybrid search over one shard: BM25 fused with vector similarity, index plus exact delta.

Each shard has two parts searched the same way: the checkpoint (rows, Annoy index, postings) and
the memtable (slots written since, searched exactly). A part is searched exactly when the
filters leave few rows or a threshold needs every score; otherwise the candidates are the Annoy
neighbours plus the BM25 leaders, over-fetched so that rows removed by the filters (tombstones,
expiry, tags) do not starve the result. Every candidate then gets both scores exactly:

    relevance = VECTOR_WEIGHT * max(cos, 0) + (1 - VECTOR_WEIGHT) * lexical ** LEXICAL_POWER

(`base.fuse`; the constants are fitted by bench/fit_fusion.py) where `lexical` is BM25 divided by
the query's total IDF (1.0 when every query word occurs once in an average-length entry), capped
at 1. A power above 1 (2, fitted) keeps a strong lexical match (most of the query's rare words)
decisive while a weak partial one (a name, a common word) barely moves the ranking: on
paraphrased questions, partial word overlaps point at the wrong memory more often than not. Both
parts of a shard share IDF statistics (checkpoint plus delta), kept incrementally. Each part
also gives its candidates' stored vectors on demand (`Candidates.vectors`), for the diversity of
the final list (`ops/diversify.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ...lexical import idf, normaliser, terms
from ..base import Candidates, Filters, fuse
from .shard import Shard

EXACT_MAX = 20_000  # up to this many rows, exact scoring (float32 matrix product) beats the index
FETCH_FACTOR = 3  # over-fetch from the index and postings, for rows the filters will drop
MIN_FETCH = 32


def _no_row(row: int) -> dict:
    raise IndexError(row)


def _fetch(shard: Shard, part: str) -> Callable[[int], dict]:
    """The record of a row of `part` of `shard`."""
    seg = shard.seg
    if part == "seg":
        return seg.doc if seg is not None else _no_row

    def memtable_doc(row: int) -> dict:
        doc = shard.mem.docs[row]
        assert doc is not None
        return doc

    return memtable_doc


def search(
    shard: Shard,
    now: float,
    filters: Filters,
    query_vector: np.ndarray | None = None,
    query_text: str = "",
    k: int = 10,
    exhaustive: bool = False,
) -> list[Candidates]:
    """Candidates from both parts of `shard`. Without a query every filtered row is returned, with
    relevance 1.0 (it matches every filter given, and nothing else was asked), ranked by its own
    importance `score`; with one, the best `k` at least (all of them if `exhaustive`)."""
    if shard.seg is None and not len(shard.mem):
        return []
    masks = {"seg": shard.seg_alive(now), "mem": shard.mem_alive(now)}
    for part, mask in masks.items():
        _restrict(shard, part, mask, filters)
    if query_vector is None:
        return [_unscored(shard, part, mask) for part, mask in masks.items()]
    if shard.dim and len(query_vector) != shard.dim:
        # another process changed the embedder (`mem reindex --embedder`) between reading this
        # shard and embedding the query: only words rank it, as a shard not yet reindexed
        query_vector = np.zeros(shard.dim, dtype=np.float32)
    weights, avgdl = _bm25_weights(shard, query_terms(query_text))
    return [_scored(shard, part, mask, query_vector, weights, avgdl, k, exhaustive) for part, mask in masks.items()]


@lru_cache(maxsize=64)
def query_terms(text: str) -> list[str]:
    """The BM25 terms of a query (cached: one query is scored against several shards)."""
    return terms(text)


def _restrict(shard: Shard, part: str, mask: np.ndarray, filters: Filters) -> None:
    """Clear the rows of `mask` that fail the tag, id or time filters (in place)."""
    if filters.timed and len(mask):
        when = shard.seg.when if part == "seg" and shard.seg else shard.mem.when[: shard.mem.n]
        if filters.since is not None:
            mask &= when[: len(mask)] >= filters.since
        if filters.until is not None:
            mask &= when[: len(mask)] < filters.until
    for tag in filters.tags:
        keep = np.zeros_like(mask)
        rows = shard.seg.tag_rows(tag) if part == "seg" and shard.seg else shard.mem.tag_slots(tag)
        keep[rows[rows < len(mask)]] = True
        mask &= keep
    if filters.ids is not None:
        keep = np.zeros_like(mask)
        for rid in filters.ids:
            row = _locate(shard, part, rid)
            if row is not None:
                keep[row] = True
        mask &= keep


def _locate(shard: Shard, part: str, rid: str) -> int | None:
    if part == "mem":
        return shard.mem.slot_of.get(rid)
    return shard.seg.find(rid) if shard.seg else None


def _columns(shard: Shard, part: str) -> tuple[np.ndarray, np.ndarray]:
    if part == "seg":
        assert shard.seg is not None
        return shard.seg.scores, shard.seg.updated
    return shard.mem.scores[: shard.mem.n], shard.mem.updated[: shard.mem.n]


def _unscored(shard: Shard, part: str, mask: np.ndarray) -> Candidates:
    rows = np.flatnonzero(mask)
    if not len(rows):
        return _empty(shard, part)
    scores, updated = _columns(shard, part)
    importance = np.asarray(scores[rows], dtype=np.float32)
    full = np.ones(len(rows), dtype=np.float32)  # the stored score ranks but never filters
    fetch = _fetch(shard, part)
    return Candidates(fetch, rows, full, None, None, np.asarray(updated[rows]), len(rows), order=importance)


def _empty(shard: Shard, part: str) -> Candidates:
    none = np.zeros(0)
    return Candidates(_fetch(shard, part), none.astype(np.int64), none, none, none, none, 0)


def _bm25_weights(shard: Shard, qterms: list[str]) -> tuple[dict[str, float], float]:
    """IDF of each query term over both parts, and the average entry length."""
    seg_lex = shard.seg.lexicon if shard.seg is not None and shard.seg.n else None
    mem_lex = shard.mem.lexicon
    n_docs = (shard.seg.n if shard.seg else 0) + len(shard.mem)
    total_len = (seg_lex.total_len if seg_lex else 0.0) + (mem_lex.total_len if mem_lex else 0)
    weights: dict[str, float] = {}
    for term in qterms:
        df = (seg_lex.df(term) if seg_lex else 0) + (mem_lex.df(term) if mem_lex else 0)
        weights[term] = idf(max(n_docs, 1), df)
    return weights, max(total_len / max(n_docs, 1), 1.0)


def _scored(
    shard: Shard,
    part: str,
    mask: np.ndarray,
    qvec: np.ndarray,
    weights: dict[str, float],
    avgdl: float,
    k: int,
    exhaustive: bool,
) -> Candidates:
    total = int(np.count_nonzero(mask))
    if not total or not shard.dim:
        return _empty(shard, part)
    lex_all, matched = _lexical_scores(shard, part, weights, avgdl)
    lex_all /= normaliser(weights.values())
    fetch = max(MIN_FETCH, FETCH_FACTOR * k)
    if part == "mem":
        rows = np.flatnonzero(mask)
        vec = (shard.mem.vectors[: shard.mem.n] @ qvec)[rows]
    elif exhaustive or total <= max(EXACT_MAX, fetch) or shard.seg is None or shard.seg.index is None:
        assert shard.seg is not None
        rows = np.flatnonzero(mask)
        vec = shard.seg.similarities(qvec)[rows]
    else:
        assert shard.seg is not None
        rows = _index_candidates(shard, mask, qvec, lex_all, matched, fetch)
        vec = shard.seg.similarities(qvec, rows)
    lex = np.minimum(lex_all[rows], 1.0)
    _, updated = _columns(shard, part)
    indexed = part == "seg" and not exhaustive and total > max(EXACT_MAX, fetch)
    path = "index" if indexed and shard.seg is not None and shard.seg.index is not None else "exact"
    found = Candidates(_fetch(shard, part), rows, fuse(vec, lex), vec, lex, np.asarray(updated[rows]), total, path)
    found.vectors = _vectors(shard, part, rows)
    return found


def _vectors(shard: Shard, part: str, rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The stored vectors of some of `rows` (by position), as float32."""

    def vectors(positions: np.ndarray) -> np.ndarray:
        picked = rows[positions]
        if part == "mem":
            return np.asarray(shard.mem.vectors[picked], dtype=np.float32)
        assert shard.seg is not None
        return np.asarray(shard.seg.vectors[picked], dtype=np.float32)

    return vectors


def _lexical_scores(shard: Shard, part: str, weights: dict[str, float], avgdl: float) -> tuple[np.ndarray, np.ndarray]:
    if part == "seg":
        assert shard.seg is not None
        assert shard.seg.lexicon is not None
        return shard.seg.lexicon.scores(weights)
    assert shard.mem.lexicon is not None
    return shard.mem.lexicon.scores(weights, avgdl, shard.mem.n)


def _index_candidates(
    shard: Shard, mask: np.ndarray, qvec: np.ndarray, lex: np.ndarray, matched: np.ndarray, fetch: int
) -> np.ndarray:
    """Annoy neighbours and BM25 leaders (among the `matched` rows) that `mask` allows, over-fetched."""
    assert shard.seg is not None and shard.seg.index is not None
    share = max(np.count_nonzero(mask) / len(mask), 1e-3)  # the filters keep this share: fetch more
    want = min(int(fetch / share), len(mask))
    near = shard.seg.index.nearest(qvec, want)
    if len(matched) > want:  # the BM25 leaders (matched may repeat rows: the union removes them)
        matched = matched[np.argpartition(-lex[matched], want - 1)[:want]]
    rows = np.union1d(near, matched)
    return rows[mask[rows]]
