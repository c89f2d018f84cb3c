"""BM25 over entry text: tokenising, a postings index built with each segment, and live statistics.

Each segment's part is a CSR postings matrix in numpy files (term -> rows, term frequencies), so
a fresh process scores a query by touching only the postings of the query's terms. Entries
written since the last checkpoint keep their term counts in memory. The statistics (how many
records, their average length, each query term's document frequency) are those of the shard's
live records, summed over every part at query time (`search.py`), so that a shard of many
segments ranks exactly as one segment holding the same records would: the term-frequency part
of the score is computed per query from the stored counts and the shard's average length, with
the same float64 arithmetic for segment rows and memtable slots.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import orjson

from .paths import save_array, write_file

K1 = 1.2
B = 0.75

_WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    import Stemmer

    return Stemmer.Stemmer("english")


MAX_WORD = 200  # characters of a word that count: a longer one (a hex dump, a run of letters) is cut


def terms(text: str) -> list[str]:
    """Lower-cased, stemmed words of `text`, stopwords dropped, each cut to MAX_WORD characters
    (no real word is longer; PostgreSQL's term index takes at most 2712 bytes an entry)."""
    words = [w[:MAX_WORD] for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
    return _stemmer().stemWords(words) if words else []


# Distinct terms of a query that count for BM25: the first ones, in the query's order. A query
# is a question or a passage; a hostile one of 33,000 distinct words kept a PostgreSQL search
# busy for 6 minutes (each row's terms are matched against the query's: outside audit 34a) and
# the files backend for a second. Both backends cut it here, so that they rank alike.
MAX_QUERY_TERMS = 256


@lru_cache(maxsize=64)
def query_terms(text: str) -> tuple[str, ...]:
    """The distinct BM25 terms of a query, in order, at most MAX_QUERY_TERMS of them (cached:
    one query is scored against several scopes)."""
    return tuple(dict.fromkeys(terms(text)))[:MAX_QUERY_TERMS]


def idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def normaliser(weights: Iterable[float]) -> float:
    """What a document matching every query term once, at average length, scores: lex = 1.0."""
    return sum(weights) or 1.0


class DeltaLexicon:
    """Postings of the entries written since the checkpoint, by memtable slot, kept up to date."""

    def __init__(self) -> None:
        self.postings: dict[str, dict[int, int]] = {}
        self.slot_terms: dict[int, Counter[str]] = {}
        self.doclen: dict[int, int] = {}
        self.total_len = 0

    def add(self, slot: int, text: str) -> None:
        self.remove(slot)
        counts = Counter(terms(text))
        for term, n in counts.items():
            self.postings.setdefault(term, {})[slot] = n
        self.slot_terms[slot] = counts
        self.doclen[slot] = sum(counts.values())
        self.total_len += self.doclen[slot]

    def remove(self, slot: int) -> None:
        counts = self.slot_terms.pop(slot, None)
        if counts is None:
            return
        self.total_len -= self.doclen.pop(slot)
        for term in counts:
            del self.postings[term][slot]

    def df(self, term: str, alive: np.ndarray | None = None) -> int:
        """Slots holding `term` (only those `alive` allows, when given). The slots `alive` refuses
        are few (expired records; freed slots hold no postings): those are the ones looked at."""
        slots = self.postings.get(term, {})
        if alive is None or not slots:
            return len(slots)
        return len(slots) - sum(1 for slot in np.flatnonzero(~alive) if int(slot) in slots)

    def live_length(self, alive: np.ndarray) -> float:
        """Total length of the slots `alive` allows."""
        dead = (self.doclen.get(int(slot), 0) for slot in np.flatnonzero(~alive))
        return float(self.total_len - sum(dead))

    def scores(self, weights: dict[str, float], avgdl: float, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Dense BM25 scores (float64) for slots 0..size-1, and the slots where a query term occurs."""
        out = np.zeros(size, dtype=np.float64)
        for term, w in weights.items():
            for slot, tf in self.postings.get(term, {}).items():
                norm = K1 * (1 - B + B * float(self.doclen[slot]) / avgdl)
                out[slot] += w * float(tf) * (K1 + 1) / (float(tf) + norm)
        return out, np.flatnonzero(out)


class SegmentLexicon:
    """The postings of a segment, memory-mapped: for each term its rows and term counts
    (`lex_tf.npy`; a segment of an older version stored instead each posting's term-frequency
    part computed with its own average length, `lex_part.npy`, from which the counts are
    recovered exactly: they are small integers)."""

    FILES = ("lex_ptr.npy", "lex_rows.npy", "doclen.npy")

    def __init__(self, folder: Path) -> None:
        self._vocab_raw = (folder / "lex_vocab.json").read_bytes()  # parsed on first use
        ptr, rows, doclen = (np.asarray(np.load(folder / f, mmap_mode="r")) for f in self.FILES)
        self.ptr, self.rows, self.doclen = ptr, rows, doclen
        if (folder / "lex_tf.npy").exists():
            self.tf = np.asarray(np.load(folder / "lex_tf.npy", mmap_mode="r"))
        else:
            self.tf = _counts_from_parts(np.load(folder / "lex_part.npy"), rows, doclen)
        self.total_len = float(doclen.sum()) if len(doclen) else 0.0
        self._table: tuple[np.ndarray, np.ndarray] | None = None  # a segment written before it has none
        if (folder / "lex_keys.npy").exists():
            keys, places = (np.asarray(np.load(folder / f, mmap_mode="r")) for f in ("lex_keys.npy", "lex_places.npy"))
            self._table = keys, places

    @cached_property
    def vocab(self) -> Vocabulary | dict[str, int]:
        """term -> id (`.get`), from `lex_vocab.json` and its saved table (see `Vocabulary`)."""
        return Vocabulary.over(self._vocab_raw, len(self.ptr) - 1, self._table)

    def term_rows(self, term: str) -> np.ndarray:
        tid = self.vocab.get(term)
        return self.rows[:0] if tid is None else self.rows[int(self.ptr[tid]) : int(self.ptr[tid + 1])]

    def df(self, term: str, alive: np.ndarray | None = None) -> int:
        """Rows holding `term` (only those `alive` allows, when given)."""
        rows = self.term_rows(term)
        return len(rows) if alive is None else int(np.count_nonzero(alive[rows]))

    def live_length(self, alive: np.ndarray) -> float:
        return float(self.doclen[alive].astype(np.float64).sum())

    def scores(self, weights: dict[str, float], avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """Dense BM25 scores (float64) for every row, and the rows where a query term occurs
        (repeats possible)."""
        out = np.zeros(len(self.doclen), dtype=np.float64)
        touched = []
        for term, w in weights.items():
            tid = self.vocab.get(term)
            if tid is None:
                continue
            lo, hi = int(self.ptr[tid]), int(self.ptr[tid + 1])
            rows = self.rows[lo:hi]
            tf = self.tf[lo:hi].astype(np.float64)
            norm = K1 * (1 - B + B * self.doclen[rows].astype(np.float64) / avgdl)
            out[rows] += w * tf * (K1 + 1) / (tf + norm)
            touched.append(rows)
        # the rows where a term occurs, with repeats (deduplicating 100k rows costs more than scoring)
        return out, np.concatenate(touched) if touched else np.zeros(0, dtype=np.int64)


_MASK = (1 << 64) - 1
_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)


class Vocabulary:
    """A segment's term ids, looked up in the bytes of its `lex_vocab.json` (`{"term":id,...}` as
    orjson writes it) instead of a dict of every term. A segment holds about one term per record
    when each record's key is a word of its own (1M terms, 16.7 MB of JSON at a million
    records): parsing it took 370 ms of every process's first query and the dict 120 MB of a
    server's memory. Terms are words, so the only quotes in the file are those around them and
    `"term":` can only match a term. A lookup is a binary search for the term's hash in the
    segment's table (`vocabulary_table`, saved beside the file by its writer and memory-mapped),
    then a comparison of the term's bytes. A segment written before the table was saved has none:
    its first `FIND_FIRST` lookups (a one-shot command's query) search the bytes for `"term":` (a
    few ms for a rare term, the whole file for an absent one), and then (a server) the table is
    made once (150-300 ms at a million terms: the pause a server's fifth query or so had)."""

    FIND_FIRST = 12
    REMEMBER = 50_000  # terms whose id (or absence) is kept

    def __init__(self, raw: bytes, table: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self._raw = raw
        self._lookups = 0
        self._seen: dict[str, int | None] = {}
        self._keys: np.ndarray | None = None  # the sorted hash of every term, made past FIND_FIRST lookups
        self._starts = self._ends = np.zeros(0, dtype=np.int32)  # where each term is
        self._low = np.uint64(0)  # the low bits of a key that hold its term's index
        if table is not None:  # made when the segment was written (`vocabulary_table`)
            self._keys, places = table
            self._starts, self._ends = places[:, 0], places[:, 1]
            self._low = _low_bits(len(places))

    @classmethod
    def over(
        cls, raw: bytes, n_terms: int, table: tuple[np.ndarray, np.ndarray] | None = None
    ) -> Vocabulary | dict[str, int]:
        """The vocabulary of `raw`, which holds `n_terms` terms; a plain dict if the file is not
        laid out as expected (a quote or backslash in a term, another writer). `table`, the
        `vocabulary_table` of `raw` saved beside it, is used when it covers `n_terms` terms."""
        if not laid_out(raw, n_terms):
            return orjson.loads(raw)
        if table is not None and not (len(table[0]) == n_terms and table[1].shape == (n_terms, 2)):
            table = None  # not this vocabulary's: made as of old on first use
        return cls(raw, table)

    def get(self, term: str) -> int | None:
        if term in self._seen:  # a query looks each term up several times, a server the common ones often
            return self._seen[term]
        if len(self._seen) >= self.REMEMBER:
            self._seen.clear()
        self._seen[term] = found = self._lookup(term)
        return found

    def _lookup(self, term: str) -> int | None:
        word = term.encode("utf-8", "surrogatepass")
        self._lookups += 1
        if self._keys is None and self._lookups <= self.FIND_FIRST:
            at = self._raw.find(b'"' + word + b'":')
            return None if at < 0 else self._id_after(at + len(word) + 1)
        for i in self._candidates(_term_hash(word)):
            start, end = int(self._starts[i]), int(self._ends[i])
            if self._raw[start:end] == word:
                return self._id_after(end)
        return None

    def _id_after(self, quote: int) -> int:
        """The id after the term whose closing quote is at `quote`: `"term":<id>,` or `...}`."""
        stop = self._raw.find(b",", quote)
        return int(self._raw[quote + 2 : stop if stop >= 0 else self._raw.rindex(b"}")])

    def _candidates(self, key: int) -> np.ndarray:
        """Indexes of the terms whose hash is `key`'s (its high bits: the low ones hold the index)."""
        if self._keys is None:
            self._keys, places = vocabulary_table(self._raw)
            self._starts, self._ends = places[:, 0], places[:, 1]
            self._low = _low_bits(len(places))
        high = np.uint64(key) & ~self._low
        lo = np.searchsorted(self._keys, high, side="left")
        hi = np.searchsorted(self._keys, high | self._low, side="right")
        return (self._keys[lo:hi] & self._low).astype(np.int64)


def laid_out(raw: bytes, n_terms: int) -> bool:
    """Whether `raw` is `{"term":id,...}` of `n_terms` terms as orjson writes it, each quote
    around a term (no quote or backslash in one): what `Vocabulary` reads."""
    return raw.count(b'"') == 2 * n_terms and b"\\" not in raw and raw.startswith(b"{") and len(raw) < 1 << 31


def vocabulary_table(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The lookup table of a vocabulary's bytes: the sorted key of every term (its hash in the
    high bits, its index in the low ones) and each term's (start, end) in `raw`. One vectorised
    pass finds every term and hashes its first and last 8 bytes and length; 150-300 ms at a
    million terms, so a segment's writer saves it (`lex_keys.npy`, `lex_places.npy`)."""
    data = np.frombuffer(raw, dtype=np.uint8)
    quotes = np.flatnonzero(data == ord('"'))
    starts, ends = (quotes[0::2] + 1).astype(np.int32), quotes[1::2].astype(np.int32)
    low = _low_bits(len(starts))
    # one sort of hash and index together is twice as fast as argsort, then a gather
    keys = (_key_hashes(data, starts, ends) & ~low) | np.arange(len(starts), dtype=np.uint64)
    keys.sort()
    return keys, np.stack([starts, ends], axis=1)


def _low_bits(n_terms: int) -> np.uint64:
    """The low bits of a key, enough to hold a term's index."""
    return np.uint64((1 << max(n_terms - 1, 1).bit_length()) - 1)


def _term_hash(word: bytes) -> int:
    """`_key_hashes` of one term: its first 8 bytes, its last 8 bytes (as the high bytes of a
    little-endian word) and its length."""
    head = int.from_bytes(word[:8], "little")
    tail = (int.from_bytes(word[-8:], "little") << (8 * (8 - min(len(word), 8)))) & _MASK
    return ((head * _MIX[0]) & _MASK) ^ ((tail * _MIX[1]) & _MASK) ^ len(word)


def _key_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """`_term_hash` of each term `data[start:end]`, reading both ends of every term at once
    through a window of 8 bytes over the data; the few terms whose window would leave the data
    (the first and last ones) are hashed one by one."""
    n = len(starts)
    if len(data) < 16:
        return np.array([_term_hash(bytes(data[s:e])) for s, e in zip(starts, ends, strict=True)], dtype=np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(data, 8)
    lengths = np.minimum(ends - starts, 8).astype(np.int64)
    ones = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)  # the low k bytes
    head = windows[np.minimum(starts, len(data) - 8)].view("<u8").ravel() & ones[lengths]
    tail = windows[np.maximum(ends - 8, 0)].view("<u8").ravel() & ~ones[8 - lengths]
    with np.errstate(over="ignore"):
        keys = (head * np.uint64(_MIX[0])) ^ (tail * np.uint64(_MIX[1])) ^ (ends - starts).astype(np.uint64)
    for i in np.flatnonzero((starts > len(data) - 8) | (ends < 8))[:n]:
        keys[i] = _term_hash(bytes(data[starts[i] : ends[i]]))
    return keys


def _counts_from_parts(part: np.ndarray, rows: np.ndarray, doclen: np.ndarray) -> np.ndarray:
    """Term counts from the stored parts of an older segment (see `SegmentLexicon`)."""
    avgdl = max(float(doclen.mean()), 1.0) if len(doclen) else 1.0
    norm = K1 * (1 - B + B * doclen[rows].astype(np.float64) / avgdl)
    part64 = part.astype(np.float64)
    return np.rint(part64 * norm / (K1 + 1 - part64)).astype(np.float32)


def write_segment_lexicon(folder: Path, texts: Sequence[str]) -> None:
    """Build the CSR postings for `texts` (row i = texts[i]) and save them in `folder`."""
    vocab: dict[str, int] = {}
    postings: list[list[tuple[int, int]]] = []
    doclen = np.zeros(len(texts), dtype=np.float32)
    for row, text in enumerate(texts):
        counts = Counter(terms(text))
        doclen[row] = sum(counts.values())
        for term, n in counts.items():
            tid = vocab.setdefault(term, len(vocab))
            if tid == len(postings):
                postings.append([])
            postings[tid].append((row, n))
    lengths = np.array([len(p) for p in postings], dtype=np.int64)
    ptr = np.zeros(len(postings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    flat = [pair for plist in postings for pair in plist]
    pairs = np.array(flat, dtype=np.int64).reshape(-1, 2)
    raw = orjson.dumps(vocab)
    write_file(folder / "lex_vocab.json", raw)
    if laid_out(raw, len(vocab)):  # a server's first queries, a one-shot command's every one, need not make it
        keys, places = vocabulary_table(raw)
        save_array(folder / "lex_keys.npy", keys)
        save_array(folder / "lex_places.npy", places)
    save_array(folder / "lex_ptr.npy", ptr)
    rows, tf = pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.float32)
    save_array(folder / "lex_rows.npy", rows)
    save_array(folder / "lex_tf.npy", tf)
    save_array(folder / "doclen.npy", doclen)
