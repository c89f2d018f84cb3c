"""Hybrid search over one shard: BM25 fused with vector similarity, index plus exact delta.

A shard has several parts searched the same way: each segment (rows, Annoy index, postings) and
the memtable (slots written since the last checkpoint, searched exactly). A part is searched
exactly when the filters leave few rows or a threshold needs every score; otherwise the
candidates are the Annoy neighbours plus the BM25 leaders, over-fetched so that rows removed by
the filters (shadowed rows, tombstones, expiry, tags) do not starve the result. The Annoy search
runs on a worker thread (Annoy releases the GIL) while the query's own thread scores the words:
on two cores, the two halves of the query overlap. Every candidate then gets both scores exactly:

    relevance = VECTOR_WEIGHT * max(cos, 0) + (1 - VECTOR_WEIGHT) * lexical ** LEXICAL_POWER

(`base.fuse`; the constants are fitted by bench/fit_fusion.py) where `lexical` is BM25 divided by
the query's total IDF (1.0 when every query word occurs once in an average-length entry), capped
at 1. A power above 1 (2, fitted) keeps a strong lexical match (most of the query's rare words)
decisive while a weak partial one (a name, a common word) barely moves the ranking: on
paraphrased questions, partial word overlaps point at the wrong memory more often than not.

The BM25 statistics (record count, average length, document frequencies) are the shard's, over
its live records only (not shadowed, deleted or expired), summed over the parts per query: a
record scores the same whichever part holds it, so a shard of many segments ranks exactly as one
segment holding its live records. Each part also gives its candidates' stored vectors on demand
(`Candidates.vectors`), for the diversity of the final list (`ops/diversify.py`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...blas import on_one_thread
from ...lexical import idf, normaliser, query_terms
from ..base import Candidates, Filters, fuse
from .segment import Segment
from .shard import Shard

WORD_BUDGET = 4096  # rows holding a query word scored past the index's neighbours, whatever their cosine
BOUND_MARGIN = 1e-5  # relevance is float32: a bound a little generous reads a few more rows, never misses one
EXACT_MAX = 20_000  # up to this many rows, exact scoring (float32 matrix product) beats the index
FETCH_FACTOR = 3  # over-fetch from the index and postings, for rows the filters will drop
MIN_FETCH = 32


@dataclass
class Part:
    """One part of a shard being searched: segment `seg` (None: the memtable) and its row mask."""

    shard: Shard
    seg: Segment | None
    mask: np.ndarray

    @property
    def name(self) -> str:
        return "mem" if self.seg is None else self.seg.folder.name

    def fetch(self) -> Callable[[int], dict]:
        """The record of a row."""
        if self.seg is not None:
            return self.seg.doc
        mem = self.shard.mem

        return mem.record

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores, updated) of every row."""
        if self.seg is not None:
            return self.seg.scores, self.seg.updated
        mem = self.shard.mem
        return mem.scores[: mem.n], mem.updated[: mem.n]

    def when(self) -> np.ndarray:
        return self.seg.when if self.seg is not None else self.shard.mem.when[: self.shard.mem.n]

    def tag_rows(self, tag: str) -> np.ndarray:
        return self.seg.tag_rows(tag) if self.seg is not None else self.shard.mem.tag_slots(tag)

    def locate(self, rid: str) -> int | None:
        return self.seg.find(rid) if self.seg is not None else self.shard.mem.slot_of.get(rid)

    @property
    def lexicon(self):  # type: ignore[no-untyped-def]
        return self.seg.lexicon if self.seg is not None else self.shard.mem.lexicon


def parts(shard: Shard, now: float) -> list[Part]:
    """Every part of `shard`, each with the mask of its live rows."""
    found = [Part(shard, seg, shard.part_alive(i, now)) for i, seg in enumerate(shard.segs)]
    return [*found, Part(shard, None, shard.mem_alive(now))]


@on_one_thread
def search(
    shard: Shard,
    now: float,
    filters: Filters,
    query_vector: np.ndarray | None = None,
    query_text: str = "",
    k: int = 10,
    exhaustive: bool = False,
) -> list[Candidates]:
    """Candidates from every part of `shard`. Without a query every filtered row is returned, with
    relevance 1.0 (it matches every filter given, and nothing else was asked), ranked by its own
    importance `score`; with one, the best `k` at least (all of them if `exhaustive`)."""
    if not shard.segs and not len(shard.mem):
        return []
    live = parts(shard, now)
    alive = [part.mask for part in live]  # before the filters: BM25's statistics count every live row
    for part in live:
        part.mask = part.mask.copy()
        _restrict(part, filters)
    if query_vector is None:
        return [_unscored(part) for part in live]
    if shard.dim and len(query_vector) != shard.dim:
        # another process changed the embedder (`mem reindex --embedder`) between reading this
        # shard and embedding the query: only words rank it, as a shard not yet reindexed
        query_vector = np.zeros(shard.dim, dtype=np.float32)
    try:
        return _search(shard, live, alive, query_vector, query_text, k, exhaustive)
    except (IndexError, ValueError) as exc:  # a mapped file written over in place since it was checked
        found = next((d for seg in shard.segs if (d := seg.damage_found()) is not None), None)
        if found is None:
            raise
        raise found from exc


