"""Issue 11's targets, the files backend and the PostgreSQL backend side by side, in one run.

    python bench/bench_backends.py                        # 100k entries, private PostgreSQL
    python bench/bench_backends.py --sizes 10000          # a quick run
    python bench/bench_backends.py --store postgresql://user@host/db   # an existing server
    python bench/bench_backends.py --only files           # one backend

Without `--store`, a private PostgreSQL (with pgvector) is started by `pgserver` in a temporary
folder and removed at the end, its shared_buffers set as a deployment's would be (a quarter of
the memory, at most 1 GB: `Postgres._tune`; the line before the table shows it). With
`--store`, the URL's role must be allowed to create databases (and the `vector` extension in
them). Every PostgreSQL measurement runs in a database
of its own, made by `CREATE DATABASE` (or as a copy of the loaded one), and dropped at the end;
every files measurement in a folder of its own.

For each size N and each backend, through public tools only:

1. bulk load: an export file of N semantic entries, in the documented format (see
   `store/ops/transfer.py`), is loaded by `mem --store URL import FILE` (files: `--home DIR`)
   into an empty store; entries/s = N / the command's wall time. `mem gc` follows (timed apart:
   on files it writes the checkpoint and the Annoy index, on PostgreSQL it purges expired rows).
2. one `mem serve-stdio` on the loaded store: durable store of one entry (median, p99) and
   retrieve by query with limit 10 (p50, p99), `--rounds` requests each.
3. recall@10 of the vector search as shipped (pgvector's HNSW index; files: the Annoy index plus
   the exact delta) against exact search over the same rows, both through the backend seam:
   `Scope.search(k=10)` against `Scope.search(exhaustive=True)` (every row scored), vector only.
4. 8 concurrent writers: 8 `mem serve-stdio` processes (for PostgreSQL each with a `--home` of
   its own, as 8 machines would have; files share the one folder they must share) store one
   entry per request, as fast as the acknowledgements come back, for `--write-seconds`, into
   the namespace of the loaded store (a copy of it). Acknowledged writes per second in total,
   then a count proves every acknowledged write is there. Once into one shared namespace, once
   into 8 namespaces (one each). Beside it, the CPU time (user + system, from /proc) of the 8
   `mem` processes and of the PostgreSQL server's processes (when the server runs on this
   machine) per acknowledged write, and how many of the machine's cores were busy in all
   (those, this script and the server): on one machine, writers and server share its cores.
   On PostgreSQL, then, what the server alone sustains of the same writes into one namespace:
   `pg_replay.py` has 8 `pgbench` clients (PostgreSQL's own load tool, a C client of negligible
   CPU) send the statements a store sends, on a copy of the loaded store. In a fleet the writers
   run on other machines; here they share the server's cores. Skipped without pgbench (it comes
   with `pgserver`).
5. `--waiting` more entries (default 10,000) imported into the loaded store, then retrieve by
   query again before any `mem gc`: what the rows not yet in the vector index cost every query
   (files: the journals' delta; PostgreSQL: the rows past the HNSW index's watermark).

Times are wall-clock, through the processes users run; a machine busy with other work shows it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    StdioClient,
    entries,
    env_for,
    median,
    mem_cmd,
    percentile,
    queries,
    sentence,
)

NS = "bench"
AGENT = "bench"
WRITERS = 8
SHARED_BUFFERS_MB = 1024  # the private server's shared_buffers, at most (`Postgres._tune`)
BACKENDS = ("files", "postgres")


# -- where each backend's stores live -----------------------------------------------------------


def shown_url(url: str) -> str:
    """`url` without its password (printed, never the secret)."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (None: no such process here)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes `pids` used so far (Linux /proc; 0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    fields = [_stat(pid) for pid in pids]
    return sum(int(f[11]) + int(f[12]) for f in fields if f) / ticks


