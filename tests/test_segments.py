"""Issue 13: a shard of several segments (checkpoints from the journals only, tombstones, merges)
answers exactly as one segment holding the same records, and a crash at any step of a merge
loses nothing and brings nothing back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2e_mem import clock
from a2e_mem.backends.files import checkpoint
from a2e_mem.backends.files.engine import PURGE
from a2e_mem.backends.files.shard import scan, seg_name
from a2e_mem.service import MemoryService

WORDS = "alpha beta gamma delta kiwi mango river stone cloud ember frost lumen quartz".split()
QUERIES = ["alpha kiwi", "river stone cloud", "quartz", "ember frost mango beta", "nothing here"]


def service(home: Path) -> MemoryService:
    return MemoryService(home)


def shard_of(svc: MemoryService):
    return svc.backend.shard("proj", "semantic", schema="entries")


def text(seed: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * (seed % 5 + 1)) % len(WORDS)] for i in range(2 + seed % 6))


def put(svc, scope, key: int, seed: int, ttl: int | None = None) -> None:
    entry = {"key": {"k": key}, "content": f"{text(seed)} n{seed}", "tier": "semantic", "tags": [f"t{seed % 3}"]}
    if ttl is not None:
        entry["ttl"] = ttl
    svc.store(scope, [entry])


def checkpoint_now(svc) -> bool:
    """An ordinary (incremental) checkpoint, with the merges the policy asks for."""
    return svc.backend.checkpoint_shard(shard_of(svc), force=True, wait=True)


def purge_now(svc) -> None:
    folder = shard_of(svc).folder
    (folder / PURGE).touch()
    svc.backend.purge_folder(folder)


def answers(svc, scope) -> list:
    """Every query's ranked ids, relevances and total, plus unranked listings and the export."""
    out = []
    for query in QUERIES:
        for tags in ((), ("t1",)):
            found = svc.retrieve(scope, query=query, tier="semantic", limit=50, tags=list(tags))
            out.append((query, tags, found["total"], [(e["key"], e["relevance"]) for e in found["entries"]]))
    listing = svc.retrieve(scope, tier="semantic", limit=100)
    out.append(("", (), listing["total"], sorted(str(e["key"]) for e in listing["entries"])))
    out.append(("export", (), 0, list(svc.export("proj"))))
    return out


def assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for (q, tags, total, entries), (q2, tags2, total2, entries2) in zip(got, want, strict=True):
        assert (q, tags, total) == (q2, tags2, total2)
        if q in ("", "export"):
            assert entries == entries2, q
            continue
        assert [key for key, _ in entries] == [key for key, _ in entries2], (q, tags)
        for (_, rel), (_, rel2) in zip(entries, entries2, strict=True):
            assert rel == pytest.approx(rel2, abs=2e-6), (q, tags)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 14), st.integers(0, 60)),
        st.tuples(st.just("ttl"), st.integers(0, 14), st.integers(0, 60)),
        st.tuples(st.just("del"), st.integers(0, 14), st.just(0)),
        st.tuples(st.just("cp"), st.just(0), st.just(0)),
        st.tuples(st.just("purge"), st.just(0), st.just(0)),
        st.tuples(st.just("tick"), st.just(0), st.just(0)),
    ),
    min_size=5,
    max_size=45,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_many_segments_answer_as_one(home, ops):
    """Differential: after a random mix of puts, overwrites, deletes, expiries, checkpoints,
    merges and purges, the multi-segment shard (as open, and reopened by a fresh process) gives
    the same retrieve results (ids, relevance, total) and the same export as the same records
    rewritten as one segment (`mem gc`)."""
    base = Path(tempfile.mkdtemp(dir=home.parent))
    clock.set_offset(0)
    try:
        svc = service(base)
        scope = svc.scope("proj", "alice")
        put(svc, scope, 100, 1)  # never deleted: the shard is never empty
        elapsed = 0
        model: dict[int, tuple[int, int | None]] = {100: (1, None)}  # key -> (seed, expiry)
        for op, key, seed in ops:
            if op == "put":
                put(svc, scope, key, seed)
                model[key] = (seed, None)
            elif op == "ttl":
                put(svc, scope, key, seed, ttl=5)
                model[key] = (seed, elapsed + 5)
            elif op == "del":
                svc.forget(scope, keys=[{"k": key}], tier="semantic")
                model.pop(key, None)
            elif op == "cp":
                checkpoint_now(svc)
            elif op == "purge":
                purge_now(svc)
            else:
                elapsed += 3
                clock.set_offset(elapsed)
        checkpoint_now(svc)  # the journals too become a segment
        layered = answers(svc, scope)
        listed = svc.retrieve(scope, tier="semantic", limit=100)["entries"]
        live = {k: seed for k, (seed, expires) in model.items() if expires is None or expires > elapsed}
        assert {e["key"]["k"]: e["content"] for e in listed} == {k: f"{text(s)} n{s}" for k, s in live.items()}
        fresh = service(base)
        assert_same(answers(fresh, fresh.scope("proj", "alice")), layered)
        fresh.checkpoint(force=True)
        assert len(shard_of(fresh).segs) == 1
        assert_same(answers(fresh, fresh.scope("proj", "alice")), layered)
    finally:
        clock.set_offset(0)
        shutil.rmtree(base, ignore_errors=True)