def _search(
    shard: Shard,
    live: list[Part],
    alive: list[np.ndarray],
    query_vector: np.ndarray,
    query_text: str,
    k: int,
    exhaustive: bool,
) -> list[Candidates]:
    fetch = max(MIN_FETCH, FETCH_FACTOR * k)
    asked: list[Asked | None] = []
    try:  # the index searches run while this thread scores the words and the other parts
        for part in live:
            asked.append(_ask_index(part, query_vector, fetch, exhaustive))
        _let_start(asked)
        weights, avgdl = _bm25_weights(live, alive, list(query_terms(query_text)))
        found: dict[int, Candidates] = {}
        for i in sorted(range(len(live)), key=lambda i: asked[i] is not None):
            found[i] = _scored(live[i], query_vector, weights, avgdl, asked[i], k)
        return [found[i] for i in range(len(live))]
    finally:  # on an error or an interrupt too: no search of this query's indexes outlives it
        _finish(asked)


def _restrict(part: Part, filters: Filters) -> None:
    """Clear the rows of the part's mask that fail the tag, id or time filters (in place)."""
    mask = part.mask
    if filters.timed and len(mask):
        when = part.when()
        if filters.since is not None:
            mask &= when[: len(mask)] >= filters.since
        if filters.until is not None:
            mask &= when[: len(mask)] < filters.until
    for tag in filters.tags:
        keep = np.zeros_like(mask)
        rows = part.tag_rows(tag)
        keep[rows[rows < len(mask)]] = True
        mask &= keep
    if filters.ids is not None:
        keep = np.zeros_like(mask)
        for rid in filters.ids:
            row = part.locate(rid)
            if row is not None:
                keep[row] = True
        mask &= keep


def _unscored(part: Part) -> Candidates:
    rows = np.flatnonzero(part.mask)
    if not len(rows):
        return _empty(part)
    scores, updated = part.columns()
    importance = np.asarray(scores[rows], dtype=np.float32)
    full = np.ones(len(rows), dtype=np.float32)  # the stored score ranks but never filters
    return Candidates(part.fetch(), rows, full, None, None, np.asarray(updated[rows]), len(rows), order=importance)


def _empty(part: Part) -> Candidates:
    none = np.zeros(0)
    return Candidates(part.fetch(), none.astype(np.int64), none, none, none, none, 0)


def _bm25_weights(live: list[Part], alive: list[np.ndarray], qterms: list[str]) -> tuple[dict[str, float], float]:
    """IDF of each query term and the average entry length, over the live rows of every part
    (`alive`: their masks before any filter)."""
    n_docs = 0
    total_len = 0.0
    lexicons = []
    for part, mask in zip(live, alive, strict=True):
        lexicon = part.lexicon
        if lexicon is None or not len(mask):
            continue
        lexicons.append((lexicon, mask))
        n_docs += int(np.count_nonzero(mask))
        total_len += lexicon.live_length(mask)
    weights: dict[str, float] = {}
    for term in qterms:
        df = sum(lexicon.df(term, mask) for lexicon, mask in lexicons)
        weights[term] = idf(max(n_docs, 1), df)
    return weights, max(total_len / max(n_docs, 1), 1.0)


def _ask_index(part: Part, qvec: np.ndarray, fetch: int, exhaustive: bool) -> Asked | None:
    """Start the Annoy search of `part` on the worker thread, if the part is searched through
    its index: big, unfiltered enough, and not asked for every score. Annoy releases the GIL, so
    on a second core it runs while this thread computes the BM25 scores (about half a query)."""
    seg, mask = part.seg, part.mask
    if seg is None or seg.index is None or exhaustive or not part.shard.dim:
        return None
    total = int(np.count_nonzero(mask))
    if total <= max(EXACT_MAX, fetch):
        return None
    share = max(total / len(mask), 1e-3)  # the filters keep this share: fetch more
    want = min(int(fetch / share), len(mask))
    started = threading.Event()
    index = seg.index

    def nearest() -> np.ndarray:
        started.set()
        return index.nearest(qvec, want)

    try:
        near = _worker().submit(nearest)
    except RuntimeError:  # the interpreter is exiting (its executors take no more work): search here
        near = Future()
        near.set_result(nearest())
    return Asked(want, near, started)


@dataclass
class Asked:
    """An index search under way: the neighbours wanted, the rows it will give, and whether the
    worker has begun it."""

    want: int
    near: Future[np.ndarray]
    started: threading.Event


def _let_start(asked: list[Asked | None]) -> None:
    """Wait until the worker is inside the first index search. Otherwise this thread keeps the
    GIL for the whole interpreter switch interval (5 ms) while the worker waits for it to even
    begin: the overlap would be lost."""
    first = next((job for job in asked if job is not None), None)
    if first is not None:
        first.started.wait()


