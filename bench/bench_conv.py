"""Retrieval on our own long-conversation set (bench/convgen.py): lexical alone, vector alone, the
old hybrid and the new default, per question type and overall.

    python bench/bench_conv.py --split dev|test [--embedder static] [--data bench/data/convbench.json]
                               [--modes lexical,vector,old,new] [--json results.json]

Each conversation goes into a fresh store (its own `MEM_HOME`) through `mem serve-stdio` (this
checkout's, `python -m a2e_mem.cli.main serve-stdio`; `MEM_BENCH_BIN` names another `mem`): each turn is
a semantic A2E entry keyed by its turn id whose content is {"speaker", "text", "date"} (the
session's date), stored in `memory/store` batches of 200. Each question is one
`memory/retrieve` with its text as `query` and `limit` 50.

The modes differ only in the ranking constants (`a2e_mem.backends.base.VECTOR_WEIGHT` and
`LEXICAL_POWER`, `a2e_mem.ops.diversify.DIVERSITY`, the time weights `a2e_mem.timeaware.W_PERIOD`,
`W_WHEN`, `W_RECENT`, the bridge's `a2e_mem.ops.bridge.BRIDGE_GAIN`): "new default" is the server
as shipped; "old hybrid" is the ranking shipped before issue 12 (0.7 * cosine + 0.3 * lexical^2,
listed by relevance alone, no time signal, no bridge); "lexical alone" (weight 0: rank by BM25)
and "vector alone" (weight 1: rank by cosine) are single signals too, without diversity, time or
bridge. Each runs the same `serve-stdio` on the same store,
started by a two-line launcher that sets the constants before the CLI starts. Every query is on
the wire in every mode. After the tables, old and new side by side, with the difference in points.

Figures, averaged over the questions of a type (and over all of them):
- hit@k: an evidence turn is among the first k results;
- ev@k: the fraction of the question's evidence turns among the first k (k = 5, 10, 25, 50);
- MRR: 1 / rank of the first evidence turn (0 when none is in the 50).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "convbench.json"
TYPES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
LIMIT = 50
BATCH = 200
HITS = (1, 5, 10)
EVIDENCE = (5, 10, 25, 50)
NO_TIME = {"W_PERIOD": 0.0, "W_WHEN": 0.0, "W_RECENT": 0.0, "BRIDGE_GAIN": 0.0}  # time and bridge off: no gain
OLD = {"VECTOR_WEIGHT": 0.7, "LEXICAL_POWER": 2.0, "DIVERSITY": 0.0, **NO_TIME}  # shipped before issue 12
MODES = {  # name -> (title, ranking constants; None: as shipped)
    "lexical": ("lexical alone", {"VECTOR_WEIGHT": 0.0, "LEXICAL_POWER": 1.0, "DIVERSITY": 0.0, **NO_TIME}),
    "vector": ("vector alone", {"VECTOR_WEIGHT": 1.0, "LEXICAL_POWER": 1.0, "DIVERSITY": 0.0, **NO_TIME}),
    "old": ("old hybrid (0.7 * cosine + 0.3 * lexical^2, by relevance alone, no time signal)", OLD),
    "new": ("new default (as shipped)", None),
}
LAUNCHER = (  # every constant a mode names is set on its module before the CLI starts
    "import os, json, a2e_mem.backends.base as base, a2e_mem.ops.diversify as diversify, "
    "a2e_mem.ops.bridge as bridge, a2e_mem.timeaware as timeaware; c = json.loads(os.environ['MEM_BENCH_RANKING']); "
    "[setattr(next(m for m in (base, diversify, bridge, timeaware) if hasattr(m, k)), k, v) for k, v in c.items()]; "
    "from a2e_mem.cli.main import run; run()"
)


def server_cmd(constants: dict | None) -> list[str]:
    if constants is not None:
        return [sys.executable, "-c", LAUNCHER, "serve-stdio"]
    if os.environ.get("MEM_BENCH_BIN"):
        return [os.environ["MEM_BENCH_BIN"], "serve-stdio"]
    return [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"]


class Server:
    """One `mem serve-stdio` over `home`, with one session in namespace `conv`."""

    def __init__(self, home: Path, embedder: str, constants: dict | None) -> None:
        env = {**os.environ, "MEM_HOME": str(home), "MEM_EMBEDDER": embedder}
        if constants is not None:
            env["MEM_BENCH_RANKING"] = orjson.dumps(constants).decode()
        self.proc = subprocess.Popen(
            server_cmd(constants), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT
        )
        self.n = 0
        self.call("handshake/req", agent_id="bench", agent_caps=[], auth_token="")
        self.memory_id = self.call("memory/init/req", namespace="conv", scope={"agent": "bench"})["memory_id"]

    def call(self, kind: str, **fields) -> dict:
        self.n += 1
        msg = {"type": kind, "id": f"r{self.n}", "version": "1.0", "ts": time.time(), **fields}
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        self.proc.stdin.flush()
        reply = orjson.loads(self.proc.stdout.readline())
        if reply.get("type") == "error" or reply.get("errors"):
            raise RuntimeError(reply)
        return reply

    def store(self, turns: list[dict]) -> None:
        for i in range(0, len(turns), BATCH):
            entries = [
                {
                    "key": {"id": t["id"]},
                    "content": {"speaker": t["speaker"], "text": t["text"], "date": t["date"]},
                    "tier": "semantic",
                }
                for t in turns[i : i + BATCH]
            ]
            self.call("memory/store/req", memory_id=self.memory_id, entries=entries)

    def retrieve(self, query: str) -> list[str]:
        reply = self.call("memory/retrieve/req", memory_id=self.memory_id, query=query, limit=LIMIT, tier="semantic")
        return [e["key"]["id"] for e in reply["entries"]]

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def score(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    wanted = set(evidence)
    rank = next((i + 1 for i, tid in enumerate(ranked) if tid in wanted), None)
    row = {f"hit@{k}": float(rank is not None and rank <= k) for k in HITS}
    row.update({f"ev@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in EVIDENCE})
    row["MRR"] = 1 / rank if rank else 0.0
    return row


COLUMNS = [f"hit@{k}" for k in HITS] + [f"ev@{k}" for k in EVIDENCE] + ["MRR"]


def summarise(rows: list[tuple[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per type and overall: the mean of each figure, and `n`."""
    out = {}
    for kind in (*TYPES, "overall"):
        picked = [r for t, r in rows if kind in (t, "overall")]
        if picked:
            out[kind] = {c: sum(r[c] for r in picked) / len(picked) for c in COLUMNS} | {"n": len(picked)}
    return out


