"""Store and retrieve costs at growing sizes, through `serve-stdio` and the CLI, against targets.

    python bench/bench_store.py                      # 1k and 10k
    python bench/bench_store.py --sizes 1000 10000 100000

For each size: bulk-load N entries with `mem store -` (and time the embedder alone on the same
texts), checkpoint with `mem gc`, then measure through a `mem serve-stdio` process (durable
store of one entry, retrieve by query with limit 10, retrieve by key, resident memory), whole
`mem` processes (store one entry, retrieve by query), and the recall@10 of the Annoy index plus
the exact delta against exact search over the same vectors. Beside it, the floor under the query
rows: Annoy's own search at the budget the store uses, alone, and its index file's size. Times
are medians unless marked.
Targets are printed for 1k to 100k (the first performance issue) and for 1M (issue 13: run it by
hand, `--sizes 1000000 --keep DIR` once, then `--reuse`; its checkpoint row is bench_segments.py's,
its rows against Chroma are bench_chroma.py's).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import StdioClient, entries, env_for, median, mem_cmd, percentile, queries, time_process  # noqa: E402

TARGETS = {  # (metric, size) -> target, in the unit the metric prints
    ("stdio store ms", 1000): "<= 5",
    ("stdio store ms", 10000): "<= 5",
    ("stdio store ms", 100000): "<= 10",
    ("stdio query p50 ms", 1000): "<= 3",
    ("stdio query p50 ms", 10000): "<= 5",
    ("stdio query p50 ms", 100000): "<= 10",
    ("stdio query p99 ms", 1000): "<= 10",
    ("stdio query p99 ms", 10000): "<= 15",
    ("stdio query p99 ms", 100000): "<= 30",
    ("stdio by-key ms", 1000): "<= 1",
    ("stdio by-key ms", 10000): "<= 1",
    ("stdio by-key ms", 100000): "<= 1",
    ("cli store ms", 1000): "<= 250",
    ("cli store ms", 10000): "<= 250",
    ("cli store ms", 100000): "<= 400",
    ("cli query ms", 1000): "<= 300",
    ("cli query ms", 10000): "<= 300",
    ("cli query ms", 100000): "<= 600",
    ("bulk / embed ratio", 100000): "<= 2.0",
    ("recall@10 index+delta", 10000): ">= 0.98",
    ("recall@10 index+delta", 100000): ">= 0.98",
    ("stdio RSS MiB", 100000): "<= 400",
    # issue 13, at a million entries (its other rows: bench_segments.py, bench_chroma.py)
    ("bulk / embed ratio", 1_000_000): "<= 2.0",
    ("stdio store ms", 1_000_000): "<= 5",
    ("stdio query p50 ms", 1_000_000): "<= 5",
    ("stdio query p99 ms", 1_000_000): "<= 20",
    ("recall@10 index+delta", 1_000_000): ">= 0.98",
    ("stdio RSS MiB", 1_000_000): "<= 763 (800 MB)",
    ("cli query ms", 1_000_000): "<= 400",
}
NS = "bench"


def bulk_load(home: Path, n: int) -> dict[str, float]:
    data = entries(n)
    body = b"\n".join(orjson.dumps(e) for e in data) + b"\n"
    env = env_for(home, MEM_CHECKPOINTS="off")
    start = time.perf_counter()
    import subprocess

    subprocess.run(
        mem_cmd("--quiet", "store", "-", "--namespace", NS), input=body, env=env, stdout=subprocess.DEVNULL, check=True
    )
    bulk = time.perf_counter() - start
    from a2e_mem.embed import get_embedder
    from a2e_mem.schemas import entry_text

    embedder = get_embedder(env.get("MEM_EMBEDDER") or "static")
    texts = [entry_text(e) for e in data]
    start = time.perf_counter()
    embedder.embed(texts)
    embed = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run(mem_cmd("gc"), env=env, stdout=subprocess.DEVNULL, check=True)
    checkpoint = time.perf_counter() - start
    return {
        "bulk load s": bulk,
        "embedder alone s": embed,
        "bulk / embed ratio": bulk / embed,
        "checkpoint s": checkpoint,
    }


def stdio_figures(home: Path, n: int, rounds: int) -> dict[str, float]:
    client = StdioClient(home)
    client.call("handshake/req", agent_id="bench", agent_caps=["streaming", "artifacts"], auth_token="")
    mid = client.call("memory/init/req", namespace=NS, scope={"agent": "bench"})["memory_id"]
    stores = [
        client.timed(
            "memory/store/req",
            memory_id=mid,
            entries=[{"key": {"id": f"s{i}"}, "content": f"new note {i}", "tier": "semantic"}],
        )[0]
        for i in range(rounds)
    ]
    qs = queries(rounds)
    by_query = [client.timed("memory/retrieve/req", memory_id=mid, query=q, limit=10)[0] for q in qs]
    rng = random.Random(3)
    by_key = [
        client.timed("memory/retrieve/req", memory_id=mid, keys=[{"id": f"e{rng.randrange(n)}"}])[0]
        for _ in range(rounds)
    ]
    rss, anonymous = client.rss_mib(), client.rss_mib("RssAnon")
    client.close()
    ms = 1000
    return {
        "stdio store ms": median(stores) * ms,
        "stdio store p99 ms": percentile(stores, 99) * ms,
        "stdio query p50 ms": median(by_query) * ms,
        "stdio query p99 ms": percentile(by_query, 99) * ms,
        "stdio by-key ms": median(by_key) * ms,
        "stdio RSS MiB": rss,
        "  of which anonymous MiB": anonymous,
    }


def cli_figures(home: Path, runs: int) -> dict[str, float]:
    env = env_for(home, MEM_CHECKPOINTS="off")
    store = [
        t
        for i, t in enumerate(
            time_process(
                mem_cmd("store", "--namespace", NS, "--tier", "semantic", "--key", "id=cli", "one more note"), env, runs
            )
        )
    ]
    query = time_process(
        mem_cmd("retrieve", "--namespace", NS, "--query", "who booked the flight to Lisbon?"), env, runs
    )
    return {"cli store ms": median(store) * 1000, "cli query ms": median(query) * 1000}


def recall_figure(home: Path, n_queries: int = 300) -> dict[str, float]:
    """Vector-only top-10 through the index plus the delta, against exact search over the same rows."""
    from a2e_mem import clock
    from a2e_mem.backends.files import index as ann
    from a2e_mem.backends.files.search import Filters, search
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)
    shard = svc.engine.shard(NS, "semantic", schema="entries")
    now = clock.now()
    names = [seg.folder.name for seg in shard.segs] + ["mem"]  # the parts, in the order search gives them
    blocks, ids = [], []
    for seg, alive in zip(shard.segs, shard.seg_alive(now), strict=True):
        rows = np.flatnonzero(alive)
        blocks.append(np.asarray(seg.vectors[rows], np.float32))
        ids += [(seg.folder.name, int(r)) for r in rows]
    mem_slots = np.flatnonzero(shard.mem_alive(now))
    vectors = np.concatenate([*blocks, shard.mem.vectors[mem_slots]])
    ids += [("mem", int(s)) for s in mem_slots]
    recalls, annoy = [], []
    indexes = [seg.index for seg in shard.segs if seg.index is not None]
    for qvec in svc.engine.embed(queries(n_queries, seed=5)):
        started = time.perf_counter()
        for index in indexes:
            index.nearest(qvec, 10)
        annoy.append(time.perf_counter() - started)
        exact = {ids[i] for i in np.argsort(-(vectors @ qvec))[:10]}
        found = []
        for name, part in zip(names, search(shard, now, Filters(), qvec, "", k=10), strict=True):
            found += [(name, int(r), float(v)) for r, v in zip(part.rows, part.vector, strict=True)]
        top = {(p, r) for p, r, _ in sorted(found, key=lambda x: -x[2])[:10]}
        recalls.append(len(top & exact) / 10)
    index_bytes = sum((seg.folder / ann.FILE).stat().st_size for seg in shard.segs if seg.index is not None)
    return {
        "recall@10 index+delta": float(np.mean(recalls)),
        "delta entries": float(len(mem_slots)),
        # the floor under the query rows: Annoy's own search at the budget the store uses (the
        # whole query adds BM25, fusion and the records), and the index file every query walks
        # through at random (a long-running server ends up with all of it resident)
        "Annoy alone p50 ms": median(annoy) * 1000,
        "Annoy index MiB": index_bytes / 2**20,
    }


def help_figure(runs: int) -> dict[str, float]:
    return {"mem --help ms": median(time_process(mem_cmd("--help"), env_for(Path(tempfile.gettempdir())), runs)) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=200, help="requests per stdio figure")
    parser.add_argument("--runs", type=int, default=10, help="whole-process runs per CLI figure")
    parser.add_argument("--keep", type=Path, help="build stores here and keep them")
    parser.add_argument("--reuse", action="store_true", help="with --keep: measure the stores kept there, unbuilt")
    args = parser.parse_args()
    # room for the largest size and the entries the figures add (a namespace holds 1,000,000
    # entries and 1 GiB by default: the 1M run hit that limit); a limit the caller set stands
    os.environ.setdefault("MEM_MAX_ENTRIES", str(max(1_000_000, 2 * max(args.sizes))))
    os.environ.setdefault("MEM_MAX_BYTES", str(max(1 << 30, 4096 * max(args.sizes))))
    base = args.keep or Path(tempfile.mkdtemp(prefix="mem-bench-"))
    rows: list[tuple[str, int, float]] = []
    for name, value in help_figure(args.runs).items():
        rows.append((name, 0, value))
    for n in args.sizes:
        home = base / f"store-{n}"
        if args.reuse and home.exists():
            figures = {}
        else:
            shutil.rmtree(home, ignore_errors=True)
            figures = bulk_load(home, n)
        figures |= stdio_figures(home, n, args.rounds)
        figures |= cli_figures(home, args.runs)
        figures |= recall_figure(home)
        rows += [(name, n, value) for name, value in figures.items()]
        print(f"# {n} entries done", file=sys.stderr, flush=True)
    print(f"{'figure':28} {'entries':>8} {'measured':>10}  target")
    for name, n, value in rows:
        target = TARGETS.get((name, n), "")
        print(f"{name:28} {n or '':>8} {value:10.3f}  {target}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