def test_ranking_statistics_count_only_live_records(home):
    """BM25's document count, average length and document frequencies count live records only:
    a word made rare by deleting most of its holders (in an older segment) scores as it would in
    a shard that never had them."""
    svc = service(home)
    scope = svc.scope("proj", "alice")
    for key in range(12):
        svc.store(scope, [{"key": {"k": key}, "content": f"kiwi common words {key}", "tier": "semantic"}])
    svc.store(scope, [{"key": {"k": 99}, "content": "kiwi river", "tier": "semantic"}])
    checkpoint_now(svc)
    svc.forget(scope, keys=[{"k": key} for key in range(12)], tier="semantic")
    checkpoint_now(svc)
    assert len(shard_of(svc).segs) == 2
    layered = svc.retrieve(scope, query="kiwi river", tier="semantic")

    clean = service(home.parent / "clean")
    other = clean.scope("proj", "alice")
    clean.store(other, [{"key": {"k": 99}, "content": "kiwi river", "tier": "semantic"}])
    clean.checkpoint(force=True)
    reference = clean.retrieve(other, query="kiwi river", tier="semantic")
    assert layered["total"] == reference["total"] == 1
    assert layered["entries"][0]["relevance"] == reference["entries"][0]["relevance"]


def test_a_checkpoint_writes_only_what_changed(home):
    """The second checkpoint writes a segment of the new records alone; the first stays as it was."""
    svc = service(home)
    scope = svc.scope("proj", "alice")
    for key in range(20):
        put(svc, scope, key, key)
    checkpoint_now(svc)
    folder = shard_of(svc).folder
    (first,) = scan(folder)[0]
    data = (folder / seg_name(*first) / "data.json").read_bytes()
    put(svc, scope, 50, 3)
    put(svc, scope, 3, 9)  # an overwrite of a record of the first segment
    svc.forget(scope, keys=[{"k": 4}], tier="semantic")
    checkpoint_now(svc)
    ranges, wals = scan(folder)
    assert ranges == [first, (first[1] + 1, first[1] + 1)]
    assert (folder / seg_name(*first) / "data.json").read_bytes() == data
    newest = folder / seg_name(*ranges[-1])
    assert orjson.loads((newest / "meta.json").read_bytes())["count"] == 2
    tombs = orjson.loads((newest / "tombs.json").read_bytes())
    assert len(tombs) == 1  # the delete; the overwrite shadows its older version by holding the id
    assert all(w > ranges[-1][1] for w in wals)


def test_a_deleted_record_never_comes_back(home, monkeypatch):
    """A record of an old segment deleted later stays deleted: after restart, after merges that
    leave its segment out, after merges that take it in, after gc."""
    monkeypatch.setattr(checkpoint, "MIN_JOURNAL_BYTES", 100)  # tiers from 100 bytes: A is above the rest
    svc = service(home)
    scope = svc.scope("proj", "alice")
    put(svc, scope, 1, 1)
    put(svc, scope, 2, 2)
    for n in range(40):
        put(svc, scope, 1000 + n, n)
    checkpoint_now(svc)  # segment A holds 1, 2 and many more
    svc.forget(scope, keys=[{"k": 1}], tier="semantic")
    put(svc, scope, 3, 3)
    checkpoint_now(svc)  # segment B: 3, and a tombstone for 1

    def keys(s):
        found = s.retrieve(s.scope("proj", "alice"), tier="semantic", limit=100)["entries"]
        return sorted(e["key"]["k"] for e in found if e["key"]["k"] < 1000)

    assert keys(service(home)) == [2, 3]
    for n in range(4, 10):  # segments C.. merge with B (not A) under the policy
        put(svc, scope, n, n)
        checkpoint_now(svc)
        fresh = service(home)
        assert keys(fresh) == [2, 3, *range(4, n + 1)]
        assert fresh.backend.shard("proj", "semantic", schema="entries").get('{"k":1}', clock.now()) is None
    ranges, _ = scan(shard_of(svc).folder)
    assert ranges[0] == (1, 1) and len(ranges) < 6, "the policy merged the newer segments, not the first"
    service(home).checkpoint(force=True)
    assert keys(service(home)) == [2, *range(3, 10)]
    assert len(scan(shard_of(service(home)).folder)[0]) == 1


