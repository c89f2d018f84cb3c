"""Journals, checkpoints and recovery: what is acknowledged is there after any crash."""

from __future__ import annotations

import logging
import os

import orjson
import pytest
from tinydb import TinyDB

from a2e_mem.backends.files.integrity import unseal
from a2e_mem.backends.files.journal import Journal
from a2e_mem.backends.files.shard import listing
from a2e_mem.errors import InvalidInput
from a2e_mem.service import MemoryService

from .conftest import entry


def shard_folder(home):
    (folder,) = {p.parent for p in home.rglob("wal-*.ndjson")} | {p.parent for p in home.rglob("seg-*")}
    return folder


def test_journal_reads_only_complete_lines(tmp_path):
    journal = Journal.create(tmp_path / "wal-00000001.ndjson", 1)
    journal.append({"op": "del", "ids": ["1"]})
    with open(journal.path, "ab") as f:
        f.write(b'{"op": "del", "ids": ["2"]')  # a writer died mid-line
    reader = Journal(journal.path, 1)
    assert list(reader.read_new()) == [{"op": "del", "ids": ["1"]}]
    assert list(reader.read_new()) == []


def test_append_cuts_a_torn_tail_instead_of_merging_into_it(tmp_path):
    journal = Journal.create(tmp_path / "wal-00000001.ndjson", 1)
    journal.append({"n": 1})
    with open(journal.path, "ab") as f:
        f.write(b'{"n": 2, "torn')
    writer = Journal(journal.path, 1)
    list(writer.read_new())
    writer.append({"n": 3})
    lines = [orjson.loads(unseal(x)[0]) for x in journal.path.read_bytes().splitlines()]
    assert lines == [{"n": 1, "line": 1}, {"n": 3, "line": 2}]  # each line numbered in the file


def test_recovery_after_a_torn_write_keeps_every_acknowledged_entry(home):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, f"fact {i}") for i in range(5)])
    wal = next(home.rglob("wal-*.ndjson"))
    with open(wal, "ab") as f:
        f.write(b'{"op":"put","recs":[{"id":"x","doc":{"id":')
    fresh = MemoryService(home)
    assert fresh.retrieve(fresh.scope("ns", "a"), limit=100)["total"] == 5
    fresh.store(fresh.scope("ns", "a"), [entry("after", "written after the crash")])
    assert MemoryService(home).retrieve(fresh.scope("ns", "a"), limit=100)["total"] == 6


def test_checkpoint_is_a_tinydb_file_and_state_is_unchanged(home):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, f"fact number {i}", tags=["even"] if i % 2 == 0 else []) for i in range(20)])
    svc.forget(s, keys=[{"k": 3}])
    svc.store(s, [entry(4, "fact four, rewritten")])
    before = svc.retrieve(s, limit=100)
    assert svc.checkpoint() == 1
    folder = shard_folder(home)
    segs, wals = listing(folder)
    assert len(segs) == 1 and all(w > segs[0] for w in wals)
    docs = TinyDB(folder / f"seg-{segs[0]:08d}" / "data.json").table("records").all()
    assert len(docs) == 19 and {d["content"] for d in docs} >= {"fact four, rewritten"}
    after = MemoryService(home).retrieve(s, limit=100)
    assert after == before
    assert svc.retrieve(s, limit=100) == before  # the writer's own view switches to the checkpoint too


def test_writes_after_a_checkpoint_replay_on_top_of_it(home):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, f"v{i}") for i in range(10)])
    svc.checkpoint()
    svc.store(s, [entry(1, "changed"), entry(10, "new")])
    svc.forget(s, keys=[{"k": 2}])
    result = MemoryService(home).retrieve(s, limit=100)
    contents = {e["key"]["k"]: e["content"] for e in result["entries"]}
    assert result["total"] == 10 and contents[1] == "changed" and 2 not in contents and contents[10] == "new"


