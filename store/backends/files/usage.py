"""How many live records, and how many bytes, a namespace holds: what its limits are checked
against (`max_entries`, `max_bytes`) before every write.

A2E entries and codebolt records (key-value, JSON, todo, markdown, episodic memories and their
events, persistent memories, the graph) count alike. Entry shards are counted as of now (entries
expire). Codebolt records never expire, so a codebolt shard's figures hold until its files
change: a namespace with thousands of episodic logs is neither reread nor held open at every
write. A shard's figures are taken again when this process wrote to it (`Engine.written`), else
after `RECHECK` seconds, and only reread when its files changed (`_files_stamp`). The figures are
also kept in `HOME/ns/<digest>/usage.json`, so that a one-shot command reads only the shards
that changed since the last one; the file is a cache (checked against the stamps), never the truth.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path

import orjson

from ...paths import write_atomic
from .engine import Engine
from .shard import Shard

RECHECK = 1.0  # seconds a codebolt shard's figures are trusted without looking at its files
USAGE_FILE = "usage.json"
SAVE_AFTER = 8  # shards read in one count before the figures are worth saving

Stamp = tuple[tuple[str, int, int], ...]


class UsageCounter:
    """Paths are kept as strings: a count looks at every shard of a namespace, and `Path`
    objects cost more than the look itself."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._figures: dict[str, tuple[Stamp, tuple[int, int], float]] = {}  # shard -> stamp, usage, when
        self._folders: dict[str, tuple[int, float, list[tuple[str, bool]]]] = {}
        self._open: dict[str, Shard] | None = None
        self._reads = 0

    def count(self, namespace: str, now: float, extra: Iterable[Shard] = ()) -> tuple[int, int]:
        """Live records and bytes of `namespace`, plus those of the in-memory shards `extra`."""
        count = size = 0
        tick = time.monotonic()
        while self.engine.written:  # this process's own writes count at once
            self._figures.pop(str(self.engine.written.pop()), None)
        folder = str(self.engine.namespace_dir(namespace))
        self._reads, self._open = 0, None
        for path, entries in self._shard_paths(folder, tick):
            if entries:
                c, b = self.engine.open_folder(Path(path)).usage(now)
            else:
                c, b = self._records(path, now, tick)
            count, size = count + c, size + b
        for shard in extra:
            c, b = shard.usage(now)
            count, size = count + c, size + b
        if self._reads >= SAVE_AFTER and not self.engine.read_only:
            self._save(folder)
        return count, size

    def _shard_paths(self, folder: str, tick: float) -> list[tuple[str, bool]]:
        """(folder, holds A2E entries?) of every shard of a namespace folder; listed again when
        the folder changes (a new shard) or after `RECHECK` seconds."""
        try:
            mtime = os.stat(folder).st_mtime_ns
        except FileNotFoundError:
            return []
        cached = self._folders.get(folder)
        if cached is not None and cached[0] == mtime and tick - cached[1] < RECHECK:
            return cached[2]
        known = self._load(folder) if cached is None else dict(cached[2])
        found, complete = [], True
        for path in _subfolders(folder):
            if path in known:  # a shard's kind never changes: its descriptor is read once
                found.append((path, known[path]))
                continue
            descriptor = self.engine.descriptor(Path(path))
            if descriptor is None:  # being created: list again next time
                complete = False
                continue
            found.append((path, descriptor.get("schema") == "entries"))
        if cached is not None:  # shards came or went (a namespace deleted?): look at each again
            for path, _ in cached[2]:
                if path in self._figures:
                    stamp, usage, _ = self._figures[path]
                    self._figures[path] = (stamp, usage, float("-inf"))
        self._folders[folder] = (mtime if complete else -1, tick, found)
        return found

    def _records(self, path: str, now: float, tick: float) -> tuple[int, int]:
        """Records and bytes of a codebolt shard (see the module's docstring)."""
        cached = self._figures.get(path)
        if cached is not None and tick - cached[2] < RECHECK:
            return cached[1]
        stamp = _files_stamp(path)
        shard = self._open_shards().get(path)
        if shard is not None:
            shard.refresh()
            usage = shard.usage(now)
        elif cached is not None and cached[0] == stamp:
            usage = cached[1]
        else:
            loaded = self.engine.load_folder(Path(path))  # read once, not kept: no file stays open
            usage = loaded.usage(now)
            loaded.close()
            self._reads += 1
        self._figures[path] = (stamp, usage, tick)
        return usage

    def _open_shards(self) -> dict[str, Shard]:
        """The shards this process holds open, by folder (made once per count, when needed)."""
        if self._open is None:
            self._open = {str(folder): shard for folder, shard in self.engine.open_shards()}
        return self._open

    def _load(self, folder: str) -> dict[str, bool]:
        """What an earlier process saved: which shards hold A2E entries, and the figures of the
        others (each still checked against its shard's stamp before use)."""
        known: dict[str, bool] = {}
        try:
            with open(os.path.join(folder, USAGE_FILE), "rb") as f:
                saved = orjson.loads(f.read())
            known.update((os.path.join(folder, name), True) for name in saved["entries"])
            for name, (stamp, count, size) in saved["records"].items():
                path = os.path.join(folder, name)
                known[path] = False
                if path not in self._figures:
                    self._figures[path] = (tuple(tuple(s) for s in stamp), (int(count), int(size)), float("-inf"))
        except (OSError, ValueError, TypeError, KeyError, orjson.JSONDecodeError):
            return {}  # no file, or not one we can read: count from the shards
        return known

    def _save(self, folder: str) -> None:
        cached = self._folders.get(folder)
        if cached is None:
            return
        name = os.path.basename
        records = {
            name(path): [self._figures[path][0], *self._figures[path][1]]
            for path, entries in cached[2]
            if not entries and path in self._figures
        }
        entries = [name(path) for path, entries in cached[2] if entries]
        with contextlib.suppress(OSError):  # a cache: the next count reads the shards again
            write_atomic(Path(folder) / USAGE_FILE, orjson.dumps({"entries": entries, "records": records}))


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.path for e in entries if e.is_dir()]
    except FileNotFoundError:
        return []


def _files_stamp(folder: str) -> Stamp:
    """What changes whenever a shard's content does: the names, sizes and modification times of
    its checkpoints and journals (journals only grow; a checkpoint is a new folder)."""
    stamp = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                if e.name.startswith(("wal-", "seg-")):  # the descriptor never changes
                    st = e.stat()
                    stamp.append((e.name, st.st_size, st.st_mtime_ns))
    except FileNotFoundError:
        return ()
    return tuple(sorted(stamp))