def test_an_expired_overwrite_does_not_resurrect_the_older_version(home):
    svc = service(home)
    scope = svc.scope("proj", "alice")
    put(svc, scope, 1, 1)
    checkpoint_now(svc)
    put(svc, scope, 1, 2, ttl=5)  # a newer version that expires
    checkpoint_now(svc)
    clock.set_offset(10)
    purge_now(svc)  # the expired version is purged: the older one must stay shadowed
    fresh = service(home)
    assert fresh.retrieve(fresh.scope("proj", "alice"), tier="semantic")["entries"] == []


def test_a_purge_rewrites_every_segment_holding_forgotten_content(home):
    """The README's forget promise: a purge checkpoint leaves no file holding the forgotten text."""
    svc = service(home)
    scope = svc.scope("proj", "alice")
    svc.store(scope, [{"key": {"k": "zebra-key"}, "content": "secret-zebra-phrase", "tier": "semantic"}])
    checkpoint_now(svc)
    for n in range(2, 5):
        put(svc, scope, n, n)
        checkpoint_now(svc)
    svc.forget(scope, keys=[{"k": "zebra-key"}], tier="semantic")
    checkpoint_now(svc)  # an ordinary checkpoint first: it records a tombstone (the id) for the purge to drop
    assert any(b"zebra-key" in p.read_bytes() for p in shard_of(svc).folder.glob("seg-*/tombs.json"))
    purge_now(svc)
    folder = shard_of(svc).folder
    for path in folder.rglob("*"):
        if path.is_file():
            assert b"zebra" not in path.read_bytes(), path  # neither the content nor the key
    assert sorted(e["key"]["k"] for e in svc.retrieve(scope, tier="semantic")["entries"]) == [2, 3, 4]


def test_segment_count_stays_bounded(home):
    svc = service(home)
    scope = svc.scope("proj", "alice")
    most = 0
    for n in range(60):
        put(svc, scope, n, n)
        checkpoint_now(svc)
        most = max(most, len(scan(shard_of(svc).folder)[0]))
        assert len(shard_of(svc).segs) <= checkpoint.MAX_SEGMENTS
    assert 1 < most <= checkpoint.FANOUT
    assert svc.retrieve(scope, tier="semantic", limit=100)["total"] == 60


