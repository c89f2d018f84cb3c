"""Retrieval quality on a conversational-memory set: lexical, vector (exact and through the
index) and the shipped hybrid, as hit@1, hit@5, hit@10 and MRR.

    python bench/bench_quality.py [--embedder static] [--data bench/data/convmem.json]

Each memory (one chat turn) is stored as an A2E entry whose content is {"speaker", "text",
"date"}; each question is a retrieve with `query` and `limit` 10. A question is hit at k when one
of its answer memories is among the first k entries. The modes change only the fusion weight
and whether the Annoy index is forced; everything else is the store as shipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from store import search  # noqa: E402
from store.service import MemoryService  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "convmem.json"
MODES = {  # name -> (vector weight, force the index)
    "lexical (BM25)": (0.0, False),
    "vector, exact": (1.0, False),
    "vector, index": (1.0, True),
    "hybrid (shipped)": (None, True),
}


def load(svc: MemoryService, memories: list[dict]) -> None:
    scope = svc.scope("quality", "bench")
    entries = [
        {
            "key": {"id": m["id"]},
            "content": {"speaker": m["speaker"], "text": m["text"], "date": m["date"]},
            "tier": "semantic",
        }
        for m in memories
    ]
    svc.store(scope, entries)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="static")
    args = parser.parse_args()
    data = orjson.loads(args.data.read_bytes())
    os.environ["MEM_CHECKPOINTS"] = "off"
    svc = MemoryService(tempfile.mkdtemp(prefix="mem-quality-"), embedder=args.embedder)
    load(svc, data["memories"])
    shipped_weight, shipped_exact_max = search.VECTOR_WEIGHT, search.EXACT_MAX
    print(f"{len(data['memories'])} memories, {len(data['questions'])} questions, embedder {args.embedder}")
    print(f"{'mode':18} {'questions':11} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR':>6}")
    for mode, (weight, force_index) in MODES.items():
        search.VECTOR_WEIGHT = shipped_weight if weight is None else weight
        search.EXACT_MAX = 0 if force_index else shipped_exact_max
        for kind in (None, "keyword", "paraphrase"):
            r = evaluate(svc, data["questions"], kind)
            label = kind or "all"
            print(f"{mode:18} {label:11} {r['hit@1']:6.3f} {r['hit@5']:6.3f} {r['hit@10']:6.3f} {r['MRR']:6.3f}")


if __name__ == "__main__":
    main()
