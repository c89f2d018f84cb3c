"""Issue 13: a checkpoint file verified in full once is not hashed again by later processes
while its size, times and inode are unchanged (`stamps.py`); a changed file is hashed and
caught on load, and `mem doctor` hashes everything regardless of stamps."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from a2e_mem.backends.files import integrity, segment, stamps
from a2e_mem.errors import Damaged
from a2e_mem.service import MemoryService

HOUR_NS = 3600 * 10**9


@pytest.fixture
def later(monkeypatch):
    """Verifications happen an hour after the files were written (old enough to be stamped)."""
    monkeypatch.setattr(stamps, "_clock", lambda: time.time_ns() + HOUR_NS)


def build(home: Path) -> Path:
    """A checkpoint of 30 entries (vectors and Annoy index); returns its folder."""
    svc = MemoryService(home)
    facts = [{"key": {"k": i}, "content": f"fact {i} about topic{i % 7}", "tier": "semantic"} for i in range(30)]
    svc.store(svc.scope("proj", "alice"), facts)
    svc.checkpoint(force=True)
    svc.close()
    (seg,) = home.rglob("seg-*")
    return seg


def open_checkpoint(home: Path) -> segment.Segment:
    seg = MemoryService(home).engine.shard("proj", "semantic", schema="entries").seg
    assert seg is not None
    return seg


def use_big_files(home: Path) -> segment.Segment:
    """Open the checkpoint in a new service and use its vectors and index (both verified first)."""
    seg = open_checkpoint(home)
    assert len(seg.vectors) == seg.n
    assert seg.index is not None
    return seg


def recorded(seg_folder: Path) -> dict:
    return integrity.read_sealed(seg_folder.parent / stamps.FILE)["stamps"]


def hashes_counted(monkeypatch) -> list[str]:
    """Record every whole-file hash the segment code makes from now on."""
    calls: list[str] = []
    real_file, real_view = segment.file_checksum, segment.checksum
    monkeypatch.setattr(segment, "file_checksum", lambda path: calls.append(Path(path).name) or real_file(path))
    monkeypatch.setattr(segment, "checksum", lambda view: calls.append("vectors.npy") or real_view(view))
    return calls


def flip_byte(path: Path, keep_mtime: bool = False) -> None:
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_mtime_ns == before.st_mtime_ns


def test_a_file_verified_once_is_not_hashed_again(home, later, monkeypatch):
    seg_folder = build(home)
    use_big_files(home)  # hashes everything, and records it
    stamped = recorded(seg_folder)
    assert {f"{seg_folder.name}/vectors.npy", f"{seg_folder.name}/index.ann"} <= set(stamped)
    assert f"{seg_folder.name}/data.json" not in stamped  # its records are checked one by one
    calls = hashes_counted(monkeypatch)
    use_big_files(home)
    assert calls == []
    assert MemoryService(home).doctor() == []  # the stamps file is no finding (and is private)
    assert (seg_folder.parent / stamps.FILE).stat().st_mode & 0o077 == 0


def test_a_young_file_is_hashed_by_every_process_until_it_is_old_enough(home, monkeypatch):
    seg_folder = build(home)
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in seg_folder.iterdir())
    monkeypatch.setattr(stamps, "_clock", lambda: newest + 10**9)  # verified a second after it was written:
    use_big_files(home)  # a change within the clock's granularity could have kept its times
    assert not (seg_folder.parent / stamps.FILE).exists()
    calls = hashes_counted(monkeypatch)
    use_big_files(home)
    assert {"vectors.npy", "index.ann"} <= set(calls)


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["mtime changed", "mtime restored"])
def test_a_flipped_byte_in_a_verified_file_is_caught_on_load(home, later, keep_mtime):
    seg_folder = build(home)
    use_big_files(home)
    flip_byte(seg_folder / "vectors.npy", keep_mtime)  # the ctime moves either way
    flip_byte(seg_folder / "index.ann", keep_mtime)
    seg = open_checkpoint(home)
    with pytest.raises(Damaged, match="vectors.npy"):
        seg.vectors  # noqa: B018 - the first use verifies
    assert seg.index is None  # never loaded (its size is right: only its checksum can say so)
    findings = {f["where"] for f in MemoryService(home).doctor()}
    assert {str((seg_folder / n).relative_to(home)) for n in ("vectors.npy", "index.ann")} <= findings


def test_doctor_finds_a_flipped_byte_that_no_stat_shows(home, later):
    """A change under the file system (bit rot) moves no time: loads trust the stamp, doctor
    hashes in full and finds it."""
    seg_folder = build(home)
    use_big_files(home)
    vectors = seg_folder / "vectors.npy"
    flip_byte(vectors, keep_mtime=True)
    forged = recorded(seg_folder)  # as if the stamp still described the file: only its bytes changed
    forged[f"{seg_folder.name}/vectors.npy"]["stat"] = stamps._stat_key(vectors.stat())
    (seg_folder.parent / stamps.FILE).write_bytes(integrity.seal({"stamps": forged}))
    assert open_checkpoint(home).vectors.shape[0] == 30  # the documented blind spot of a load
    findings = MemoryService(home).doctor()
    assert [(f["where"], f["problem"]) for f in findings] == [
        (str(vectors.relative_to(home)), "damaged: checksum mismatch")
    ]


def test_damaged_or_stale_stamps_only_cost_a_verification(home, later, monkeypatch):
    seg_folder = build(home)
    use_big_files(home)
    path = seg_folder.parent / stamps.FILE
    path.write_bytes(path.read_bytes().replace(b"index.ann", b"index.anN"))  # fails its seal
    calls = hashes_counted(monkeypatch)
    use_big_files(home)
    assert {"vectors.npy", "index.ann"} <= set(calls)  # hashed again, and stamped again
    assert f"{seg_folder.name}/index.ann" in recorded(seg_folder)
    svc = MemoryService(home)
    svc.store(svc.scope("proj", "alice"), [{"key": {"k": 99}, "content": "one more", "tier": "semantic"}])
    svc.checkpoint(force=True)  # replaces the checkpoint
    assert not seg_folder.exists()
    use_big_files(home)
    keys = set(recorded(seg_folder))
    assert keys and not any(key.startswith(f"{seg_folder.name}/") for key in keys)  # the gone one's dropped
    assert orjson.loads(path.read_bytes())["stamps"]  # still plain JSON for people


def test_a_checkpoint_removes_what_a_killed_stamp_write_left_and_nothing_younger(home):
    seg = build(home)
    shard = seg.parent
    old, young = shard / f".{stamps.FILE}.111.222.tmp", shard / f".{stamps.FILE}.333.444.tmp"
    for tmp in (old, young):
        tmp.write_bytes(b"half a write")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    svc = MemoryService(home)
    svc.store(svc.scope("proj", "alice"), [{"key": {"k": 99}, "content": "one more", "tier": "semantic"}])
    svc.checkpoint(force=True)  # its builder removes the leftovers of dead builds
    assert not old.exists() and young.exists()