def test_the_merge_policy():
    """Size-tiered: FANOUT segments of one tier merge (with any smaller ones after them); never
    more than MAX_SEGMENTS."""
    floor = 100.0
    assert checkpoint.plan_merge([1000, 10, 10, 10], floor) is None
    assert checkpoint.plan_merge([1000, 10, 10, 10, 10], floor) == (1, 5)
    assert checkpoint.plan_merge([6400, 1600, 1600, 1600, 400, 100], floor) is None
    assert checkpoint.plan_merge([6400, 1600, 1600, 1600, 1600, 100], floor) == (1, 6)
    assert checkpoint.plan_merge([10**9 // 4**i for i in range(9)], floor) == (7, 9)  # over 8: smallest pair


# -- crashes during a merge ---------------------------------------------------------------------


def layered_store(home: Path):
    """A shard of four segments (the policy off), with an overwrite and a delete across them."""
    svc = service(home)
    scope = svc.scope("proj", "alice")
    for batch in range(4):
        for n in range(5):
            put(svc, scope, batch * 5 + n, batch * 5 + n)
        if batch == 2:
            put(svc, scope, 1, 77)  # overwrites a record of the first segment
            svc.forget(scope, keys=[{"k": 2}], tier="semantic")
        checkpoint_now(svc)
    return svc, scope


@pytest.fixture
def no_merges(monkeypatch):
    monkeypatch.setattr(checkpoint, "FANOUT", 100)


@pytest.mark.parametrize("step", ["tmp-left", "renamed", "half-removed"])
def test_a_crash_at_any_step_of_a_merge_opens_to_the_same_records(home, no_merges, step):
    svc, scope = layered_store(home)
    folder = shard_of(svc).folder
    assert len(scan(folder)[0]) == 4
    before = answers(svc, scope)
    shard = shard_of(svc)
    inputs = [seg.folder for seg in shard.segs[1:]]
    if step == "tmp-left":  # killed while writing the merged segment
        partial = folder / f"tmp-{seg_name(shard.segs[1].lo, shard.seg_gen)}-999999"
        partial.mkdir(mode=0o700)
        (partial / "data.json").write_bytes(b'{"records": {"1": {"id"')
    else:
        with checkpoint.building(folder):
            checkpoint._write_range(shard, folder, 1, None, "hash", last=len(shard.segs))  # renamed into place
        if step == "half-removed":  # killed while deleting its inputs
            shutil.rmtree(inputs[0])
            for name in ("vectors.npy", "manifest.json"):
                (inputs[1] / name).unlink()
    fresh = service(home)
    assert_same(answers(fresh, fresh.scope("proj", "alice")), before)
    assert fresh.doctor() == []
    checkpoint_now(fresh)  # the next builder removes what the dead one left
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith(("seg-", "tmp-")))
    assert not any(n.startswith("tmp-") for n in names)
    assert len(names) == (4 if step == "tmp-left" else 2)
    final = service(home)
    assert_same(answers(final, final.scope("proj", "alice")), before)


def test_killing_the_detached_builder_mid_merge_loses_nothing(home, no_merges, monkeypatch):
    """kill -9 of a real builder process while it merges, at several points of its work."""
    svc, scope = layered_store(home)
    before = answers(svc, scope)
    folder = shard_of(svc).folder
    monkeypatch.setattr(checkpoint, "FANOUT", 4)  # the builder below merges the four segments
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from a2e_mem.backends.files import checkpoint\n"
        "from a2e_mem.backends.files.engine import Engine\n"
        "point = sys.argv[3]\n"
        "real_install, real_remove = checkpoint.install_segment, checkpoint.remove_replaced\n"
        "def install(folder, name, *a, **k):\n"
        "    if point == 'writing':\n"
        "        os.makedirs(folder / f'tmp-{name}-{os.getpid()}')\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real_install(folder, name, *a, **k)\n"
        "    if point == 'installed':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "checkpoint.install_segment = install\n"
        "Engine(Path(sys.argv[1])).checkpoint_folder(Path(sys.argv[2]), force=True)\n"
    )
    for point in ("writing", "installed"):
        done = subprocess.run([sys.executable, "-c", script, str(home), str(folder), point], env={**os.environ})
        assert done.returncode == -9
        fresh = service(home)
        assert_same(answers(fresh, fresh.scope("proj", "alice")), before)
    checkpoint_now(service(home))
    final = service(home)
    assert_same(answers(final, final.scope("proj", "alice")), before)
    assert len(final.backend.shard("proj", "semantic", schema="entries").segs) == 1


def test_doctor_checks_every_segment_and_repair_salvages_each(home, no_merges):
    svc, scope = layered_store(home)
    folder = shard_of(svc).folder
    ranges, _ = scan(folder)
    damaged = folder / seg_name(*ranges[1]) / "scores.npy"
    damaged.write_bytes(b"garbage")
    findings = service(home).doctor()
    assert [f["where"] for f in findings] == [str(damaged.relative_to(home))]
    repaired = service(home).doctor(repair=True)
    assert repaired[-1]["lost"] == 0
    fresh = service(home)
    listed = fresh.retrieve(fresh.scope("proj", "alice"), tier="semantic", limit=50)["entries"]
    keys = sorted(e["key"]["k"] for e in listed)
    assert keys == [n for n in range(20) if n != 2]
    assert fresh.doctor() == []


