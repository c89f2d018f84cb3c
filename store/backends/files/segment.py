"""A segment: an immutable folder holding a TinyDB file and what is derived from it.

`seg-<gen>/` covers every journal up to `wal-<gen>`, `seg-<lo>-<hi>/` the journals `wal-<lo>` to
`wal-<hi>` (see `shard.py`). Beside `data.json` (the records, a TinyDB file) and `tombs.json` (the
ids of older segments' records it deletes) it holds numpy columns for filtering and ordering
without parsing records (`expires`, `updated`, `when` (the record's own time,
`timeaware.entry_time`; a segment older than this column computes it from its records on first
use), `scores`, `sizes`, id hashes), tag postings, and for searchable shards the vectors
(float16), the BM25 postings and the Annoy index. Built in a temporary folder and renamed into
place, so a reader sees a whole segment or none.

`manifest.json`, written last, lists every file with its size and checksum, and keeps a copy of
the shard's descriptor and of the embedder (from which `mem doctor --repair` restores
`shard.json` and `store.json`). Opening a checkpoint checks every file against it except
`data.json`, whose records are checked one by one as they are read (`checksums.npy`), and hashes
none that an earlier process verified and that has not changed since (`stamps.py`). A damaged
Annoy index is never loaded (random bytes in it crash Annoy): search falls back to exact
scoring and a warning says so. When another derived file (a column, the postings, the tags) is
damaged but the records and vectors are intact, `open_segment` rebuilds the derived files in a
private temporary folder and answers from those, with a warning (the next checkpoint, or `mem
doctor --repair`, writes them back for good). Otherwise the shard's reads fail with an error
naming the damaged file, rather than answers computed from garbage.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ...errors import Damaged
from ...lexical import SegmentLexicon, write_segment_lexicon
from ...log import logger
from ...paths import naming, save_array, write_file
from ...schemas import Schema
from ...timeaware import entry_time
from . import index as ann
from .integrity import (
    CHECKSUMS,
    checksum,
    damaged,
    file_checksum,
    file_problem,
    read_manifest,
    record_checksum,
    size_problem,
    write_manifest,
)
from .stamps import Stamps
from .storage import RecordFile, write_records

DATA = "data.json"
TOMBS = "tombs.json"
# Checked by size on open, their checksums on first use: records one by one as they are read, the
# vectors when a search or a checkpoint first reads them, the index before it is loaded (most
# commands need none of them, and these are the big files).
VECTORS = "vectors.npy"
CHECKED_LATER = (DATA, VECTORS, ann.FILE)
FIND_WITH_SORTER = 8  # finds before `Segment._sorted_hashes` is made
EXACT_CACHE = 20_000  # checkpoints up to this size keep a float32 copy of their vectors (20 MB)


def id_hash(rid: str) -> int:
    return int.from_bytes(hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def number(value: Any, default: float) -> float:
    """A numeric column value: numbers as they are, anything else (an ISO string) the default."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def expiry(doc: dict[str, Any]) -> float:
    value = doc.get("expires_at")
    return math.inf if value is None else float(value)


def write_segment(
    folder: Path,
    docs: Sequence[dict[str, Any]],
    vectors: np.ndarray | None,
    schema: Schema,
    embedder: str,
    descriptor: dict[str, Any] | None = None,
    index: bool = True,
    tombs: Sequence[str] = (),
) -> None:
    """Write a complete segment of `docs` (each with an "id") into the empty `folder`, deleting
    the ids `tombs` from older segments; the shard's `descriptor` is kept in its manifest.
    `index=False` skips the Annoy index (a stand-in for a damaged checkpoint searches exactly)."""
    with naming(folder / DATA):
        spans = write_records(folder / DATA, docs)
    with open(folder / DATA, "rb") as f:
        data = f.read()
    sums = np.array([record_checksum(data[start:end]) for start, end in spans], dtype=np.uint64)
    save_array(folder / CHECKSUMS, sums)
    hashes = np.array([id_hash(d["id"]) for d in docs], dtype=np.uint64)
    columns: dict[str, np.ndarray] = {
        "offsets": np.array(spans, dtype=np.int64).reshape(-1, 2),
        "hashes": hashes,
        "hash_order": np.argsort(hashes, kind="stable").astype(np.int32),
        "expires": np.array([expiry(d) for d in docs], dtype=np.float64),
        "updated": np.array([number(d.get("updated_at"), 0.0) for d in docs], dtype=np.float64),
        "scores": np.array([number(d.get("score"), 1.0) for d in docs], dtype=np.float32),
        "when": np.array([entry_time(d) for d in docs], dtype=np.float64),
    }
    for name, array in columns.items():
        save_array(folder / f"{name}.npy", array)
    tags: dict[str, list[int]] = {}
    for row, doc in enumerate(docs):
        for tag in doc.get("tags") or ():
            tags.setdefault(tag, []).append(row)
    write_file(folder / "tags.json", orjson.dumps(tags))
    write_file(folder / TOMBS, orjson.dumps(sorted(tombs)))
    dim = 0
    if schema.indexed and vectors is not None:
        dim = int(vectors.shape[1])
        save_array(folder / "vectors.npy", vectors.astype(np.float16))
        write_segment_lexicon(folder, [schema.text(d) for d in docs])
        if len(docs) and index:
            ann.build(folder, vectors)
    sizes = columns["offsets"][:, 1] - columns["offsets"][:, 0]
    meta = {
        "count": len(docs), "bytes": int(sizes.sum()), "schema": schema.name, "dim": dim, "embedder": embedder,
        "tombs": len(tombs),
    }  # fmt: skip
    write_file(folder / "meta.json", orjson.dumps(meta))
    shard = {"schema": schema.name, **(descriptor or {})}
    write_manifest(folder, {"meta": meta, "shard": shard})


