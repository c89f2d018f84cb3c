"""TinyDB storage for checkpoint files: orjson, atomic replace, and a byte offset for every record.

A checkpoint is an ordinary TinyDB JSON file (`TinyDB(path)` opens it), written once and never
modified. While serialising, the storage notes where each record starts and ends, so a reader can
parse one record from a memory map without reading the other 100k. This is the only module that
imports tinydb.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
from tinydb import TinyDB
from tinydb.storages import Storage

from ...paths import FILE_MODE

TABLE = "records"


class CheckpointStorage(Storage):
    """Reads and writes a whole TinyDB file; `offsets` holds each record's (start, end) bytes."""

    def __init__(self, path: str | Path, access_mode: str = "r+") -> None:
        self.path = Path(path)
        self.offsets: list[tuple[int, int]] = []

    def read(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return orjson.loads(raw) if raw else None

    def write(self, data: dict[str, Any]) -> None:
        chunks, self.offsets = _serialise(data)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.writelines(chunks)
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass


def _serialise(data: dict[str, Any]) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Render TinyDB's {table: {doc_id: doc}} as JSON, noting each record's span in `TABLE`."""
    chunks: list[bytes] = [b"{"]
    pos = 1
    offsets: list[tuple[int, int]] = []
    for t, (name, table) in enumerate(data.items()):
        head = (b"," if t else b"") + orjson.dumps(name) + b":{"
        chunks.append(head)
        pos += len(head)
        for i, (doc_id, doc) in enumerate(table.items()):
            prefix = (b"," if i else b"") + orjson.dumps(str(doc_id)) + b":"
            body = orjson.dumps(doc)
            chunks += (prefix, body)
            pos += len(prefix)
            if name == TABLE:
                offsets.append((pos, pos + len(body)))
            pos += len(body)
        chunks.append(b"}")
        pos += 1
    chunks.append(b"}")
    return chunks, offsets


def write_records(path: Path, docs: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """Write a fresh TinyDB file holding `docs` (doc ids 1..N in order); return their spans."""
    db = TinyDB(path, storage=CheckpointStorage)
    try:
        db.table(TABLE).insert_multiple(docs)
        storage: CheckpointStorage = db.storage  # type: ignore[assignment]
        return storage.offsets
    finally:
        db.close()


class RecordFile:
    """Random access to the records of a checkpoint file through a memory map."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def load(self, start: int, end: int) -> dict[str, Any]:
        return orjson.loads(self.raw(start, end))

    def raw(self, start: int, end: int) -> bytes:
        """The bytes of one record (checked against its checksum by the caller)."""
        assert self._map is not None
        return self._map[start:end]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()


def read_all(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of a checkpoint file, through TinyDB itself (used by `mem doctor`)."""
    db = TinyDB(path, storage=CheckpointStorage, access_mode="r")
    try:
        yield from db.table(TABLE).all()
    finally:
        db.close()