@pytest.mark.parametrize("lost", [-1, 1])  # the newest segment, a middle one
def test_repair_keeps_the_records_of_the_segments_a_lost_one_leaves(home, no_merges, lost):
    """A second audit: a lost segment made --repair drop every older, intact segment too. The
    records of every segment left are kept, and the report says the count is unknown."""
    svc, scope = layered_store(home)
    folder = shard_of(svc).folder
    ranges, _ = scan(folder)
    shutil.rmtree(folder / seg_name(*ranges[lost]))
    gone = set(range(ranges.index(ranges[lost]) * 5, ranges.index(ranges[lost]) * 5 + 5))
    repaired = service(home).doctor(repair=True)
    assert repaired[-1]["lost"] is None and "may be back in an older version" in repaired[-1]["repair"]
    fresh = service(home)
    keys = {e["key"]["k"] for e in fresh.retrieve(fresh.scope("proj", "alice"), tier="semantic", limit=50)["entries"]}
    assert keys >= {n for n in range(20) if n != 2} - gone - {1, 2}  # every intact segment's records
    assert len(keys) >= 20 - len(gone) - 2


def test_damaged_tombstones_that_still_parse_are_not_applied(home, no_merges):
    """A second audit: a tombs.json rewritten with a live id deleted that record on --repair,
    which then said nothing was lost."""
    svc, scope = layered_store(home)
    folder = shard_of(svc).folder
    ranges, _ = scan(folder)
    (folder / seg_name(*ranges[-1]) / "tombs.json").write_bytes(orjson.dumps([orjson.dumps({"k": 0}).decode()]))
    repaired = service(home).doctor(repair=True)
    assert repaired[-1]["lost"] is None and "damaged tombstones not applied" in repaired[-1]["repair"]
    fresh = service(home)
    keys = {e["key"]["k"] for e in fresh.retrieve(fresh.scope("proj", "alice"), tier="semantic", limit=50)["entries"]}
    assert 0 in keys


# -- mem gc tells the truth ------------------------------------------------------------------------


def test_gc_counts_what_it_did_and_waits_for_a_running_builder(home):
    svc = service(home)
    scope = svc.scope("proj", "alice")
    for n in range(5):
        put(svc, scope, n, n)
    folder = shard_of(svc).folder
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from a2e_mem.backends.files import checkpoint\n"
            "with checkpoint.building(Path(sys.argv[1])):\n"
            "    print('held', flush=True)\n"
            "    sys.stdin.readline()\n",
            str(folder),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        seen = []

        def release_after_waiting(done, total):
            seen.append((done, total))

        releaser = threading.Timer(0.5, lambda: (holder.stdin.write("\n"), holder.stdin.flush()))
        releaser.start()
        report = svc.backend.collect(progress=release_after_waiting)
    finally:
        holder.wait(timeout=30)
    assert report == {"shards": 1, "checkpointed_shards": 1, "merges": 0, "waited_for_running": 1}
    assert seen == [(1, 1)]
    assert svc.backend.collect() == {"shards": 1, "checkpointed_shards": 0, "merges": 0, "waited_for_running": 0}


def test_a_store_written_before_segments_opens_unchanged(home):
    """A store of the version before segments: one `seg-<gen>` whose postings hold each term's
    BM25 part computed with that segment's own average length (`lex_part.npy`) and no
    tombstones. It opens, ranks as before, and takes new segments on top."""
    import numpy as np

    from a2e_mem.backends.files.integrity import read_manifest, write_manifest
    from a2e_mem.lexical import K1, B

    svc = service(home)
    scope = svc.scope("proj", "alice")
    for n in range(30):
        put(svc, scope, n, n)
    svc.checkpoint(force=True)
    before = answers(svc, scope)
    (seg,) = shard_of(svc).folder.glob("seg-*")
    assert seg.name == "seg-00000001"
    doclen = np.load(seg / "doclen.npy")
    rows, tf = np.load(seg / "lex_rows.npy"), np.load(seg / "lex_tf.npy")
    avgdl = max(float(doclen.mean()), 1.0)
    part = tf * (K1 + 1) / (tf + K1 * (1 - B + B * doclen[rows] / avgdl))  # as the older version wrote it
    np.save(seg / "lex_part.npy", part.astype(np.float32))
    (seg / "lex_tf.npy").unlink()
    (seg / "tombs.json").unlink()
    manifest = read_manifest(seg)
    (seg / "manifest.json").unlink()
    write_manifest(seg, {"meta": manifest["meta"], "shard": manifest["shard"]})
    for path in seg.iterdir():
        path.chmod(0o600)

    old = service(home)
    assert_same(answers(old, old.scope("proj", "alice")), before)
    assert old.doctor() == []
    svc = service(home)
    scope = svc.scope("proj", "alice")
    put(svc, scope, 3, 99)
    svc.forget(scope, keys=[{"k": 4}], tier="semantic")
    checkpoint_now(svc)
    assert sorted(p.name for p in shard_of(svc).folder.glob("seg-*")) == ["seg-00000001", "seg-00000002-00000002"]
    listed = svc.retrieve(scope, tier="semantic", limit=100)["entries"]
    assert sorted(e["key"]["k"] for e in listed) == [n for n in range(30) if n != 4]


