"""A shard: one checkpoint plus the journals written after it, mirrored in memory.

On disk a shard is a folder of `seg-<gen>/` checkpoints and `wal-<gen>.ndjson` journals; the
newest complete checkpoint covers every journal with a generation up to its own, and the state is
that checkpoint with the newer journals replayed in order. `refresh()` brings the in-memory mirror
up to date by reading only what was appended since the last call, so a long-lived server sees
other processes' writes at the cost of a directory scan. Writers hold the store lock, call
`refresh()`, decide, then `append()`: the journal line is fsync'd before the call returns.

A shard without a folder lives only in memory (the working tier of a `serve-stdio` session).

A shard deleted or replaced by another process (`mem namespaces delete`, `mem session close`)
while this one had it open shows in the journals it holds open: their files are unlinked without
a newer checkpoint covering them. `refresh()` then drops everything it knew and reads the folder
anew, so a writer (which refreshes under the lock) appends to the live folder, never to a file
that no longer exists.

Vectors of another dimension than the shard's (written by a process that had not yet seen a
`mem reindex --embedder` that changed the dimension, or read mid-reindex) are not used: such a
record or checkpoint is found by its words, keys and tags but not by vector similarity until the
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
from ...paths import ensure_dir, write_atomic
from ...schemas import Schema
from ..base import Candidates, Filters, Scope
from .integrity import parse_line, read_manifest, seal
from .journal import Journal, Op
from .memtable import Memtable
from .segment import Segment, expiry, open_segment

WAL = "wal-{:08d}.ndjson"
SEG = "seg-{:08d}"
DESCRIPTOR = "shard.json"
DAMAGED = "damaged-"  # prefix of a journal with damaged lines that a checkpoint kept aside
_NAME = re.compile(r"^(wal|seg)-(\d{8})(\.ndjson)?$")


def listing(folder: Path) -> tuple[list[int], list[int]]:
    """Generations of the complete checkpoints and of the journals in `folder`, ascending."""
    segs: list[int] = []
    wals: list[int] = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return segs, wals
    for name in names:
        match = _NAME.match(name)
        if match:
            (segs if match[1] == "seg" else wals).append(int(match[2]))
    return sorted(segs), sorted(wals)


def recorded_descriptor(folder: Path) -> dict[str, Any] | None:
    """The shard's descriptor from the copies kept beside its data (the newest checkpoint's
    manifest, else a journal's header), for when `shard.json` is lost or damaged."""
    segs, wals = listing(folder)
    for gen in reversed(segs):
        try:
            manifest = read_manifest(folder / SEG.format(gen))
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


class MissingCheckpoint(Damaged):
    """The journals after a checkpoint are there but the checkpoint is not."""


def check_chain(folder: Path, newest: int, wals: list[int]) -> None:
    """Raise `MissingCheckpoint` if the journals after checkpoint `newest` do not start right
    after it. Every journal is created as `wal-<checkpoint + 1>` and a checkpoint is renamed
    into place before the journals it covers are deleted, so a gap means a checkpoint folder
    was lost: reading on would silently drop its records."""
    after = [gen for gen in wals if gen > newest]
    if after and after[0] != newest + 1:
        lost = folder / SEG.format(after[0] - 1)
        raise MissingCheckpoint(
            f"{lost} is missing (the journals after it remain): run `mem doctor --repair`",
            {"file": str(lost), "why": "missing"},
        )


