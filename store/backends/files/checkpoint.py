"""Checkpoints and merges: the journals become a new segment, segments merge, off the write path.

A checkpoint writes a segment from the journals only, so it costs what changed, not the shard:

1. Under the store lock (briefly): read to the end and start a new journal, so writers carry on
   into it while the checkpoint works.
2. Without the lock: write the records the journals left live into a temporary folder, with
   everything derived from them (columns, postings, vectors, Annoy index) and, as tombstones,
   the ids they deleted that older segments hold (or that expired: an expired newer version
   must not bring an older one back); fsync.
3. Rename the folder to `seg-<lo>-<hi>` (readers switch to it on their next refresh), then delete
   the journals it covers.

Merge policy: size-tiered. A segment's tier is log4 of its size over `MIN_JOURNAL_BYTES`; once
the newest segments hold `FANOUT` (4) of one tier or below, they merge into one segment of the
next tier, and a shard over `MAX_SEGMENTS` (8) merges its smallest adjacent pair. Tiered rather
than levelled because the write load is append-mostly (episodic logs, new memories): levelled
merging rewrites a level on every push into it (write amplification about 10 per level), tiered
rewrites a record once per tier it climbs (about log4 of the shard over the checkpoint size: 3 to
5 times at 100k to 1M entries), and a query already fans out over a handful of segments, whose
shard-global BM25 statistics keep the ranking of one segment (`search.py`). Only adjacent
segments merge, so a merge's output covers a contiguous range of journals and supersedes its
inputs by its name alone: a crash at any point leaves either a `tmp-` folder (removed by the next
builder) or the merged segment beside some of its inputs, which readers ignore (`shard.py`).
Merges run in the same detached process as the checkpoint, after it, holding the builder lock
and never the namespace lock: writers and readers do not wait for them.

A purge (after a forget, or when a record was seen expired) rewrites, with the journals, every
segment from the oldest one holding a deleted, shadowed or expired record, so forgotten content
leaves the disk within one checkpoint (see the README). `mem gc` rewrites the whole shard as one
segment (`full`), unless it is one segment already with nothing to purge.

A second lock file, `checkpoint.lock`, is held by every builder of a `seg-*` of the shard: this
module's checkpoints and merges (background ones skip a shard whose lock is taken, `mem gc`
waits for it) and `maintenance` (reindex, doctor --repair, which wait for it). Only its holder
may remove `tmp-*` folders and superseded segments, and only then are they known to be the
remains of a dead or failed build. The lock is taken before the namespace lock, never after it.

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
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from ... import clock
from ...config import env_number
from ...paths import fsync_dir, write_atomic
from . import stamps
from .journal import Journal
from .locking import FileLock
from .segment import id_hash, write_segment
from .shard import DAMAGED, WAL, Shard, scan, seg_name, superseded

# A checkpoint costs what the journals hold, but every reader replays the journals (~50 us an
# entry), which bounds how far they may grow before a one-shot CLI command feels it; a share of
# the shard keeps the number of segments (and merges) logarithmic in its size.
MIN_JOURNAL_BYTES = env_number("MEM_CHECKPOINT_BYTES", 1 << 20)
JOURNAL_SHARE = 0.1
FANOUT = 4  # segments of one tier that merge into one of the next (see the module's docstring)
MAX_SEGMENTS = 8  # a shard never keeps more segments than this after its builder is done
LOCK = "checkpoint.lock"
STATE = "checkpoint.state"
BACKOFF_FIRST = env_number("MEM_CHECKPOINT_BACKOFF", 5)  # seconds before a retry, doubled...
BACKOFF_MAX = 900.0  # ...up to a quarter of an hour


@dataclass
class Outcome:
    """What one builder run did to a shard (for `mem gc`'s report)."""

    waited: bool = False  # another builder (a checkpoint, a merge) held the shard: this one waited
    written: bool = False  # a segment was written from the journals (or the shard rewritten)
    merges: int = 0  # merges of segments run after it


def threshold(shard: Shard) -> float:
    return max(MIN_JOURNAL_BYTES, JOURNAL_SHARE * shard.segment_bytes())


def due(shard: Shard, share: float = 1.0) -> bool:
    """Whether the journals have grown enough that folding them in pays off (at clean shutdown,
    a smaller `share` of the threshold is enough)."""
    assert shard.folder is not None
    return shard.pending_bytes() > share * threshold(shard) and not backing_off(shard.folder)


def builder_lock(folder: Path) -> FileLock:
    """The lock every builder of a checkpoint of the shard in `folder` holds."""
    return FileLock(folder / LOCK)


@contextlib.contextmanager
def building(folder: Path, wait: bool = True, clean: bool = True, outcome: Outcome | None = None):
    """Hold the shard's builder lock (yields False, holding nothing, if `wait` is False and
    another builder has it, or if the shard is gone); leftovers of dead builds are removed
    (unless `clean` is False: `mem doctor` without --repair changes nothing). `outcome.waited`
    says whether another builder held the lock when this one came."""
    mutex = builder_lock(folder)
    while True:
        try:
            taken = mutex.acquire(blocking=False)
            if not taken and wait:
                if outcome is not None:
                    outcome.waited = True
                taken = mutex.acquire(blocking=True)
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
    full: bool = False,
    outcome: Outcome | None = None,
) -> bool:
    """Checkpoint `shard` now (from this process), then merge its segments as the policy asks.
    False if another checkpoint holds it (unless `wait`), if there is nothing to do, or if
    failures are being backed off from (unless `force`). With `purge` (the marker file deletes
    leave), only if the marker is there; it is taken away under the namespace lock, so every
    delete made before is covered, and put back on failure. `full` (`mem gc`) rewrites the shard
    as one segment. `embed` re-embeds the records when some of the shard's vectors have another
    dimension (see `shard.py`), so that a checkpoint never turns them into vectors of the right
    size but empty. `outcome` receives what was done."""
    assert shard.folder is not None
    folder = shard.folder
    outcome = outcome if outcome is not None else Outcome()
    if not folder.exists():
        return False
    with building(folder, wait, outcome=outcome) as held:
        if not held or not folder.exists() or (not force and backing_off(folder)):
            return False
        shard.refresh()  # the bulk of the journals, read without holding writers up
        with lock:
            shard.refresh()  # only what was appended meanwhile
            if purge is not None:
                if not purge.exists():
                    return False
                purge.unlink()
            first = len(shard.segs)  # an ordinary checkpoint rewrites no segment
            if purge is not None or full:
                first = _first_rewritten(shard, clock.now(), full)
            if first < len(shard.segs) and not shard.journals:  # segments alone to rewrite
                gen = shard.seg_gen + 1
                shard.journals.append(Journal.create(folder / WAL.format(gen), gen, shard.record()))
            frozen = None
            if first < len(shard.segs) or (_holds_writes(shard) and (force or shard.pending_bytes())):
                frozen = _freeze(shard, folder)
        if frozen is not None:
            # counted as failed until it succeeds: a builder killed outright (the OOM killer,
            # kill -9) records nothing, and the next write would start another at once
            _record_failure(folder)
            try:
                _write_range(shard, folder, first, frozen, embedder, embed)
            except BaseException:
                if purge is not None:
                    with contextlib.suppress(OSError):
                        purge.touch(0o600)
                raise
            _keep_damaged(shard, folder, frozen)
            remove_replaced(folder)
            (folder / STATE).unlink(missing_ok=True)
            outcome.written = True
        outcome.merges += merge_segments(shard, embedder, embed)
        return outcome.written or outcome.merges > 0


