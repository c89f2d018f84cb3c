"""Hybrid search over one scope in PostgreSQL, ranked exactly as the files backend ranks.

BM25 uses this backend's own term statistics (`mem_terms`, `mem_scopes`), not PostgreSQL's full
text search: `ts_rank` is not BM25 (no IDF, another length normalisation) and its parsers stem
and drop other words than `lexical.terms`, so relevance, and the ranking, would differ between
backends. Here each row keeps its terms (`lexical.terms` of its text, with repeats), and a query's
weights (`lexical.idf` over the scope's document frequencies, average length) and the per-row sum
are the files backend's formula (`files/search.py`), computed in Python over the candidate rows.
Relevance is `base.fuse(cosine, min(bm25 / normaliser, 1))`.

Which rows are candidates (each then gets both scores exactly):
- exact, when the filtered scope has at most EXACT_MAX rows, or `exhaustive` asks for every
  score: the `fetch` rows of highest cosine (computed in SQL in an expression the planner cannot
  serve from the HNSW index) and every row holding a query term. That is every row that can rank
  in the top `fetch` by relevance: a row without a query term scores VECTOR_WEIGHT * cosine, so one outside
  the cosine leaders is beaten by at least `fetch` rows, unless fewer than `fetch` candidates score
  above 0 (cosines of 0 or less): rows of relevance 0 rank newest first, so the `fetch` newest
  rows join them (on either path). With `exhaustive`, every filtered row.
- index, otherwise: the HNSW index's nearest rows of the whole table (`hnsw.ef_search` raised so
  that enough of them pass the scope's filters), filtered; the rows written since the index's
  watermark (see `schema.py`), by exact cosine; the best rows by relevance of those holding the query's
  rarest terms (GIN, up to LEXICAL_BUDGET rows); then, if the query has terms too common for
  that, the rows of common terms alone that could still rank among the first (`_common_leaders`:
  a bound on BM25 says which sets of terms such a row must hold; up to COMMON_BUDGET rows). When
  the index gives fewer rows than asked (pgvector 0.6 has no iterative scan: a small scope of a
  big table can be starved by its filters) the search is done exactly instead.

Without a query every filtered live row is a candidate, relevance 1.0, ranked by its `score`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...lexical import K1, B, idf, normaliser, query_terms
from ..base import LEXICAL_POWER, VECTOR_WEIGHT, Candidates, Doc, Filters, RecordGone, fuse
from .scope import KEY, LIVE, PgScope

# of a scope: live rows, their total length, the query terms' document frequencies, the rows
# passing the filters, the table's rows, the vector index's record, the embedder's (`_statistics`)
Statistics = tuple[int, float, list[int], int, int, "dict | None", "dict | None"]

# Scopes of at most this many rows are searched exactly, as the files backend's are: the ranking
# is then the files backend's. Each row scored in SQL costs 2 to 4 us (51 ms a query at 10,000
# rows on a slow day, 21 ms through the index), but the index path's word candidates (the rarest
# terms' rows, within LEXICAL_BUDGET) miss rows that a common query word ranks high: at 2,000 an
# outside audit found top-5 entries of the files backend missing on a 10,000-row scope. Kept.
EXACT_MAX = 20_000
FETCH_FACTOR = 3  # as files/search.py: over-fetch for the caller's own cuts
MIN_FETCH = 32
# hnsw.ef_search bounds (pgvector refuses more than 1000). A retrieve of limit <= 10 asks 150
# rows (a pool of 50, FETCH_FACTOR 3): the floor is that, no more (each unit ~10-30 us at 100k
# rows; 200 cost a retrieve 1 ms more). recall@10 at 100 / 150 / 200: the bench's 100k rows
# 0.996 / 1.000 / 1.000; 30k rows of 1 to 3 words of a 30-word vocabulary (many equal vectors)
# 0.976 / 0.989 / 0.993. An outside audit's 30-word corpus gave 0.947 at 100, 0.960 at 200.
EF_MIN, EF_MAX = 150, 1000
EF_SLACK = 1.5  # the filters keep `share` of the index's rows on average: ask for more (share < 1)
LEXICAL_BUDGET = 1000  # rows of the rarest query terms the index path ranks by BM25 (each read costs ~10 us)
NEAR, RECENT, LEADER = 0, 1, 2  # which part of the index path's candidates a row came from
FLOOR_MARGIN = 1e-4  # relevance is float32: a floor a little low reads a few more rows, never misses one
MAX_TERM_SETS = 16  # sets of common terms whose rows are read and ranked (see `_common_leaders`)
COMMON_BUDGET = 2000  # rows those sets may read, at most (the cheapest sets first)

# a row's cosine distance; a vector of another dimension than the query's (left by hand in a
# loosened column, or by another process's reindex) counts as no vector rather than failing
DISTANCE = "CASE WHEN vector_dims(vec) = %(dim)s THEN vec <=> %(q)b END"
# a record's own time (`timeaware.entry_time`); rows written before the `at` column, by created_at
WHEN = "coalesce(at, CASE WHEN jsonb_typeof(doc->'created_at') = 'number' THEN (doc->>'created_at')::float8 END, 0)"
ROWS = "(SELECT count(*) FROM mem_records WHERE " + KEY + ")"
LENGTH = "(SELECT coalesce(sum(cardinality(terms)), 0) FROM mem_records WHERE " + KEY + ")"
SCORE_COLUMNS = (
    f"seq, {DISTANCE}, updated_at, cardinality(terms), "
    "CASE WHEN terms && %(qt)s::text[] THEN ARRAY(SELECT x FROM unnest(terms) x WHERE x = ANY(%(qt)s::text[])) END"
)
# The index path's few hundred candidates: a row's whole terms when it holds a query term
# (`bm25_scores` counts only the query's). The subquery that keeps only those cost ~8 us a row
# there, 2 ms a retrieve at 100k rows; an exact search's thousands of rows keep it, so that
# Python does not walk every term of every row.
CANDIDATE_COLUMNS = SCORE_COLUMNS.replace(
    "ARRAY(SELECT x FROM unnest(terms) x WHERE x = ANY(%(qt)s::text[]))", "terms"
).replace(DISTANCE, "d")


def search_each(
    scopes: list[PgScope],
    now: float,
    filters: Filters,
    qvec: np.ndarray | None,
    query_text: str,
    k: int,
    exhaustive: bool,
) -> list[list[Candidates]]:
    """The candidates of each of `scopes` (of one backend). The scopes' statistics travel in one
    round trip: a retrieve of every tier asked one each (1 ms a tier)."""
    if qvec is None:
        return [_unscored(scope, *_where(scope, now, filters)) for scope in scopes]
    searched = [scope for scope in scopes if scope.dim]
    if not searched:
        return [[] for _ in scopes]
    qterms = list(query_terms(query_text))
    dim = searched[0].backend.current_dim()
    if not dim or len(qvec) != dim:  # another process's reindex changed the embedder: words only
        qvec = np.zeros(max(dim, 1), dtype=np.float32)
    qvec = np.asarray(qvec, dtype=np.float32)
    asks = []
    for scope in searched:
        where, params = _where(scope, now, filters)
        params.update(q=qvec, qt=qterms, dim=len(qvec))
        asks.append((scope, where, params))
    found = {
        id(scope): _scope_search(scope, where, params, statistics, k, exhaustive)
        for (scope, where, params), statistics in zip(asks, _statistics(asks, filters), strict=True)
    }
    return [found.get(id(scope), []) for scope in scopes]


def _scope_search(
    scope: PgScope, where: str, params: dict[str, Any], statistics: Statistics, k: int, exhaustive: bool
) -> list[Candidates]:
    """One scope's candidates, its statistics read (`_statistics`)."""
    qvec, qterms = params["q"], params["qt"]
    dim = scope.backend.current_dim()
    fetch = max(MIN_FETCH, FETCH_FACTOR * k)
    n_docs, total_len, dfs, total, table_rows, index, recorded = statistics
    if recorded and int(recorded["dim"]) != len(qvec) and np.any(qvec):
        qvec = _after_reindex(scope)
        params.update(q=qvec, dim=len(qvec))
    if total <= 0:
        return []
    weights = {t: idf(max(n_docs, 1), df) for t, df in zip(qterms, dfs, strict=True)}
    avgdl = max(total_len / max(n_docs, 1), 1.0)
    rows, path = None, "exact"
    blank = not np.any(qvec)
    upto = int(index["upto"]) if index and index.get("dim") == dim and scope.backend._vector_dim == dim else 0
    if upto and not (exhaustive or blank or total <= max(EXACT_MAX, fetch)):
        near = NearHint(upto, total / max(table_rows, total, 1))
        rows = _index_rows(scope, where, params, weights, dfs, (k, fetch), total, near, avgdl)
        path = "index"
    if rows is None:
        rows = _exact_rows(scope, where, params, fetch, exhaustive)
        path = "exact"
    if not exhaustive and _scoring(rows) < min(fetch, total):
        rows = _with_newest(scope, where, params, rows, fetch)
    return [_scored(scope, rows, weights, avgdl, total, path, len(qvec), k)]


