"""Reading a damaged shard: every record that can still be trusted, and what was lost.

Used by `mem doctor --repair` (which then writes a fresh checkpoint of what was saved) and by
`mem export` on a shard that cannot be opened. Nothing here trusts a derived file that failed
its checksum: the records come from `data.json`, scanned record by record (so a truncated or
overwritten file still yields every intact record; each is checked against `checksums.npy` when
that column is intact), segment after segment (each one's tombstones applied), then the journals
after the segments are replayed, valid lines only. When a segment in the middle is lost, only
the segments after it are read: an older one could bring back records the lost one deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...errors import Damaged
from .integrity import (
    CHECKSUMS,
    file_problem,
    lines_lost,
    read_manifest,
    record_checksum,
    scan_journal,
    scan_records,
)
from .segment import TOMBS
from .shard import DAMAGED, WAL, MissingCheckpoint, check_chain, foreign_header, live_ranges, scan, seg_name


@dataclass
class Salvage:
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> record, journals applied
    from_checkpoint: int = 0  # records read from the checkpoint file
    expected: int | None = None  # records the checkpoint was written with (None: unknown)
    bad_lines: int = 0  # journal lines skipped (each a write whose records are lost)
    missing: str | None = None  # a checkpoint folder that is gone, its records with it
    segments: int = 0  # segments read
    untrusted_tombs: list[str] = field(default_factory=list)  # damaged tombstone files, not applied
    unread: list[tuple[str, str]] = field(default_factory=list)  # (file, why) of files not read at all

    @property
    def lost(self) -> int | None:
        """Checkpoint records that could not be read (None when a whole checkpoint, or a file
        that could not be read at all, is gone: how many it held is unknown)."""
        if self.missing is not None or self.unread:
            return None
        return max(0, (self.expected or 0) - self.from_checkpoint)


def salvage_shard(folder: Path, descriptor: dict[str, Any] | None = None) -> Salvage:
    """Everything readable in the shard `folder` (the caller holds its lock when it rewrites).
    A file that cannot be read at all (permissions, a folder in its place) and a journal whose
    header names another shard than `descriptor` (copied from elsewhere) are passed over, noted
    in `unread`."""
    result = Salvage()
    ranges, wals = scan(folder)
    chain = live_ranges(ranges)
    base = chain[-1][1] if chain else 0
    # Every segment that is left is read, also those older than a lost one: their records are
    # kept (what the lost segment deleted or overwrote may be back in an older version, which
    # the finding says) rather than thrown away with it.
    _note_gaps(folder, chain, result)
    for lo, hi in chain:
        try:
            read_checkpoint(folder / seg_name(lo, hi), result)
        except OSError as exc:
            result.unread.append((str(exc.filename or folder / seg_name(lo, hi)), exc.strerror or "unreadable"))
    try:
        check_chain(folder, base, wals)
    except MissingCheckpoint as exc:
        result.missing = exc.detail["file"]
        base = 0  # the segment the journals build on is gone: replay every journal left
    for kept in folder.glob(f"{DAMAGED}*"):  # its valid lines are in the checkpoint already
        result.bad_lines += lines_lost(scan_journal(kept)[1])
    for gen in (g for g in wals if g > base):
        try:
            ops, bad = scan_journal(folder / WAL.format(gen))
        except OSError as exc:
            result.unread.append((str(folder / WAL.format(gen)), exc.strerror or "unreadable"))
            continue
        stranger = foreign_header(ops, descriptor)
        if stranger:
            result.unread.append((str(folder / WAL.format(gen)), stranger))
            continue
        result.bad_lines += lines_lost(bad)
        for op in ops:
            for rec in op.get("recs", ()):
                result.docs[rec["id"]] = rec["doc"]
            for rid in op.get("ids", ()):
                result.docs.pop(rid, None)
    return result


def _note_gaps(folder: Path, chain: list[tuple[int, int]], result: Salvage) -> None:
    """Note in `result.missing` the last gap in `chain` (a segment folder that is gone)."""
    expected = 1
    for lo, hi in chain:
        if lo != expected:
            result.missing = str(folder / seg_name(expected, lo - 1))
        expected = hi + 1


def read_checkpoint(seg: Path, result: Salvage) -> None:
    """Add the intact records of segment `seg` to `result` (newer versions replace older ones,
    and its tombstones delete them)."""
    part = Salvage()
    _read_segment(seg, part)
    for rid in _tombs(seg, result):
        result.docs.pop(rid, None)
    for rid, doc in part.docs.items():
        result.docs.pop(rid, None)
        result.docs[rid] = doc
    first = result.segments == 0
    result.segments += 1
    result.from_checkpoint += part.from_checkpoint
    if part.expected is None or (result.expected is None and not first):
        result.expected = None  # one segment's count is unknown: so is the total
    else:
        result.expected = (result.expected or 0) + part.expected
    if part.missing is not None:
        result.missing = part.missing


def _tombs(seg: Path, result: Salvage) -> list[str]:
    """The ids segment `seg` deletes; none when its `tombs.json` does not match its manifest
    (damaged tombstones would delete live records: the deleted ones may come back instead,
    which `result.untrusted_tombs` reports)."""
    try:
        manifest = read_manifest(seg)
    except Damaged:
        manifest = None  # nothing to check them against: read as they are, like the records
    entry = (manifest or {}).get("files", {}).get(TOMBS)
    if entry is not None and file_problem(seg, TOMBS, entry) is not None:
        result.untrusted_tombs.append(str(seg / TOMBS))
        return []
    try:
        tombs = orjson.loads((seg / TOMBS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        result.untrusted_tombs.append(str(seg / TOMBS))
        return []
    return [rid for rid in tombs if isinstance(rid, str)] if isinstance(tombs, list) else []


def _read_segment(seg: Path, result: Salvage) -> None:
    try:
        manifest = read_manifest(seg)
    except Damaged:
        manifest = None
    sums = _trusted_checksums(seg, manifest)
    result.expected = _expected_count(seg, manifest)
    try:
        data = (seg / "data.json").read_bytes()
    except FileNotFoundError:
        data = b""
    seen: set[int] = set()
    # a record is the row whose checksum it has, under whichever number it is found (records
    # moved under each other's numbers are kept: an outside audit saw both lost)
    rows = None if sums is None else {int(value): row for row, value in enumerate(sums)}
    for doc_id, raw, doc in scan_records(data):
        row = doc_id - 1 if rows is None else rows.get(record_checksum(raw), -1)
        if row in seen or row < 0:
            continue  # a damaged record that still parses, or a nested object taken for a record
        seen.add(row)
        result.docs[doc["id"]] = doc
    result.from_checkpoint = len(seen)
    if result.expected is None and not seen:  # nothing says how many it held, and none can be read
        result.missing = str(seg)
    elif result.expected is None:
        result.expected = max(seen) + 1


def _expected_count(seg: Path, manifest: dict[str, Any] | None) -> int | None:
    """How many records the checkpoint was written with: from the manifest, else (an older
    checkpoint) from meta.json if it still parses."""
    meta = (manifest or {}).get("meta")
    if meta is None:
        try:
            meta = orjson.loads((seg / "meta.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
    count = meta.get("count") if isinstance(meta, dict) else None
    return count if isinstance(count, int) else None


def _trusted_checksums(seg: Path, manifest: dict[str, Any] | None) -> np.ndarray | None:
    """The record checksums, if the manifest vouches for them."""
    entry = (manifest or {}).get("files", {}).get(CHECKSUMS)
    if manifest is None:  # lost: the column still tells a damaged record from an intact one
        try:
            return np.load(seg / CHECKSUMS)
        except (OSError, ValueError):
            return None
    if entry is None or file_problem(seg, CHECKSUMS, entry) is not None:
        return None
    return np.load(seg / CHECKSUMS)