def server_seconds(pids: list[int]) -> float:
    """CPU seconds of a server's processes `pids` (the postmaster first) and of its children that
    ended and were waited for: the backends of connections closed meanwhile."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    fields = _stat(pids[0]) if pids else None
    reaped = (int(fields[13]) + int(fields[14])) / ticks if fields else 0.0
    return cpu_seconds(pids) + reaped


def cpu_now(mem_pids: list[int], server_pids: list[int]) -> tuple[float, float, float]:
    """CPU seconds so far of the mem processes, the server's, and this script's."""
    return cpu_seconds(mem_pids), cpu_seconds(server_pids), sum(os.times()[:2])


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` (same server, role and options)."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


class Postgres:
    """A PostgreSQL server for the bench: a private `pgserver` one, or the `--store` URL's.
    `fresh()` gives a URL to a new database; every database made is dropped by `close()`."""

    def __init__(self, url: str | None, workdir: Path, keep: bool = False) -> None:
        self.server = None
        self.admin_url = url or ""
        if url is None:
            import pgserver

            # started once to be tuned (`_tune`), then again with its settings; kept: the server
            # goes on running with its databases (stop it with `pg_ctl stop -D`)
            tuned = pgserver.get_server(workdir / "pgdata", cleanup_mode="stop")
            self.admin_url = tuned.get_uri()
            self._tune()
            tuned.cleanup()
            self.server = pgserver.get_server(workdir / "pgdata", cleanup_mode=None if keep else "delete")
            self.admin_url = self.server.get_uri()
        self.made: list[str] = []
        self.version = self._query("SELECT current_setting('server_version')")
        self.shared_buffers = self._query("SELECT current_setting('shared_buffers')")

    def _tune(self) -> None:
        """The private server's memory, set as a deployment's would be: pgvector's performance
        notes say to tune the server (shared_buffers typically a quarter of the memory), and
        PostgreSQL's default of 128MB holds less than the HNSW index of 100k rows (130 MB at 256
        dimensions), so every query read part of it through the kernel's cache. A quarter of the
        memory, at most SHARED_BUFFERS. A server given by --store is measured as it is set."""
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        megabytes = max(128, min(SHARED_BUFFERS_MB, memory // 4 // 2**20))
        self._query(f"ALTER SYSTEM SET shared_buffers = '{megabytes}MB'")

    def _query(self, statement: str, url: str | None = None) -> str:
        """The first column of the first row of `statement` ("" when it returns none)."""
        import psycopg

        with psycopg.connect(url or self.admin_url, autocommit=True) as conn:
            cursor = conn.execute(statement)  # type: ignore[arg-type]
            row = cursor.fetchone() if cursor.description else None
        return str(row[0]) if row else ""

    def fresh(self, label: str, template: str | None = None) -> str:
        """A URL to a new database `mem_bench_<pid>_<label>` (a copy of `template`'s database if
        given: no connection may be open on it)."""
        import psycopg
        from psycopg import sql

        name = f"mem_bench_{os.getpid()}_{label}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            if template:
                source = urlsplit(template).path.lstrip("/")
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(source))
                )
            else:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.made.append(name)
        url = with_database(self.admin_url, name)
        if not template:
            self._enable_vector(url)
        return url

    def _enable_vector(self, url: str) -> None:
        """pgvector in the new database, where this role may do it; else the backend's own
        migrations (or its error naming the SQL to run) decide."""
        import psycopg

        try:
            self._query("CREATE EXTENSION IF NOT EXISTS vector", url)
        except psycopg.Error as exc:
            print(f"# CREATE EXTENSION vector failed ({type(exc).__name__}): left to the backend", file=sys.stderr)

    def local_pids(self) -> list[int]:
        """The server's processes (postmaster and children) when it runs on this machine, found
        from a backend's parent; none for a remote server."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:  # its backend lives while we look
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            postmaster = _parent(backend)
            if postmaster is None or _comm(backend) != "postgres":  # not a process here: another machine
                return []
        return [postmaster, *(pid for pid in _pids() if _parent(pid) == postmaster)]

    def pgvector_version(self, url: str) -> str:
        return self._query("SELECT coalesce(max(extversion), 'none') FROM pg_extension WHERE extname = 'vector'", url)

    def close(self, keep: bool) -> None:
        import psycopg
        from psycopg import sql

        if not keep:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                for name in self.made:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if self.server is not None and not keep:
            self.server.cleanup()


