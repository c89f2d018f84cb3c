"""The append-only log in front of a checkpoint: one fsync'd NDJSON line per acknowledged write.

Writers append under the store's lock; readers never lock: they consume complete lines only, so
a line being written by another process is simply picked up on the next read. A last line with
no newline can only be the remains of a writer that died mid-write (writers hold the lock), so
the next writer cuts it off before appending and a reader ignores it: a torn tail is never fatal
and never swallows the next write.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .log import logger
from .paths import FILE_MODE, fsync_dir

Op = dict[str, Any]


class Journal:
    """One log file, read incrementally from `offset` and appended to under the lock."""

    def __init__(self, path: Path, gen: int) -> None:
        self.path = path
        self.gen = gen
        self.offset = 0  # how far this process has read
        self._written = 0  # where this process's last append ended
        self._fd: int | None = None

    @classmethod
    def create(cls, path: Path, gen: int) -> Journal:
        """Create an empty log file (the caller holds the lock)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        os.close(fd)
        fsync_dir(path.parent)
        return cls(path, gen)

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def read_new(self) -> Iterator[Op]:
        """Yield the operations written since the last call, complete lines only."""
        fd = self._open()
        size = os.fstat(fd).st_size
        if size <= self.offset:
            return
        data = os.pread(fd, size - self.offset, self.offset)
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            op = _parse(line)
            if op is not None:
                yield op
        self.offset += end

    def append(self, op: Op) -> None:
        """Durably append one operation. The caller holds the lock and has read to the end; the
        line is not applied here: the next `read_new` returns it like any other."""
        fd = self._open()
        end = max(self.offset, self._written)
        if os.fstat(fd).st_size != end:
            self._cut_torn_tail(fd, end)
        line = orjson.dumps(op) + b"\n"
        try:
            written = os.pwrite(fd, line, end)
        except BaseException:
            _truncate_quietly(fd, end)  # a part of the line may be there: remove it
            raise
        if written != len(line):
            _truncate_quietly(fd, end)
            raise OSError(errno.ENOSPC, f"short write to {self.path.name}")
        self._written = end + len(line)
        # A failed fdatasync leaves the line where it is: readers (which take no lock) may have
        # seen it already, so cutting it would make their view diverge from the file. The write
        # is reported as failed and its outcome is unknown, as after a timeout; a retry of the
        # same key is an idempotent upsert.
        os.fdatasync(fd)

    def _cut_torn_tail(self, fd: int, end: int) -> None:
        """Drop bytes past the last complete line: a writer died while writing them."""
        tail = os.pread(fd, os.fstat(fd).st_size - end, end)
        if b"\n" in tail:  # complete lines we have not read: the caller broke the protocol
            raise RuntimeError("journal append before reading to the end")
        logger("journal").warning("cutting %d torn bytes from %s", len(tail), self.path.name)
        os.ftruncate(fd, end)

    def pending(self) -> int:
        """Bytes in the file (read or not): what a checkpoint would fold in."""
        return max(self.offset, self._written)

    def size(self) -> int:
        return os.fstat(self._open()).st_size

    def unlinked(self) -> bool:
        """Whether the file read and appended to is no longer in the shard (deleted with it)."""
        return self._fd is not None and os.fstat(self._fd).st_nlink == 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _truncate_quietly(fd: int, size: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)


def _parse(line: bytes) -> Op | None:
    try:
        op = orjson.loads(line)
    except orjson.JSONDecodeError:
        logger("journal").warning("skipping an unreadable journal line (%d bytes)", len(line))
        return None
    return op if isinstance(op, dict) else None
