"""Crashes and full disks: a killed writer or checkpoint never costs an acknowledged write, and a
write the disk refuses is a clear error that leaves no trace in the journal.

SIGKILL lands at random moments (seeded: `MEM_SEED` replays a run; the seed is in every failure
message). CI kills a few times; `MEM_STRESS=1` kills many more times.
"""

from __future__ import annotations

import errno
import os
import random
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest
from tinydb import TinyDB
from typer.testing import CliRunner

from a2e_mem.cli.main import app
from a2e_mem.service import MemoryService

from .conftest import stored_anywhere

ROOT = Path(__file__).resolve().parent.parent
STRESS = bool(os.environ.get("MEM_STRESS"))
SEED = int(os.environ.get("MEM_SEED", time.time_ns() % 2**32))

WRITER = textwrap.dedent(
    """
    import sys
    from a2e_mem.service import MemoryService
    run = sys.argv[1]
    svc = MemoryService()
    scope = svc.scope("crash", "writer")
    i = 0
    while True:
        key = {"run": run, "i": i}
        content = f"entry {run}-{i} " + "padding " * (i % 40)  # varied line sizes
        out = svc.store(scope, [{"key": key, "content": content, "tier": i % 2 and "semantic" or "episodic"}])
        assert out["stored"] == [key], out
        print(i, flush=True)  # acknowledged: only now may the test count it
        i += 1
    """
)


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "MEM_HOME": str(home), "MEM_LOG": "error", **extra}


def missing(svc: MemoryService, keys: set[tuple]) -> set[tuple]:
    """The keys of `keys` the store does not have (episodic and semantic tiers of the writer)."""
    scope = svc.scope("crash", "writer")
    wanted = [{"run": run, "i": i} for run, i in sorted(keys)]
    if not keys or svc.retrieve(scope, keys=wanted, limit=1)["total"] == len(keys):
        return set()
    found = svc.retrieve(scope, keys=wanted, limit=1000)["entries"]
    return keys - {(e["key"]["run"], e["key"]["i"]) for e in found}


def assert_files_parse(home: Path) -> None:
    """Checkpoints open with TinyDB; every complete journal line parses (a torn tail may remain)."""
    for path in home.rglob("seg-*/data.json"):
        db = TinyDB(path, access_mode="r")
        try:
            db.table("records").all()
        finally:
            db.close()
    for path in home.rglob("wal-*.ndjson"):
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            assert isinstance(orjson.loads(line), dict), path


def kill_writer_at_random(home: Path, run: int, rng: random.Random) -> set[tuple]:
    """Start a writer, let it acknowledge for a random while, SIGKILL it; its acknowledged keys."""
    env = env_for(home, MEM_CHECKPOINTS="inline", MEM_CHECKPOINT_BYTES="4096")
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(run)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
    )
    assert proc.stdout
    first = proc.stdout.readline()  # it is running and has acknowledged once
    time.sleep(rng.uniform(0, 0.4))
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait()
    assert first.endswith(b"\n") and proc.returncode == -signal.SIGKILL, f"writer ended early (seed {SEED})"
    lines = (first + rest).split(b"\n")[:-1]  # a line without its newline is not acknowledged
    return {(str(run), int(x)) for x in lines}


def test_sigkill_of_a_writer_never_loses_an_acknowledged_write(home):
    rng = random.Random(SEED)
    acked: set[tuple] = set()
    for run in range(20 if STRESS else 4):
        acked |= kill_writer_at_random(home, run, rng)
        svc = MemoryService(home)  # the store opens...
        lost = missing(svc, acked)
        assert not lost, f"lost {sorted(lost)[:5]} after kill {run} (seed {SEED})"
        svc.close()
    assert_files_parse(home)
    # ... and takes writes and a full checkpoint afterwards
    svc = MemoryService(home)
    svc.store(svc.scope("crash", "writer"), [{"key": {"run": "after", "i": 0}, "content": "x", "tier": "episodic"}])
    svc.checkpoint(force=True)
    assert not missing(MemoryService(home), acked | {("after", 0)})
    assert not list(home.rglob("tmp-*")), "a dead checkpoint's temporary folder survived a checkpoint"


def big_shard(home: Path, n: int) -> Path:
    svc = MemoryService(home)
    notes = [{"key": {"run": "big", "i": i}, "content": f"note {i} about things", "tier": "semantic"} for i in range(n)]
    svc.store(svc.scope("crash", "writer"), notes)
    svc.close()
    (folder,) = {p.parent for p in home.rglob("wal-*.ndjson")}
    return folder


