"""What a checkpoint costs on a big shard: 10k new entries on top of 100k, in one shard.

    python bench/bench_segments.py                       # 100k, then 10k more
    python bench/bench_segments.py --base 20000 --add 2000
    python bench/bench_segments.py --copy-of DIR/store-1000000   # 10k on top of a kept 1M store


Loads `--base` entries into one namespace's semantic tier (in process, checkpoints off), folds
them into one segment (`mem gc`), stores `--add` more, then times the checkpoint of those (the
one a background process runs once the journals are due). With layered segments it writes a
segment of the new entries alone; before them it rewrote the whole shard. It then times a
query over the segments and the memtable, and `mem gc`, which rewrites the shard as one segment.
With `--copy-of HOME` (a store kept by `bench_store.py --keep`, its namespace `bench` checkpointed)
the base is a copy of that store instead: loading a million entries and folding them takes
half an hour here, the copy a minute; the closing `mem gc` is then left out (it rewrites the
whole shard: another ten minutes at 1M), unless `--gc`.
Only the library's long-standing calls are used, so the script also times older versions (install
one in a virtual environment of its own and run this file with its Python).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import entries, queries  # noqa: E402

NS = "bench"
BATCH = 2000


def load(svc, scope, data: list[dict]) -> None:
    for start in range(0, len(data), BATCH):
        svc.store(scope, data[start : start + BATCH])


def shown(seconds: float, digits: int) -> str:
    return "-" if math.isnan(seconds) else f"{seconds:.{digits}f}"


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=int, default=100_000)
    parser.add_argument("--add", type=int, default=10_000)
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or "static")
    parser.add_argument("--copy-of", type=Path, help="start from a copy of this store (see above)")
    parser.add_argument("--gc", action="store_true", help="with --copy-of: time the closing `mem gc` too")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mem-bench-segments-"))
    if args.copy_of:
        shutil.copytree(args.copy_of, home, dirs_exist_ok=True)
    os.environ.update(MEM_HOME=str(home), MEM_CHECKPOINTS="off", MEM_EMBEDDER=args.embedder)
    # room past the namespace's default limit of 1,000,000 entries: a copied 1M store and more
    os.environ.setdefault("MEM_MAX_ENTRIES", str(4_000_000))
    os.environ.setdefault("MEM_MAX_BYTES", str(8 << 30))
    from a2e_mem import __file__ as where
    from a2e_mem.service import MemoryService

    try:
        svc = MemoryService(home)
        scope = svc.scope(NS, "bench")
        if args.copy_of:  # the base is there; the new entries get keys of their own
            args.base = svc.retrieve(scope, limit=1)["total"]
            load_base = first = math.nan
            added = entries(args.add, seed=11, prefix="added")
        else:
            data = entries(args.base + args.add)
            load_base = timed(lambda: load(svc, scope, data[: args.base]))
            first = timed(lambda: svc.checkpoint(force=True))
            added = data[args.base :]
        load_add = timed(lambda: load(svc, scope, added))
        engine = svc.backend
        shard = engine.shard(NS, "semantic", schema="entries")
        incremental = timed(lambda: engine.checkpoint_shard(shard, force=True, wait=True))
        shard = engine.shard(NS, "semantic", schema="entries")
        segments = sorted(p.name for p in shard.folder.iterdir() if p.name.startswith("seg-"))
        fresh = MemoryService(home)
        fresh_scope = fresh.scope(NS, "bench")
        qs = queries(60)
        fresh.retrieve(fresh_scope, query=qs[0], limit=10)  # load the model and the indexes
        query = statistics.median(timed(lambda q=q: fresh.retrieve(fresh_scope, query=q, limit=10)) for q in qs)
        total = fresh.retrieve(fresh_scope, limit=1)["total"]
        gc = timed(lambda: fresh.checkpoint(force=True)) if args.gc or not args.copy_of else math.nan
    finally:
        shutil.rmtree(home, ignore_errors=True)
    rows = [
        ("a2e_mem", where.rsplit("/", 2)[0]),
        ("embedder", args.embedder),
        ("base", f"a copy of {args.copy_of}" if args.copy_of else "stored here"),
        (f"store {args.base} entries s", shown(load_base, 1)),
        (f"first checkpoint ({args.base}) s", shown(first, 2)),
        (f"store {args.add} more s", f"{load_add:.1f}"),
        (f"checkpoint of {args.add} on top of {args.base} s", f"{incremental:.2f}  (issue 13: <= 3 s at 10k on 1M)"),
        ("segments after it", f"{len(segments)}: {' '.join(segments)}"),
        ("query p50 ms (in process, after it)", f"{query * 1000:.2f}"),
        ("entries found", str(total)),
        ("mem gc (one segment) s", shown(gc, 2)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