def open_segment(folder: Path) -> Segment:
    """The checkpoint in `folder`; if a derived file is damaged but `data.json` and the vectors
    pass their checksums, a stand-in rebuilt from them (see the module's docstring)."""
    try:
        return Segment(folder)
    except Damaged as exc:
        stand_in = _rebuilt(folder)
        if stand_in is None:
            raise
        where, why = exc.detail.get("file", str(folder)), exc.detail.get("why", "damaged")
        logger("segment").warning(
            "%s is damaged (%s): answering from a rebuilt copy; run `mem doctor --repair`", where, why
        )
        return stand_in


def _rebuilt(folder: Path) -> Segment | None:
    """A Segment over derived files made anew from the trusted records and vectors, or None."""
    import shutil
    import tempfile

    from ...schemas import SCHEMAS

    manifest = read_manifest(folder)  # raises Damaged itself if it cannot be trusted
    files = manifest["files"] if manifest else {}
    trusted = (DATA, VECTORS) if VECTORS in files else (DATA,)
    if manifest is None or any(name not in files or file_problem(folder, name, files[name]) for name in trusted):
        return None
    meta, shard = manifest["meta"], manifest.get("shard", {})
    docs = list(orjson.loads((folder / DATA).read_bytes())["records"].values())  # its checksum held
    if len(docs) != meta["count"] or (TOMBS in files and file_problem(folder, TOMBS, files[TOMBS])):
        return None
    tombs = orjson.loads((folder / TOMBS).read_bytes()) if TOMBS in files else []
    vectors = np.load(folder / VECTORS).astype(np.float32) if VECTORS in files else None
    tmp = Path(tempfile.mkdtemp(prefix="mem-rebuilt-"))
    try:
        (tmp / folder.name).mkdir()
        write_segment(tmp / folder.name, docs, vectors, SCHEMAS[meta["schema"]], meta["embedder"], shard, index=False,
                      tombs=tombs)  # fmt: skip
        segment = Segment(tmp / folder.name)  # every file is open or read now: the folder can go
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    segment.folder = folder
    return segment


def _map(path: Path) -> mmap.mmap | None:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None