@dataclass
class Store:
    """One store of one backend: the options every `mem` command on it takes."""

    backend: str
    home: Path  # files: the store itself; postgres: only the configuration folder
    url: str | None = None  # postgres only

    @property
    def options(self) -> tuple[str, ...]:
        return ("--store", self.url) if self.url else ("--home", str(self.home))

    def env(self, home: Path | None = None) -> dict[str, str]:
        # MEM_STORE set empty: a files run never follows a MEM_STORE the caller's shell exports
        return env_for(home or self.home, MEM_STORE="")

    def shown(self) -> str:
        return shown_url(self.url) if self.url else f"--home {self.home}"

    def service(self):  # type: ignore[no-untyped-def]
        from a2e_mem.service import MemoryService

        return MemoryService(self.home, store=self.url or "")


@dataclass
class Stores:
    """Makes fresh, empty or copied, stores of each backend."""

    workdir: Path
    postgres: Postgres | None
    count: int = 0
    homes: list[Path] = field(default_factory=list)

    def home(self, label: str) -> Path:
        self.count += 1
        home = self.workdir / f"{self.count:02d}-{label}"
        home.mkdir(parents=True)
        return home

    def fresh(self, backend: str, label: str) -> Store:
        home = self.home(f"{backend}-{label}")
        if backend == "files":
            return Store(backend, home)
        assert self.postgres is not None
        return Store(backend, home, self.postgres.fresh(label))

    def copy(self, store: Store, label: str) -> Store:
        """A new store holding what `store` holds (nothing may have it open)."""
        home = self.home(f"{store.backend}-{label}")
        if store.url is None:
            shutil.copytree(store.home, home, dirs_exist_ok=True)
            return Store(store.backend, home)
        assert self.postgres is not None
        return Store(store.backend, home, self.postgres.fresh(label, template=store.url))


# -- the measurements -------------------------------------------------------------------------


def export_file(path: Path, n: int, prefix: str = "e", seed: int = 7) -> None:
    """N semantic entries of namespace NS as `mem export` writes them: one record a line, keys
    sorted, lines sorted by (namespace, kind, scope, id); the record id is the key as sorted-key
    JSON (`store/ops/a2e.py` canonical_key)."""
    now = time.time()
    records = []
    for i, entry in enumerate(entries(n, seed=seed, prefix=prefix)):
        rid = orjson.dumps(entry["key"], option=orjson.OPT_SORT_KEYS).decode()
        doc = {
            **entry,
            "id": rid,
            "created_at": now + i * 1e-3,
            "updated_at": now + i * 1e-3,
            "expires_at": None,
            "score": 1.0,
            "source": "",
            "ttl": 0,
        }
        records.append({"namespace": NS, "kind": "semantic", "scope": [], "id": rid, "doc": doc})
    records.sort(key=lambda record: record["id"])  # one namespace, kind and scope: by id
    path.write_bytes(b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records))


def run_mem(store: Store, *args: str, stdin: bytes | None = None) -> tuple[float, bytes]:
    cmd = mem_cmd(*store.options, *args)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=store.env(), input=stdin, capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return seconds, done.stdout


def bulk_load(store: Store, dump: Path, n: int) -> dict[str, float]:
    seconds, out = run_mem(store, "--quiet", "import", str(dump), "--format", "json")
    counts = orjson.loads(out)
    if counts.get("new") != n:
        raise RuntimeError(f"import of {n} entries reported {counts}")
    gc_seconds, _ = run_mem(store, "--quiet", "gc")
    return {"import s": seconds, "import entries/s": n / seconds, "gc after import s": gc_seconds}