def _finish(asked: list[Asked | None]) -> None:
    """Wait until every index search of a query has ended (the caller may close the index next).
    An interrupt (Ctrl-C) meanwhile is raised once they have."""
    interrupted: BaseException | None = None
    for job in asked:
        while job is not None and not job.near.cancel() and not job.near.done():
            try:
                job.near.exception()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the wait
                interrupted = exc
    if interrupted is not None:
        raise interrupted


def _worker() -> ThreadPoolExecutor:
    """The threads that run index searches: this process's own (a child forked after a query
    inherits the executor but not its threads, and would wait for them forever)."""
    return _executor(os.getpid())


@lru_cache(maxsize=1)
def _executor(pid: int) -> ThreadPoolExecutor:
    """Made on the first index search of process `pid`. As many threads as cores: the searches of
    a query's several segments run side by side."""
    return ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="mem-index")


def _scored(
    part: Part,
    qvec: np.ndarray,
    weights: dict[str, float],
    avgdl: float,
    asked: Asked | None,
    k: int,
) -> Candidates:
    """The part's candidates scored: the index's (`asked`, under way), the BM25 leaders and the
    rows whose words could still put them among the first `k` (`_outranking`), or every row
    exactly when nothing was asked of the index."""
    mask, seg, shard = part.mask, part.seg, part.shard
    total = int(np.count_nonzero(mask))
    if not total or not shard.dim:
        return _empty(part)
    lex_all, matched = _lexical_scores(part, weights, avgdl)
    norm = normaliser(weights.values())
    if seg is None:
        rows = np.flatnonzero(mask)
        vec = (shard.mem.vectors[: shard.mem.n] @ qvec)[rows]
    elif asked is None:
        rows = np.flatnonzero(mask)
        vec = seg.similarities(qvec)[rows]
    else:
        leaders = _leaders(lex_all, matched, asked.want)  # while the index search runs
        near = asked.near.result()
        rows = np.union1d(near, leaders)
        rows = rows[mask[rows]]
        vec = seg.similarities(qvec, rows)
        reach = float(seg.similarities(qvec, near).min()) if 0 < len(near) < len(mask) else -1.0
        worded = np.flatnonzero((lex_all > 0) & mask)  # not np.unique(matched): 0.5 ms at 100k rows
        relevance = fuse(vec, np.minimum(lex_all[rows] / norm, 1.0).astype(np.float32))
        more = np.setdiff1d(_outranking(worded, np.minimum(lex_all[worded] / norm, 1.0), relevance, reach, k), rows)
        rows, vec = np.concatenate([rows, more]), np.concatenate([vec, seg.similarities(qvec, more)])
    lex = np.minimum(lex_all[rows] / norm, 1.0).astype(np.float32)
    _, updated = part.columns()
    path = "exact" if asked is None else "index"
    found = Candidates(part.fetch(), rows, fuse(vec, lex), vec, lex, np.asarray(updated[rows]), total, path)
    found.vectors = _vectors(part, rows)
    return found


def _vectors(part: Part, rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The stored vectors of some of `rows` (by position), as float32."""
    seg, mem = part.seg, part.shard.mem

    def vectors(positions: np.ndarray) -> np.ndarray:
        picked = rows[positions]
        if seg is None:
            return np.asarray(mem.vectors[picked], dtype=np.float32)
        return np.asarray(seg.vectors[picked], dtype=np.float32)

    return vectors


def _lexical_scores(part: Part, weights: dict[str, float], avgdl: float) -> tuple[np.ndarray, np.ndarray]:
    if part.seg is not None:
        assert part.seg.lexicon is not None
        return part.seg.lexicon.scores(weights, avgdl)
    mem = part.shard.mem
    assert mem.lexicon is not None
    return mem.lexicon.scores(weights, avgdl, mem.n)


def _outranking(worded: np.ndarray, lexical: np.ndarray, relevance: np.ndarray, reach: float, k: int) -> np.ndarray:
    """The rows of `worded` (filtered rows holding a query word, of `lexical` relevance) that
    could rank among the first `k` above the candidates' `relevance`. The BM25 leaders alone are
    not enough: lexical relevance is capped at 1, and a row with every query word, at the cap,
    but a long text, is no leader by raw BM25 while its cosine puts it first (an outside audit
    found top entries missing on 30k-row scopes). Any cosine is assumed while that leaves at
    most WORD_BUDGET rows to score (a millisecond or two); past it, a row the index did not give
    is assumed to have a cosine of at most `reach`, the least of its neighbours' (as far as the
    approximate index tells)."""
    bar = float(np.partition(relevance, len(relevance) - k)[len(relevance) - k]) if len(relevance) >= k else 0.0
    lexical = lexical.astype(np.float32)
    for cosine in (1.0, reach):
        could = fuse(np.full(len(lexical), cosine, dtype=np.float32), lexical) > bar - BOUND_MARGIN
        if np.count_nonzero(could) <= WORD_BUDGET:
            break
    return worded[could]


def _leaders(lex: np.ndarray, matched: np.ndarray, want: int) -> np.ndarray:
    """The `want` best BM25 scores among the `matched` rows (which may repeat rows: the union
    with the index's neighbours removes them)."""
    if len(matched) <= want:
        return matched
    return matched[np.argpartition(-lex[matched], want - 1)[:want]]
