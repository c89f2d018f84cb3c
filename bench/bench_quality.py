"""Retrieval quality on a conversational-memory set: lexical, vector (exact and through the
index) and the shipped hybrid, as hit@1, hit@5, hit@10 and MRR.

    python bench/bench_quality.py [--embedder static] [--data bench/data/convmem.json]
    python bench/bench_quality.py --store postgresql://...      # the shipped hybrid on that server
    python bench/bench_quality.py --backends files,postgres     # both, side by side
    python bench/bench_quality.py --backends files,postgres --distractors 30000   # through the indexes

Each memory (one chat turn) is stored as an A2E entry whose content is {"speaker", "text",
"date"}; each question is a retrieve with `query` and `limit` 10. A question is hit at k when one
of its answer memories is among the first k entries.

On the files backend the modes change only the fusion weight (`store/backends/base.py`
VECTOR_WEIGHT; the single-signal modes also list by relevance alone, without diversity) and
whether the Annoy index is forced (`store/backends/files/search.py`
EXACT_MAX); everything else is the store as shipped. On PostgreSQL only the shipped hybrid runs
(its search is its own: those two knobs are the files backend's).

A PostgreSQL store is always a fresh database, made by `CREATE DATABASE` on `--store`'s server
(or on a private `pgserver` when `--backends` names postgres without `--store`) and dropped at
the end, so that runs never mix. `--backends files,postgres` loads the set into a files store
and into such a database, runs the shipped
hybrid on both and prints them side by side with the difference in points (issue 11: the
PostgreSQL backend within 2 points of the files backend at hit@5 and hit@10).

The set alone (354 memories) is below both backends' exact-search threshold (20,000 rows):
`--distractors N` adds N synthetic entries (`bench/common.py`, never an answer) to the same tier,
so that with N = 30000 each backend ranks through its index (Annoy + delta; pgvector HNSW +
lexical postings) and the comparison covers the path a big store takes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2e_mem.backends import base  # noqa: E402
from a2e_mem.backends.files import search as files_search  # noqa: E402
from a2e_mem.ops import diversify  # noqa: E402
from a2e_mem.service import MemoryService  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "convmem.json"
MODES = {  # name -> (vector weight, force the index)
    "lexical (BM25)": (0.0, False),
    "vector, exact": (1.0, False),
    "vector, index": (1.0, True),
    "hybrid (shipped)": (None, True),
}
SHIPPED = "hybrid (shipped)"
KINDS = (None, "keyword", "paraphrase")
METRICS = ("hit@1", "hit@5", "hit@10", "MRR")
WITHIN_POINTS = {"hit@5": 2.0, "hit@10": 2.0}  # issue 11: PostgreSQL within 2 points of files


def load(svc: MemoryService, memories: list[dict], distractors: int = 0) -> None:
    """The set's memories, and `distractors` synthetic entries (never an answer) in the same
    tier, so that a store past the exact-search threshold ranks through its index."""
    from bench.common import entries as synthetic

    scope = svc.scope("quality", "bench")
    entries = [
        {
            "key": {"id": m["id"]},
            "content": {"speaker": m["speaker"], "text": m["text"], "date": m["date"]},
            "tier": "semantic",
        }
        for m in memories
    ]
    entries += synthetic(distractors, prefix="distractor-")
    for start in range(0, len(entries), 5000):
        svc.store(scope, entries[start : start + 5000])
    svc.checkpoint()


def evaluate(svc: MemoryService, questions: list[dict], kind: str | None = None) -> dict[str, float]:
    scope = svc.scope("quality", "bench")
    hits = {1: 0, 5: 0, 10: 0}
    rr = 0.0
    asked = [q for q in questions if kind is None or q["kind"] == kind]
    for q in asked:
        ranked = [e["key"]["id"] for e in svc.retrieve(scope, query=q["question"], limit=10)["entries"]]
        rank = next((i + 1 for i, mid in enumerate(ranked) if mid in q["answers"]), None)
        for k in hits:
            hits[k] += rank is not None and rank <= k
        rr += 1 / rank if rank else 0.0
    n = len(asked)
    return {"hit@1": hits[1] / n, "hit@5": hits[5] / n, "hit@10": hits[10] / n, "MRR": rr / n, "n": n}


def open_store(url: str | None, embedder: str) -> MemoryService:
    """A store: files in a new temporary folder, or the database at `url`."""
    return MemoryService(tempfile.mkdtemp(prefix="mem-quality-"), embedder=embedder, store=url or "")


def is_postgres(url: str | None) -> bool:
    return bool(url) and url.startswith(("postgresql://", "postgres://"))  # type: ignore[union-attr]


def run_modes(svc: MemoryService, questions: list[dict], modes: list[str]) -> None:
    """One table: each mode, on all questions and on each kind."""
    shipped_weight, shipped_exact_max = base.VECTOR_WEIGHT, files_search.EXACT_MAX
    shipped_diversity = diversify.DIVERSITY
    print(f"{'mode':18} {'questions':11} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR':>6}")
    try:
        for mode in modes:
            weight, force_index = MODES[mode]
            base.VECTOR_WEIGHT = shipped_weight if weight is None else weight  # `fuse` reads it on each call
            diversify.DIVERSITY = shipped_diversity if weight is None else 0.0  # one signal alone: by relevance
            files_search.EXACT_MAX = 0 if force_index else shipped_exact_max
            for kind in KINDS:
                r = evaluate(svc, questions, kind)
                label = kind or "all"
                print(f"{mode:18} {label:11} {r['hit@1']:6.3f} {r['hit@5']:6.3f} {r['hit@10']:6.3f} {r['MRR']:6.3f}")
    finally:
        base.VECTOR_WEIGHT, files_search.EXACT_MAX = shipped_weight, shipped_exact_max
        diversify.DIVERSITY = shipped_diversity


@contextlib.contextmanager
def loaded_store(
    backend: str, data: dict, embedder: str, server: str | None, distractors: int = 0
) -> Iterator[MemoryService]:
    """A new store of `backend` holding the set: files in a temporary folder, or a fresh
    database on `server` (None: a private pgserver), dropped afterwards."""
    from bench.bench_backends import Postgres, shown_url

    postgres = Postgres(server, Path(tempfile.mkdtemp(prefix="mem-quality-pg-"))) if backend == "postgres" else None
    try:
        url = postgres.fresh("quality") if postgres else None
        print(f"{backend}: {shown_url(url) if url else 'files in a temporary --home'}")
        svc = open_store(url, embedder)
        try:
            load(svc, data["memories"], distractors)
            yield svc
        finally:
            svc.close()
    finally:
        if postgres:
            postgres.close(keep=False)


def search_paths(svc: MemoryService, question: str) -> str:
    """How the backend's search found the rows of one question: "exact" or "index" per part."""
    from a2e_mem import clock

    scope = svc.backend.scope("quality", "semantic", schema="entries")
    parts = scope.search(clock.now(), base.Filters(), svc.backend.embed([question])[0], question, k=10)
    return f"{scope.usage(clock.now())[0]} entries, searched by " + "+".join(p.path for p in parts if len(p.rows))