def test_a_long_lived_reader_follows_checkpoints_made_elsewhere(home):
    reader = MemoryService(home)
    s = reader.scope("ns", "a")
    writer = MemoryService(home)
    writer.store(s, [entry(i, "x") for i in range(3)])
    assert reader.retrieve(s)["total"] == 3
    writer.checkpoint()
    writer.store(s, [entry(9, "y")])
    assert reader.retrieve(s)["total"] == 4
    writer.checkpoint()
    assert reader.retrieve(s, keys=[{"k": 9}])["entries"][0]["content"] == "y"


def test_interrupted_checkpoint_leaves_a_readable_store(home):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, "x") for i in range(3)])
    folder = shard_folder(home)
    (folder / "tmp-00000001-99999").mkdir()  # a checkpoint died before its rename
    (folder / "tmp-00000001-99999" / "data.json").write_text("{garbage")
    assert MemoryService(home).retrieve(s)["total"] == 3
    svc.checkpoint()
    assert not (folder / "tmp-00000001-99999").exists()


def test_files_are_private(home):
    svc = MemoryService(home)
    svc.store(svc.scope("ns", "a"), [entry(1, "secret")])
    svc.checkpoint()
    for path in home.rglob("*"):
        mode = os.stat(path).st_mode & 0o777
        assert mode & 0o077 == 0, f"{path.relative_to(home)} is {oct(mode)}"


@pytest.mark.parametrize("name", ["../../etc", "/abs/path", "nul\x00byte", "ü" * 300, "a" * 1024, "..", "CON"])
def test_hostile_names_never_become_paths(home, name):
    svc = MemoryService(home)
    if "\x00" in name:
        with pytest.raises(InvalidInput):
            svc.init(name, name)
        return
    s = svc.init(name, name)
    svc.store(s, [entry(name, name, tags=[name[:200]])])
    assert svc.retrieve(s, keys=[{"k": name}])["total"] == 1
    for path in home.rglob("*"):
        assert path.resolve().is_relative_to(home.resolve())
        assert len(path.name) <= 64


def deletes(ops):
    """The ids of each delete among `ops` (the header line is an operation too)."""
    return [op["ids"] for op in ops if op["op"] == "del"]


def test_journal_lines_are_numbered_across_writers_and_a_lost_block_is_found(tmp_path):
    from a2e_mem.backends.files.integrity import lines_lost, scan_journal

    path = tmp_path / "wal-00000001.ndjson"
    first = Journal.create(path, 1, {"schema": "records"})  # a header line, then appends unread
    first.append({"op": "del", "ids": ["a"]})
    first.append({"op": "del", "ids": ["b"]})
    second = Journal(path, 1)  # another process: reads to the end, then appends
    assert deletes(second.read_new()) == [["a"], ["b"]]
    second.append({"op": "del", "ids": ["c"]})
    assert deletes(first.read_new()) == [["a"], ["b"], ["c"]]  # the numbers are not handed back
    first.append({"op": "del", "ids": ["d"]})
    assert scan_journal(path)[1] == []  # 1 header + 4 lines, numbered 2 to 5 whoever wrote them
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + lines[4:]))  # lines 3 and 4 gone: no checksum can see it
    ops, bad = scan_journal(path)
    assert deletes(ops) == [["a"], ["d"]]
    assert bad == [(3, "2 lines before it are missing")] and lines_lost(bad) == 2
    reader = Journal(path, 1)
    warned: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warned.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("mem").addHandler(handler)
    try:
        assert deletes(reader.read_new()) == [["a"], ["d"]] and reader.skipped  # kept aside at a checkpoint
    finally:
        logging.getLogger("mem").removeHandler(handler)
    assert any("line 3 of" in text and "2 lines before it are missing" in text for text in warned), warned


