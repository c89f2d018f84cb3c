"""A shard: a short list of sealed segments plus the journals written after them, mirrored in memory.

On disk a shard is a folder of segments and `wal-<gen>.ndjson` journals. A segment covers a range
of journal generations: `seg-<hi>/` covers every journal from the first to `wal-<hi>` (the only
kind of segment before segments were layered, so a store of an older version opens unchanged),
`seg-<lo>-<hi>/` covers `wal-<lo>` to `wal-<hi>` and holds only what those journals changed. A
complete segment whose range holds another's supersedes it (a merge renames its output into
place before it deletes its inputs, so a crash between leaves both: the reader takes the wider
one, and the next builder deletes the other). The live segments chain: each one starts where
the one before it ended, the first at generation 1; a gap means a segment folder was lost and
reads fail naming it (`mem doctor --repair` salvages the rest). The state is the segments in
order, then the newer journals replayed in order.

A record of an older segment is shadowed by a newer segment that holds its id, either as a
record (an overwrite) or in its tombstones (`tombs.json`: the ids it deleted); the newest
version of an id wins. Shadowing between segments is computed once per set of segments from
their id hashes (64-bit blake2b: two ids share one with odds of about 1e-8 in a million-record
shard, in which case the older record would be hidden too); records shadowed by the journals
(the memtable) are found by id, exactly, as they are applied.

`refresh()` brings the in-memory mirror up to date by reading only what was appended since the
last call, so a long-lived server sees other processes' writes at the cost of a directory scan.
Writers hold the store lock, call `refresh()`, decide, then `append()`: the journal line is
fsync'd before the call returns.

A shard without a folder lives only in memory (the working tier of a `serve-stdio` session).

A shard deleted or replaced by another process (`mem namespaces delete`, `mem session close`)
while this one had it open shows in the journals it holds open: their files are unlinked without
a newer checkpoint covering them. `refresh()` then drops everything it knew and reads the folder
anew, so a writer (which refreshes under the lock) appends to the live folder, never to a file
that no longer exists.

Vectors of another dimension than the shard's (written by a process that had not yet seen a
`mem reindex --embedder` that changed the dimension, or read mid-reindex) are not used: such a
record or segment is found by its words, keys and tags but not by vector similarity until the
reindex finishes (or `mem doctor --repair` re-embeds it). A reader never fails on them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...embed import decode_vector
from ...errors import Damaged
from ...log import logger
from ...paths import ensure_dir, write_atomic
from ...schemas import Schema
from ..base import Candidates, Filters, Scope
from .integrity import damaged, parse_line, read_manifest, seal
from .journal import Journal, Op
from .memtable import Memtable
from .segment import Segment, expiry, open_segment

WAL = "wal-{:08d}.ndjson"
SEG = "seg-{:08d}"
DESCRIPTOR = "shard.json"
DAMAGED = "damaged-"  # prefix of a journal with damaged lines that a checkpoint kept aside
_TOLD_FOREIGN: set[Path | None] = set()  # shards whose vectors of another embedder were warned of
_NAME = re.compile(r"^(wal|seg)-(\d{8})(?:-(\d{8}))?(\.ndjson)?$")

Range = tuple[int, int]  # (lo, hi): the journal generations a segment covers


def seg_name(lo: int, hi: int) -> str:
    """The folder name of the segment covering journals `lo` to `hi` (`seg-<hi>` from the first)."""
    return SEG.format(hi) if lo <= 1 else f"seg-{lo:08d}-{hi:08d}"


def scan(folder: Path) -> tuple[list[Range], list[int]]:
    """Ranges of every complete segment folder, and generations of the journals, in `folder`."""
    ranges: list[Range] = []
    wals: list[int] = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return ranges, wals
    for name in names:
        match = _NAME.match(name)
        if not match:
            continue
        if match[1] == "wal":
            if match[4] and not match[3]:
                wals.append(int(match[2]))
        elif not match[4]:
            ranges.append((int(match[2]), int(match[3])) if match[3] else (1, int(match[2])))
    return sorted(ranges), sorted(wals)


def live_ranges(ranges: list[Range]) -> list[Range]:
    """The segments not superseded by a wider one (see the module's docstring), oldest first."""
    kept: list[Range] = []
    for lo, hi in sorted(ranges, key=lambda r: (r[0], -r[1])):
        if kept and hi <= kept[-1][1]:
            continue  # inside the one kept before: a merge's input it has not deleted yet
        kept.append((lo, hi))
    return kept


def superseded(ranges: list[Range]) -> list[Range]:
    live = set(live_ranges(ranges))
    return [r for r in ranges if r not in live]


def segment_chain(folder: Path) -> tuple[list[Range], list[int]]:
    """The live segments of `folder` (checked to chain from generation 1) and its journals;
    `MissingCheckpoint` names a segment folder that is gone."""
    ranges, wals = scan(folder)
    chain = live_ranges(ranges)
    expected = 1
    for lo, hi in chain:
        if lo != expected:
            lost = folder / (seg_name(expected, lo - 1) if lo > expected else seg_name(lo, hi))
            why = "missing" if lo > expected else "overlapping"
            raise MissingCheckpoint(
                f"{lost} is {why} (the segments after it remain): run `mem doctor --repair`",
                {"file": str(lost), "why": why},
            )
        expected = hi + 1
    return chain, wals


def listing(folder: Path) -> tuple[list[int], list[int]]:
    """Newest generations of every complete segment and generations of the journals in
    `folder`, ascending (the newest segment's is where the journals start again)."""
    ranges, wals = scan(folder)
    return sorted(hi for _, hi in ranges), wals


def recorded_descriptor(folder: Path) -> dict[str, Any] | None:
    """The shard's descriptor from the copies kept beside its data (the newest segment's
    manifest, else a journal's header), for when `shard.json` is lost or damaged."""
    ranges, wals = scan(folder)
    for lo, hi in sorted(ranges, key=lambda r: r[1], reverse=True):
        try:
            manifest = read_manifest(folder / seg_name(lo, hi))
        except (OSError, Damaged):
            continue
        if manifest is not None and isinstance(manifest.get("shard"), dict) and "kind" in manifest["shard"]:
            return dict(manifest["shard"])
    for gen in reversed(wals):
        try:
            with open(folder / WAL.format(gen), "rb") as f:
                first = f.readline()
        except OSError:
            continue
        op, _, _ = parse_line(first.rstrip(b"\n"), False)
        if op is not None and op["op"] == "shard" and "kind" in op["shard"]:
            return dict(op["shard"])
    return None


IDENTITY = ("namespace", "kind", "scope")  # what names a shard in its descriptor


def foreign_header(ops: list[Op], descriptor: dict[str, Any] | None) -> str | None:
    """Why a journal whose operations are `ops` is another shard's (its header, the first
    operation, names another namespace, kind or scope than `descriptor`: a file copied from
    another folder, whose records must not be read as this shard's); None when it is not."""
    header = ops[0].get("shard") if ops and ops[0].get("op") == "shard" else None
    if not isinstance(header, dict) or not descriptor:
        return None
    differ = [name for name in IDENTITY if name in header and name in descriptor and header[name] != descriptor[name]]
    if not differ:
        return None
    theirs = ", ".join(f"{name} {header[name]!r}" for name in differ)
    return f"its header names another shard ({theirs}): a journal copied from elsewhere?"


class MissingCheckpoint(Damaged):
    """The journals or segments after a segment are there but the segment is not."""


def check_chain(folder: Path, newest: int, wals: list[int]) -> None:
    """Raise `MissingCheckpoint` if the journals after segment generation `newest` do not start
    right after it. Every journal is created as `wal-<checkpoint + 1>` and a segment is renamed
    into place before the journals it covers are deleted, so a gap means a segment folder was
    lost: reading on would silently drop its records."""
    after = [gen for gen in wals if gen > newest]
    if after and after[0] != newest + 1:
        lost = folder / seg_name(newest + 1, after[0] - 1)
        raise MissingCheckpoint(
            f"{lost} is missing (the journals after it remain): run `mem doctor --repair`",
            {"file": str(lost), "why": "missing"},
        )


def check_next_journal(folder: Path, newest: int, wals: list[int]) -> None:
    """Raise `MissingCheckpoint` if segment generation `newest` has no journal after it: every
    checkpoint (and merge, reindex or repair) starts `wal-<newest + 1>` before its segment lands,
    and writers append to it, so without it the writes acknowledged since the checkpoint are gone.
    Reading on would answer without them as if they had never been; writing would start a new
    journal in its place and hide the loss from `mem doctor` too (outside audit B25)."""
    if newest and (newest + 1) not in wals:
        lost = folder / WAL.format(newest + 1)
        raise MissingCheckpoint(
            f"{lost} is missing: the writes acknowledged after the checkpoint are lost: run `mem doctor --repair`",
            {"file": str(lost), "why": "missing"},
        )


def shadowed(segs: list[Segment]) -> list[np.ndarray]:
    """Per segment, the mask of rows that a newer segment shadows (holds the id as a record or
    a tombstone)."""
    masks: list[np.ndarray] = [np.zeros(0, dtype=bool)] * len(segs)
    newer = np.zeros(0, dtype=np.uint64)
    for i in reversed(range(len(segs))):
        seg = segs[i]
        masks[i] = np.isin(seg.hashes, newer) if len(newer) and seg.n else np.zeros(seg.n, dtype=bool)
        if i:
            newer = np.union1d(newer, np.concatenate([seg.hashes, seg.tomb_hashes]))
    return masks


class Shard(Scope):
    def __init__(self, folder: Path | None, schema: Schema, dim: int, descriptor: dict[str, Any] | None = None):
        self.folder = folder
        self.schema = schema
        self.dim = dim if schema.indexed else 0
        self.descriptor = descriptor or {}
        self.on_create: Callable[[], None] | None = None  # called when the folder is first written
        # called with the shard before a delete is logged (a purge is due); given the shard rather
        # than holding it, so that a shard the engine lets go is freed (and its files closed) at once
        self.on_delete: Callable[[Shard], None] | None = None
        self.on_append: Callable[[], None] | None = None  # called after any write is logged
        self.segs: list[Segment] = []
        self.journals: list[Journal] = []
        self.version = 0
        self._reset([])

    # -- reading the disk -------------------------------------------------------------------

    @property
    def seg(self) -> Segment | None:
        """The newest segment (the only one, in a shard just merged or checkpointed once)."""
        return self.segs[-1] if self.segs else None

    @property
    def seg_gen(self) -> int:
        """The newest journal generation the segments cover."""
        return self.segs[-1].gen if self.segs else 0

    def refresh(self) -> None:
        """Apply whatever other processes (or checkpoints) changed since the last call."""
        if self.folder is None:
            return
        for _ in range(10):
            try:
                return self._refresh_once()
            except (FileNotFoundError, MissingCheckpoint):  # a checkpoint removed what we listed: list again
                continue
            except Damaged as exc:  # a file missing from a checkpoint being removed (a namespace delete)
                if exc.detail.get("why") != "missing":
                    raise
                continue
        self._refresh_once()

    def _refresh_once(self) -> None:
        assert self.folder is not None
        chain, wals = segment_chain(self.folder)
        newest = chain[-1][1] if chain else 0
        check_chain(self.folder, newest, wals)
        check_next_journal(self.folder, newest, wals)
        # A journal we know that is gone (deleted, or never opened before its folder was removed)
        # means the shard was deleted or replaced under us: start again from what is on disk.
        gone = any(j.unlinked() or j.gen not in wals for j in self.journals)
        names = [seg_name(lo, hi) for lo, hi in chain]
        if names != [seg.folder.name for seg in self.segs] or gone:
            self._reset(self._open_segments(names, reuse=not gone))
        known = {j.gen for j in self.journals}
        for gen in wals:
            if gen > self.seg_gen and gen not in known:
                self.journals.append(Journal(self.folder / WAL.format(gen), gen))
        self.journals.sort(key=lambda j: j.gen)
        for journal in self.journals:
            for op in journal.read_new():
                if op.get("op") == "shard" and (stranger := foreign_header([op], self.record())):
                    raise damaged(journal.path, stranger)
                self._apply(op)

    def _open_segments(self, names: list[str], reuse: bool) -> list[Segment]:
        """The segments `names`, keeping those already open (a merge replaced only some)."""
        assert self.folder is not None
        open_now = {seg.folder.name: seg for seg in self.segs} if reuse else {}
        opened: list[Segment] = []
        try:
            for name in names:
                opened.append(open_now.get(name) or self._open_segment(self.folder / name))
        except BaseException:
            for seg in opened:
                if seg not in open_now.values():
                    seg.close()
            raise
        return opened

    def _open_segment(self, path: Path) -> Segment:
        seg = open_segment(path)
        if self.dim and int(seg.meta["dim"]) != self.dim:  # mid-reindex: words only, no vectors
            seg.blind(self.dim)
        return seg

    def _reset(self, segs: list[Segment]) -> None:
        for journal in self.journals:
            journal.close()
        for seg in self.segs:
            if seg not in segs:
                seg.close()
        self.segs = segs
        self.dead = shadowed(segs)  # per segment: rows a newer segment shadows
        self.tombs: list[set[int]] = [set() for _ in segs]  # per segment: rows the journals shadow
        self.gone: set[str] = set()  # ids the journals deleted (tombstones for older segments)
        self.mem = Memtable(self.dim, self.schema.text if self.schema.indexed else None)
        self.journals = []
        self.version += 1
        # a lower bound of the records' expiry times: when it is past, something may need purging
        self.next_expiry = min((float(seg.expires.min()) for seg in segs if seg.n), default=math.inf)
        # records whose vectors have another dimension (not searchable by vector; see above)
        self.foreign_vectors = sum(seg.n for seg in segs if self.foreign(seg))
        if self.foreign_vectors and self.folder not in _TOLD_FOREIGN:
            _TOLD_FOREIGN.add(self.folder)
            logger("shard").warning(
                "%d records of %s have vectors of another embedder than the store's (a `mem reindex` under way "
                "or stopped): found by words only until it ends, or `mem gc` re-embeds them",
                self.foreign_vectors, self.folder,
            )  # fmt: skip

    def foreign(self, seg: Segment) -> bool:
        """Whether `seg` holds vectors of another dimension than the shard's (see above)."""
        return bool(seg.n and self.dim and int(seg.meta["dim"]) != self.dim)

    # -- writing ----------------------------------------------------------------------------

    def append(self, op: Op) -> None:
        """Durably log `op`. The caller holds the lock and has refreshed. The in-memory state
        picks the line up at the next refresh, like any other process's write, so a one-shot
        command that exits after writing never pays for applying it."""
        if self.folder is None:  # no journal to read it back from: apply a copy of the caller's objects
            self._apply(orjson.loads(orjson.dumps(op)))
        else:
            if op.get("op") == "del" and self.on_delete is not None:
                self.on_delete(self)  # first: a delete that cannot ask for its purge (a full disk) is refused
            self._active_journal().append(op)
            self.version += 1
            if self.on_append is not None:
                self.on_append()

    def _active_journal(self) -> Journal:
        if not self.journals:  # a first write, or a view that was reset: read the disk again
            self._refresh_once()  # (the caller holds the lock: nobody adds a journal meanwhile)
        if self.journals:
            return self.journals[-1]
        assert self.folder is not None
        ensure_dir(self.folder)
        record = self.record()
        if not (self.folder / DESCRIPTOR).exists():
            write_atomic(self.folder / DESCRIPTOR, seal(record))
            if self.on_create is not None:
                self.on_create()
        gen = self.seg_gen + 1
        self.journals.append(Journal.create(self.folder / WAL.format(gen), gen, record))
        return self.journals[-1]

    def record(self) -> dict[str, Any]:
        """The shard's descriptor as `shard.json` holds it (copied into journals and manifests)."""
        return {"schema": self.schema.name, **self.descriptor}

    def _apply(self, op: Op) -> None:
        self.version += 1
        if op.get("op") == "put":
            for rec in op["recs"]:
                self._put(rec)
        elif op.get("op") == "del":
            for rid in op["ids"]:
                self._remove(rid)

    def _put(self, rec: dict[str, Any]) -> None:
        rid = rec["id"]
        if not self.mem.remove(rid):
            self._bury(rid)
        self.gone.discard(rid)
        vec = decode_vector(rec["vec"]) if self.dim and rec.get("vec") else None
        if vec is not None and len(vec) != self.dim:
            vec = None  # made with another embedder: see the module's docstring
            self.foreign_vectors += 1
        self.next_expiry = min(self.next_expiry, expiry(rec["doc"]))
        self.mem.put(rid, rec["doc"], rec.get("size") or len(orjson.dumps(rec["doc"])), vec)

    def _remove(self, rid: str) -> None:
        if not self.mem.remove(rid):
            self._bury(rid)
        if self.folder is not None:
            self.gone.add(rid)

    def _bury(self, rid: str) -> None:
        found = self.locate(rid)
        if found is not None:
            self.tombs[found[0]].add(found[1])

    def locate(self, rid: str) -> tuple[int, int] | None:
        """(segment, row) of the newest segment version of `rid`, if it is not shadowed by a
        newer segment (the journals' shadowing is in `tombs`)."""
        for i in reversed(range(len(self.segs))):
            seg = self.segs[i]
            row = seg.find(rid)
            if row is not None:
                return None if self.dead[i][row] else (i, row)
            if rid in seg.tomb_ids:
                return None
        return None

    # -- reading the state ------------------------------------------------------------------

    def get(self, rid: str, now: float) -> dict[str, Any] | None:
        """The live record `rid`, or None (missing, deleted or expired)."""
        doc = self.mem.get(rid)
        if doc is None:
            found = self.locate(rid)
            if found is None or found[1] in self.tombs[found[0]]:
                return None
            doc = self.segs[found[0]].doc(found[1])
        return doc if expiry(doc) > now else None

    def last(self, now: float) -> dict[str, Any] | None:
        """The newest live record: the memtable's last written (slots are kept in write order
        by `slot_of`), else the newest segment's last live row (rows are in write order too)."""
        for rid in reversed(self.mem.slot_of):
            slot = self.mem.slot_of[rid]
            if self.mem.expires[slot] > now:
                return self.mem.record(slot)
        for i in reversed(range(len(self.segs))):
            alive = np.flatnonzero(self.part_alive(i, now))
            if len(alive):
                return self.segs[i].doc(int(alive[-1]))
        return None

    def part_alive(self, i: int, now: float) -> np.ndarray:
        """Mask of segment `i`'s rows that are neither shadowed, deleted nor expired."""
        seg = self.segs[i]
        alive = seg.expires > now
        alive &= ~self.dead[i]
        if self.tombs[i]:
            alive[np.fromiter(self.tombs[i], dtype=np.int64)] = False
        return alive

    def seg_alive(self, now: float) -> list[np.ndarray]:
        """`part_alive` of every segment, oldest first."""
        return [self.part_alive(i, now) for i in range(len(self.segs))]

    def mem_alive(self, now: float) -> np.ndarray:
        return self.mem.expires[: self.mem.n] > now

    def docs(self, now: float) -> Iterator[dict[str, Any]]:
        """Every live record: segment rows in order, oldest segment first, then newer records
        in slot order."""
        for i, seg in enumerate(self.segs):
            for row in np.flatnonzero(self.part_alive(i, now)):
                yield seg.doc(int(row))
        alive = self.mem_alive(now)
        for slot, _ in self.mem.items():
            if alive[slot]:
                yield self.mem.record(slot)

    def usage(self, now: float) -> tuple[int, int]:
        """(live records, their bytes)."""
        count = size = 0
        for i, seg in enumerate(self.segs):
            alive = self.part_alive(i, now)
            count += int(alive.sum())
            size += int(seg.sizes[alive].sum())
        mem_alive = self.mem_alive(now)
        mem_bytes = int(np.asarray(self.mem.sizes)[mem_alive].sum()) if self.mem.n else 0
        return count + int(mem_alive.sum()), size + mem_bytes

    def segment_bytes(self) -> int:
        """Bytes of the records the segments were written with."""
        return sum(int(seg.meta["bytes"]) for seg in self.segs)

    def search(
        self,
        now: float,
        filters: Filters,
        query_vector: np.ndarray | None = None,
        query_text: str = "",
        k: int = 10,
        exhaustive: bool = False,
    ) -> list[Candidates]:
        from .search import search

        return search(self, now, filters, query_vector, query_text, k, exhaustive)

    def pending_bytes(self) -> int:
        """Size of the journals not yet checkpointed."""
        return sum(j.pending() for j in self.journals)

    def close(self) -> None:
        self._reset([])
