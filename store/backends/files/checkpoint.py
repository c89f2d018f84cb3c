"""Checkpoints: fold a shard's journals into a new TinyDB file, indexes and all, off the write path.

1. Under the store lock (briefly): read to the end and start a new journal, so writers carry on
   into it while the checkpoint works.
2. Without the lock: write the live records (expired ones are purged here) into a temporary
   folder with everything derived from them (columns, postings, vectors, Annoy index); fsync.
3. Rename the folder to `seg-<gen>` (readers switch to it on their next refresh), then delete the
   journals and checkpoint it replaces.

A second lock file, `checkpoint.lock`, is held by every builder of a `seg-*` of the shard: this
module's checkpoints (background ones skip a shard whose lock is taken, `mem gc` waits for it) and
`maintenance` (reindex, doctor --repair, which wait for it). Only its holder may remove `tmp-*`
folders, and only then are they known to be the remains of a dead or failed build. The lock is
taken before the namespace lock, never after it.

Servers and one-shot CLI commands start checkpoints in a detached process (`python -m
store.checkpoint HOME SHARD`), so neither a request nor a command waits for an index build.

A checkpoint that fails (a full disk, a file size limit) removes its temporary folder, reuses the
empty journal a previous failed attempt started instead of starting one more, and is not retried
before a delay that doubles with each consecutive failure (`checkpoint.state` in the shard holds
the count and the time of the last failure; a success removes it). `mem gc` ignores the delay.

A purge checkpoint (`--purge`, started after a delete and when a reader or writer meets an expired
record) waits for the lock instead of skipping, so forgotten and expired content leaves the disk
within one checkpoint of the shard after it was forgotten or seen expired (see the README).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

from ... import clock
from ...config import env_number
from ...paths import fsync_dir, write_atomic
from .journal import Journal
from .locking import FileLock
from .segment import write_segment
from .shard import DAMAGED, SEG, WAL, Shard, listing

# A checkpoint rewrites the shard (O(n)), so it runs when the journals reach a share of the
# checkpoint's size: amortised O(1) a write. Every reader replays the journals (~50 us an entry),
# which bounds how far they may grow before a one-shot CLI command feels it.
MIN_JOURNAL_BYTES = env_number("MEM_CHECKPOINT_BYTES", 1 << 20)
JOURNAL_SHARE = 0.1
LOCK = "checkpoint.lock"
STATE = "checkpoint.state"
BACKOFF_FIRST = env_number("MEM_CHECKPOINT_BACKOFF", 5)  # seconds before a retry, doubled...
BACKOFF_MAX = 900.0  # ...up to a quarter of an hour


def threshold(shard: Shard) -> float:
    base = shard.seg.meta["bytes"] if shard.seg else 0
    return max(MIN_JOURNAL_BYTES, JOURNAL_SHARE * base)


def due(shard: Shard, share: float = 1.0) -> bool:
    """Whether the journals have grown enough that folding them in pays off (at clean shutdown,
    a smaller `share` of the threshold is enough)."""
    assert shard.folder is not None
    return shard.pending_bytes() > share * threshold(shard) and not backing_off(shard.folder)


def builder_lock(folder: Path) -> FileLock:
    """The lock every builder of a checkpoint of the shard in `folder` holds."""
    return FileLock(folder / LOCK)


@contextlib.contextmanager
def building(folder: Path, wait: bool = True, clean: bool = True):
    """Hold the shard's builder lock (yields False, holding nothing, if `wait` is False and
    another builder has it, or if the shard is gone); leftovers of dead builds are removed
    (unless `clean` is False: `mem doctor` without --repair changes nothing)."""
    mutex = builder_lock(folder)
    while True:
        try:
            taken = mutex.acquire(blocking=wait)
        except FileNotFoundError:  # the shard was deleted
            taken = False
        if not taken or mutex.is_current():
            break
        mutex.release()  # deleted (and maybe made anew) while we waited: lock the live file
    if not taken:
        yield False
        return
    try:
        if clean:
            _remove_leftovers(folder)
        yield True
    finally:
        mutex.release()


def run(
    shard: Shard,
    lock: FileLock,
    embedder: str,
    force: bool = False,
    wait: bool = False,
    purge: Path | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> bool:
    """Checkpoint `shard` now (from this process). False if another checkpoint holds it (unless
    `wait`), if there is nothing to do, or if failures are being backed off from (unless `force`).
    With `purge` (the marker file deletes leave), only if the marker is there; it is taken away
    under the namespace lock, so every delete made before is covered, and put back on failure.
    `embed` re-embeds the records when some of the shard's vectors have another dimension (see
    `shard.py`), so that a checkpoint never turns them into vectors of the right size but empty."""
    assert shard.folder is not None
    folder = shard.folder
    if not folder.exists():
        return False
    with building(folder, wait) as held:
        if not held or not folder.exists() or (not force and backing_off(folder)):
            return False
        shard.refresh()  # the bulk of the journals, read without holding writers up
        with lock:
            shard.refresh()  # only what was appended meanwhile
            if purge is not None:
                if not purge.exists():
                    return False
                purge.unlink()
                if not shard.journals:  # a checkpoint alone, holding expired records
                    gen = shard.seg_gen + 1
                    shard.journals.append(Journal.create(folder / WAL.format(gen), gen, shard.record()))
            if not shard.journals or not (force or shard.pending_bytes()):
                return False
            frozen = _freeze(shard, folder)
        try:
            _build(shard, folder, frozen, embedder, embed)
        except BaseException:
            _record_failure(folder)
            if purge is not None:
                with contextlib.suppress(OSError):
                    purge.touch(0o600)
            raise
        _keep_damaged(shard, folder, frozen)
        _remove_replaced(folder, frozen)
        (folder / STATE).unlink(missing_ok=True)
        return True


def _freeze(shard: Shard, folder: Path) -> int:
    """The generation the checkpoint will cover, with a journal after it for the writers (the
    caller holds the namespace lock). An empty newest journal, left by a checkpoint that failed,
    is kept for that purpose rather than starting one more per attempt."""
    last = shard.journals[-1]
    if len(shard.journals) > 1 and (last.blank() or (folder / STATE).exists()):
        # a failed checkpoint left the newest journal to the writers: fold the ones before it
        # and start none, so that failures do not add a journal each
        return shard.journals[-2].gen
    Journal.create(folder / WAL.format(last.gen + 1), last.gen + 1, shard.record())
    return last.gen


def backing_off(folder: Path) -> bool:
    """Whether the last checkpoint of the shard failed too recently to try again."""
    try:
        state = orjson.loads((folder / STATE).read_bytes())
        delay = min(BACKOFF_FIRST * 2 ** (int(state["failures"]) - 1), BACKOFF_MAX)
        return bool(clock.now() < float(state["at"]) + delay)
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return False


def _record_failure(folder: Path) -> None:
    try:
        failures = int(orjson.loads((folder / STATE).read_bytes())["failures"])
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        failures = 0
    with contextlib.suppress(OSError):  # the disk that failed the build may refuse this too
        write_atomic(folder / STATE, orjson.dumps({"failures": failures + 1, "at": clock.now()}))


def _build(shard: Shard, folder: Path, gen: int, embedder: str, embed: Callable | None = None) -> None:
    now = clock.now()
    docs, vectors = [], []
    if shard.seg is not None:
        rows = np.flatnonzero(shard.seg_alive(now))
        docs += [shard.seg.doc(int(r)) for r in rows]
        if shard.dim:
            vectors.append(np.asarray(shard.seg.vectors[rows], dtype=np.float32))
    alive = shard.mem_alive(now)
    slots = [slot for slot, _ in shard.mem.items() if alive[slot]]
    docs += [shard.mem.docs[s] for s in slots]  # type: ignore[misc]
    if shard.dim:
        vectors.append(shard.mem.vectors[slots])
    matrix = np.concatenate(vectors) if vectors else None
    if shard.dim and shard.foreign_vectors:
        if embed is None:
            raise RuntimeError("vectors of another dimension in the shard, and no embedder to remake them")
        matrix = np.asarray(embed([shard.schema.text(d) for d in docs]), dtype=np.float32).reshape(-1, shard.dim)
    install_segment(folder, gen, docs, matrix, shard.schema, embedder, shard.record())


def install_segment(
    folder: Path, gen: int, docs: list, vectors: np.ndarray | None, schema, embedder: str, record: dict | None = None
) -> None:
    """Write `seg-<gen>` in a temporary folder and rename it into place (the caller holds the
    builder lock); on failure the temporary folder is removed. `record`: the shard's descriptor,
    copied into the manifest."""
    tmp = folder / f"tmp-{gen:08d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    try:
        write_segment(tmp, docs, vectors, schema, embedder, record)
        _fsync_tree(tmp)
        os.rename(tmp, folder / SEG.format(gen))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(folder)


def _keep_damaged(shard: Shard, folder: Path, gen: int) -> None:
    """Move journals with damaged lines aside (`damaged-wal-...`) instead of deleting them, so
    `mem doctor` still reports the writes they lost (and `--repair` counts, then removes them)."""
    for journal in shard.journals:
        if journal.gen <= gen and journal.skipped:
            os.rename(journal.path, folder / f"{DAMAGED}{journal.path.name}")


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        os.chmod(path, 0o600)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(folder)


def _remove_replaced(folder: Path, gen: int) -> None:
    """Delete checkpoints and journals that `seg-<gen>` covers (the caller holds the builder lock)."""
    segs, wals = listing(folder)
    for old in segs:
        if old < gen:
            shutil.rmtree(folder / SEG.format(old), ignore_errors=True)
    for old in wals:
        if old <= gen:
            (folder / WAL.format(old)).unlink(missing_ok=True)


def _remove_leftovers(folder: Path) -> None:
    """Temporary folders of builds that died or failed: the caller holds the builder lock, so no
    build is under way."""
    for tmp in folder.glob("tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def spawn(home: Path, shard_folder: Path, purge: bool = False) -> None:
    """Start a detached process that checkpoints one shard; returns at once. A `purge` one waits
    for a running checkpoint and then runs even if the journals are small."""
    subprocess.Popen(
        [
            sys.executable,
            "-m",
            f"{__package__}.checkpoint",  # this module, whatever the package is installed as
            str(home),
            str(shard_folder),
            *(["--purge"] if purge else []),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


if __name__ == "__main__":
    from .engine import Engine

    engine = Engine(Path(sys.argv[1]))
    if "--purge" in sys.argv[3:]:
        engine.purge_folder(Path(sys.argv[2]))
    else:
        engine.checkpoint_folder(Path(sys.argv[2]))