def test_a_repeated_journal_line_is_skipped_and_reported_not_applied_again(tmp_path):
    """Found by an outside audit: a put copied to the end of a journal (after the delete of its
    record) brought the deleted record back, and doctor reported nothing."""
    from a2e_mem.backends.files.integrity import lines_lost, scan_journal

    path = tmp_path / "wal-00000001.ndjson"
    journal = Journal.create(path, 1, {"schema": "records"})
    journal.append({"op": "del", "ids": ["a"]})
    journal.append({"op": "del", "ids": ["b"]})
    journal.append({"op": "del", "ids": ["c"]})
    header, a, b, c = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(header + a + b + c + a)  # line 2 again, at the end
    ops, bad = scan_journal(path)
    assert deletes(ops) == [["a"], ["b"], ["c"]]
    assert bad == [(5, "repeats an earlier line (it says it is line 2): skipped")] and lines_lost(bad) == 0
    reader = Journal(path, 1)
    assert deletes(reader.read_new()) == [["a"], ["b"], ["c"]] and reader.skipped == 1
    path.write_bytes(header + a + c + b)  # two lines swapped: reported once, both applied
    ops, bad = scan_journal(path)
    assert deletes(ops) == [["a"], ["c"], ["b"]] and [n for n, _ in bad] == [3] and lines_lost(bad) == 0
    path.write_bytes(header + c + a + b)  # the last line moved first (an outside audit: every line after it was lost)
    ops, bad = scan_journal(path)
    moved = "is out of place (2 lines numbered before it come after it): applied"
    assert deletes(ops) == [["c"], ["a"], ["b"]] and bad == [(2, moved)]
    assert deletes(Journal(path, 1).read_new()) == [["c"], ["a"], ["b"]]
    path.write_bytes(header + a + b"garbage\n" + b + c)  # a line inserted: reported once, nothing skipped
    ops, bad = scan_journal(path)
    assert deletes(ops) == [["a"], ["b"], ["c"]] and bad == [(3, "no checksum")]
    writer = Journal(path, 1)
    list(writer.read_new())
    writer.append({"op": "del", "ids": ["d"]})  # numbered after what it read: no report
    assert scan_journal(path)[1] == [(3, "no checksum")]


def test_a_last_line_that_lost_only_its_newline_is_read_and_the_next_append_ends_it(tmp_path):
    """A final byte cut off a journal (`truncate -s -1`, an editor that strips the last newline)
    left its last line, an acknowledged write, without a newline: readers dropped it as a torn
    write and the next writer cut it off. Its checksum holds, so it is read, and kept."""
    journal = Journal.create(tmp_path / "wal-00000001.ndjson", 1)
    journal.append({"op": "del", "ids": ["1"]})
    journal.append({"op": "del", "ids": ["2"]})
    os.truncate(journal.path, journal.path.stat().st_size - 1)
    early = Journal(journal.path, 1)
    assert list(early.read_new()) == [{"op": "del", "ids": ["1"]}, {"op": "del", "ids": ["2"]}]
    writer = Journal(journal.path, 1)
    list(writer.read_new())
    writer.append({"op": "del", "ids": ["3"]})
    lines = journal.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [orjson.loads(unseal(x)[0])["line"] for x in lines[:-1]] == [1, 2, 3]
    assert list(early.read_new()) == [{"op": "del", "ids": ["3"]}] and early.skipped == 0
    again = Journal(journal.path, 1)
    assert [op["ids"] for op in again.read_new()] == [["1"], ["2"], ["3"]] and again.skipped == 0


def test_a_write_whose_newline_was_cut_off_survives_the_next_writes_and_a_checkpoint(home, monkeypatch):
    monkeypatch.setenv("MEM_CHECKPOINTS", "off")
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, f"fact {i}") for i in range(3)])
    (wal,) = home.rglob("wal-*.ndjson")
    os.truncate(wal, wal.stat().st_size - 1)
    fresh = MemoryService(home)
    assert fresh.retrieve(fresh.scope("ns", "a"), limit=100)["total"] == 3
    fresh.store(fresh.scope("ns", "a"), [entry("after", "written after the cut")])
    assert fresh.checkpoint() == 1
    keys = {e["key"]["k"] for e in MemoryService(home).retrieve(fresh.scope("ns", "a"), limit=100)["entries"]}
    assert keys == {0, 1, 2, "after"}
