"""The store on disk: where each shard lives, the locks, the embedder recorded with the store.

    HOME/store.json                 embedder name and dimension, format version
    HOME/config.json                limits and policies (optional, see `config.py`)
    HOME/ns/<digest>/namespace.json the namespace's real name
    HOME/ns/<digest>/lock           one lock for every write in the namespace
    HOME/ns/<digest>/<digest>/      a shard (see `shard.py`), named by the digest of its scope
    HOME/system/...                 the registry of CLI sessions

Shards are opened once per process and kept; each use refreshes them from disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .embed import DEFAULT, Embedder, get_embedder
from .errors import Damaged, StoreMismatch
from .integrity import read_sealed, seal
from .locking import FileLock
from .log import logger
from .paths import digest, ensure_dir, write_atomic
from .schemas import SCHEMAS
from .shard import DESCRIPTOR, Shard, recorded_descriptor

SYSTEM = "\x00system"  # a namespace name no user can pass (NUL is refused in names)
FORMAT = 2  # 2: journal lines, descriptors and checkpoint files carry checksums (format 1 still read)
NAMESPACE = "namespace.json"


class Engine:
    def __init__(self, home: Path, embedder: str | None = None, checkpoints: str | None = None) -> None:
        self.home = home
        self.wanted_embedder = embedder or os.environ.get("MEM_EMBEDDER") or None
        self.checkpoints = checkpoints or os.environ.get("MEM_CHECKPOINTS", "background")
        self._shards: dict[Path, Shard] = {}
        self._locks: dict[Path, FileLock] = {}
        self._embedder: Embedder | None = None
        self._recorded: dict | None = None
        self._descriptors: dict[Path, dict] = {}
        self.redact = False  # mask secret-shaped strings in records (set from the config)

    # -- embedder ---------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The store's embedder; a store made with another one must be reindexed first."""
        if self._embedder is None:
            recorded = self.recorded_embedder()
            name = self.wanted_embedder or (recorded or {}).get("embedder") or DEFAULT
            if recorded and recorded.get("embedder") != name:
                raise StoreMismatch(
                    f"this store's vectors were made by the {recorded['embedder']!r} embedder, not {name!r}: "
                    f"run `mem reindex --embedder {name}` to rebuild them",
                    {"recorded": recorded, "wanted": name},
                )
            self._embedder = get_embedder(name)
        return self._embedder

    @property
    def dim(self) -> int:
        """The vectors' dimension, without loading the model when the store has it on record."""
        recorded = self.recorded_embedder()
        wanted = self.wanted_embedder
        if recorded and (wanted is None or wanted == recorded.get("embedder")):
            return int(recorded["dim"])
        return self.embedder.dim

    def recorded_embedder(self) -> dict | None:
        """The embedder the store's vectors were made with (store.json), read once; `Damaged`
        if the file cannot be trusted (`mem doctor --repair` restores it from the checkpoints)."""
        if self._recorded is None:
            try:
                self._recorded = read_sealed(self.home / "store.json", {"embedder": str, "dim": int})
            except FileNotFoundError:
                return None
        return self._recorded

    def record_embedder(self, embedder: Embedder) -> None:
        ensure_dir(self.home)
        meta = {"format": FORMAT, "embedder": embedder.name, "dim": embedder.dim}
        write_atomic(self.home / "store.json", seal(meta))
        self._recorded = meta

    def embed(self, texts: list[str]) -> np.ndarray:
        embedder = self.embedder
        if self.recorded_embedder() is None:
            self.record_embedder(embedder)
        return embedder.embed(texts)

    # -- layout -----------------------------------------------------------------------------

    def namespace_dir(self, namespace: str) -> Path:
        if namespace == SYSTEM:
            return self.home / "system"
        return self.home / "ns" / digest(namespace)

    def lock(self, namespace: str) -> FileLock:
        folder = self.namespace_dir(namespace)
        if folder not in self._locks:
            ensure_dir(folder)
            if namespace != SYSTEM and not (folder / NAMESPACE).exists():
                write_atomic(folder / NAMESPACE, seal({"namespace": namespace}))
            self._locks[folder] = FileLock(folder / "lock")
        return self._locks[folder]

    def shard(self, namespace: str, kind: str, *scope: str, schema: str = "records") -> Shard:
        """The shard holding `kind` records of `scope` in `namespace` (refreshed from disk)."""
        folder = self.namespace_dir(namespace) / digest(kind, *scope)
        shard = self._shards.get(folder)
        if shard is None:
            dim = self.dim if SCHEMAS[schema].indexed else 0
            descriptor = {"namespace": namespace, "kind": kind, "scope": list(scope)}
            shard = self._shards[folder] = Shard(folder, SCHEMAS[schema], dim, descriptor)
        shard.refresh()
        return shard

    def memory_shard(self, schema: str = "entries") -> Shard:
        """A shard that lives only in this process (a stdio session's working tier)."""
        dim = self.embedder.dim if SCHEMAS[schema].indexed else 0
        return Shard(None, SCHEMAS[schema], dim)

    def namespaces(self) -> list[tuple[str, Path]]:
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
        if folder in self._shards:
            shard = self._shards[folder]
        else:
            descriptor = self.descriptor(folder)
            if descriptor is None:
                raise FileNotFoundError(folder / DESCRIPTOR)
            schema = SCHEMAS[descriptor["schema"]]
            dim = self.dim if schema.indexed else 0
            shard = self._shards[folder] = Shard(folder, schema, dim, descriptor)
        shard.refresh()
        return shard

    # -- checkpoints ------------------------------------------------------------------------

    def after_write(self, shard: Shard, share: float = 1.0) -> None:
        """Start a checkpoint if the shard's journals are due one."""
        from . import checkpoint

        if shard.folder is None or self.checkpoints == "off" or not checkpoint.due(shard, share):
            return
        if self.checkpoints == "inline":
            self.checkpoint_shard(shard)
        else:
            checkpoint.spawn(self.home, shard.folder)

    def checkpoint_shard(self, shard: Shard, force: bool = False) -> bool:
        from . import checkpoint

        namespace = shard.descriptor.get("namespace", SYSTEM)
        return checkpoint.run(shard, self.lock(namespace), self.embedder.name, force)

    def checkpoint_folder(self, folder: Path, force: bool = False) -> bool:
        return self.checkpoint_shard(self.open_folder(folder), force)

    def shutdown(self) -> None:
        """A server's clean exit: start checkpoints for the shards whose journals hold more than
        an eighth of the threshold (the next process then replays less), then close."""
        for shard in list(self._shards.values()):
            self.after_write(shard, share=1 / 8)
        self.close()

    def close(self) -> None:
        self._descriptors.clear()
        for shard in self._shards.values():
            shard.close()
        self._shards.clear()


def namespace_name(folder: Path) -> str | None:
    """The name in a namespace folder's `namespace.json`, None if it is missing or damaged."""
    try:
        return read_sealed(folder / NAMESPACE, {"namespace": str})["namespace"]
    except (FileNotFoundError, Damaged):
        return None


def shard_descriptor(folder: Path) -> dict | None:
    """A shard folder's `shard.json`, None if it is missing or damaged."""
    try:
        return read_sealed(folder / DESCRIPTOR, {"kind": str, "schema": str})
    except (FileNotFoundError, Damaged):
        return None