def open_client(store: Store, agent: str, namespace: str = NS, home: Path | None = None) -> tuple[StdioClient, str]:
    env = store.env(home)
    client = StdioClient(Path(env["MEM_HOME"]), store.options, MEM_STORE="")
    client.call("handshake/req", agent_id=agent, agent_caps=["streaming", "artifacts"], auth_token="")
    memory_id = client.call("memory/init/req", namespace=namespace, scope={"agent": agent})["memory_id"]
    return client, memory_id


def stdio_figures(store: Store, rounds: int) -> dict[str, float]:
    client, mid = open_client(store, AGENT)
    client.call("memory/retrieve/req", memory_id=mid, query="warm up", limit=10)
    stores = []
    for i in range(rounds):
        entry = {"key": {"id": f"s{i}"}, "content": f"new note {i}", "tier": "semantic"}
        stores.append(client.timed("memory/store/req", memory_id=mid, entries=[entry])[0])
    by_query = [client.timed("memory/retrieve/req", memory_id=mid, query=q, limit=10)[0] for q in queries(rounds)]
    client.close()
    ms = 1000
    return {
        "stdio store ms": median(stores) * ms,
        "stdio store p99 ms": percentile(stores, 99) * ms,
        "stdio query p50 ms": median(by_query) * ms,
        "stdio query p99 ms": percentile(by_query, 99) * ms,
    }


def waiting_figures(store: Store, more: Path, rounds: int) -> dict[str, float]:
    """Retrieve by query after `mem import` of the entries of `more` and before any `mem gc`: the
    rows the vector index does not cover yet (files: the journals' delta; PostgreSQL: the rows
    past the HNSW index's watermark), which every query scores exactly."""
    run_mem(store, "--quiet", "import", str(more), "--format", "json")
    client, mid = open_client(store, AGENT)
    client.call("memory/retrieve/req", memory_id=mid, query="warm up", limit=10)
    by_query = [client.timed("memory/retrieve/req", memory_id=mid, query=q, limit=10)[0] for q in queries(rounds, 7)]
    client.close()
    return {"waiting query p50 ms": median(by_query) * 1000, "waiting query p99 ms": percentile(by_query, 99) * 1000}


def top_ids(parts, k: int = 10) -> tuple[set[str], str]:  # type: ignore[no-untyped-def]
    """The ids of the `k` rows of best cosine among search results, and how they were found."""
    scored = [
        (float(v), part, i) for part in parts for i, v in enumerate(part.vector if part.vector is not None else [])
    ]
    scored.sort(key=lambda s: -s[0])
    paths = sorted({part.path for part in parts if len(part.rows)})
    return {part.doc(i)["id"] for _, part, i in scored[:k]}, "+".join(paths)


def recall_figure(store: Store, n_queries: int) -> dict[str, float | str]:
    """Vector-only top-10 as shipped against exact top-10 (every row scored), both through the
    seam, so the same code measures both backends."""
    from a2e_mem import clock
    from a2e_mem.backends.base import Filters

    svc = store.service()
    try:
        scope = svc.backend.scope(NS, "semantic", schema="entries")
        now = clock.now()
        recalls, paths = [], set()
        for qvec in svc.backend.embed(queries(n_queries, seed=5)):
            found, path = top_ids(scope.search(now, Filters(), qvec, "", k=10))
            exact, _ = top_ids(scope.search(now, Filters(), qvec, "", k=10, exhaustive=True))
            recalls.append(len(found & exact) / len(exact))
            paths.add(path)
    finally:
        svc.close()
    return {"recall@10": float(np.mean(recalls)), "recall path": ",".join(sorted(paths))}


def live_entries(store: Store, namespaces: list[str]) -> int:
    from a2e_mem import clock

    svc = store.service()
    try:
        return sum(svc.backend.scope(ns, "semantic", schema="entries").usage(clock.now())[0] for ns in namespaces)
    finally:
        svc.close()


