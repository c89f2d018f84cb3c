"""The store on disk: where each shard lives, the locks, the embedder recorded with the store.

    HOME/store.json                 embedder name and dimension, format version
    HOME/config.json                limits and policies (optional, see `config.py`)
    HOME/ns/<digest>/namespace.json the namespace's real name
    HOME/ns/<digest>/lock           one lock for every write in the namespace
    HOME/ns/<digest>/usage.json     a cache of its shards' record counts (see `usage.py`)
    HOME/ns/<digest>/<digest>/      a shard (see `shard.py`), named by the digest of its scope
    HOME/system/...                 the registry of CLI sessions
    HOME/.trash/                    what a delete is removing (renamed there first: see `discard`)

Shards are opened once per process and kept; each use refreshes them from disk.

Another process may change the store under a long-lived one: `mem reindex --embedder` replaces
store.json, and every use of a shard checks (one stat) that store.json is the one this process
read. When it is not, the process drops its shards and its embedder and takes the recorded one
(`epoch` counts these switches, so that a writer that embedded before taking the lock embeds
again); a process told to use another embedder (MEM_EMBEDDER, --embedder) refuses to go on.

Expired records, and records deleted by a forget, stay in the journals and the checkpoint until a
checkpoint of their shard rewrites it. A delete, and any use of a shard that holds a record past
its expiry time, asks for a purge: a marker file (`purge.wanted`) in the shard and a detached
checkpoint that waits for a running one and runs until no marker is left (see `checkpoint.py`).
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ... import clock
from ...config import env_choice
from ...embed import Embedder, decode_vector, dimension_of
from ...errors import Damaged, InvalidInput, Unauthorized
from ...log import logger
from ...paths import digest, ensure_dir, write_atomic
from ...schemas import SCHEMAS
from ..base import SYSTEM, Backend, Doc, Progress, Scope
from .integrity import read_sealed, seal
from .locking import FileLock
from .shard import DESCRIPTOR, Shard, recorded_descriptor

FORMAT = 2  # 2: journal lines, descriptors and checkpoint files carry checksums (format 1 still read)
NAMESPACE = "namespace.json"
MAX_NAME = 1024  # as models.MAX_NAME (not imported: pydantic is slow to load)
CHECKPOINT_MODES = ("background", "inline", "off")
PURGE = "purge.wanted"  # in a shard: deleted or expired records wait for a checkpoint to purge them
PURGE_STALE = 60.0  # seconds after which a purge asked for and not done is asked for again
OPEN_SHARDS = 32  # shards a process keeps open (see `Engine._keep`)


class Engine(Backend):
    def __init__(self, home: Path, embedder: str | None = None, checkpoints: str | None = None) -> None:
        super().__init__(embedder or os.environ.get("MEM_EMBEDDER"))
        self.home = home
        self.url = str(home)
        self.checkpoints = checkpoints or env_choice("MEM_CHECKPOINTS", CHECKPOINT_MODES, "background")
        self._shards: dict[Path, Shard] = {}
        self._locks: dict[Path, FileLock] = {}
        self._recorded: dict | None = None
        self._descriptors: dict[Path, dict] = {}
        self._stamp: tuple[int, int, int] | None = None  # identity of the store.json read
        self._nothing_on_record = False  # no checkpoint with vectors was found to restore store.json from
        self._deferred: set[Path] = set()  # inline purges asked for while a lock was held
        self._counter: Any = None  # the namespaces' usage (see `usage.py`), made when first needed
        self.written: set[Path] = set()  # shard folders of records written since the limits looked

    # -- embedder ---------------------------------------------------------------------------

    def recorded_embedder(self) -> dict | None:
        """The embedder the store's vectors were made with (store.json), read once; `Damaged`
        if the file cannot be trusted (`mem doctor --repair` restores it from the checkpoints)."""
        if self._recorded is None:
            path = self.home / "store.json"
            stamp = self._store_stamp()
            try:
                recorded = read_sealed(path, {"embedder": str, "dim": int})
            except FileNotFoundError:
                return self._restore_store_file()
            self._recorded = recorded
            self._stamp = stamp
        return self._recorded

    def _restore_store_file(self) -> dict | None:
        """A store.json deleted from a store that has checkpoints with vectors is written again
        from their records (with a warning), rather than left for the first write to record the
        default embedder, whose vectors would not match theirs. None for a new store (found once
        a process: every use of the embedder asks, and a store.json written later is read anyway)."""
        if self._nothing_on_record:
            return None
        on_record = self.embedder_on_record()
        if on_record is None:
            self._nothing_on_record = True
            return None
        name, dim = on_record
        meta = {"format": FORMAT, "embedder": name, "dim": dim}
        if not self.read_only:
            write_atomic(self.home / "store.json", seal(meta))
        logger("engine").warning(
            "%s was missing: restored from the vectors on record (embedder %r, dimension %d)",
            self.home / "store.json", name, dim,
        )  # fmt: skip
        self._recorded, self._stamp = meta, self._store_stamp()
        return meta

    def embedder_on_record(self) -> tuple[str, int] | None:
        """(embedder, dimension) most checkpoints with vectors were made by (their meta.json);
        without any, the embedder the journals' vectors fit (`_embedder_in_journals`); None when
        no vector was ever written."""
        seen: Counter[tuple[str, int]] = Counter()
        for meta_file in self.home.glob("ns/*/*/seg-*/meta.json"):
            try:
                meta = orjson.loads(meta_file.read_bytes())
                if meta.get("dim"):
                    seen[(str(meta["embedder"]), int(meta["dim"]))] += 1
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
        return seen.most_common(1)[0][0] if seen else self._embedder_in_journals()

    def _embedder_in_journals(self) -> tuple[str, int] | None:
        """A store whose store.json went before its first checkpoint: its journals hold vectors
        but not the embedder's name. The dimension of the first vector found names it: the
        configured embedder if it makes that dimension, else the built-in one that does (256:
        static, 384: minilm, any other D: hash:D). Only a `hash:256` store is then misnamed
        (as static): hash is the test embedder, and `mem reindex --embedder` mends it."""
        for journal in sorted(self.home.glob("ns/*/*/wal-*.ndjson")):
            dim = _first_vector_dim(journal)
            if dim:
                return _embedder_of_dim(dim, self.wanted_embedder)
        return None

    def record_embedder(self, embedder: Embedder) -> None:
        ensure_dir(self.home)
        meta = {"format": FORMAT, "embedder": embedder.name, "dim": embedder.dim}
        write_atomic(self.home / "store.json", seal(meta))
        self._recorded = meta
        self._stamp = self._store_stamp()

    def _store_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.home / "store.json")
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def sync_store(self) -> None:
        """Take in a store.json another process replaced (a reindex): if it names another
        embedder or dimension, drop the shards and the embedder made for the old one."""
        if self._recorded is None or self._store_stamp() == self._stamp:
            return
        old = self._recorded
        self._recorded = None
        new = self.recorded_embedder() or {}
        if (new.get("embedder"), new.get("dim")) != (old.get("embedder"), old.get("dim")):
            self._embedder = None
            self.epoch += 1
            # Forgotten, not closed: a caller may be in the middle of a write with one of them
            # (this runs inside the lock, e.g. while the limits are counted), and a closed shard
            # would look empty and start a journal below its checkpoint. Unreferenced ones are
            # closed when they are collected.
            self._shards.clear()

    # -- layout -----------------------------------------------------------------------------

    def namespace_dir(self, namespace: str) -> Path:
        if namespace == SYSTEM:
            return self.home / "system"
        return self.home / "ns" / digest(namespace)

    def lock(self, namespace: str) -> FileLock:
        """The namespace's write lock (every write takes it, so a read-only engine refuses it)."""
        if self.read_only:
            raise Unauthorized("this store is open read-only: nothing may be written")
        folder = self.namespace_dir(namespace)
        if folder not in self._locks:
            descriptor = namespace_descriptor(namespace) if namespace != SYSTEM else b""  # checked before mkdir
            ensure_dir(folder)
            self._name_namespace(namespace, descriptor)
            self._locks[folder] = FileLock(folder / "lock")
        return self._locks[folder]

    def _name_namespace(self, namespace: str, descriptor: bytes | None = None) -> None:
        """Write namespace.json (again, when a writer brings a deleted namespace back)."""
        if namespace == SYSTEM:
            return
        folder = self.namespace_dir(namespace)
        if not (folder / NAMESPACE).exists():
            write_atomic(folder / NAMESPACE, descriptor or namespace_descriptor(namespace))

    def shard(self, namespace: str, kind: str, *scope: str, schema: str = "records") -> Shard:
        """The shard holding `kind` records of `scope` in `namespace` (refreshed from disk)."""
        self.sync_store()
        folder = self.namespace_dir(namespace) / digest(kind, *scope)
        shard = self._kept(folder)
        if shard is None:
            dim = self.dim if SCHEMAS[schema].indexed else 0
            descriptor = {"namespace": namespace, "kind": kind, "scope": list(scope), "schema": schema}
            shard = self._keep(folder, Shard(folder, SCHEMAS[schema], dim, descriptor))
            shard.on_create = lambda: self._name_namespace(namespace)
            shard.on_delete = self._purge_for_delete
            shard.on_append = lambda: self.written.add(folder)
        shard.refresh()
        self._purge_if_expired(shard)
        return shard

    def namespaces(self) -> list[str]:
        return [name for name, _ in self.namespace_folders()]

    def scope(self, namespace: str, kind: str, *scope: str, schema: str = "records") -> Shard:
        return self.shard(namespace, kind, *scope, schema=schema)

    def scopes(self, namespace: str) -> list[Scope]:
        folder = self.namespace_dir(namespace)
        if not folder.exists():
            return []
        return [self.open_folder(path) for _, path in self.shard_folders(folder)]

    def usage(self, namespace: str, now: float) -> tuple[int, int]:
        if self._counter is None:
            from .usage import UsageCounter

            self._counter = UsageCounter(self)
        return self._counter.count(namespace, now)

    def drop_scope(self, namespace: str, kind: str, *scope: str) -> None:
        """Remove the scope's folder, holding its builder lock (no checkpoint is writing in it)
        and the namespace lock (no write is under way)."""
        from . import checkpoint

        folder = self.namespace_dir(namespace) / digest(kind, *scope)
        with checkpoint.building(folder), self.lock(namespace):
            self.discard(folder)
        self._shards.pop(folder, None)

    def namespace_folders(self) -> list[tuple[str, Path]]:
        """(name, folder) of every namespace on disk. A namespace whose `namespace.json` is lost
        or damaged is named by its shards' descriptors (which hold the name too), with a warning."""
        found = []
        for folder in sorted(p for p in (self.home / "ns").glob("*") if p.is_dir()):
            name = namespace_name(folder) or self._name_from_shards(folder)
            if name is not None:
                found.append((name, folder))
        return found

    def _name_from_shards(self, folder: Path) -> str | None:
        for descriptor, _ in self.shard_folders(folder):
            name = descriptor.get("namespace")
            if isinstance(name, str) and digest(name) == folder.name:
                logger("engine").warning("%s is missing or damaged: run `mem doctor --repair`", folder / NAMESPACE)
                return name
        return None

    def shard_folders(self, namespace_folder: Path) -> list[tuple[dict, Path]]:
        """(descriptor, folder) of every shard of a namespace (a write checks the namespace's
        usage, so descriptors, which never change, are read once per process)."""
        found = []
        for folder in sorted(p for p in namespace_folder.iterdir() if p.is_dir()):
            descriptor = self.descriptor(folder)
            if descriptor is not None:
                found.append((descriptor, folder))
        return found

    def descriptor(self, folder: Path) -> dict | None:
        """The shard's `shard.json`, or if it is lost or damaged (with a warning) the copy kept
        in its checkpoint's manifest or journal headers; None for a folder that is no shard yet."""
        if folder not in self._descriptors:
            descriptor = shard_descriptor(folder)
            if descriptor is None:
                descriptor = recorded_descriptor(folder)
                if descriptor is None:
                    return None  # not a shard yet (or being created): look again next time
                logger("engine").warning("%s is missing or damaged: run `mem doctor --repair`", folder / DESCRIPTOR)
            self._descriptors[folder] = descriptor
        return self._descriptors[folder]

    def open_folder(self, folder: Path) -> Shard:
        """A shard by its folder (for maintenance: gc, doctor, checkpoints)."""
        self.sync_store()
        shard = self._kept(folder) or self._keep(folder, self._new_shard(folder))
        shard.refresh()
        self._purge_if_expired(shard)
        return shard

    def open_shards(self) -> list[tuple[Path, Shard]]:
        """(folder, shard) of the shards this process holds open (not refreshed)."""
        return list(self._shards.items())

    def load_folder(self, folder: Path) -> Shard:
        """A shard read from `folder` but not kept: the caller closes it."""
        shard = self._new_shard(folder)
        shard.refresh()
        return shard

    def _new_shard(self, folder: Path) -> Shard:
        descriptor = self.descriptor(folder)
        if descriptor is None:
            raise FileNotFoundError(folder / DESCRIPTOR)
        schema = SCHEMAS[descriptor["schema"]]
        dim = self.dim if schema.indexed else 0
        shard = Shard(folder, schema, dim, descriptor)
        shard.on_delete = self._purge_for_delete
        shard.on_append = lambda: self.written.add(folder)
        return shard

    def _purge_for_delete(self, shard: Shard) -> None:
        self.ask_purge(shard, strict=True)

    def _kept(self, folder: Path) -> Shard | None:
        """The open shard of `folder`, now the most recently used one."""
        shard = self._shards.pop(folder, None)
        if shard is not None:
            self._shards[folder] = shard
        return shard

    def _keep(self, folder: Path, shard: Shard) -> Shard:
        """Keep `shard` open, letting go of the least recently used ones past OPEN_SHARDS: each
        holds its journal and its segments' mapped files open (about 17 descriptors a segment),
        and a server that meets hundreds of namespaces would run out of them. One let go is
        forgotten, not closed (a caller may still be using it: see `sync_store`); its files
        close when the last reference goes, and a later use opens it again from disk."""
        self._shards[folder] = shard
        while len(self._shards) > OPEN_SHARDS:
            del self._shards[next(iter(self._shards))]
        return shard

    def discard(self, path: Path) -> None:
        """Delete a file or folder of the store at once for every reader: it is renamed into
        HOME/.trash (a reader then finds it gone, never half-deleted), then removed, along with
        whatever an interrupted discard left there."""
        trash = ensure_dir(self.home / ".trash")
        try:
            os.rename(path, trash / f"{os.getpid()}-{time.monotonic_ns()}-{path.name}")
        except FileNotFoundError:
            return
        for leftover in os.listdir(trash):
            target = trash / leftover
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)

    # -- checkpoints ------------------------------------------------------------------------

    def after_write(self, scope: Scope, share: float = 1.0) -> None:
        """Start a checkpoint if the shard's journals are due one (the caller holds no lock)."""
        from . import checkpoint

        assert isinstance(scope, Shard)
        shard = scope
        if self._deferred and not any(lock.held() for lock in self._locks.values()):
            for folder in list(self._deferred):  # a purge waits for the builder lock: never under a lock
                self._deferred.discard(folder)
                try:
                    self.purge_folder(folder)
                except (OSError, Damaged) as exc:  # the marker stays: the next purge or `mem gc` does it
                    logger("engine").warning("purge of %s failed (the delete is kept): %s", folder, exc)
        if shard.folder is None or self.checkpoints == "off" or not checkpoint.due(shard, share):
            return
        if self.checkpoints == "inline":
            self._checkpoint_after_write(shard)
        else:
            checkpoint.spawn(self.home, shard.folder)

    def _checkpoint_after_write(self, shard: Shard) -> None:
        """An inline checkpoint, run after a write is in the journal: its failure (a full disk)
        is the checkpoint's, not the write's, which must not be reported failed and sent again
        (a duplicate). It is logged; the checkpoint's own backoff tries again later, `mem gc` now."""
        try:
            self.checkpoint_shard(shard)
        except (OSError, Damaged) as exc:
            logger("engine").warning(
                "checkpoint of %s failed (the write is kept in the journal): %s", shard.folder, exc
            )  # fmt: skip

    def checkpoint_shard(
        self, shard: Shard, force: bool = False, wait: bool = False, full: bool = False, outcome: Any = None
    ) -> bool:
        from . import checkpoint

        namespace = shard.descriptor.get("namespace", SYSTEM)
        embedder = self.embedder
        return checkpoint.run(
            shard, self.lock(namespace), embedder.name, force, wait, embed=embedder.embed, full=full, outcome=outcome
        )

    def checkpoint_folder(
        self, folder: Path, force: bool = False, wait: bool = False, full: bool = False, outcome: Any = None
    ) -> bool:
        return self.checkpoint_shard(self.open_folder(folder), force, wait, full, outcome)

    def ask_purge(self, shard: Shard, strict: bool = False) -> None:
        """Have deleted and expired records of `shard` leave the disk soon: leave the marker a
        purge checkpoint looks for and start one, unless one was asked for a moment ago (it will
        see the marker: it checks for it under the namespace lock, as deletes set it). `strict`
        (a delete, before it is logged): a marker the disk refuses is raised, so that the delete
        is refused rather than done with nothing left to say its content must go."""
        if shard.folder is None or self.checkpoints == "off" or not shard.folder.exists():
            return
        marker = shard.folder / PURGE
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            try:
                if time.time() - marker.stat().st_mtime < PURGE_STALE:
                    return  # a purge is on its way
                os.utime(marker)
            except FileNotFoundError:
                return self.ask_purge(shard, strict)  # the purge took it meanwhile: ask again
        except OSError as exc:
            if strict and exc.errno != errno.ENOENT:
                raise
            return  # the folder went away, or the disk refuses an expiry's purge: the next use asks again
        if self.checkpoints == "inline":
            self._deferred.add(shard.folder)
            self.after_write(shard)
        else:
            from . import checkpoint

            checkpoint.spawn(self.home, shard.folder, purge=True)

    def _purge_if_expired(self, shard: Shard) -> None:
        if shard.next_expiry <= clock.now():
            self.ask_purge(shard)

    def purge_folder(self, folder: Path) -> int:
        """Run purge checkpoints of a shard while its marker says one is wanted; each waits for
        a running checkpoint. Returns how many ran."""
        from . import checkpoint

        done = 0
        while (folder / PURGE).exists() and (folder / DESCRIPTOR).exists():
            shard = self.open_folder(folder)
            lock = self.lock(shard.descriptor.get("namespace", SYSTEM))
            embedder = self.embedder
            if not checkpoint.run(
                shard, lock, embedder.name, force=True, wait=True, purge=folder / PURGE, embed=embedder.embed
            ):
                break
            done += 1
        return done

    # -- upkeep (the seam's; see `maintenance.py`) ------------------------------------------

    def export_scopes(self, namespace: str | None, now: float, damaged: list[str]) -> Iterator[tuple[dict, list[Doc]]]:
        from .maintenance import readable_docs

        for name, folder in self.namespace_folders():
            if namespace is None or name == namespace:
                for descriptor, shard_folder in self.shard_folders(folder):
                    yield {"namespace": name, **descriptor}, readable_docs(self, shard_folder, now, damaged)

    def stats(self, namespace: str | None = None) -> list[dict[str, Any]]:
        from . import maintenance

        return maintenance.stats(self, namespace)

    def delete_namespace(self, namespace: str) -> dict[str, Any]:
        from . import maintenance

        return maintenance.delete_namespace(self, namespace)

    def reindex(self, embedder: str, progress: Progress | None = None) -> dict[str, Any]:
        from . import maintenance

        return maintenance.reindex(self, embedder, progress)

    def doctor(self, repair: bool = False) -> list[dict[str, Any]]:
        from . import maintenance

        return maintenance.doctor(self, repair)

    def checkpoint(self, force: bool = False) -> int:
        """Rewrite every shard that has journals, several segments or records to purge as one
        segment; returns the number of shards rewritten."""
        return int(self.collect(force)["checkpointed_shards"])

    def collect(self, force: bool = True, progress: Progress | None = None) -> dict[str, Any]:
        """`mem gc`: every shard rewritten as one segment (journals folded in, deleted and
        expired records purged), waiting for a checkpoint or merge under way in a shard (another
        process's) to finish first. Counts what was done: shards rewritten, merges run, and
        shards whose running builder this one waited for (their work is done, by the other
        process, when this returns). `progress(done, total)` is called after each shard."""
        from .checkpoint import Outcome

        folders = [folder for _, ns in self.namespace_folders() for _, folder in self.shard_folders(ns)]
        report = {"shards": len(folders), "checkpointed_shards": 0, "merges": 0, "waited_for_running": 0}
        for done, folder in enumerate(folders, 1):
            outcome = Outcome()
            if folder.exists():
                self.checkpoint_folder(folder, force, wait=True, full=True, outcome=outcome)
            report["checkpointed_shards"] += outcome.written
            report["merges"] += outcome.merges
            report["waited_for_running"] += outcome.waited
            if progress is not None:
                progress(done, len(folders))
        return report

    def shutdown(self) -> None:
        """A server's clean exit: start checkpoints for the shards whose journals hold more than
        an eighth of the threshold (the next process then replays less), then close. A
        read-only engine leaves every file as it found it."""
        for shard in list(self._shards.values()) if not self.read_only else []:
            self.after_write(shard, share=1 / 8)
        self.close()

    def close(self) -> None:
        self._descriptors.clear()
        for shard in self._shards.values():
            shard.close()
        self._shards.clear()