def _scoring(rows: list[tuple]) -> int:
    """How many candidates have a relevance above 0: a cosine above 0 or a query term."""
    return sum(1 for row in rows if (row[1] is not None and row[1] < 1.0) or row[4])


def _with_newest(scope: PgScope, where: str, params: dict[str, Any], rows: list[tuple], fetch: int) -> list[tuple]:
    """`rows` and the scope's `fetch` newest rows: fewer than `fetch` candidates score above 0,
    so rows of relevance 0 (a cosine of 0 or less, no query term) are among the first, and ties
    rank newest first (`ops/a2e.py`): the newest rows, not whichever the cosine put first."""
    newest = _run(
        scope,
        f"SELECT {SCORE_COLUMNS} FROM mem_records WHERE {where} ORDER BY updated_at DESC, seq DESC LIMIT %(fetch)s",
        {**params, "fetch": fetch},
    )
    unique = {row[0]: row for row in [*rows, *newest]}
    return [unique[seq] for seq in sorted(unique)]


def _after_reindex(scope: PgScope) -> np.ndarray:
    """The query vector was made for another dimension than the store now records: another
    process reindexed it. Re-read the record; a process told to use another embedder gets the
    `StoreMismatch` naming `mem reindex` (from `backend.embedder`), any other searches by words
    (a zero vector), as the files backend does, until its next query embeds with the new one."""
    backend = scope.backend
    backend.refresh(force=True)
    dim = backend.current_dim()
    backend.embedder  # noqa: B018 (raises StoreMismatch when this process may not switch)
    return np.zeros(max(dim, 1), dtype=np.float32)