def writers_figure(stores: Stores, loaded: Store, seconds: float, shared: bool) -> dict[str, float]:
    """8 `serve-stdio` writers at once; acknowledged writes/s in total, and the writes lost."""
    label = "shared" if shared else "own"
    store = stores.copy(loaded, f"writers-{label}")
    namespaces = [NS if shared else f"{NS}-w{w}" for w in range(WRITERS)]
    before = live_entries(store, sorted(set(namespaces)))
    clients = []
    for w in range(WRITERS):
        home = stores.home(f"writer{w}") if store.url else None  # 8 machines, 8 homes, one database
        client, mid = open_client(store, f"writer{w}", namespaces[w], home)
        client.call("memory/store/req", memory_id=mid, entries=[_entry(w, -1)])  # connect, load, warm up
        clients.append((client, mid))
    acked = [1] * WRITERS  # the warm-up writes
    start = threading.Barrier(WRITERS + 1)
    clock_box: dict[str, float] = {}

    def write(w: int) -> None:
        client, mid = clients[w]
        start.wait()
        j = 0
        while time.perf_counter() < clock_box["deadline"]:
            client.call("memory/store/req", memory_id=mid, entries=[_entry(w, j)])
            acked[w] += 1
            j += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    mem_pids = [client.proc.pid for client, _ in clients]
    server_pids = stores.postgres.local_pids() if store.url and stores.postgres else []
    cpu_before = cpu_now(mem_pids, server_pids)
    began = time.perf_counter()
    clock_box["deadline"] = began + seconds
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    cpu_used = [b - a for a, b in zip(cpu_before, cpu_now(mem_pids, server_pids), strict=True)]
    for client, _ in clients:
        client.close()
    timed = sum(acked) - WRITERS
    lost = before + sum(acked) - live_entries(store, sorted(set(namespaces)))
    figures = {f"writers {label} acked/s": timed / elapsed, f"writers {label} lost": float(lost)}
    per_write = 1000 / max(timed, 1)
    figures[f"writers {label} mem cpu ms"] = cpu_used[0] * per_write
    if server_pids:
        figures[f"writers {label} pg cpu ms"] = cpu_used[1] * per_write
    figures[f"writers {label} cores busy"] = sum(cpu_used) / elapsed
    return figures


def replay_figure(stores: Stores, loaded: Store, seconds: float) -> dict[str, float]:
    """What the server alone sustains of the same writes, into one namespace: `pg_replay.py`
    (8 pgbench clients sending a store's statements) on a copy of the loaded store, with the
    server's CPU a write and the replayed writes missing after. Nothing without pgbench."""
    from bench import pg_replay

    pgbench = pg_replay.pgbench_path()
    if pgbench is None or loaded.url is None:
        return {}
    store = stores.copy(loaded, "replay")
    assert store.url is not None
    server = stores.postgres.local_pids() if stores.postgres else []
    before = pg_replay.replayed_rows(store.url)
    cpu_before = server_seconds(server)
    done = pg_replay.replay(store.url, seconds, WRITERS, pgbench)  # its connections end with it
    cpu_used = server_seconds(server) - cpu_before  # a backend that ended counts 0 live, its CPU reaped
    figures = {
        "replay writes/s": done["writes/s"],
        "replay lost": done["writes"] - (pg_replay.replayed_rows(store.url) - before) + done["failed"],
    }
    if server:
        figures["replay pg cpu ms"] = cpu_used * 1000 / max(done["writes"], 1)
    return figures


def _entry(writer: int, j: int) -> dict:
    import random

    content = sentence(random.Random(writer * 1_000_003 + j))
    return {"key": {"id": f"w{writer}-{j}"}, "content": content, "tier": "semantic"}


def measure(backend: str, stores: Stores, n: int, dump: Path, args: argparse.Namespace) -> dict[str, float | str]:
    figures: dict[str, float | str] = {}
    loaded = stores.fresh(backend, f"load{n}")
    figures["store"] = loaded.shown()
    step(backend, n, "bulk load")
    figures |= bulk_load(loaded, dump, n)
    step(backend, n, "serve-stdio store and retrieve")
    figures |= stdio_figures(loaded, args.rounds)
    step(backend, n, "recall@10")
    figures |= recall_figure(loaded, args.recall_queries)
    for shared in (True, False):
        step(backend, n, f"{WRITERS} writers, {'one namespace' if shared else 'a namespace each'}")
        figures |= writers_figure(stores, loaded, args.write_seconds, shared)
    if backend == "postgres":
        step(backend, n, f"the same writes replayed by {WRITERS} pgbench clients")
        figures |= replay_figure(stores, loaded, args.write_seconds)
    if args.waiting:
        step(backend, n, f"retrieve with {args.waiting} more entries not indexed yet")
        figures |= waiting_figures(loaded, dump.with_name(f"waiting-{args.waiting}.ndjson"), args.rounds)
    return figures


