"""`MemoryService`: every operation of the store, one method each.

The CLI, `serve-stdio` and `serve-mcp` are front doors onto this class; none of them implements
an operation itself. Codebolt tools and knowledge-graph operations take a `namespace` keyword
(default "default"); A2E operations take a session or scope.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .backends import open_backend
from .backends.base import Backend
from .config import load_config
from .ops.a2e import A2E, Session
from .ops.documents import DocumentTools
from .ops.episodes import EpisodeTools
from .ops.graph import GraphTools
from .ops.persistent import PersistentTools
from .paths import check_home, default_home


class MemoryService(DocumentTools, EpisodeTools, PersistentTools, GraphTools):
    """The A2E operations are defined here; each codebolt tool group and the knowledge graph
    is a mixin defined in its own module (documents, episodes, persistent, graph), one method
    per tool, named as the tool is."""

    def __init__(
        self,
        home: Path | str | None = None,
        embedder: str | None = None,
        checkpoints: str | None = None,
        store: str | None = None,
        pooled: bool = False,
    ):
        """`home` holds the configuration (and, without a store URL, the store itself); `store`
        is a store URL (default: `MEM_STORE`, else `config.json`'s "store"; none keeps the
        store in files under `home`). `pooled` asks a database backend for a connection pool,
        for a long-lived server."""
        self.home = Path(home).expanduser() if home else default_home()  # "~/x" from MEM_HOME or --home
        check_home(self.home)
        self.config = load_config(self.home)
        url = store if store is not None else self.config.store
        self.backend: Backend = open_backend(url, self.home, embedder, checkpoints, pooled)
        self.backend.redacts = lambda namespace: self.config.for_namespace(namespace).redact
        self.a2e = A2E(self.backend, self.config)
        self.backend.check_room = self.a2e.check_room  # codebolt records count toward the limits too
        self.backend.record_limit = lambda namespace: self.config.for_namespace(namespace).max_entry_bytes
        # The engine is not thread-safe (shard mirrors, journal offsets, temporary files of one
        # process): the Python API and the LangGraph store run its calls one at a time under this
        # lock, one per open store, so that a `Memory` and a `MemStore` sharing it share the lock.
        self.lock = threading.RLock()

    @property
    def engine(self) -> Backend:
        """The backend (its name from before there were several)."""
        return self.backend

    # -- A2E sessions and scopes ------------------------------------------------------------

    def init(self, namespace: str = "default", agent: str = "default", persist: bool = False) -> Session:
        """Open a session (`memory/init`); `persist` keeps it across processes (`mem init`)."""
        return self.a2e.open_session(namespace, agent, persist)

    def session(self, memory_id: str) -> Session:
        return self.a2e.session(memory_id)

    def scope(self, namespace: str = "default", agent: str = "default") -> Session:
        """Episodic and semantic tiers of (namespace, agent), without a session."""
        return self.a2e.scope(namespace, agent)

    def sessions(self) -> list[dict[str, Any]]:
        return self.a2e.list_sessions()

    def close_session(self, memory_id: str) -> None:
        self.a2e.close_session(memory_id)

    # -- A2E memory -------------------------------------------------------------------------

    def store(
        self, session: Session, entries: list[Any], progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Store A2E entries (`memory/store`); `progress(done, total)` follows a bulk store."""
        return self.a2e.store(session, entries, progress=progress)

    def retrieve(self, session: Session, **query: Any) -> dict[str, Any]:
        return self.a2e.retrieve(session, **query)

    def forget(self, session: Session, **query: Any) -> int:
        return self.a2e.forget(session, **query)

    # -- maintenance (imported when used: one-shot commands do not pay for them) ----------

    def export(self, namespace: str | None = None) -> Iterator[bytes]:
        """The store (or one namespace) as sorted NDJSON lines; see `transfer.py`."""
        from .ops import transfer

        return transfer.export_records(self.backend, namespace)

    def import_records(self, lines: Iterable[bytes | str], dry_run: bool = False) -> dict[str, int]:
        """Upsert the lines of an export; `dry_run` only counts what would change."""
        from .ops import transfer

        return transfer.import_records(self.backend, self.a2e, lines, dry_run)

    def stats(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.backend.stats(namespace)

    def namespaces(self) -> list[dict[str, Any]]:
        totals: dict[str, dict[str, Any]] = {}
        for row in self.backend.stats():
            total = totals.setdefault(row["namespace"], {"namespace": row["namespace"], "entries": 0, "bytes": 0})
            total["entries"] += row["entries"]
            total["bytes"] += row["bytes"]
        return sorted(totals.values(), key=lambda r: r["namespace"])

    def delete_namespace(self, namespace: str) -> dict[str, Any]:
        return self.backend.delete_namespace(namespace)

    def reindex(
        self, embedder: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Re-embed everything with `embedder` (default: the configured one) and rebuild indexes."""
        name = embedder or self.backend.wanted_embedder or (self.backend.recorded_embedder() or {}).get("embedder")
        return self.backend.reindex(name or "static", progress)

    def doctor(self, repair: bool = False) -> list[dict[str, Any]]:
        """Problems found in the store (none when healthy); `repair` fixes what it can."""
        return self.backend.doctor(repair)

    def checkpoint(self, force: bool = False) -> int:
        """Upkeep (`mem gc`): fold journals into checkpoints, purge deleted and expired records;
        returns the number of scopes rewritten."""
        return self.backend.checkpoint(force)

    def gc(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """`mem gc`: `checkpoint(force=True)`, with a report counting what was done (see
        `Backend.collect`)."""
        return self.backend.collect(True, progress)

    def close(self) -> None:
        self.backend.close()

    def shutdown(self) -> None:
        """A long-lived server's clean exit: checkpoints what is worth it, then closes."""
        self.backend.shutdown()
