"""The pieces of `bench/bench_backends.py` and `bench/bench_quality.py` that decide what is
measured (no timing is asserted): the generated export is what `mem export` writes, store URLs
are printed without their password, and the quality comparison says "NO" past 2 points."""

from __future__ import annotations

from pathlib import Path

from a2e_mem.backends.base import Filters
from a2e_mem.service import MemoryService
from bench.bench_backends import export_file, shown_url, top_ids, with_database
from bench.bench_quality import print_comparison
from tests.pg import pg_server, pg_url  # noqa: F401 (fixtures)


def test_generated_export_is_what_mem_export_writes(tmp_path: Path) -> None:
    dump = tmp_path / "dump.ndjson"
    export_file(dump, 40)
    svc = MemoryService(tmp_path / "home")
    counts = svc.import_records(dump.read_bytes().splitlines())
    assert counts == {"new": 40, "changed": 0, "unchanged": 0}
    assert b"".join(line + b"\n" for line in svc.export()) == dump.read_bytes()
    svc.close()


def test_top_ids_ranks_by_cosine_across_parts(tmp_path: Path) -> None:
    dump = tmp_path / "dump.ndjson"
    export_file(dump, 30)
    svc = MemoryService(tmp_path / "home")
    svc.import_records(dump.read_bytes().splitlines())
    scope = svc.backend.scope("bench", "semantic", schema="entries")
    qvec = svc.backend.embed(["the tax return"])[0]
    parts = scope.search(0.0, Filters(), qvec, "", k=10, exhaustive=True)
    found, path = top_ids(parts, k=5)
    cosines = sorted(((float(v), part.doc(i)["id"]) for part in parts for i, v in enumerate(part.vector)), reverse=True)
    assert found == {rid for _, rid in cosines[:5]}
    assert path == "exact"
    svc.close()


def test_urls_are_shown_without_password() -> None:
    url = "postgresql://mem:s3cret@db.example:5432/mem?sslmode=require"
    assert "s3cret" not in shown_url(url)
    assert shown_url(url) == "postgresql://mem:***@db.example:5432/mem?sslmode=require"
    assert shown_url("postgresql://postgres:@/postgres?host=/tmp/x") == "postgresql://postgres:@/postgres?host=/tmp/x"
    assert (
        with_database(url, "mem_bench_1_load")
        == "postgresql://mem:s3cret@db.example:5432/mem_bench_1_load?sslmode=require"
    )


def test_quality_comparison_flags_a_gap_over_two_points(capsys) -> None:  # type: ignore[no-untyped-def]
    def figures(hit5: float, hit10: float) -> dict:
        one = {"hit@1": 0.5, "hit@5": hit5, "hit@10": hit10, "MRR": 0.6, "n": 100}
        return {None: one, "keyword": one, "paraphrase": one}

    print_comparison({"files": figures(0.70, 0.80), "postgres": figures(0.69, 0.77)}, ["files", "postgres"])
    out = capsys.readouterr().out
    assert "at hit@5, all questions: yes (+1.0 points behind)" in out
    assert "at hit@10, all questions: NO (+3.0 points behind)" in out


def test_cpu_accounting_finds_the_servers_processes_on_this_machine(tmp_path: Path, pg_url) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    import os

    from bench.bench_backends import Postgres, _comm, cpu_seconds

    server = Postgres(pg_url, tmp_path)
    pids = server.local_pids()
    # the postmaster first; a backend of another test's connection may have ended since ("")
    assert pids and _comm(pids[0]) == "postgres" and all(_comm(pid) in ("postgres", "") for pid in pids)
    assert cpu_seconds(pids) > 0
    # a pid not running adds 0 (compared alone: this process's own CPU moves between two reads,
    # which failed CI once, 34.41 against 34.42)
    assert cpu_seconds([2**22 + 12345]) == 0 and cpu_seconds([os.getpid()]) > 0


def test_the_write_replay_sends_what_a_store_sends(tmp_path: Path, pg_url) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """`pg_replay.py`'s pgbench script writes records `mem` reads back, and keeps the statistics
    and counters in step as a store does: the replayed statements are the backend's own."""
    import orjson
    import psycopg

    from a2e_mem.ops.transfer import export_records
    from bench import pg_replay

    svc = MemoryService(tmp_path / "home", store=pg_url)
    try:
        svc.backend.embed(["warm up"])
        session = svc.a2e.open_session("bench", "replay-test")
        svc.a2e.store(session, [{"key": {"id": "mine"}, "content": "a first entry of the store", "tier": "semantic"}])
    finally:
        svc.close()
    pgbench = pg_replay.pgbench_path()
    assert pgbench is not None  # it comes with pgserver, in the test extra
    done = pg_replay.replay(pg_url, 1, 2, pgbench)
    assert done["writes"] > 0 and done["failed"] == 0
    assert pg_replay.replayed_rows(pg_url) == done["writes"]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT count(*), sum(size) FROM mem_records WHERE namespace = 'bench'").fetchone()
        scope = conn.execute("SELECT n_docs, bytes FROM mem_scopes WHERE namespace = 'bench'").fetchone()
        usage = conn.execute("SELECT entries, bytes FROM mem_usage WHERE namespace = 'bench'").fetchone()
    assert rows == scope == usage and rows[0] == done["writes"] + 1
    svc = MemoryService(tmp_path / "home", store=pg_url)
    try:
        session = svc.a2e.open_session("bench", "replay-test")
        found = svc.a2e.retrieve(session, query=pg_replay.TEXT, limit=3)
        assert found["total"] == done["writes"] + 1
        key = found["entries"][0]["key"]
        assert found["entries"][0]["content"] == pg_replay.TEXT and key["id"].startswith("pgb")
        # records as mem writes them (audit 30d: the first replay's could not be exported)
        assert svc.a2e.retrieve(session, keys=[key])["entries"][0]["key"] == key
        exported = [orjson.loads(line) for line in export_records(svc.backend, "bench")]
        assert len(exported) == done["writes"] + 1 and all(r["id"] == r["doc"]["id"] for r in exported)
    finally:
        svc.close()