def step(backend: str, n: int, what: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {backend} {n}: {what}", file=sys.stderr, flush=True)


# -- the table --------------------------------------------------------------------------------

ROWS = [  # (label, figure, format, target, meets(value) or None)
    ("serve-stdio durable store of one entry, median ms", "stdio store ms", "{:.2f}", "<= 5", lambda v: v <= 5),
    ("  (p99 ms)", "stdio store p99 ms", "{:.2f}", "", None),
    ("serve-stdio retrieve by query, limit 10, p50 ms", "stdio query p50 ms", "{:.2f}", "<= 15", lambda v: v <= 15),
    ("serve-stdio retrieve by query, limit 10, p99 ms", "stdio query p99 ms", "{:.2f}", "<= 40", lambda v: v <= 40),
    ("  (p50 ms, with --waiting entries not indexed yet)", "waiting query p50 ms", "{:.2f}", "", None),
    ("  (p99 ms, the same)", "waiting query p99 ms", "{:.2f}", "", None),
    ("recall@10 of the index against exact search", "recall@10", "{:.3f}", ">= 0.95", lambda v: v >= 0.95),
    ("  (how the shipped search found them)", "recall path", "{}", "", None),
    ("8 writers, one namespace, acked writes/s", "writers shared acked/s", "{:.0f}", ">= 3x files", None),
    ("  (acknowledged writes missing after)", "writers shared lost", "{:.0f}", "0", lambda v: v == 0),
    *(
        (f"  ({what})", f"writers shared {figure}", fmt, "", None)
        for what, figure, fmt in (
            ("CPU ms a write, the 8 mem processes", "mem cpu ms", "{:.2f}"),
            ("CPU ms a write, the PostgreSQL server", "pg cpu ms", "{:.2f}"),
            ("CPU cores busy, with this script", "cores busy", "{:.2f}"),
        )
    ),
    ("  (the server alone: 8 pgbench clients send them, writes/s)", "replay writes/s", "{:.0f}", "", None),
    ("  (replayed writes missing after)", "replay lost", "{:.0f}", "0", lambda v: v == 0),
    ("  (CPU ms a replayed write, the PostgreSQL server)", "replay pg cpu ms", "{:.2f}", "", None),
    ("8 writers, a namespace each, acked writes/s", "writers own acked/s", "{:.0f}", "", None),
    ("  (acknowledged writes missing after)", "writers own lost", "{:.0f}", "0", lambda v: v == 0),
    ("  (CPU cores busy, with this script)", "writers own cores busy", "{:.2f}", "", None),
    ("bulk load through `mem import`, entries/s", "import entries/s", "{:.0f}", ">= 2,000", lambda v: v >= 2000),
    ("  (`mem import` wall s)", "import s", "{:.1f}", "", None),
    ("  (`mem gc` after the import, s)", "gc after import s", "{:.1f}", "", None),
]
RATIO_FIGURES = {"writers shared acked/s": 3.0, "writers own acked/s": None}
# figures of PostgreSQL alone, compared with another figure of the files backend
RATIO_AGAINST = {"replay writes/s": "writers shared acked/s"}


def print_table(n: int, results: dict[str, dict[str, float | str]]) -> None:
    files, pg = results.get("files", {}), results.get("postgres", {})
    what = f"what, at {n:,} entries"
    print(f"\n{what:52} {'target':>12} {'files':>10} {'postgres':>10} {'pg/files':>9}  pg meets")
    for label, name, fmt, target, meets in ROWS:
        f_value, p_value = files.get(name), pg.get(name)
        ratio, verdict = "", ""
        against = files.get(RATIO_AGAINST.get(name, ""))
        if isinstance(against, float) and isinstance(p_value, float) and against:
            ratio = f"{p_value / against:.2f}x"
        elif isinstance(f_value, float) and isinstance(p_value, float) and name in RATIO_FIGURES and f_value:
            ratio = f"{p_value / f_value:.2f}x"
            wanted = RATIO_FIGURES[name]
            verdict = "" if wanted is None else ("yes" if p_value / f_value >= wanted else "NO")
        elif isinstance(p_value, float) and meets is not None:
            verdict = "yes" if meets(p_value) else "NO"
        print(f"{label:52} {target:>12} {_cell(fmt, f_value):>10} {_cell(fmt, p_value):>10} {ratio:>9}  {verdict}")
    for backend, figures in results.items():
        print(f"{backend}: {figures.get('store', '')}")


def _cell(fmt: str, value: float | str | None) -> str:
    return "-" if value is None else fmt.format(value)


# -- main -------------------------------------------------------------------------------------


def postgres_available() -> bool:
    return importlib.util.find_spec("a2e_mem.backends.postgres") is not None


@contextlib.contextmanager
def workspace(keep: Path | None) -> Iterator[Path]:
    base = keep or Path(tempfile.mkdtemp(prefix="mem-bench-backends-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        yield base
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000], help="entries per store (default 100000)")
    parser.add_argument("--store", help="an existing PostgreSQL (postgresql://...); default: a private pgserver")
    parser.add_argument("--only", choices=BACKENDS, help="measure one backend only")
    parser.add_argument("--rounds", type=int, default=200, help="requests per serve-stdio figure")
    parser.add_argument("--recall-queries", type=int, default=100, help="queries for recall@10")
    parser.add_argument("--write-seconds", type=float, default=10.0, help="duration of each 8-writer run")
    parser.add_argument(
        "--waiting", type=int, default=10_000, help="entries imported last, retrieved before any gc (0: skip)"
    )
    parser.add_argument("--keep", type=Path, help="build the stores in this folder and keep them (and the databases)")
    args = parser.parse_args()
    backends = [args.only] if args.only else list(BACKENDS)
    if "postgres" in backends and not postgres_available():
        if args.only:
            parser.error("the PostgreSQL backend (store/backends/postgres/) is not in this checkout")
        print("# the PostgreSQL backend is not in this checkout: files only", file=sys.stderr)
        backends.remove("postgres")
    began = time.perf_counter()
    print("command: python " + " ".join([sys.argv[0], *(shown_url(a) for a in sys.argv[1:])]))
    print(f"`mem` run as: {' '.join(mem_cmd())}, code from {Path(__file__).resolve().parent.parent}")
    print(
        f"serve-stdio figures over {args.rounds} requests; recall over {args.recall_queries} queries; "
        f"writers for {args.write_seconds:g} s; {os.cpu_count()} CPUs"
    )
    with workspace(args.keep) as base:
        postgres = Postgres(args.store, base, bool(args.keep)) if "postgres" in backends else None
        try:
            if postgres:
                url = postgres.fresh("probe")
                print(
                    f"PostgreSQL {postgres.version}, pgvector {postgres.pgvector_version(url)}, "
                    f"shared_buffers {postgres.shared_buffers}, "
                    f"{'private pgserver' if postgres.server else shown_url(postgres.admin_url)}"
                )
            stores = Stores(base, postgres)
            for n in args.sizes:
                dump = base / f"export-{n}.ndjson"
                export_file(dump, n)
                if args.waiting:
                    export_file(dump.with_name(f"waiting-{args.waiting}.ndjson"), args.waiting, prefix="w", seed=11)
                results = {backend: measure(backend, stores, n, dump, args) for backend in backends}
                print_table(n, results)
        finally:
            if postgres:
                postgres.close(keep=bool(args.keep))
    print(f"\nruntime {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
