"""The append-only log in front of a checkpoint: one fsync'd NDJSON line per acknowledged write.

Writers append under the store's lock; readers never lock: they consume complete lines only, so
a line being written by another process is simply picked up on the next read. A last line with
no newline is the remains of a writer that died mid-write (writers hold the lock), so the next
writer cuts it off before appending and a reader ignores it: a torn tail is never fatal and never
swallows the next write. Unless it is a whole sealed line (its checksum holds, `intact_tail`):
then only its newline was lost (a final byte cut off, an editor that strips it), and it may be an
acknowledged write. It is read like any line, and the next append writes the missing newline
before its own line (a reader that read it skips that newline).

Every line is sealed with its checksum (see `integrity.py`), and a journal starts with a header
line holding the shard's descriptor (a copy of `shard.json`, from which `mem doctor --repair`
restores it). A complete line that fails its checksum or is not a well-formed operation is
skipped with a warning naming the file and line, and `mem doctor` reports it; lines without a
checksum are read as before only in journals of older versions (no sealed line yet).

Each operation line also carries its number in the file (`"line"`, the header being line 1), so
that whole lines lost from the middle (a block of the file zeroed and cut out, an edit) are
found: a line numbered past the count of lines before it leaves a gap (missing unless a moved
line fills it), and one that repeats an earlier number is skipped (`integrity.LineOrder`). What
no number can tell is a file that lost its last lines: that looks like a journal whose writers
stopped there (and a torn last line like a writer that died mid-write).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...log import logger
from ...paths import FILE_MODE, fsync_dir
from .integrity import LineOrder, complete_lines, intact_tail, is_blank, parse_line, seal, whole_lines

Op = dict[str, Any]


class Journal:
    """One log file, read incrementally from `offset` and appended to under the lock."""

    def __init__(self, path: Path, gen: int) -> None:
        self.path = path
        self.gen = gen
        self.offset = 0  # how far this process has read
        self._written = 0  # where this process's last append ended
        self._fd: int | None = None
        self._refused: OSError | None = None  # why the file could be opened for reading only
        self._lines = 0  # complete lines read so far (for naming a bad one)
        self._order = LineOrder()  # the numbers ("line") of the lines read so far
        self._next_written = 1  # the number of a line appended right after this process's last one
        self._sealed = False  # a sealed line was read: every later line must be sealed too
        self.skipped = 0  # damaged or missing lines (a checkpoint keeps such a journal aside)
        self._unended = False  # the last line read had lost its newline (`intact_tail`)

    @classmethod
    def create(cls, path: Path, gen: int, descriptor: dict[str, Any] | None = None) -> Journal:
        """Create a log file (the caller holds the lock), starting with a header line holding the
        shard's `descriptor` when given."""
        header = seal({"op": "shard", "format": 2, "shard": descriptor}) + b"\n" if descriptor else b""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            if header and os.write(fd, header) != len(header):
                raise OSError(errno.ENOSPC, f"short write to {path.name}")
            os.fdatasync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
        journal = cls(path, gen)
        journal._written = len(header)
        journal._next_written = 2 if header else 1
        return journal

    def _open(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR)
            except OSError as exc:  # a read-only store (media, a mount, permissions): it can still be read
                if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                    raise
                self._fd = os.open(self.path, os.O_RDONLY)
                self._refused = exc  # what an append says
        return self._fd

    def read_new(self) -> Iterator[Op]:
        """Yield the operations written since the last call, complete lines only."""
        fd = self._open()
        size = os.fstat(fd).st_size
        if size <= self.offset:
            return
        data = os.pread(fd, size - self.offset, self.offset)
        if self._unended and data.startswith(b"\n"):  # the newline an append put after that line
            self.offset += 1
            data = data[1:]
        self._unended = False
        end = data.rfind(b"\n") + 1
        tail = intact_tail(data)
        if tail is not None:
            logger("journal").warning("the last line of %s had lost its newline: read as a whole line", self.path)
        for line in complete_lines(data[:end]) + ([tail] if tail is not None else []):
            self._lines += 1
            if is_blank(line):
                continue
            op, problem, self._sealed = parse_line(line, self._sealed)
            if not self._in_sequence(op):
                continue
            if op is None:
                self.skipped += 1
                logger("journal").warning(
                    "skipping line %d of %s (%s): run `mem doctor`", self._lines, self.path, problem
                )
            else:
                op.pop("line", None)  # the operation as it was appended
                yield op
        self.offset += end if tail is None else len(data)
        self._unended = tail is not None

    def _in_sequence(self, op: Op | None) -> bool:
        """Check the line's number (`integrity.LineOrder`); False for a line that repeats an
        earlier one, skipped (applying it again could bring back what was deleted since)."""
        problem = self._order.check(op, self._lines)
        if problem is None:
            return True
        self.skipped += 1  # a checkpoint keeps the journal aside for `mem doctor`
        logger("journal").warning("line %d of %s: %s: run `mem doctor`", self._lines, self.path, problem.text)
        return problem.kind != "repeat"

    def append(self, op: Op) -> None:
        """Durably append one operation. The caller holds the lock and has read to the end; the
        line is not applied here: the next `read_new` returns it like any other."""
        fd = self._open()
        if self._refused is not None:
            raise OSError(self._refused.errno, self._refused.strerror, str(self.path))
        end = max(self.offset, self._written)
        if os.fstat(fd).st_size != end:
            self._cut_torn_tail(fd, end)
        number = self._order.next_number() if self.offset >= self._written else self._next_written
        ending = b"\n" if self._unended and self.offset >= self._written else b""  # the line read had lost it
        line = ending + seal({**op, "line": number}) + b"\n"
        try:
            written = os.pwrite(fd, line, end)
        except BaseException:
            _truncate_quietly(fd, end)  # a part of the line may be there: remove it
            raise
        if written != len(line):
            _truncate_quietly(fd, end)
            raise OSError(errno.ENOSPC, f"short write to {self.path.name}")
        self._written = end + len(line)
        self._next_written = number + 1
        self._unended = False
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

    def blank(self) -> bool:
        """Whether the log holds no operation: nothing, or its header line alone (a journal a
        failed checkpoint started, which the next attempt reuses)."""
        size = self.size()
        if size > 1 << 16:
            return False
        for line in whole_lines(os.pread(self._open(), size, 0)):
            op, _, _ = parse_line(line, False)
            if op is None or op.get("op") != "shard":
                return False
        return True

    def pending(self) -> int:
        """Bytes in the file (read or not): what a checkpoint would fold in."""
        return max(self.offset, self._written)

    def size(self) -> int:
        return os.fstat(self._open()).st_size

    def unlinked(self) -> bool:
        """Whether the file read and appended to is no longer in the shard (deleted with it), or
        no longer holds what this process read of it (cut by another program: `cut_under_us`)."""
        if self._fd is None:
            return False
        stat = os.fstat(self._fd)  # one system call: a refresh asks this of every journal
        return stat.st_nlink == 0 or self._cut_under_us(stat.st_size)

    def _cut_under_us(self, size: int) -> bool:
        """Whether the file is shorter than what this process read or wrote of it: lines it had
        (acknowledged ones among them) were cut by another program, which no writer of mem does.
        Said, naming the file; the shard then reads its folder anew (`Shard.refresh`)."""
        held = max(self.offset, self._written)
        if size >= held:
            return False
        logger("journal").error(
            "%s is shorter (%d bytes) than this process read or wrote of it (%d): lines were cut from it by "
            "another program; reading it anew, run `mem doctor`", self.path, size, held,
        )  # fmt: skip
        return True

    def __del__(self) -> None:  # a shard forgotten rather than closed (see Engine.sync_store)
        with contextlib.suppress(Exception):
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _truncate_quietly(fd: int, size: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)