def _where(scope: PgScope, now: float, filters: Filters) -> tuple[str, dict[str, Any]]:
    """The filters as a condition of constant text, and its parameters."""
    where = f"{KEY} AND {LIVE}"
    params: dict[str, Any] = {**scope.key, "now": now}
    if filters.tags:
        # a tag or id with NUL matches nothing: no stored one can hold it (text cannot)
        where += " AND tags @> %(tags)s::text[]"
        params["tags"] = [tag.replace("\x00", "") for tag in filters.tags]
        if any("\x00" in tag for tag in filters.tags):
            where += " AND false"
    if filters.ids is not None:
        where += " AND id = ANY(%(ids)s::text[])"
        params["ids"] = [rid for rid in filters.ids if "\x00" not in rid]
    if filters.since is not None:
        where += f" AND {WHEN} >= %(since)s"
        params["since"] = filters.since
    if filters.until is not None:
        where += f" AND {WHEN} < %(until)s"
        params["until"] = filters.until
    return where, params


def _run(scope: PgScope, sql: str, params: dict[str, Any]) -> list[tuple]:
    with scope.backend.db.connection() as conn:
        return conn.execute(sql, params).fetchall()


def _unscored(scope: PgScope, where: str, params: dict[str, Any]) -> list[Candidates]:
    rows = _run(scope, f"SELECT seq, score, updated_at FROM mem_records WHERE {where} ORDER BY seq", params)
    if not rows:
        return []
    seqs = np.array([r[0] for r in rows], dtype=np.int64)
    order = np.array([r[1] for r in rows], dtype=np.float32)
    updated = np.array([r[2] for r in rows], dtype=np.float64)
    full = np.ones(len(rows), dtype=np.float32)  # the stored score ranks but never filters
    fetch = Loader(scope, seqs, order, vectors=False)
    return [Candidates(fetch, np.arange(len(rows)), full, None, None, updated, len(rows), order=order)]