def run_conversation(conv: dict, modes: list[str], embedder: str) -> dict[str, list[tuple[str, dict[str, float]]]]:
    rows: dict[str, list] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="mem-convbench-") as home:
        for i, mode in enumerate(modes):
            server = Server(Path(home), embedder, MODES[mode][1])
            if i == 0:  # the store is the same for every mode: fill it once, through the first server
                server.store(conv["turns"])
            for q in conv["questions"]:
                rows[mode].append((q["type"], score(server.retrieve(q["question"]), q["evidence"])))
            server.close()
    return rows


def print_table(name: str, summary: dict[str, dict[str, float]]) -> None:
    print(f"\n{name}")
    print(f"{'type':12} {'n':>4} " + " ".join(f"{c:>6}" for c in COLUMNS))
    for kind, r in summary.items():
        print(f"{kind:12} {r['n']:4d} " + " ".join(f"{r[c]:6.3f}" for c in COLUMNS))


def print_comparison(old: dict[str, dict[str, float]], new: dict[str, dict[str, float]]) -> None:
    """Old hybrid and new default side by side: a line per type and figure, the difference in points."""
    print(f"\nold hybrid vs new default\n{'type':12} {'figure':7} {'old':>6} {'new':>6} {'Δ pts':>6}")
    for kind in old:
        for c in COLUMNS:
            label = kind if c == COLUMNS[0] else ""
            print(
                f"{label:12} {c:7} {old[kind][c]:6.3f} {new[kind][c]:6.3f} {100 * (new[kind][c] - old[kind][c]):+6.1f}"
            )


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from bench.common import check_installed_checkout

    check_installed_checkout()  # the servers run the a2e_mem installed here: this checkout's
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "test"), required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--modes", default="lexical,vector,old,new", help="comma-separated: " + ", ".join(MODES))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}")
    started = time.perf_counter()
    convs = [c for c in orjson.loads(args.data.read_bytes())["conversations"] if c["split"] == args.split]
    rows: dict[str, list] = {m: [] for m in modes}
    for conv in convs:
        for mode, got in run_conversation(conv, modes, args.embedder).items():
            rows[mode].extend(got)
    n_turns = sum(len(c["turns"]) for c in convs)
    print("$ " + shlex.join(["python", *sys.argv]))
    print(
        f"split {args.split}: {len(convs)} conversations, {n_turns} turns, {len(rows[modes[0]])} questions; "
        f"embedder {args.embedder}; retrieve limit {LIMIT}"
    )
    results = {}
    for mode in modes:
        results[mode] = summarise(rows[mode])
        print_table(MODES[mode][0], results[mode])
    if "old" in results and "new" in results:
        print_comparison(results["old"], results["new"])
    elapsed = time.perf_counter() - started
    print(f"\nruntime {elapsed:.1f} s")
    if args.json:
        meta = {"split": args.split, "embedder": args.embedder, "runtime_s": round(elapsed, 1)}
        args.json.write_bytes(orjson.dumps({"meta": meta, "modes": results}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