def compare_backends(data: dict, embedder: str, server: str | None, backends: list[str], distractors: int) -> None:
    """The shipped hybrid on each backend, side by side, with PostgreSQL's difference in points."""
    results: dict[str, dict[str | None, dict[str, float]]] = {}
    for backend in backends:
        with loaded_store(backend, data, embedder, server, distractors) as svc:
            results[backend] = {kind: evaluate(svc, data["questions"], kind) for kind in KINDS}
            print(f"{backend}: {search_paths(svc, data['questions'][0]['question'])}")
    print_comparison(results, backends)


def print_comparison(results: dict[str, dict[str | None, dict[str, float]]], backends: list[str]) -> None:
    """Per question kind, a metric a line, a backend a column; with two backends, the second's
    difference in points (100 x the difference of the fractions)."""
    pair = len(backends) == 2
    print(
        f"\n{'shipped hybrid':15} {'questions':16} {'metric':7}"
        + "".join(f" {b:>9}" for b in backends)
        + (f" {'Δ pts':>7}" if pair else "")
    )
    for kind in KINDS:
        for metric in METRICS:
            row = [results[b][kind][metric] for b in backends]
            label = f"{kind or 'all'} ({int(results[backends[0]][kind]['n'])})" if metric == METRICS[0] else ""
            cells = "".join(f" {value:9.3f}" for value in row) + (f" {100 * (row[1] - row[0]):+7.1f}" if pair else "")
            print(f"{'':15} {label:16} {metric:7}{cells}")
    if pair:
        first, second = backends
        for metric, points in WITHIN_POINTS.items():
            behind = 100 * (results[first][None][metric] - results[second][None][metric])
            verdict = "yes" if behind <= points else "NO"
            print(
                f"{second} within {points:g} points of {first} at {metric}, all questions: {verdict} "
                f"({behind:+.1f} points behind)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="static")
    parser.add_argument(
        "--store", help="a store URL (postgresql://...); with --backends, the server to make a database on"
    )
    parser.add_argument(
        "--backends", help="comma-separated, e.g. files,postgres: the shipped hybrid on each, side by side"
    )
    parser.add_argument(
        "--distractors",
        type=int,
        default=0,
        help="synthetic entries added beside the set (e.g. 30000: past the exact-search threshold, through the index)",
    )
    args = parser.parse_args()
    data = orjson.loads(args.data.read_bytes())
    os.environ["MEM_CHECKPOINTS"] = "off"
    print(
        f"{len(data['memories'])} memories (+{args.distractors} distractors), {len(data['questions'])} questions, "
        f"embedder {args.embedder}"
    )
    if args.backends:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        unknown = set(backends) - {"files", "postgres"}
        if unknown or not backends:
            parser.error(f"--backends takes files and/or postgres, not {','.join(sorted(unknown)) or 'nothing'}")
        compare_backends(data, args.embedder, args.store, backends, args.distractors)
        return
    if args.store and not is_postgres(args.store):
        parser.error("--store takes a postgresql:// URL (files stores are made in a temporary folder)")
    backend = "postgres" if args.store else "files"
    with loaded_store(backend, data, args.embedder, args.store, args.distractors) as svc:
        run_modes(svc, data["questions"], [SHIPPED] if backend == "postgres" else list(MODES))


if __name__ == "__main__":
    main()