def _first_rewritten(shard: Shard, now: float, full: bool) -> int:
    """The first segment a purge (or with `full`, `mem gc`) rewrites: the oldest one holding a
    record that is shadowed, deleted or expired, or vectors of another embedder than the store's
    (a `mem reindex` killed before it reached the shard: re-embedded by `_write_range`); all of
    them for `full`, unless the shard is one clean segment; `len(shard.segs)` for none."""
    if full and (len(shard.segs) > 1 or (shard.segs and _holds_writes(shard))):
        return 0
    for i, seg in enumerate(shard.segs):
        if shard.tombs[i] or shard.dead[i].any() or (seg.expires <= now).any() or shard.foreign(seg):
            return i
    return len(shard.segs)


def _holds_writes(shard: Shard) -> bool:
    """Whether the journals hold an operation (not only the header of a journal just started)."""
    return any(not journal.blank() for journal in shard.journals)


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


def _write_range(
    shard: Shard, folder: Path, first: int, hi: int | None, embedder: str, embed: Callable | None = None, last=None
) -> None:
    """Write the segment replacing segments `first` to `last` (exclusive; all of them when None)
    and, when `hi` is given, the memtable (the journals up to `hi`, frozen by the caller)."""
    now = clock.now()
    last = len(shard.segs) if last is None else last
    inputs = range(first, last)
    docs: list[dict] = []
    vectors: list[np.ndarray] = []
    dropped: set[str] = set()  # ids whose newest version here is gone: older segments' must stay hidden
    for i in inputs:
        seg = shard.segs[i]
        visible = ~shard.dead[i]
        if hi is not None and shard.tombs[i]:
            visible[np.fromiter(shard.tombs[i], dtype=np.int64)] = False
        live = visible & (seg.expires > now)
        rows = np.flatnonzero(live)
        docs += [seg.doc(int(r)) for r in rows]
        if shard.dim:
            vectors.append(np.asarray(seg.vectors[rows], dtype=np.float32))
        dropped.update(seg.doc(int(r))["id"] for r in np.flatnonzero(visible & ~live))
        dropped.update(seg.tomb_ids)
    if hi is not None:
        alive = shard.mem_alive(now)
        slots = [slot for slot, _ in shard.mem.items() if alive[slot]]
        docs += [shard.mem.docs[s] for s in slots]  # type: ignore[misc]
        if shard.dim:
            vectors.append(shard.mem.vectors[slots])
        dropped.update(doc["id"] for slot, doc in shard.mem.items() if not alive[slot])
        dropped.update(shard.gone)
    matrix = np.concatenate(vectors) if vectors else None
    if shard.dim and matrix is None:
        matrix = np.zeros((0, shard.dim), dtype=np.float32)
    if shard.dim and shard.foreign_vectors:
        if embed is None:
            raise RuntimeError("vectors of another dimension in the shard, and no embedder to remake them")
        matrix = np.asarray(embed([shard.schema.text(d) for d in docs]), dtype=np.float32).reshape(-1, shard.dim)
    tombs = _tombstones(shard, first, dropped - {d["id"] for d in docs})
    lo = shard.segs[first].lo if first < len(shard.segs) else shard.seg_gen + 1
    top = hi if hi is not None else shard.segs[last - 1].gen
    install_segment(folder, seg_name(lo, top), docs, matrix, shard.schema, embedder, shard.record(), tombs)