def _statistics(asks: list[tuple[PgScope, str, dict[str, Any]]], filters: Filters) -> list[Statistics]:
    """Of each scope asked (scope, condition, parameters): its live rows and their total length,
    each query term's document frequency among them, the rows passing the filters, the table's
    rows, the HNSW index's watermark and the recorded embedder. One round trip for them all.
    Without filters the count comes from the statistics (minus the expired rows, found by the
    expiry index), not from a scan; a scope whose statistics row is missing (deleted by hand:
    `mem doctor --repair` recounts) is counted from its rows."""
    where = asks[0][1]  # the same text for every scope: only the parameters differ
    if filters.tags or filters.ids is not None or filters.timed:
        total = f"(SELECT count(*) FROM mem_records WHERE {where})"
    else:
        total = f"coalesce(s.n_docs, {ROWS}) - (SELECT count(*) FROM gone)"
    # The statistics count a row from its write to its delete; an expired row stays until a
    # purge (`mem gc`) deletes it. Its share (found by the expiry index: few rows) is taken off,
    # so that, as in the files backend, an expired row never weighs in the BM25 statistics.
    sql = f"""
        WITH gone AS (SELECT terms FROM mem_records WHERE namespace = %(ns)s AND expires_at <= %(now)s
                      AND kind = %(kind)s AND scope = %(scope)s::text[])
        SELECT coalesce(s.n_docs, {ROWS}) - (SELECT count(*) FROM gone),
               coalesce(s.total_len, {LENGTH}) - (SELECT coalesce(sum(cardinality(terms)), 0) FROM gone),
               ARRAY(SELECT coalesce(t.df, 0) - (SELECT count(*) FROM gone WHERE q.term = ANY(gone.terms))
                     FROM unnest(%(qt)s::text[]) WITH ORDINALITY AS q(term, i)
                     LEFT JOIN mem_terms t ON t.namespace = %(ns)s AND t.kind = %(kind)s
                          AND t.scope = %(scope)s::text[] AND t.term = q.term ORDER BY q.i),
               {total},
               (SELECT coalesce(sum(entries), 0) FROM mem_usage),
               (SELECT value FROM mem_meta WHERE key = 'vector_index'),
               (SELECT value FROM mem_meta WHERE key = 'embedder')
        FROM (SELECT 1) AS one
        LEFT JOIN mem_scopes s ON s.namespace = %(ns)s AND s.kind = %(kind)s AND s.scope = %(scope)s::text[]
    """
    # prepared, and run under its generic plan: its lookups by key do not depend on the values,
    # and parsing and planning it for each query was most of its server time (0.9 of 1.2 ms)
    found = asks[0][0].backend.db.read_generic_many(sql, [params for _, _, params in asks])
    return [
        (int(n_docs), float(total_len), [int(d) for d in dfs], int(count), int(table_rows), index, recorded)
        for ((n_docs, total_len, dfs, count, table_rows, index, recorded),) in found
    ]


def _exact_rows(scope: PgScope, where: str, params: dict[str, Any], fetch: int, exhaustive: bool) -> list[tuple]:
    if exhaustive:
        return _run(scope, f"SELECT {SCORE_COLUMNS} FROM mem_records WHERE {where}", params)
    # DISTANCE is an ordering the HNSW index cannot give, so every filtered row's cosine is computed
    sql = (
        f"SELECT {SCORE_COLUMNS} FROM mem_records WHERE {where} AND (terms && %(qt)s::text[] OR seq IN "
        f"(SELECT seq FROM mem_records WHERE {where} ORDER BY {DISTANCE} LIMIT %(fetch)s))"
    )
    return _run(scope, sql, {**params, "fetch": fetch})