def kill_checkpoint(home: Path, folder: Path, rng: random.Random, phase: str) -> None:
    """Run `python -m a2e_mem.backends.files.checkpoint` on `folder`; SIGKILL it while it starts, or once its
    temporary folder appears (building the new checkpoint)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.backends.files.checkpoint", str(home), str(folder)], env=env_for(home), cwd=ROOT
    )
    if phase == "build":
        deadline = time.monotonic() + 30
        while not list(folder.glob("tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
    else:
        time.sleep(rng.uniform(0.05, 0.6))
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_sigkill_in_the_middle_of_a_checkpoint_leaves_a_whole_store(home):
    rng = random.Random(SEED)
    n = 20000 if STRESS else 6000
    folder = big_shard(home, n)
    expected = {("big", i) for i in range(n)}
    phases = ["build", "startup", "build"] * (4 if STRESS else 1)
    killed_mid_build = 0
    for k, phase in enumerate(phases):
        temporary = set(folder.glob("tmp-*"))
        kill_checkpoint(home, folder, rng, phase)
        killed_mid_build += bool(set(folder.glob("tmp-*")) - temporary)
        fresh = MemoryService(home)
        result = fresh.retrieve(fresh.scope("crash", "writer"), tier="semantic", limit=5)
        assert result["total"] == len(expected), f"kill {k} ({phase}, seed {SEED})"
        sample = [{"run": "big", "i": i} for i in rng.sample(range(n), 20)] + [{"run": "kill", "i": k - 1}] * (k > 0)
        assert fresh.retrieve(fresh.scope("crash", "writer"), keys=sample, limit=50)["total"] == len(sample)
        note = {"key": {"run": "kill", "i": k}, "content": k, "tier": "semantic"}
        fresh.store(fresh.scope("crash", "writer"), [note])
        expected.add(("kill", k))
        fresh.close()
    assert killed_mid_build, f"no kill landed while a checkpoint was being built (seed {SEED})"
    assert_files_parse(home)
    assert MemoryService(home).checkpoint(force=True) == 1
    assert not list(folder.glob("tmp-*"))
    (data,) = folder.glob("seg-*/data.json")
    assert len(TinyDB(data, access_mode="r").table("records").all()) == len(expected)


# -- full disks and refused writes ----------------------------------------------------------------


def journal_lines(home: Path) -> list[bytes]:
    out = []
    for path in sorted(home.rglob("wal-*.ndjson")):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"{path.name} holds a partial line"
        out += data.splitlines()
    return out


def fail_pwrite_short(real):
    def pwrite(fd, data, offset):
        return real(fd, data[: len(data) // 2], offset)  # the disk filled up half-way

    return pwrite


def fail_with(code):
    def fail(*args):
        raise OSError(code, os.strerror(code))

    return fail


def keys_in(svc: MemoryService, scope) -> list[int]:
    return sorted(e["key"]["i"] for e in svc.retrieve(scope, limit=100)["entries"])


@pytest.mark.parametrize(
    "target, make",
    [
        ("pwrite", fail_pwrite_short),
        ("pwrite", lambda real: fail_with(errno.ENOSPC)),
        ("fdatasync", lambda real: fail_with(errno.ENOSPC)),
        ("fdatasync", lambda real: fail_with(errno.EIO)),
    ],
    ids=["short-write", "pwrite-enospc", "fdatasync-enospc", "fdatasync-eio"],
)
def test_a_write_the_disk_refuses_is_an_error_and_leaves_no_partial_line(home, monkeypatch, target, make):
    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"kept {i}", "tier": "episodic"} for i in range(3)])
    before = journal_lines(home)
    monkeypatch.setattr(os, target, make(getattr(os, target)))
    with pytest.raises(OSError) as failure:
        svc.store(scope, [{"key": {"i": 99}, "content": "refused " * 50, "tier": "episodic"}])
    assert failure.value.errno in (errno.ENOSPC, errno.EIO) and str(failure.value)
    monkeypatch.undo()
    after = journal_lines(home)  # never a partial line
    if target == "pwrite":
        assert after == before  # not a byte of a write that did not reach the file
    else:  # written, but not known durable: the line may stay, whole (its outcome is unknown)
        assert after[: len(before)] == before and len(after) - len(before) in (0, 1)
    svc.store(scope, [{"key": {"i": 3}, "content": "after the disk was freed", "tier": "episodic"}])
    views = [keys_in(svc, scope), keys_in(MemoryService(home), scope)]
    assert views[0] == views[1] and views[0] in ([0, 1, 2, 3], [0, 1, 2, 3, 99])
    assert target != "pwrite" or 99 not in views[0]
    assert all(isinstance(orjson.loads(line), dict) for line in journal_lines(home))


def test_a_long_lived_reader_agrees_with_the_file_after_a_failed_fsync(home, monkeypatch):
    """A server reads the journal without the lock, so it can read a complete line between the
    writer's pwrite and its failed fdatasync. Whatever becomes of that write, the reader must end
    up with the same entries as a fresh process, and see the writes that follow."""
    writer, reader = MemoryService(home), MemoryService(home)
    scope = writer.scope("disk", "a")
    writer.store(scope, [{"key": {"i": i}, "content": f"kept {i}", "tier": "episodic"} for i in range(3)])
    assert reader.retrieve(scope)["total"] == 3
    real = os.fdatasync

    def look_then_fail(fd):
        reader.retrieve(scope)  # a concurrent reader catches up while the line is unsynced
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fdatasync", look_then_fail)
    with pytest.raises(OSError):
        writer.store(scope, [{"key": {"i": 99}, "content": "not acknowledged " * 10, "tier": "episodic"}])
    monkeypatch.setattr(os, "fdatasync", real)
    writer.store(scope, [{"key": {"i": 3}, "content": "n3", "tier": "episodic"}])
    writer.store(scope, [{"key": {"i": 4}, "content": "n4", "tier": "episodic"}])
    fresh = keys_in(MemoryService(home), scope)
    assert keys_in(reader, scope) == fresh and {0, 1, 2, 3, 4} <= set(fresh)


def limit_file_size(size: int):
    """A child's RLIMIT_FSIZE: writes past `size` bytes fail (EFBIG / short write), even as root."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def cli(home: Path, *args: str, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args],
        capture_output=True,
        text=True,
        env=env_for(home),
        cwd=ROOT,
        preexec_fn=preexec,
        timeout=60,
    )


