"""`mem` side by side with Chroma's `PersistentClient`, on the same entries and the same vectors.

    pip install '.[bench]'                           # chromadb is a bench dependency only
    python bench/bench_chroma.py                     # 10k and 100k
    python bench/bench_chroma.py --sizes 10000 --queries 100 --runs 7

The vectors are computed once, in this process, with mem's own embedder (`static`) over the
text mem searches (`entry_text`: content, key values and tags); Chroma is given exactly those
vectors (cosine space) and mem computes the same ones itself. For each size:

- add: mem bulk-loads with one whole `mem store -` process (NDJSON on stdin), which includes
  starting Python and embedding every entry; the embedder's own time on the same texts is shown
  beside it, and mem's time without it. Chroma's add runs in this process, in batches of its
  largest size, with the vectors given (no embedding) and builds its HNSW index as it goes;
  mem builds its Annoy index at the checkpoint (`mem gc`), timed on its own line.
- in-process query: median and p99 over `--queries` queries with limit 10, after one warm-up
  pass, mem and Chroma alternating: `MemoryService.retrieve` (which embeds the query text) and
  `collection.query` with the precomputed query vector.
- fresh process: wall time of a new process that opens the store and runs one query, median of
  `--runs` runs after a warm-up, mem and Chroma alternating: `mem retrieve --query ...` (loads
  its embedder and embeds the query) and `python -c "import chromadb; ...; col.query(...)"`,
  which reads the query vector from a .npy file (no embedder loaded: this favours Chroma).
  Also Chroma's bare `import chromadb` in a new process.

The ratio column is Chroma's time over mem's (for entries/s rows, mem's rate over Chroma's):
above 1, mem is faster. Targets are the issue's: at least 3x for a fresh-process query at 10k
and 100k, and mem no slower in process.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import entries, env_for, median, mem_cmd, percentile, queries, time_process  # noqa: E402

NS = "bench"
COLLECTION = "bench"
LIMIT = 10
TARGETS = {  # figure -> the target for chroma/mem
    "fresh-process query s": ">= 3",
    "in-process query p50 ms": ">= 1 (no slower)",
    "in-process query p99 ms": ">= 1 (no slower)",
}
CHROMA_QUERY = """
import sys
import chromadb
import numpy as np
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
collection = client.get_collection(sys.argv[2])
collection.query(query_embeddings=[np.load(sys.argv[3])], n_results=int(sys.argv[4]))
"""

Row = tuple[str, float | None, float | None, bool]  # figure, mem, chroma, higher is better


def embed(texts: list[str]) -> tuple[np.ndarray, float]:
    """mem's vectors for `texts`, and the embedder's seconds (loaded and warmed beforehand)."""
    from a2e_mem.embed import get_embedder

    embedder = get_embedder("static")
    embedder.embed(texts[:10])
    start = time.perf_counter()
    vectors = embedder.embed(texts)
    return vectors, time.perf_counter() - start


def mem_add(home: Path, data: list[dict]) -> tuple[float, float]:
    """Seconds of a whole `mem store -` process over `data`, then of `mem gc` (the checkpoint)."""
    body = b"".join(orjson.dumps(e) + b"\n" for e in data)
    env = env_for(home, MEM_CHECKPOINTS="off")
    start = time.perf_counter()
    subprocess.run(
        mem_cmd("--quiet", "store", "-", "--namespace", NS), input=body, env=env, check=True, stdout=subprocess.DEVNULL
    )
    bulk = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run(mem_cmd("gc"), env=env, stdout=subprocess.DEVNULL, check=True)
    return bulk, time.perf_counter() - start


def chroma_client(path: Path):
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def chroma_add(path: Path, data: list[dict], vectors: np.ndarray):
    """The new collection and the seconds of creating it and adding `data` in maximal batches."""
    client = chroma_client(path)
    batch = client.get_max_batch_size()
    start = time.perf_counter()
    collection = client.create_collection(
        COLLECTION, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    for lo in range(0, len(data), batch):
        part = data[lo : lo + batch]
        collection.add(
            ids=[e["key"]["id"] for e in part],
            embeddings=vectors[lo : lo + batch],
            documents=[e["content"] for e in part],
            metadatas=[{"tier": e["tier"], "tag": e["tags"][0]} for e in part],
        )
    return collection, time.perf_counter() - start


def in_process_queries(home: Path, collection, texts: list[str], vectors: np.ndarray) -> dict[str, list[float]]:
    """Per-query seconds of mem's retrieve and Chroma's query, alternating, after one warm-up pass."""
    from a2e_mem.service import MemoryService

    svc = MemoryService(home, checkpoints="off")
    scope = svc.scope(NS)
    times: dict[str, list[float]] = {"mem": [], "chroma": []}
    for timed in (False, True):
        for text, vector in zip(texts, vectors, strict=True):
            start = time.perf_counter()
            found = svc.retrieve(scope, query=text, limit=LIMIT)
            mid = time.perf_counter()
            hits = collection.query(query_embeddings=[vector], n_results=LIMIT)
            end = time.perf_counter()
            assert len(found["entries"]) == LIMIT and len(hits["ids"][0]) == LIMIT, (found, hits)
            if timed:
                times["mem"].append(mid - start)
                times["chroma"].append(end - mid)
    svc.close()
    return times


def run_once(name: str, cmd: list[str], env: dict[str, str], echo: bool) -> float:
    """Wall seconds of `cmd`; its stderr is shown when it fails, or when `echo` (warnings, notes)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode or (echo and done.stderr.strip()):
        print(f"# {name} said (exit {done.returncode}): {done.stderr.decode()[-2000:]}", file=sys.stderr)
    done.check_returncode()
    return elapsed