class Segment:
    """Read access to a checkpoint folder: big arrays memory-mapped, small files read at once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        parts = folder.name.split("-")
        self.gen = int(parts[-1])  # the newest journal generation it covers
        self.lo = int(parts[1]) if len(parts) > 2 else 1  # the oldest
        self.manifest = read_manifest(folder)
        self._stamps = Stamps(folder)
        self._trusted: set[str] = set()  # files verified in full, here or by an earlier process
        self._vectors_stat: tuple[os.stat_result, int] | None = None  # (stat, began) before it was hashed
        index_ok = self._verify()
        self._stamps.save()
        self.meta = orjson.loads((folder / "meta.json").read_bytes())
        self.n = int(self.meta["count"])
        # Every file is opened (mapped or read) now: a checkpoint may delete this folder at any
        # time, and what is open stays readable, where a lazy open would fail.
        self.offsets = self._array("offsets")
        self.expires = self._array("expires")
        self.updated = self._array("updated")
        self.scores = self._array("scores")
        self._when = self._array("when") if (folder / "when.npy").exists() else None
        self._hashes = self._array("hashes"), self._array("hash_order")
        self._finds = 0
        self._tags_raw = (folder / "tags.json").read_bytes()
        tombs = orjson.loads((folder / TOMBS).read_bytes()) if (folder / TOMBS).exists() else []
        self.tomb_ids: frozenset[str] = frozenset(tombs)
        self.tomb_hashes = np.array(sorted(id_hash(rid) for rid in tombs), dtype=np.uint64)
        self._records = RecordFile(folder / DATA)
        dim = int(self.meta["dim"])
        self._vectors = self._array("vectors") if dim else np.zeros((self.n, 0), dtype=np.float16)
        # the whole file, mapped now (a checkpoint may delete it) and hashed on first use, unless
        # an earlier process verified it and it has not changed since
        unchecked = dim and self.manifest is not None and VECTORS not in self._trusted
        self._vectors_unchecked = _map(folder / VECTORS) if unchecked else None
        self.lexicon = SegmentLexicon(folder) if dim else None
        listed = self.manifest is not None and ann.FILE in self.manifest["files"]
        self._index_ok = bool(dim and self.n and index_ok and listed)
        sealed = self.manifest is not None and CHECKSUMS in self.manifest["files"]
        self._sums = self._array("checksums") if sealed else None  # older checkpoints have none

    def _verify(self) -> bool:
        """Check every file against the manifest (see CHECKED_LATER); raise `Damaged` naming a
        bad file. Returns whether the Annoy index may be loaded: not when its size is wrong
        (search is then exact), nor without a manifest (a checkpoint of an older version, or one
        whose manifest was lost: `mem doctor` reports it)."""
        if self.manifest is None:  # info, not a warning: every command would repeat it until a checkpoint
            logger("segment").info("%s has no manifest: its index is not used (see `mem doctor`)", self.folder)
            return False
        index_ok = True
        for name, entry in self.manifest["files"].items():
            problem = self._check(name, entry, full=name not in CHECKED_LATER)
            if problem is None:
                continue
            if name == ann.FILE:
                logger("segment").warning("%s/%s is damaged (%s): searching exactly; run `mem doctor --repair`",
                                          self.folder, name, problem)  # fmt: skip
                index_ok = False
            else:
                raise damaged(self.folder / name, problem)
        return index_ok

    def _check(self, name: str, entry: dict[str, Any], full: bool) -> str | None:
        """What is wrong with file `name` by its manifest `entry`, or None. A file an earlier
        process verified, unchanged since (`stamps.py`), is not hashed again; otherwise only its
        size is checked unless `full`."""
        began = self._stamps.began()
        try:
            st = os.stat(self.folder / name)
        except FileNotFoundError:
            return "missing"
        problem = size_problem(st.st_size, entry)
        if problem is not None:
            return problem
        if self._stamps.holds(name, entry, st):
            self._trusted.add(name)
            return None
        if name == VECTORS:
            self._vectors_stat = st, began  # hashed on first use, through the map made at open
        if not full:
            return None
        if file_checksum(self.folder / name) != entry.get("xxh3"):
            return "checksum mismatch"
        self._stamps.verified(name, entry, st, began)
        self._trusted.add(name)
        return None

    @cached_property
    def index(self) -> ann.Index | None:
        """The Annoy index, loaded on first use (most commands never search a checkpoint big
        enough to need it) and only after its checksum held: random bytes crash Annoy. None
        means search exactly: no index, a damaged one, or one a checkpoint removed meanwhile."""
        if not self._index_ok:
            return None
        assert self.manifest is not None
        try:
            entry = self.manifest["files"][ann.FILE]
            problem = None if ann.FILE in self._trusted else self._check(ann.FILE, entry, full=True)
            self._stamps.save()
            if problem is None:
                return ann.Index(self.folder, int(self.meta["dim"]))
        except FileNotFoundError:
            problem = "missing"
        if problem == "missing":  # a checkpoint replaced this one meanwhile: the next refresh sees it
            return None
        logger("segment").warning("%s/%s is damaged (%s): searching exactly; run `mem doctor --repair`",
                                  self.folder, ann.FILE, problem)  # fmt: skip
        return None

    @property
    def vectors(self) -> np.ndarray:
        """The float16 vectors; the first use checks them against the manifest."""
        if self._vectors_unchecked is not None:
            assert self.manifest is not None
            entry = self.manifest["files"][VECTORS]
            if VECTORS not in self._trusted:
                if checksum(self._vectors_unchecked) != entry["xxh3"]:
                    raise damaged(self.folder / VECTORS, "checksum mismatch")
                if self._vectors_stat is not None:
                    self._stamps.verified(VECTORS, entry, *self._vectors_stat)
                    self._stamps.save()
            self._vectors_unchecked.close()
            self._vectors_unchecked = None
        return self._vectors

    def blind(self, dim: int) -> None:
        """Search this checkpoint by words, keys and tags only: its vectors have another dimension
        than the store's embedder makes (a reindex has not reached it yet), so they are replaced
        by zeros of `dim` and its index is never used."""
        self._vectors = np.zeros((self.n, dim), dtype=np.float16)
        if self._vectors_unchecked is not None:
            self._vectors_unchecked.close()
            self._vectors_unchecked = None
        index = self.__dict__.get("index")
        if index is not None:
            index.close()
        self._index_ok = False
        self.__dict__["index"] = None

    def _array(self, name: str) -> np.ndarray:
        """A memory-mapped column, as a plain ndarray view (indexing np.memmap is much slower)."""
        path = self.folder / f"{name}.npy"
        try:
            return np.asarray(np.load(path, mmap_mode="r"))
        except (ValueError, EOFError) as exc:  # not a .npy file any more (one without a manifest)
            raise damaged(path, f"unreadable: {exc}") from None

    @property
    def when(self) -> np.ndarray:
        """Each record's own time; read from the records once for a checkpoint older than the column."""
        if self._when is None:
            self._when = np.array([entry_time(self.doc(row)) for row in range(self.n)], dtype=np.float64)
        return self._when

    @cached_property
    def sizes(self) -> np.ndarray:
        return np.asarray(self.offsets[:, 1] - self.offsets[:, 0])

    @cached_property
    def tags(self) -> dict[str, list[int]]:
        return orjson.loads(self._tags_raw)

    @cached_property
    def _vectors32(self) -> np.ndarray:
        """float32 copy of the vectors, for exact scoring of small checkpoints (numpy's float16
        products are slow)."""
        return np.asarray(self.vectors, dtype=np.float32)

    def similarities(self, query: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Cosine of `query` with the given rows (all rows if None)."""
        if rows is not None:
            return np.asarray(self.vectors[rows], dtype=np.float32) @ query
        if self.n <= EXACT_CACHE:
            return self._vectors32 @ query
        out = np.empty(self.n, dtype=np.float32)  # big and exhaustive: convert a slice at a time
        for start in range(0, self.n, 8192):
            out[start : start + 8192] = np.asarray(self.vectors[start : start + 8192], dtype=np.float32) @ query
        return out

    def doc(self, row: int) -> dict[str, Any]:
        start, end = self.offsets[row]
        raw = self._records.raw(int(start), int(end))
        if self._sums is not None and record_checksum(raw) != int(self._sums[row]):
            raise self._damaged_record(row)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:  # an older checkpoint, without record checksums
            raise self._damaged_record(row) from None

    def _damaged_record(self, row: int) -> Damaged:
        """A record that fails its checksum: data.json, unless a file that locates or seals the
        records (offsets, checksums) was itself changed since this process checked it."""
        return self.damage_found() or damaged(self.folder / DATA, f"record {row + 1}")

    def damage_found(self) -> Damaged | None:
        """The first file of the folder that no longer matches its manifest, checked in full now.
        The files were checked when the segment was opened; one written over in place later (the
        process keeps it mapped) is found only here, when a read of it went wrong."""
        for name, entry in (self.manifest or {"files": {}})["files"].items():
            problem = file_problem(self.folder, name, entry)
            if problem is not None:
                return damaged(self.folder / name, f"{problem}, found on reading it")
        return None

    def find(self, rid: str) -> int | None:
        """The row holding record `rid`, if the checkpoint has it."""
        if not self.n:
            return None
        hashes, order = self._hashes
        h = np.uint64(id_hash(rid))
        self._finds += 1
        if self._finds <= FIND_WITH_SORTER:  # a few finds (a one-shot command): not worth the copy
            lo = int(np.searchsorted(hashes, h, sorter=order, side="left"))
            hi = int(np.searchsorted(hashes, h, sorter=order, side="right"))
        else:
            lo = int(np.searchsorted(self._sorted_hashes, h, side="left"))
            hi = int(np.searchsorted(self._sorted_hashes, h, side="right"))
        for pos in range(lo, hi):
            row = int(order[pos])
            if self.doc(row).get("id") == rid:
                return row
        return None

    @cached_property
    def _sorted_hashes(self) -> np.ndarray:
        """The id hashes in ascending order, made once `find` has been called more than
        `FIND_WITH_SORTER` times (8 MB and 12 ms at a million rows): a search with `sorter=`
        checks the whole sorter on every call (0.6 ms at a million rows, twice per `find`, and a
        process replaying a journal finds every id it holds)."""
        hashes, order = self._hashes
        return hashes[order]

    @property
    def hashes(self) -> np.ndarray:
        """The id hash of every row."""
        return self._hashes[0]

    def has_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """Mask of `hashes` that some row's id has (an id with that hash may be here)."""
        if not self.n or not len(hashes):
            return np.zeros(len(hashes), dtype=bool)
        return np.isin(hashes, self.hashes)

    def tag_rows(self, tag: str) -> np.ndarray:
        return np.asarray(self.tags.get(tag, ()), dtype=np.int64)

    def close(self) -> None:
        self._records.close()
        if self._vectors_unchecked is not None:
            self._vectors_unchecked.close()
        index = self.__dict__.get("index")  # only if it was loaded
        if index is not None:
            index.close()