def _index_rows(
    scope: PgScope,
    where: str,
    params: dict[str, Any],
    weights: dict[str, float],
    dfs: list[int],
    wanted: tuple[int, int],
    total: int,
    near: NearHint,
    avgdl: float,
) -> list[tuple] | None:
    """Candidates from the HNSW index (rows up to its watermark `near.upto`), the rows written
    since (exactly: the `fetch` of highest cosine) and the rarest terms' rows; None when the index
    cannot give enough rows of this scope (the caller searches exactly). `wanted`: the caller's
    `k`, and the rows fetched of each part (`fetch`, more than `k`: for the caller's own cuts)."""
    from psycopg import sql

    k, fetch = wanted
    ef = _ef(fetch, near.share)
    if ef > EF_MAX:
        return None
    timed = ", at, doc" if "since" in params or "until" in params else ""  # what `WHEN` reads
    rare = _rarest(list(weights), dfs)
    values: dict[str, Any] = {**params, "ef": ef, "fetch": fetch}
    if rare:
        values.update(_lexical_values(weights, avgdl), rare=rare)
    # prepared, under its generic plan (its parts' plans do not depend on the values: planning it
    # afresh was 1.5 ms a query); the watermark, the index's predicate, is a constant of its text
    statement = sql.SQL(_candidates_sql(where, len(weights) if rare else None, timed)).format(
        upto=sql.Literal(near.upto)
    )
    rows = scope.backend.db.read_generic(statement, values, {"hnsw.ef_search": str(ef)})
    found = rows[0][-1] if rows else 0  # rows the index and the recent rows gave
    if found < min(fetch, total):
        return None
    unique = {row[0]: row[:-2] for row in rows}  # a leader found by the index too: once
    common = {term: df for term, df in zip(weights, dfs, strict=True) if df > 0 and term not in rare}
    if common:
        sets = _word_sets(list(unique.values()), _cosine_reach(rows, fetch), weights, common, avgdl, k)
        for row in _common_leaders(scope, where, values, weights, sets, avgdl):
            unique.setdefault(row[0], row)
    return [unique[seq] for seq in sorted(unique)]


def _ef(fetch: int, share: float) -> int:
    """`hnsw.ef_search` for `fetch` rows of a scope holding `share` of the table's rows: when
    every row passes the filters (one scope, none expired, no filter), every row the index gives
    is a candidate, no slack (each unit of ef costs ~30 us at 100k rows)."""
    slack = 1.0 if share >= 1.0 else EF_SLACK
    return max(EF_MIN, math.ceil(fetch / share * slack))


@dataclass(frozen=True)
class NearHint:
    """What an index search of a scope asks the HNSW index: rows up to the watermark `upto`,
    the scope being `share` of the table's rows."""

    upto: int
    share: float


def _word_sets(
    rows: list[tuple], reach: float, weights: dict[str, float], common_df: dict[str, int], avgdl: float, k: int
) -> list[list[str]]:
    """The sets of common terms whose rows `_common_leaders` reads: those a row outside the
    candidates must hold to rank among the first `k`, assuming any cosine when their rows fit
    COMMON_BUDGET (the approximate index can miss a row nearer than its last neighbour: an
    outside audit found such rows of every query word missing), else a cosine of at most
    `reach`, the cheapest sets within the budget."""
    sets: list[list[str]] = []
    norm = normaliser(weights.values())
    bar = _kth_relevance(rows, weights, avgdl, k, norm)
    for cosine in (1.0, reach):
        floor = _bm25_floor(bar, cosine, norm)
        if math.isinf(floor):
            return []
        sets = term_sets({term: weights[term] * (K1 + 1) for term in common_df}, floor)
        chosen = affordable(sets, common_df)
        if len(chosen) == len(sets) < 4 * MAX_TERM_SETS:
            return chosen
    return affordable(sets, common_df)


def _cosine_reach(rows: list[tuple], fetch: int) -> float:
    """The highest cosine a row outside the candidates can have: it is not among the index's
    nearest (which the filters cut to `fetch`), so at most the least of theirs (as far as the
    approximate index tells; 1 when the index gave none), and, when the recent rows gave all
    `fetch` asked, at most the least of theirs (else every recent row is a candidate). The rows
    carry their part (`NEAR`, `RECENT`, `LEADER`) before their last column."""

    def cosines(part: int) -> list[float]:
        return [1.0 - (1.0 if row[1] is None else row[1]) for row in rows if row[-2] == part]

    near, recent = cosines(NEAR), cosines(RECENT)
    reach = min(near) if near else 1.0
    return max(reach, min(recent)) if len(recent) >= fetch else reach


def _kth_relevance(rows: list[tuple], weights: dict[str, float], avgdl: float, k: int, norm: float) -> float:
    """The candidates' `k`-th relevance (all the caller ranks: `ops/a2e.py` asks for its whole
    pool), as `_scored` scores them (`norm`: the query's BM25 normaliser); 0 when fewer than `k`."""
    if len(rows) < k:
        return 0.0
    vector = np.array([1.0 - (np.nan if row[1] is None else row[1]) for row in rows], dtype=np.float64)
    lexical = np.minimum(bm25_scores(rows, weights, avgdl) / norm, 1.0)
    relevance = fuse(np.nan_to_num(vector, nan=0.0).astype(np.float32), lexical.astype(np.float32))
    return float(np.partition(relevance, len(relevance) - k)[len(relevance) - k])