def fresh_processes(home: Path, chroma_path: Path, text: str, vector: np.ndarray, runs: int) -> dict[str, list[float]]:
    """Whole-process seconds of one query against each store, alternating, after one warm-up each."""
    vector_file = chroma_path.parent / "query.npy"
    np.save(vector_file, vector)
    cmds = {
        "mem": mem_cmd("retrieve", "--namespace", NS, "--query", text, "--limit", str(LIMIT)),
        "chroma": [sys.executable, "-c", CHROMA_QUERY, str(chroma_path), COLLECTION, str(vector_file), str(LIMIT)],
    }
    env = env_for(home, MEM_CHECKPOINTS="off")
    times: dict[str, list[float]] = {"mem": [], "chroma": []}
    for i in range(runs + 1):
        for name, cmd in cmds.items():
            elapsed = run_once(name, cmd, env, echo=not i)
            if i:
                times[name].append(elapsed)
    return times


def one_size(base: Path, n: int, n_queries: int, runs: int) -> list[Row]:
    from a2e_mem.schemas import entry_text

    data = entries(n)
    texts = queries(n_queries)
    vectors, embed_s = embed([entry_text(e) for e in data])
    query_vectors, _ = embed(texts)
    home, chroma_path = base / f"mem-{n}", base / f"chroma-{n}" / "db"
    for folder in (home, chroma_path.parent):
        shutil.rmtree(folder, ignore_errors=True)
    chroma_path.parent.mkdir(parents=True)
    bulk_s, gc_s = mem_add(home, data)
    collection, chroma_s = chroma_add(chroma_path, data, vectors)
    inproc = in_process_queries(home, collection, texts, query_vectors)
    fresh = fresh_processes(home, chroma_path, texts[0], query_vectors[0], runs)
    ms = 1000
    return [
        ("add entries/s (mem: process, with embedding)", n / bulk_s, n / chroma_s, True),
        ("add entries/s (mem: minus embedding)", n / (bulk_s - embed_s), n / chroma_s, True),
        ("mem add s (whole process)", bulk_s, None, False),
        ("mem embedding s (embedder alone)", embed_s, None, False),
        ("mem checkpoint s (mem gc, Annoy)", gc_s, None, False),
        ("add + index s", bulk_s + gc_s, chroma_s, False),
        ("in-process query p50 ms", median(inproc["mem"]) * ms, median(inproc["chroma"]) * ms, False),
        ("in-process query p99 ms", percentile(inproc["mem"], 99) * ms, percentile(inproc["chroma"], 99) * ms, False),
        ("fresh-process query s", median(fresh["mem"]), median(fresh["chroma"]), False),
    ]


def import_row(runs: int) -> Row:
    cmd = [sys.executable, "-c", "import chromadb"]
    return (
        "chroma import s (new process)",
        None,
        median(time_process(cmd, env_for(Path(tempfile.gettempdir())), runs)),
        False,
    )


def cell(value: float | None) -> str:
    return f"{value:12.3f}" if value is not None else f"{'':>12}"


def print_table(rows: list[tuple[int, Row]]) -> None:
    print(f"{'figure':46} {'size':>7} {'mem':>12} {'chroma':>12} {'chroma/mem':>11}  target")
    for n, (name, mem, chroma, higher_better) in rows:
        ratio = None
        if mem is not None and chroma is not None:
            ratio = mem / chroma if higher_better else chroma / mem
        ratio_cell = f"{ratio:11.2f}" if ratio is not None else f"{'':>11}"
        print(f"{name:46} {n or '':>7} {cell(mem)} {cell(chroma)} {ratio_cell}  {TARGETS.get(name, '')}".rstrip())


def main() -> None:
    import chromadb

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--queries", type=int, default=100, help="queries per in-process figure")
    parser.add_argument("--runs", type=int, default=7, help="whole-process runs per fresh-process figure")
    parser.add_argument("--keep", type=Path, help="build stores here and keep them")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="mem-chroma-bench-"))
    rows: list[tuple[int, Row]] = [(0, import_row(args.runs))]
    for n in args.sizes:
        rows += [(n, row) for row in one_size(base, n, args.queries, args.runs)]
        print(f"# {n} entries done", file=sys.stderr, flush=True)
    print(f"chromadb {chromadb.__version__}; ratio above 1: mem is faster")
    print_table(rows)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