def _tombstones(shard: Shard, first: int, ids: set[str]) -> list[str]:
    """Those of `ids` that a segment older than `first` may hold (by id hash): the tombstones
    the new segment must keep (none when it starts the shard)."""
    if not first or not ids:
        return []
    candidates = sorted(ids)
    hashes = np.array([id_hash(rid) for rid in candidates], dtype=np.uint64)
    held = np.zeros(len(candidates), dtype=bool)
    for seg in shard.segs[:first]:
        held |= seg.has_hashes(hashes)
    return [rid for rid, keep in zip(candidates, held, strict=True) if keep]


def plan_merge(sizes: list[int], floor: float = 0.0) -> tuple[int, int] | None:
    """The segments to merge next, as a slice (start, stop) of `sizes` (their bytes, oldest first),
    or None (see the module's docstring)."""
    floor = max(floor or MIN_JOURNAL_BYTES, 1.0)
    tiers = [int(math.log(max(size, floor) / floor, FANOUT) + 1e-9) for size in sizes]
    for tier in sorted(set(tiers)):
        start = len(sizes)
        while start > 0 and tiers[start - 1] <= tier:
            start -= 1
        if tiers[start:].count(tier) >= FANOUT:  # with the smaller ones after them
            return start, len(sizes)
    if len(sizes) > MAX_SEGMENTS:
        pair = min(range(len(sizes) - 1), key=lambda i: sizes[i] + sizes[i + 1])
        return pair, pair + 2
    return None


def merge_segments(shard: Shard, embedder: str, embed: Callable | None = None) -> int:
    """Merge the shard's segments while the policy asks for it; returns how many merges ran.
    The caller holds the builder lock (and not the namespace lock: writers carry on)."""
    assert shard.folder is not None
    merges = 0
    while True:
        shard.refresh()
        planned = plan_merge([int(seg.meta["bytes"]) for seg in shard.segs])
        if planned is None:
            return merges
        start, stop = planned
        _write_range(shard, shard.folder, start, None, embedder, embed, last=stop)
        remove_replaced(shard.folder)
        merges += 1


def install_segment(
    folder: Path,
    name: str,
    docs: list,
    vectors: np.ndarray | None,
    schema,
    embedder: str,
    record: dict | None = None,
    tombs: list[str] | None = None,
) -> None:
    """Write segment `name` in a temporary folder and rename it into place (the caller holds the
    builder lock); on failure the temporary folder is removed. `record`: the shard's descriptor,
    copied into the manifest; `tombs`: ids it deletes from older segments."""
    tmp = folder / f"tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    try:
        write_segment(tmp, docs, vectors, schema, embedder, record, tombs=tombs or ())
        _fsync_tree(tmp)
        os.rename(tmp, folder / name)
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


def remove_replaced(folder: Path) -> None:
    """Delete the segments a wider one supersedes, and the journals the segments cover (the
    caller holds the builder lock). Journals go last: until then a crash leaves them replayable."""
    ranges, wals = scan(folder)
    for lo, hi in superseded(ranges):
        shutil.rmtree(folder / seg_name(lo, hi), ignore_errors=True)
    newest = max((hi for _, hi in ranges), default=0)
    for old in wals:
        if old <= newest:
            (folder / WAL.format(old)).unlink(missing_ok=True)


def _remove_leftovers(folder: Path) -> None:
    """Temporary folders of builds that died or failed, segments a merge that died left behind
    its output (the caller holds the builder lock, so no build is under way), and the temporary
    files of stamp writes a killed process left (`stamps.remove_leftovers`)."""
    for tmp in folder.glob("tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    stamps.remove_leftovers(folder)
    ranges, _ = scan(folder)
    for lo, hi in superseded(ranges):
        shutil.rmtree(folder / seg_name(lo, hi), ignore_errors=True)


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