def _bm25_floor(bar: float, reach: float, norm: float) -> float:
    """The BM25 a row outside the candidates must pass to rank among the first (to pass `bar`,
    the candidates' k-th relevance): with a cosine of at most `reach`, only its words can lift
    its relevance (`base.fuse`) over it. Infinite when no BM25 can; `norm` is the query's
    BM25 normaliser."""
    need = (bar - VECTOR_WEIGHT * max(reach, 0.0)) / (1 - VECTOR_WEIGHT)
    if need <= 0:
        return 0.0
    lexical_need = need ** (1 / LEXICAL_POWER)
    return math.inf if lexical_need > 1.0 else lexical_need * norm * (1 - FLOOR_MARGIN)


def _common_leaders(
    scope: PgScope,
    where: str,
    values: dict[str, Any],
    weights: dict[str, float],
    sets: list[list[str]],
    avgdl: float,
) -> list[tuple]:
    """Rows the candidates so far miss that rank by their words: rows holding only the query's
    common terms (the rows holding a rarer one were ranked, their best `fetch` taken), as the
    files backend scores every row holding a query term. Such a row must pass a BM25 floor
    (`_bm25_floor`), and a term adds less than `weight * (K1 + 1)` to a row's BM25 (its limit as
    the row repeats the term), so it holds one of the smallest sets of common terms whose limits
    add up past the floor (`term_sets`, `_word_sets`): those sets' rows are read (GIN), scored in
    SQL, the best `fetch` by relevance kept. Reading a row costs ~10 us (rows are wide: their
    vector is inline), so at most COMMON_BUDGET rows are read, the cheapest sets first: past it,
    a row of common words alone can be missed."""
    if not sets:
        return []
    holding = " OR ".join(f"terms @> %(s{i})s::text[]" for i in range(len(sets)))
    extra: dict[str, Any] = {f"s{i}": terms_ for i, terms_ in enumerate(sets)} | _lexical_values(weights, avgdl)
    statement = _leaders_sql(where, len(weights), f"({holding})")
    return _run(scope, f"SELECT {CANDIDATE_COLUMNS} FROM ({statement}) AS leaders", {**values, **extra})


def affordable(sets: list[list[str]], dfs: dict[str, int]) -> list[list[str]]:
    """The sets whose rows (at most the document frequency of their rarest term) add up to at
    most COMMON_BUDGET, cheapest first, and at most MAX_TERM_SETS of them."""
    chosen: list[list[str]] = []
    reads = 0
    for terms_ in sorted(sets, key=lambda found: min(dfs[t] for t in found)):
        reads += min(dfs[t] for t in terms_)
        if reads > COMMON_BUDGET or len(chosen) == MAX_TERM_SETS:
            break
        chosen.append(terms_)
    return chosen


def term_sets(limits: dict[str, float], floor: float, most: int = 4 * MAX_TERM_SETS) -> list[list[str]]:
    """The smallest sets of terms whose `limits` add up past `floor` (at most `most` of them):
    every set of terms past it holds one of them. Terms are taken largest limit first and a set
    ends as soon as it passes, so leaving any term out of a set brings it back under the floor."""
    order = sorted(limits, key=lambda term: -limits[term])
    rest = [sum(limits[term] for term in order[i:]) for i in range(len(order) + 1)]
    found: list[list[str]] = []

    def grow(chosen: list[str], start: int, total: float) -> None:
        for i in range(start, len(order)):
            if total + rest[i] <= floor or len(found) >= most:
                return
            passed = total + limits[order[i]]
            if passed > floor:
                found.append([*chosen, order[i]])
            else:
                grow([*chosen, order[i]], i + 1, passed)

    grow([], 0, 0.0)
    return found