def namespace_descriptor(namespace: str) -> bytes:
    """The namespace.json of `namespace`; `InvalidInput` for a name no namespace may have (empty,
    over MAX_NAME characters, with NUL, or not UTF-8 text), so that every write path refuses it
    before a folder is made."""
    if not isinstance(namespace, str) or not namespace or len(namespace) > MAX_NAME or "\x00" in namespace:
        raise InvalidInput(f"namespace must be 1 to {MAX_NAME} characters without NUL", {"field": "namespace"})
    try:
        return seal({"namespace": namespace})
    except orjson.JSONEncodeError:
        raise InvalidInput(f"namespace {ascii(namespace)} is not valid UTF-8 text", {"field": "namespace"}) from None


# a file that cannot be read at all: read as one missing (its copies stand in for it), which
# `mem doctor` names; not the errors that pass with time (a full table of open files)
UNREADABLE = (PermissionError, IsADirectoryError, NotADirectoryError)


def namespace_name(folder: Path) -> str | None:
    """The name in a namespace folder's `namespace.json`, None if it is missing or damaged. The
    folder is named by the digest of the name, so a file that lost its checksum (an older
    version's, or an edited one) is still checked: a name that does not hash to the folder's is
    damage, not a rename."""
    try:
        name = read_sealed(folder / NAMESPACE, {"namespace": str})["namespace"]
    except (FileNotFoundError, Damaged, *UNREADABLE):
        return None
    return name if digest(name) == folder.name else None


