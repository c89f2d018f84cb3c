"""`MemoryService`: every operation of the store, one method each.

The CLI, `serve-stdio` and `serve-mcp` are front doors onto this class; none of them implements
an operation itself. Codebolt tools and knowledge-graph operations take a `namespace` keyword
(default "default"); A2E operations take a session or scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .backends.files.engine import Engine
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

    def __init__(self, home: Path | str | None = None, embedder: str | None = None, checkpoints: str | None = None):
        self.home = Path(home) if home else default_home()
        check_home(self.home)
        self.engine = Engine(self.home, embedder, checkpoints)
        self.config = load_config(self.home)
        self.engine.redact = self.config.base.redact
        self.a2e = A2E(self.engine, self.config)
        self.engine.check_room = self.a2e.check_room  # codebolt records count toward the limits too
        self.engine.record_limit = lambda namespace: self.config.for_namespace(namespace).max_entry_bytes

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

        return transfer.export_records(self.engine, namespace)

    def import_records(self, lines: Iterable[bytes | str], dry_run: bool = False) -> dict[str, int]:
        """Upsert the lines of an export; `dry_run` only counts what would change."""
        from .ops import transfer

        return transfer.import_records(self.engine, self.a2e, lines, dry_run)

    def stats(self, namespace: str | None = None) -> list[dict[str, Any]]:
        from .backends.files import maintenance

        return maintenance.stats(self.engine, namespace)

    def namespaces(self) -> list[dict[str, Any]]:
        from .backends.files import maintenance

        return maintenance.namespaces(self.engine)

    def delete_namespace(self, namespace: str) -> dict[str, Any]:
        from .backends.files import maintenance

        return maintenance.delete_namespace(self.engine, namespace)

    def reindex(
        self, embedder: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Re-embed everything with `embedder` (default: the configured one) and rebuild indexes."""
        name = embedder or self.engine.wanted_embedder or (self.engine.recorded_embedder() or {}).get("embedder")
        from .backends.files import maintenance

        return maintenance.reindex(self.engine, name or "static", progress)

    def doctor(self, repair: bool = False) -> list[dict[str, Any]]:
        """Problems found in the store's files (none when healthy); `repair` rebuilds indexes."""
        from .backends.files import maintenance

        return maintenance.doctor(self.engine, repair)

    def checkpoint(self, force: bool = False) -> int:
        """Fold every shard's journals into its checkpoint (purging expired entries); returns
        the number of shards rewritten."""
        done = 0
        for _, ns_folder in self.engine.namespaces():
            for _, folder in self.engine.shard_folders(ns_folder):
                done += self.engine.checkpoint_folder(folder, force, wait=True)
        return done

    def close(self) -> None:
        self.engine.close()

    def shutdown(self) -> None:
        """A long-lived server's clean exit: checkpoints what is worth it, then closes."""
        self.engine.shutdown()