def _candidates_sql(where: str, count: int | None, timed: str) -> str:
    """One statement for the index path's candidates, as `CANDIDATE_COLUMNS` gives them: the
    index's nearest rows of the scope, the rows written since the watermark (`{upto}`) by exact
    cosine, and (with `count` query terms) the best rows of the rarest terms. Each part carries
    what the scores need (no second lookup of its rows); a leader may also be a near or recent
    row (the caller keeps one). The last column counts the first two parts (too few: the caller
    searches exactly)."""
    near = (
        "SELECT seq, d, updated_at, terms FROM (SELECT seq, namespace, kind, scope, id, tags, expires_at"
        + timed
        + ", updated_at, terms, vec <=> %(q)b AS d FROM mem_records WHERE seq <= {upto} ORDER BY vec <=> %(q)b "
        "LIMIT %(ef)s) AS near WHERE " + where + " ORDER BY d LIMIT %(fetch)s"
    )
    recent = (
        f"SELECT seq, {DISTANCE} AS d, updated_at, terms FROM mem_records WHERE "
        + where
        + " AND seq > {upto} ORDER BY d LIMIT %(fetch)s"
    )
    parts = [f"near AS ({near})", f"recent AS ({recent})"]
    chosen = f"SELECT *, {NEAR} FROM near UNION ALL SELECT *, {RECENT} FROM recent"
    if count is not None:
        parts.append(f"leaders AS ({_leaders_sql(where, count)})")
        chosen += f" UNION ALL SELECT *, {LEADER} FROM leaders"
    return (
        f"WITH {', '.join(parts)} SELECT {CANDIDATE_COLUMNS}, part, "
        "(SELECT count(*) FROM near) + (SELECT count(*) FROM recent) "
        f"FROM ({chosen}) AS candidates(seq, d, updated_at, terms, part)"
    )


def _leaders_sql(where: str, count: int, holding: str = "terms && %(rare)s::text[]") -> str:
    """The best `fetch` rows by relevance among the rows `holding` the chosen terms, scored in
    SQL as `_scored` scores them (`bm25` below, `base.fuse`): by relevance, not raw BM25, since
    lexical relevance is capped at 1 and among rows at the cap the cosine decides (a row of every
    query word in a long text is no BM25 leader, and can be first). One term of the sum per query
    term (`array_positions` counts its occurrences); the text depends only on how many terms
    there are: every term, weight and constant is a parameter. Rows of (seq, d, updated_at, terms)."""
    norm = f"{K1!r} * (1 - {B!r} + {B!r} * cardinality(terms) / %(avgdl)s)"
    parts = [f"%(w{i})s * tf{i} * {K1 + 1!r} / (tf{i} + {norm})" for i in range(count)]
    tfs = ", ".join(f"cardinality(array_positions(terms, %(t{i})s::text)) AS tf{i}" for i in range(count))
    cosine = "greatest(1 - coalesce(nullif(d, 'NaN'), 1), 0)"  # no vector, or a zero one: 0, as `_scored`
    lexical = f"power(least(({' + '.join(parts)}) / %(norm)s, 1), %(power)s)"
    return (
        f"SELECT seq, d, updated_at, terms FROM (SELECT seq, {DISTANCE} AS d, updated_at, terms, {tfs} "
        f"FROM mem_records WHERE {where} AND {holding}) AS m "
        f"ORDER BY %(vw)s * {cosine} + (1 - %(vw)s) * {lexical} DESC LIMIT %(fetch)s"
    )


def _lexical_values(weights: dict[str, float], avgdl: float) -> dict[str, Any]:
    """The parameters of `_leaders_sql`'s scores."""
    values: dict[str, Any] = {f"t{i}": term for i, term in enumerate(weights)}
    values.update({f"w{i}": weight for i, weight in enumerate(weights.values())})
    values.update(avgdl=avgdl, norm=normaliser(weights.values()), vw=VECTOR_WEIGHT, power=LEXICAL_POWER)
    return values


def _rarest(qterms: list[str], dfs: list[int]) -> list[str]:
    """The query terms whose rows, rarest first, add up to at most LEXICAL_BUDGET."""
    chosen, rows = [], 0
    for term, df in sorted(zip(qterms, dfs, strict=True), key=lambda pair: pair[1]):
        if df == 0:
            continue
        if rows + df > LEXICAL_BUDGET:
            break
        chosen.append(term)
        rows += df
    return chosen


def _scored(
    scope: PgScope,
    rows: list[tuple],
    weights: dict[str, float],
    avgdl: float,
    total: int,
    path: str,
    dim: int,
    first: int,
) -> Candidates:
    n = len(rows)
    seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    distance = np.array([np.nan if r[1] is None else r[1] for r in rows], dtype=np.float64)
    vector = np.nan_to_num(1.0 - distance, nan=0.0).astype(np.float32)  # no vector, or a zero one: 0
    updated = np.fromiter((r[2] for r in rows), dtype=np.float64, count=n)
    lexical = np.minimum(bm25_scores(rows, weights, avgdl) / normaliser(weights.values()), 1.0).astype(np.float32)
    relevance = fuse(vector, lexical)
    loader = Loader(scope, seqs, relevance, first)
    found = Candidates(loader, np.arange(n), relevance, vector, lexical, updated, total, path)
    found.vectors = lambda positions: loader.vectors(positions, dim)
    return found