def shard_descriptor(folder: Path) -> dict | None:
    """A shard folder's `shard.json`, None if it is missing or damaged (or names another shard
    than the one its folder's digest stands for: see `namespace_name`)."""
    try:
        descriptor = read_sealed(folder / DESCRIPTOR, {"kind": str, "schema": str})
    except (FileNotFoundError, Damaged, *UNREADABLE):
        return None
    scope = descriptor.get("scope", [])
    if not isinstance(scope, list) or not all(isinstance(part, str) for part in scope):
        return None
    if digest(descriptor["kind"], *scope) != folder.name:
        return None
    namespace = descriptor.get("namespace")
    home_of = "system" if namespace == SYSTEM else digest(namespace) if isinstance(namespace, str) else None
    return descriptor if namespace is None or home_of == folder.parent.name else None


def _first_vector_dim(journal: Path) -> int:
    """The dimension of the first vector a journal holds (its lines' "vec", base64 float16), 0
    if none (damaged lines are passed over: doctor reports them)."""
    try:
        with journal.open("rb") as lines:
            for line in lines:
                if b'"vec":"' not in line:
                    continue
                try:
                    recs = orjson.loads(line).get("recs") or []
                except orjson.JSONDecodeError:
                    continue
                for rec in recs:
                    if isinstance(rec, dict) and isinstance(rec.get("vec"), str):
                        return len(decode_vector(rec["vec"]))
    except OSError:
        pass
    return 0


def _embedder_of_dim(dim: int, wanted: str | None) -> tuple[str, int]:
    if wanted and dimension_of(wanted) == dim:
        return wanted, dim
    return {256: "static", 384: "minilm", 64: "hash"}.get(dim, f"hash:{dim}"), dim