class Shard(Scope):
    def __init__(self, folder: Path | None, schema: Schema, dim: int, descriptor: dict[str, Any] | None = None):
        self.folder = folder
        self.schema = schema
        self.dim = dim if schema.indexed else 0
        self.descriptor = descriptor or {}
        self.on_create: Callable[[], None] | None = None  # called when the folder is first written
        self.on_delete: Callable[[], None] | None = None  # called after a delete is logged (a purge is due)
        self.on_append: Callable[[], None] | None = None  # called after any write is logged
        self.seg: Segment | None = None
        self.journals: list[Journal] = []
        self.version = 0
        self._reset(None)

    # -- reading the disk -------------------------------------------------------------------

    @property
    def seg_gen(self) -> int:
        return self.seg.gen if self.seg else 0

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
        segs, wals = listing(self.folder)
        newest = segs[-1] if segs else 0
        check_chain(self.folder, newest, wals)
        # A journal we know that is gone (deleted, or never opened before its folder was removed)
        # means the shard was deleted or replaced under us: start again from what is on disk.
        gone = any(j.unlinked() or j.gen not in wals for j in self.journals)
        if newest != self.seg_gen or gone:
            self._reset(self._open_segment(newest) if newest else None)
        known = {j.gen for j in self.journals}
        for gen in wals:
            if gen > self.seg_gen and gen not in known:
                self.journals.append(Journal(self.folder / WAL.format(gen), gen))
        self.journals.sort(key=lambda j: j.gen)
        for journal in self.journals:
            for op in journal.read_new():
                self._apply(op)

    def _open_segment(self, gen: int) -> Segment:
        assert self.folder is not None
        seg = open_segment(self.folder / SEG.format(gen))
        if self.dim and int(seg.meta["dim"]) != self.dim:  # mid-reindex: words only, no vectors
            seg.blind(self.dim)
        return seg

    def _reset(self, seg: Segment | None) -> None:
        for journal in self.journals:
            journal.close()
        if self.seg is not None:
            self.seg.close()
        self.seg = seg
        self.tomb: set[int] = set()
        self.mem = Memtable(self.dim, self.schema.text if self.schema.indexed else None)
        self.journals = []
        self.version += 1
        # a lower bound of the records' expiry times: when it is past, something may need purging
        self.next_expiry = float(seg.expires.min()) if seg is not None and seg.n else math.inf
        # records whose vectors have another dimension (not searchable by vector; see above)
        self.foreign_vectors = seg.n if seg is not None and self.dim and int(seg.meta["dim"]) != self.dim else 0

    # -- writing ----------------------------------------------------------------------------

    def append(self, op: Op) -> None:
        """Durably log `op`. The caller holds the lock and has refreshed. The in-memory state
        picks the line up at the next refresh, like any other process's write, so a one-shot
        command that exits after writing never pays for applying it."""
        if self.folder is None:
            self._apply(op)
        else:
            self._active_journal().append(op)
            self.version += 1
            if self.on_append is not None:
                self.on_append()
            if op.get("op") == "del" and self.on_delete is not None:
                self.on_delete()

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
        vec = decode_vector(rec["vec"]) if self.dim and rec.get("vec") else None
        if vec is not None and len(vec) != self.dim:
            vec = None  # made with another embedder: see the module's docstring
            self.foreign_vectors += 1
        self.next_expiry = min(self.next_expiry, expiry(rec["doc"]))
        self.mem.put(rid, rec["doc"], rec.get("size") or len(orjson.dumps(rec["doc"])), vec)

    def _remove(self, rid: str) -> None:
        if not self.mem.remove(rid):
            self._bury(rid)

    def _bury(self, rid: str) -> None:
        row = self.seg.find(rid) if self.seg else None
        if row is not None:
            self.tomb.add(row)

    # -- reading the state ------------------------------------------------------------------

    def get(self, rid: str, now: float) -> dict[str, Any] | None:
        """The live record `rid`, or None (missing, deleted or expired)."""
        doc = self.mem.get(rid)
        if doc is None:
            row = self.seg.find(rid) if self.seg else None
            if row is None or row in self.tomb:
                return None
            doc = self.seg.doc(row)  # type: ignore[union-attr]
        return doc if expiry(doc) > now else None

    def last(self, now: float) -> dict[str, Any] | None:
        """The newest live record: the memtable's last written (slots are kept in write order
        by `slot_of`), else the checkpoint's last live row (rows are in write order too)."""
        for rid in reversed(self.mem.slot_of):
            doc = self.mem.docs[self.mem.slot_of[rid]]
            if doc is not None and expiry(doc) > now:
                return doc
        if self.seg is not None:
            alive = np.flatnonzero(self.seg_alive(now))
            if len(alive):
                return self.seg.doc(int(alive[-1]))
        return None

    def seg_alive(self, now: float) -> np.ndarray:
        """Mask of checkpoint rows that are neither superseded, deleted nor expired."""
        if self.seg is None:
            return np.zeros(0, dtype=bool)
        alive = self.seg.expires > now
        if self.tomb:
            alive[np.fromiter(self.tomb, dtype=np.int64)] = False
        return alive

    def mem_alive(self, now: float) -> np.ndarray:
        return self.mem.expires[: self.mem.n] > now

    def docs(self, now: float) -> Iterator[dict[str, Any]]:
        """Every live record: checkpoint rows in order, then newer records in slot order."""
        if self.seg is not None:
            for row in np.flatnonzero(self.seg_alive(now)):
                yield self.seg.doc(int(row))
        alive = self.mem_alive(now)
        for slot, doc in self.mem.items():
            if alive[slot]:
                yield doc

    def usage(self, now: float) -> tuple[int, int]:
        """(live records, their bytes)."""
        seg_alive, mem_alive = self.seg_alive(now), self.mem_alive(now)
        seg_bytes = int(self.seg.sizes[seg_alive].sum()) if self.seg is not None else 0
        mem_bytes = int(np.asarray(self.mem.sizes)[mem_alive].sum()) if self.mem.n else 0
        return int(seg_alive.sum() + mem_alive.sum()), seg_bytes + mem_bytes

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
        self._reset(None)