def assert_one_line_error(out: subprocess.CompletedProcess, code: int = 1) -> None:
    assert out.returncode == code, out.stderr
    assert out.stdout == ""
    assert out.stderr.startswith("mem: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_cli_store_on_a_full_disk_exits_1_with_one_line_and_no_partial_line(home):
    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"kept {i}", "tier": "episodic"} for i in range(3)])
    (wal,) = home.rglob("wal-*.ndjson")
    size = wal.stat().st_size
    out = cli(home, "store", "-n", "disk", "-a", "a", "--key", "i=9", "refused", preexec=limit_file_size(size + 10))
    assert_one_line_error(out)
    assert wal.stat().st_size == size and wal.read_bytes().endswith(b"\n")
    ok = cli(home, "store", "-n", "disk", "-a", "a", "--key", "i=10", "accepted")
    assert ok.returncode == 0, ok.stderr
    keys = [e["key"] for e in MemoryService(home).retrieve(scope, limit=100)["entries"]]
    assert {"i": "9"} not in keys and {"i": "10"} in keys and len(keys) == 4


def test_a_checkpoint_on_a_full_disk_fails_cleanly_and_the_store_stays_whole(home):
    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"kept {i} " * 20, "tier": "semantic"} for i in range(200)])
    out = cli(home, "gc", preexec=limit_file_size(4096))  # the checkpoint cannot be written
    assert_one_line_error(out)
    assert not list(home.rglob("seg-*")), "a partial checkpoint was put in place"
    fresh = MemoryService(home)
    assert fresh.retrieve(scope, limit=1)["total"] == 200
    fresh.store(scope, [{"key": {"i": 200}, "content": "after", "tier": "semantic"}])
    ok = cli(home, "gc")
    assert ok.returncode == 0, ok.stderr
    assert not list(home.rglob("tmp-*"))
    assert MemoryService(home).retrieve(scope, limit=1)["total"] == 201


