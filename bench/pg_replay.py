"""What the PostgreSQL server alone sustains of `mem`'s writes: `pgbench` replays them.

On one machine the 8-writer figure of `bench_backends.py` shares the cores between the 8 `mem`
processes and the server. In a fleet the writers run on other machines. `pgbench` (PostgreSQL's
own load tool, a C client of negligible CPU) sends the statements a `serve-stdio` store of one
entry sends, in the same two pipelined round trips, from 8 connections at once:

    round trip 1: BEGIN; the locks and settings; the namespace's entry read; RESET x2; the row read
    round trip 2: the upsert; the statistics; COMMIT; the WAL flush that makes it durable

Each replayed write stores a semantic entry under a new key (`{"id": "pgb<client>-<random>"}`)
into namespace `bench` of the given database, a record as `mem` writes it (so that `mem` reads,
exports and forgets it like any other), so run it on a copy. The statements come from the backend's own code, with
one recorded entry's values written in as literals: a change to the backend's SQL is replayed.

    python bench/pg_replay.py postgresql://.../copy_of_a_loaded_store [--seconds 10] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NS = "bench"
TEXT = "Chen finished the visa application on Monday and it cost more than expected."
KEY_ID = "('pgb' || :client_id || '-' || :r)"  # pgbench variables: one new key a transaction
ROW_ID = f"""('{{"id":"' || {KEY_ID} || '"}}')"""  # the record's id: its key's canonical JSON


def pgbench_path() -> str | None:
    """pgbench next to the private server's binaries (`pgserver`), else on PATH."""
    try:
        import pgserver

        bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pgbench"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    return shutil.which("pgbench")


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def recorded_embedder(url: str) -> str:
    """The embedder the store at `url` records (its vectors are made with it)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT value->>'embedder' FROM mem_meta WHERE key = 'embedder'").fetchone()
    if not row or not row[0]:
        raise RuntimeError("the store records no embedder yet: store one entry with `mem` first")
    return str(row[0])


def _values(embedder: str) -> dict[str, str]:
    """The parameters of one store of TEXT, as SQL literals (by the names the statements use)."""
    from a2e_mem.embed import get_embedder
    from a2e_mem.lexical import terms

    words = terms(TEXT)
    now = time.time()
    doc = {
        "content": TEXT, "created_at": now, "expires_at": None, "id": "ID", "key": {"id": "KEY"}, "score": 1.0,
        "source": "", "tags": [], "tier": "semantic", "ttl": 0, "updated_at": now,
    }  # fmt: skip
    # json's ": " separator: pgbench would read ':name' inside the text as a variable
    before_id, after_id = json.dumps(doc).split('"ID"')
    before_key, after_key = after_id.split('"KEY"')
    raw = (
        f"({literal(before_id)} || to_json({ROW_ID}::text)::text || {literal(before_key)} || "
        f"to_json({KEY_ID}::text)::text || {literal(after_key)})"
    )
    vector = "[" + ",".join(f"{x:.7f}" for x in get_embedder(embedder).embed([TEXT])[0]) + "]"
    distinct = sorted(set(words))
    return {
        "ns": literal(NS), "kind": literal("semantic"), "scope": "'{}'", "id": ROW_ID, "now": "0",
        "ids": f"ARRAY[{ROW_ID}]", "raws": f"ARRAY[{raw}]", "sizes": f"ARRAY[octet_length({raw})]",
        "vecs": f"ARRAY[{literal(vector)}::vector]", "terms": f"ARRAY[{literal(' '.join(words))}]",
        "tags": "ARRAY['[]']", "scores": "ARRAY[1.0]", "updated": f"ARRAY[{now!r}]",
        "expires": "ARRAY[NULL::float8]", "when": f"ARRAY[{now!r}]", "schema": literal("entries"),
        "n": "1", "len": str(len(words)), "bytes": f"octet_length({raw})", "entries": "1",
        "size": f"octet_length({raw})",
        "words": "ARRAY[" + ",".join(literal(w) for w in distinct) + "]",
        "dfs": "ARRAY[" + ",".join("1" for _ in distinct) + "]",
    }  # fmt: skip


def _filled(statement: str, values: dict[str, str], **renamed: str) -> str:
    """`statement` with its psycopg parameters (%(name)s, %(name)b) as the literals of `values`
    (`renamed`: a parameter read from another name), on one line."""
    named = {**values, **{name: values[source] for name, source in renamed.items()}}
    return re.sub(r"%\((\w+)\)[sb]", lambda m: named[m.group(1)], statement).replace("\n", " ") + ";"


def script(embedder: str) -> str:
    """The pgbench script of one durable store of one entry, as `PostgresBackend.lock` and
    `PgScope.append` send it (early lock release, the flush after the COMMIT), its vector made
    with `embedder`."""
    from a2e_mem.backends.postgres import backend, scope
    from a2e_mem.backends.postgres.schema import EMBEDDER_LOCK

    values = _values(embedder)
    locks = backend.entry_locks(early=True) % (*EMBEDDER_LOCK, "%(ns)s")
    first = [
        "BEGIN;",
        _filled(locks, values),
        _filled(backend.ENTRY, values),
        *(f"RESET {setting};" for setting in backend.ENTRY_SETTINGS),
        _filled(scope.NOTING_ONE, values),
    ]
    second = [
        _filled(scope.INSERT, values),
        _filled(scope.STATISTICS + scope.USAGE_PART + "SELECT 1", values, terms="words"),
        "COMMIT;",
        backend.FLUSH + ";",
    ]
    lines = ["\\set r random(1, 9000000000000000000)"]
    for trip in (first, second):
        lines += ["\\startpipeline", *trip, "\\endpipeline"]
    return "\n".join(lines) + "\n"


def replay(url: str, seconds: float, clients: int, pgbench: str) -> dict[str, float]:
    """Run the script from `clients` connections for `seconds`: writes/s, and the failures."""
    with tempfile.TemporaryDirectory(prefix="mem-replay-") as folder:
        path = Path(folder) / "store.sql"
        path.write_text(script(recorded_embedder(url)))
        command = [pgbench, "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1))]
        command += ["-T", str(max(1, round(seconds))), "-f", str(path), url]
        run = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    done = re.search(r"number of transactions actually processed: (\d+)", run.stdout)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", run.stdout)
    if run.returncode != 0 or not done or not tps:
        raise RuntimeError(f"pgbench failed ({run.returncode}): {(run.stderr or run.stdout).strip()[-500:]}")
    failed = re.search(r"number of failed transactions: (\d+)", run.stdout)
    return {
        "writes/s": float(tps.group(1)),
        "writes": float(done.group(1)),
        "failed": float(failed.group(1) if failed else 0),
    }


def replayed_rows(url: str) -> int:
    """Rows the replay wrote (their keys' ids start with "pgb")."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM mem_records WHERE namespace = %s AND kind = 'semantic' AND id LIKE '{\"id\":\"pgb%%'",
            [NS],
        ).fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="a database of a `mem` store (a copy: the replay writes into it)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--print-script", action="store_true", help="print the pgbench script and exit")
    args = parser.parse_args()
    if args.print_script:
        print(script(recorded_embedder(args.url)), end="")
        return
    pgbench = pgbench_path()
    if pgbench is None:
        sys.exit("pgbench not found (it comes with PostgreSQL, and with the `pgserver` package)")
    before = replayed_rows(args.url)
    figures: dict[str, Any] = replay(args.url, args.seconds, args.clients, pgbench)
    figures["rows written"] = replayed_rows(args.url) - before
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
