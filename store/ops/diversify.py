"""Diversity of a result list: near-copies of an entry already listed give way to other entries.

A conversation repeats itself ("the internet was down again", the same plan re-told), and a
question whose answer is spread over several entries (a multi-hop question: who the aunt is,
then what happened to her) needs those several entries, not three copies of the best one. So
the entries of a query are listed by maximal marginal relevance (Carbonell and Goldstein, 1998)
restricted to near-copies: each next entry is the one of highest

    relevance - DIVERSITY * max(0, cosine - SIMILAR) / (1 - SIMILAR)

where `cosine` is its similarity to the most similar entry listed before it. An entry less alike
than SIMILAR to every listed one is not moved, so a list of different entries on one topic keeps
the relevance order; an exact copy loses DIVERSITY. The first entry is always the most relevant;
`relevance` itself (what `min_score` cuts and what the reply shows) is not changed, only the
order of the entries that passed the cut. Only the first MAX_LISTED entries are so chosen (the
cost grows with the square of the list); a longer list goes on by relevance. Ties keep the order
given (the caller sorts by relevance, then recency). DIVERSITY and SIMILAR were fitted on the dev
split of our conversation benchmark together with the fusion weights (`bench/fit_fusion.py`).
"""

from __future__ import annotations

import numpy as np

from ..backends.base import RELEVANCE_DECIMALS

DIVERSITY = 0.2  # bench/fit_fusion.py, dev split (0.1 to 0.3 the same there); 0 lists by relevance alone
SIMILAR = 0.9  # cosines up to this count as no likeness (bench/fit_fusion.py, dev split, time signal on)
MAX_LISTED = 100  # entries listed by diversity at most; the rest of a longer list by relevance
ONE_POOL = 25  # lists up to this long are chosen from the same pool: each is the head of a longer one


def pool_size(limit: int) -> int:
    """Entries considered for a list of `limit`: one more per diversified entry, room for a
    demoted copy to be replaced; the same pool for every list up to ONE_POOL entries, so that
    `limit=5` gives the first 5 of `limit=10` (the listing is greedy: a list from the same pool
    is the head of a longer one), as a benchmark's recall@5 and @10 of one query expect."""
    limit = max(limit, ONE_POOL)
    return limit + min(limit, MAX_LISTED)


def rule() -> str:
    """The listing rule as `--explain` shows it (read on each call: the benchmarks change it)."""
    likeness = "cosine" if SIMILAR <= 0 else f"(cosine - {SIMILAR:g}) / {1 - SIMILAR:g}"
    return f"listed by relevance - {DIVERSITY:g} * max(0, {likeness}) to the most similar entry listed above"


def diversify(relevance: np.ndarray, vectors: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first `limit` positions of `relevance` (sorted best first, ties in the wanted order)
    in listing order, with each one's penalty and the position of the listed entry it was most
    like (-1 for none). `vectors` are the entries' unit vectors (zero rows for none)."""
    n = len(relevance)
    count = min(limit, n)
    if DIVERSITY <= 0 or count <= 1:
        return np.arange(count), np.zeros(count), np.full(count, -1)
    vectors = np.asarray(vectors, dtype=np.float32)
    likeness = np.zeros(n, dtype=np.float32)  # max cosine to the entries listed so far (floor 0)
    nearest = np.full(n, -1)
    free = np.ones(n, dtype=bool)
    order, penalties, twins = [], [], []
    for _ in range(count):
        penalty = DIVERSITY * np.maximum(likeness - SIMILAR, 0) / (1 - SIMILAR)
        # as shown: gains equal to the shown decimals are equal, whatever their last bits
        gain = np.where(free, np.round(relevance - penalty, RELEVANCE_DECIMALS), -np.inf)
        pick = int(np.argmax(gain))  # the first of equals: the caller's tie order is kept
        order.append(pick)
        penalties.append(float(penalty[pick]))
        twins.append(int(nearest[pick]))
        free[pick] = False
        cosine = vectors @ vectors[pick]
        closer = cosine > likeness
        likeness = np.where(closer, cosine, likeness)
        nearest = np.where(closer, pick, nearest)
    return np.array(order), np.array(penalties), np.array(twins)