def test_a_checkpoint_that_cannot_write_a_column_file_names_it(home, monkeypatch):
    import numpy as np

    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"k{i}", "tier": "semantic"} for i in range(200)])
    real_save = np.save

    def short_write(path, array, *args, **kwargs):  # what numpy raises when the disk fills mid-array
        if Path(path).name == "vectors.npy":
            raise OSError("25600 requested and 4096 written")
        return real_save(path, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", short_write)
    result = CliRunner().invoke(app, ["--home", str(home), "gc"])
    assert result.exit_code == 1
    assert re.search(r"tmp-seg-\S*/vectors\.npy: 25600 requested and 4096 written", result.stderr), result.stderr
    monkeypatch.undo()
    assert MemoryService(home).retrieve(scope, limit=1)["total"] == 200


def test_permission_denied_is_a_clear_error_and_leaves_the_store_readable(home, monkeypatch):
    svc = MemoryService(home)
    scope = svc.scope("perm", "a")
    svc.store(scope, [{"key": {"i": 0}, "content": "kept", "tier": "episodic"}])
    (wal,) = home.rglob("wal-*.ndjson")
    before = wal.read_bytes()
    args = ["store", "-n", "perm", "-a", "a", "--key", "i=1", "denied"]
    if os.geteuid() == 0:  # root ignores file modes: deny the journal as a read-only file would
        real_open = os.open

        def deny(path, flags, *rest, **kw):
            if "wal-" in os.fspath(path) and flags & (os.O_WRONLY | os.O_RDWR):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
            return real_open(path, flags, *rest, **kw)

        monkeypatch.setattr(os, "open", deny)
        result = CliRunner().invoke(app, args)
        monkeypatch.undo()
        out = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
    else:
        os.chmod(wal, 0o400)
        os.chmod(wal.parent, 0o500)
        try:
            out = cli(home, *args)
        finally:
            os.chmod(wal.parent, 0o700)
            os.chmod(wal, 0o600)
    assert_one_line_error(out)
    assert "Permission denied" in out.stderr and wal.name in out.stderr
    assert wal.read_bytes() == before
    assert [e["content"] for e in MemoryService(home).retrieve(scope)["entries"]] == ["kept"]


def test_a_home_that_cannot_be_created_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = cli(blocker / "home", "store", "--key", "k", "v")
    assert_one_line_error(out, 4)  # a store directory under a file is a configuration error
    assert "which is a file" in out.stderr


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.files_only
def test_an_inline_checkpoint_that_fails_does_not_fail_the_write_that_started_it(home, monkeypatch):
    """Found by an outside audit on a full disk: with MEM_CHECKPOINTS=inline a write already in
    the journal was reported failed because the checkpoint after it failed, and the retry made
    a duplicate (two episodic events)."""
    from a2e_mem.backends.files import checkpoint

    real_write = checkpoint._write_range
    monkeypatch.setenv("MEM_CHECKPOINTS", "inline")
    monkeypatch.setattr(checkpoint, "MIN_JOURNAL_BYTES", 2000)
    monkeypatch.setattr(checkpoint, "_write_range", _full_disk)
    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    for i in range(40):  # a checkpoint is due after the first few: every one of them fails
        assert svc.store(scope, [{"key": {"i": i}, "content": f"kept {i} " * 5, "tier": "episodic"}])["stored"]
    monkeypatch.setattr(checkpoint, "_write_range", real_write)
    assert not list(home.rglob("seg-*")) and (next(home.rglob("checkpoint.state"))).exists()
    assert MemoryService(home).retrieve(scope, limit=100)["total"] == 40


@pytest.mark.files_only
def test_a_delete_that_cannot_ask_for_its_purge_is_refused_and_deletes_nothing(home, monkeypatch):
    """Found by an outside audit: a forget on a full disk answered deleted, but the marker that
    has the content purged could not be written, so the content stayed on disk after space came
    back (until `mem gc`). The marker is written first: no marker, no delete."""
    monkeypatch.setenv("MEM_CHECKPOINTS", "inline")
    real_open = os.open

    def open_refusing_the_marker(path, *args, **kwargs):
        if str(path).endswith("purge.wanted"):
            _full_disk()
        return real_open(path, *args, **kwargs)

    svc = MemoryService(home)
    scope = svc.scope("disk", "a")
    svc.store(scope, [{"key": {"k": "secret"}, "content": "SECRETWORD42", "tier": "episodic"}])
    monkeypatch.setattr(os, "open", open_refusing_the_marker)
    with pytest.raises(OSError):
        svc.forget(scope, keys=[{"k": "secret"}])
    monkeypatch.setattr(os, "open", real_open)
    assert MemoryService(home).retrieve(scope, keys=[{"k": "secret"}])["total"] == 1  # nothing was deleted
    assert svc.forget(scope, keys=[{"k": "secret"}]) == 1
    assert not stored_anywhere(home, "SECRETWORD42")


@pytest.mark.files_only
def test_a_store_on_a_read_only_file_system_can_be_read_and_says_why_it_cannot_be_written(home, monkeypatch):
    """Found by an outside audit: on a read-only mount (a backup on read-only media) every read
    failed, `Read-only file system (wal-...)`: journals and lock files were opened for writing."""
    svc = MemoryService(home)
    scope = svc.scope("ro", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"kept {i}", "tier": "semantic"} for i in range(5)])
    svc.checkpoint(force=True)
    svc.store(scope, [{"key": {"i": 5}, "content": "in the journal", "tier": "semantic"}])
    svc.memory_set("k", "v")
    svc.close()
    real_open = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def read_only(path, flags, *args, **kwargs):
        if flags & writing and str(path).startswith(str(home)):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    ro = MemoryService(home)
    assert ro.retrieve(scope, query="in the journal", tier="semantic")["entries"][0]["key"] == {"i": 5}
    assert ro.retrieve(scope, tier="semantic")["total"] == 6
    assert ro.memory_get("k") is not None
    assert sum(1 for _ in ro.export()) == 7
    assert ro.doctor() == []
    with pytest.raises(OSError) as refused:
        ro.store(scope, [{"key": {"i": 6}, "content": "refused", "tier": "semantic"}])
    assert refused.value.errno == errno.EROFS
