"""Checkpoints: fold a shard's journals into a new TinyDB file, indexes and all, off the write path.

1. Under the store lock (briefly): read to the end and start a new journal, so writers carry on
   into it while the checkpoint works.
2. Without the lock: write the live records (expired ones are purged here) into a temporary
   folder with everything derived from them (columns, postings, vectors, Annoy index); fsync.
3. Rename the folder to `seg-<gen>` (readers switch to it on their next refresh), then delete the
   journals and checkpoint it replaces.

A second lock file makes checkpoints of one shard run one at a time. Servers and one-shot CLI
commands start checkpoints in a detached process (`python -m store.checkpoint HOME SHARD`), so
neither a request nor a command waits for an index build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from . import clock
from .journal import Journal
from .locking import FileLock
from .paths import fsync_dir
from .segment import write_segment
from .shard import DAMAGED, SEG, WAL, Shard, listing

# A checkpoint rewrites the shard (O(n)), so it runs when the journals reach a share of the
# checkpoint's size: amortised O(1) a write. Every reader replays the journals (~50 us an entry),
# which bounds how far they may grow before a one-shot CLI command feels it.
MIN_JOURNAL_BYTES = int(os.environ.get("MEM_CHECKPOINT_BYTES", 1 << 20))
JOURNAL_SHARE = 0.1


def threshold(shard: Shard) -> float:
    base = shard.seg.meta["bytes"] if shard.seg else 0
    return max(MIN_JOURNAL_BYTES, JOURNAL_SHARE * base)


def due(shard: Shard, share: float = 1.0) -> bool:
    """Whether the journals have grown enough that folding them in pays off (at clean shutdown,
    a smaller `share` of the threshold is enough)."""
    return shard.pending_bytes() > share * threshold(shard)


def run(shard: Shard, lock: FileLock, embedder: str, force: bool = False) -> bool:
    """Checkpoint `shard` now (from this process). False if another checkpoint holds it or
    there is nothing to do."""
    assert shard.folder is not None
    folder = shard.folder
    if not folder.exists():
        return False
    mutex = FileLock(folder / "checkpoint.lock")
    if not mutex.acquire(blocking=False):
        return False
    try:
        shard.refresh()  # the bulk of the journals, read without holding writers up
        with lock:
            shard.refresh()  # only what was appended meanwhile
            if not shard.journals or not (force or shard.pending_bytes()):
                return False
            frozen = shard.journals[-1].gen
            Journal.create(folder / WAL.format(frozen + 1), frozen + 1, shard.record())
        _build(shard, folder, frozen, embedder)
        _keep_damaged(shard, folder, frozen)
        _remove_replaced(folder, frozen)
        return True
    finally:
        mutex.release()


def _build(shard: Shard, folder: Path, gen: int, embedder: str) -> None:
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
    tmp = folder / f"tmp-{gen:08d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    write_segment(tmp, docs, matrix, shard.schema, embedder, shard.record())
    _fsync_tree(tmp)
    os.rename(tmp, folder / SEG.format(gen))
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
    """Delete checkpoints and journals that `seg-<gen>` covers, and stale temporary folders."""
    segs, wals = listing(folder)
    for old in segs:
        if old < gen:
            shutil.rmtree(folder / SEG.format(old), ignore_errors=True)
    for old in wals:
        if old <= gen:
            (folder / WAL.format(old)).unlink(missing_ok=True)
    for tmp in folder.glob("tmp-*"):  # we hold the checkpoint lock: any other is a dead one's
        shutil.rmtree(tmp, ignore_errors=True)


def spawn(home: Path, shard_folder: Path) -> None:
    """Start a detached process that checkpoints one shard; returns at once."""
    subprocess.Popen(
        [sys.executable, "-m", "store.checkpoint", str(home), str(shard_folder)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=str(Path(__file__).resolve().parent.parent),
    )


if __name__ == "__main__":
    from .engine import Engine

    Engine(Path(sys.argv[1])).checkpoint_folder(Path(sys.argv[2]))