def bm25_scores(rows: list[tuple], weights: dict[str, float], avgdl: float) -> np.ndarray:
    """`bm25` of each candidate row (its term count, then the query terms it holds, or all its
    terms when it holds one, are its 4th and 5th columns; only the query's count), at once: the
    per-row sums in Python were a millisecond a query. Each term's part is added in the query's
    order of terms, as `lexical.DeltaLexicon.scores` adds them."""
    column = {term: j for j, term in enumerate(weights)}
    tf = np.zeros((len(rows), len(column)), dtype=np.float64)
    for i, row in enumerate(rows):
        for term in row[4] or ():
            if term in column:
                tf[i, column[term]] += 1.0
    lengths = np.fromiter((row[3] for row in rows), dtype=np.float64, count=len(rows))
    norm = K1 * (1 - B + B * lengths / avgdl)
    out = np.zeros(len(rows), dtype=np.float64)
    for j, weight in enumerate(weights.values()):
        out += weight * tf[:, j] * (K1 + 1) / (tf[:, j] + norm)
    return out


def bm25(tf: Counter, weights: dict[str, float], length: int, avgdl: float) -> float:
    """`lexical.DeltaLexicon.scores` for one row."""
    norm = K1 * (1 - B + B * length / avgdl)
    return sum(weights.get(term, 0.0) * n * (K1 + 1) / (n + norm) for term, n in tf.items())


class Loader:
    """`Candidates.fetch` and `Candidates.vectors`: a row's record and stored vector, read with
    the next rows in rank order (callers read the leaders first), in batches that double. The
    first batch is the pool the caller asked for (`first`: its `k`), so that a query's pool, its
    records and their vectors, is one round trip."""

    FIRST, MOST = 16, 1024

    def __init__(
        self, scope: PgScope, seqs: np.ndarray, rank: np.ndarray, first: int = FIRST, vectors: bool = True
    ) -> None:
        self.scope = scope
        self.with_vectors = vectors  # a search with a query: its pool's vectors are compared
        self.seqs = seqs
        self.order = np.argsort(-rank, kind="stable")
        self.position = np.empty(len(seqs), dtype=np.int64)
        self.position[self.order] = np.arange(len(seqs))
        self.docs: dict[int, Doc] = {}
        self.vecs: dict[int, Any] = {}
        self.batch = max(self.FIRST, min(first, self.MOST))

    def __call__(self, row: int) -> Doc:
        if row not in self.docs:
            self._load([row])
        return self.docs[row]

    def _load(self, rows: list[int]) -> None:
        """Read `rows` and, up to the batch size, the rows after the first of them in rank order."""
        start = int(self.position[rows[0]])
        wanted = list(dict.fromkeys(rows))
        wanted += [int(r) for r in self.order[start : start + self.batch] if int(r) not in self.docs]
        wanted = list(dict.fromkeys(wanted))
        found = self.scope.load_rows([int(self.seqs[r]) for r in wanted], self.with_vectors)
        for r in wanted:
            row = found.get(int(self.seqs[r]))
            if row is not None:
                self.docs[r], self.vecs[r] = row
        self.batch = min(2 * self.batch, self.MOST)
        if any(r not in self.docs for r in rows):  # deleted by another process between the ranking and now
            raise RecordGone("a record found by the search was deleted meanwhile: send the request again")

    def vectors(self, rows: np.ndarray, dim: int) -> np.ndarray:
        """The stored vectors of `rows` (zeros for a row without one of dimension `dim`)."""
        missing = [int(r) for r in rows if int(r) not in self.docs]
        if missing:
            self._load(missing)
        out = np.zeros((len(rows), dim), dtype=np.float32)
        for i, r in enumerate(rows):
            vec = self.vecs.get(int(r))
            if vec is None:
                continue
            vec = vec.to_numpy() if hasattr(vec, "to_numpy") else vec  # pgvector's Vector, or an array
            if len(vec) == dim:
                out[i] = np.asarray(vec, dtype=np.float32)
        return out
