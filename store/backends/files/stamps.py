"""Remembering which checkpoint files were verified in full, so that later processes need not hash them again.

A checkpoint's files never change once it is renamed into place, and `manifest.json` holds the
checksum of each. Hashing the big ones is most of what a one-shot command pays at a million
entries (the Annoy index is about 2.5 GB, the float16 vectors 512 MB), and every process paid it
again. So when a process has verified a file in full against its manifest, it records a stamp in
the shard folder's `verified.json` (sealed like every other JSON file of the store): the file's
size, mtime and ctime (nanoseconds), inode and device as they were when its checksum held, and
that checksum. A later process whose `stat` of the file gives exactly the same values, and whose
manifest asks for that same checksum, takes the file as verified; any difference means hashing it
in full again (and, if it holds, a new stamp).

Writing a file changes its mtime and ctime; `touch` or `os.utime` can set the mtime back but
not the ctime, which only the kernel sets (to the current time); a copy or a restore from a
backup is another inode. What a stamp does not see is a change that bypasses the file system's
metadata: the disk or the file system corrupting blocks under the file, or a write to the raw
device. `mem doctor` hashes every file in full, stamps or not, and finds those.

A file verified right after it was written could still be changed within the timestamp
granularity of its file system without its times moving, so, as git does for its index ("racy
clean" entries), a stamp is only recorded for a file whose mtime and ctime are at least
`RACY_NS` older than the moment its verification began; a younger file is hashed in full on each
first use until it is old enough. A clock stepped backwards by more than that could in principle
let a changed file keep its stamp.

The stamps are a cache: a missing, damaged or stale `verified.json` only costs hashing again,
and it is written without fsync (a torn write fails its seal and is ignored). Stamps of
segments that are gone are dropped whenever the file is written.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import Damaged
from ...paths import FILE_MODE
from .integrity import read_sealed, seal

FILE = "verified.json"
RACY_NS = 3_000_000_000  # above any file system's mtime granularity (FAT: 2 s)
_clock = time.time_ns  # when a verification begins (tests move it forward)


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class Stamps:
    """The stamps of one segment folder: which of its files may be taken as verified."""

    def __init__(self, segment: Path) -> None:
        self.segment = segment
        self._known = _read(segment.parent)
        self._new: dict[str, dict[str, Any]] = {}

    def holds(self, name: str, entry: dict[str, Any], st: os.stat_result) -> bool:
        """Whether file `name`, as `st` describes it now, was verified against `entry` (its
        manifest entry) by some process before."""
        stamp = self._known.get(f"{self.segment.name}/{name}")
        return isinstance(stamp, dict) and stamp.get("stat") == _stat_key(st) and stamp.get("xxh3") == entry.get("xxh3")

    def began(self) -> int:
        """Call just before the `stat` that precedes hashing a file: the time `verified` needs."""
        return _clock()

    def verified(self, name: str, entry: dict[str, Any], st: os.stat_result, began: int) -> None:
        """File `name`, stat'd as `st` after `began`, was hashed and matched `entry`: remember it
        (unless it is too young to be sure a change would move its times; see the docstring)."""
        if max(st.st_mtime_ns, st.st_ctime_ns) <= began - RACY_NS:
            self._new[f"{self.segment.name}/{name}"] = {"stat": _stat_key(st), "xxh3": entry.get("xxh3")}

    def save(self) -> None:
        """Record the new stamps (merged with those other processes wrote meanwhile), best effort."""
        if not self._new:
            return
        new, self._new = self._new, {}
        _write(self.segment.parent, new)


_write_lock = threading.Lock()
LEFTOVER_AGE = 60.0  # seconds after which a temporary file of a write is one a killed process left


def remove_leftovers(shard: Path) -> None:
    """Delete the temporary files of stamp writes whose process was killed before its rename
    (called by a checkpoint's builder). A younger one may be a write under way: left to it (if
    one is removed anyway, that write fails its rename and the stamps are made next time)."""
    cutoff = time.time() - LEFTOVER_AGE
    for tmp in shard.glob(f".{FILE}.*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()


def _read(shard: Path) -> dict[str, Any]:
    try:
        stamps = read_sealed(shard / FILE, {"stamps": dict}, sealed_only=True)["stamps"]
    except (OSError, Damaged):
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _write(shard: Path, new: dict[str, dict[str, Any]]) -> None:
    """Merge `new` into the shard's stamps, dropping those of segments that are gone. Two
    processes writing at once may lose one's stamps: that only costs a verification."""
    with _write_lock:
        stamps = {key: s for key, s in _read(shard).items() if (shard / key.split("/", 1)[0]).is_dir()}
        stamps.update(new)
        tmp = shard / f".{FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            try:
                view = memoryview(seal({"stamps": stamps}))
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, shard / FILE)
        except OSError:  # a read-only store, a full disk, a shard deleted meanwhile: hash next time
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