def test_mem_gc_prints_its_report(home):
    """`mem gc` prints what it did: the second run finds nothing left to do and says so."""

    def gc() -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "a2e_mem.cli.main", "gc", "--format", "json"],
            capture_output=True,
            text=True,
            env={**os.environ, "MEM_HOME": str(home)},
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return orjson.loads(out.stdout)

    svc = service(home)
    scope = svc.scope("proj", "alice")
    put(svc, scope, 1, 1)
    checkpoint_now(svc)
    put(svc, scope, 2, 2)
    checkpoint_now(svc)  # two segments
    put(svc, scope, 3, 3)  # and a journal
    assert gc() == {"shards": 1, "checkpointed_shards": 1, "merges": 0, "waited_for_running": 0}
    assert len(scan(shard_of(service(home)).folder)[0]) == 1
    assert gc() == {"shards": 1, "checkpointed_shards": 0, "merges": 0, "waited_for_running": 0}


def test_get_last_and_usage_across_segments(home):
    svc = service(home)
    scope = svc.scope("proj", "alice")
    put(svc, scope, 1, 1)
    put(svc, scope, 2, 2)
    checkpoint_now(svc)
    put(svc, scope, 3, 3)
    put(svc, scope, 1, 5)  # overwrites a record of the first segment, and is the last write
    checkpoint_now(svc)
    svc.forget(scope, keys=[{"k": 2}], tier="semantic")  # in the journal only
    shard = shard_of(service(home))
    now = clock.now()
    assert len(shard.segs) == 2
    assert shard.get('{"k":1}', now)["content"] == f"{text(5)} n5"
    assert shard.get('{"k":2}', now) is None
    assert shard.last(now)["key"] == {"k": 1}
    count, size = shard.usage(now)
    assert count == 2
    assert size == sum(len(orjson.dumps(shard.get(f'{{"k":{k}}}', now))) for k in (1, 3))
    assert [d["key"]["k"] for d in shard.docs(now)] == [3, 1]


def test_records_are_listed_in_order_of_writing_when_a_freed_slot_is_reused():
    """An overwrite takes the slot its old version freed: listing order (which breaks ties of
    one millisecond) must still be the order of writing."""
    from a2e_mem.backends.files.memtable import Memtable

    table = Memtable(0, None)
    for rid in ("a", "b"):
        table.put(rid, {"id": rid}, 1, None)
    table.put("a", {"id": "a", "v": 2}, 1, None)
    assert [doc["id"] for _, doc in table.items()] == ["b", "a"]


def test_find_gives_the_same_rows_before_and_after_it_sorts_the_id_hashes(home):
    """A few finds search the hash column through its sort order; past FIND_WITH_SORTER, a
    sorted copy made once (issue 13)."""
    from a2e_mem.backends.files.segment import FIND_WITH_SORTER

    svc = service(home)
    scope = svc.scope("proj", "alice")
    svc.store(scope, [{"key": {"k": i}, "content": f"note {i}", "tier": "semantic"} for i in range(40)])
    svc.checkpoint(force=True)
    seg = service(home).engine.shard("proj", "semantic", schema="entries").seg
    ids = [seg.doc(row)["id"] for row in range(seg.n)]
    asked = [*ids[: FIND_WITH_SORTER // 2], "absent", *ids[FIND_WITH_SORTER // 2 :], "also absent"]
    found = []
    for rid in asked:
        found.append(seg.find(rid))
        assert ("_sorted_hashes" in seg.__dict__) == (len(found) > FIND_WITH_SORTER)
    expected = [*range(FIND_WITH_SORTER // 2), None, *range(FIND_WITH_SORTER // 2, seg.n), None]
    assert found == expected
