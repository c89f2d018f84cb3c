"""The ranking signals of every (question, turn) pair of bench/data/convbench.json, for fitting
and comparing fusions offline (bench/fit_fusion.py) without a server per try.

Each conversation is stored in a fresh files store, in-process (`MemoryService`), exactly as
bench/bench_conv.py stores it over the wire (one semantic entry a turn, content {"speaker",
"text", "date"}, key {"id"}); each question is searched exhaustively (`Scope.search(...,
exhaustive=True)`), so that every turn gets the shipped `vector` (cosine) and `lexical`
(normalised BM25, capped at 1) signals. Rows are saved in the order the store keeps them
(write order).

The time signal (`a2e_mem/timeaware.py`) is kept in parts that do not depend on its weights, so
that a fit can weigh them: per question, whether it asks "when" or "now" and the periods it names;
per turn, the share of a period its text mentions (`period`), whether it was said inside one
(`said`), whether its text mentions any date (`dated`) and its own day (`day`). The gain of a turn
is then W_PERIOD * (period, or W_SAID if said and period is 0) + W_WHEN * dated (when asked
"when") + W_RECENT * its newness among the candidate pool (when asked "now"), as
`timeaware.gains` computes it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2e_mem import clock, timeaware  # noqa: E402
from a2e_mem.backends.base import Filters  # noqa: E402
from a2e_mem.schemas import entry_text  # noqa: E402
from a2e_mem.service import MemoryService  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "convbench.json"


def conversation_signals(conv: dict, embedder: str) -> tuple[list[dict], np.ndarray]:
    """Per question: its type and text, evidence mask, the vector and lexical signal of each
    turn, and the turns' contents (for the bridge); and the turns' vectors (as stored: the
    embedder's vector of the entry's text)."""
    svc = MemoryService(tempfile.mkdtemp(prefix="mem-signals-"), embedder=embedder)
    try:
        session = svc.scope("conv", "bench")
        entries = [
            {"key": {"id": t["id"]}, "content": {"speaker": t["speaker"], "text": t["text"], "date": t["date"]}}
            for t in conv["turns"]
        ]
        for i in range(0, len(entries), 500):
            svc.store(session, [{**e, "tier": "semantic"} for e in entries[i : i + 500]])
        scope = svc.backend.scope("conv", "semantic", schema="entries")
        order = {t["id"]: i for i, t in enumerate(conv["turns"])}
        out = []
        texts = [""] * len(order)
        docs: list[dict] = [{}] * len(order)
        for q in conv["questions"]:
            qvec = svc.backend.embed([q["question"]])[0]
            parts = scope.search(clock.now(), Filters(), qvec, q["question"], k=50, exhaustive=True)
            vec = np.zeros(len(order), dtype=np.float32)
            lex = np.zeros(len(order), dtype=np.float32)
            for part in parts:
                for i in range(len(part.rows)):
                    at = order[part.doc(i)["key"]["id"]]
                    vec[at], lex[at] = part.vector[i], part.lexical[i]
                    texts[at] = entry_text(part.doc(i))
                    docs[at] = part.doc(i)
            evidence = np.zeros(len(order), dtype=bool)
            evidence[[order[e] for e in q["evidence"]]] = True
            out.append(
                {"type": q["type"], "question": q["question"], "vec": vec, "lex": lex, "evidence": evidence,
                 "conv": conv["id"], "contents": [doc.get("content") for doc in docs]}
            )  # fmt: skip
            out[-1].update(time_parts(q["question"], docs))
        return out, svc.backend.embed(texts)
    finally:
        svc.close()


def time_parts(question: str, docs: list[dict]) -> dict:
    """The parts of the time signal of `question` over the turns `docs` (see the module docstring),
    read by the shipped `timeaware.gains` with the period weight at 1 and the others at 0."""
    asked = timeaware.read_query(question, clock.now())
    entries = [timeaware.read_entry(doc) for doc in docs]
    period = np.zeros(len(docs), dtype=np.float32)
    said = np.zeros(len(docs), dtype=bool)
    if asked.periods:
        weights = {name: getattr(timeaware, name) for name in ("W_PERIOD", "W_SAID", "W_WHEN", "W_RECENT")}
        try:
            timeaware.W_PERIOD, timeaware.W_SAID, timeaware.W_WHEN, timeaware.W_RECENT = 1.0, 0.0, 0.0, 0.0
            period = np.array([g for g, _ in timeaware.gains(asked, entries)], dtype=np.float32)
            timeaware.W_SAID = 1.0  # a turn said in the period but mentioning none of its days gains now
            said = np.array([g for g, _ in timeaware.gains(asked, entries)], dtype=np.float32) > period
        finally:
            for name, value in weights.items():
                setattr(timeaware, name, value)
    return {
        "asks_when": asked.when,
        "asks_recent": asked.recent,
        "period": period,
        "said": said,
        "dated": np.array([bool(e.mentions) for e in entries]),
        "day": np.array([e.day for e in entries], dtype=np.float64),
    }


def split_signals(split: str, data: Path = DATA, embedder: str = "static") -> list[dict]:
    """Every question of `split`, each with its conversation's turn vectors under "turns"."""
    os.environ["MEM_CHECKPOINTS"] = "off"
    convs = [c for c in orjson.loads(data.read_bytes())["conversations"] if c["split"] == split]
    questions = []
    for conv in convs:
        asked, turns = conversation_signals(conv, embedder)
        questions += [{**q, "turns": turns} for q in asked]
    return questions
