"""Per-invocation state: global options and the store, opened on first use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2e_mem.service import MemoryService


@dataclass
class State:
    home: Path | None = None
    quiet: bool = False
    embedder: str | None = None
    store: str | None = None  # --store URL (None: MEM_STORE, else config.json, else files under home)
    pooled: bool = False  # a long-lived server: a database backend keeps a connection pool
    _service: Any = None

    @property
    def service(self) -> MemoryService:
        if self._service is None:
            from a2e_mem.service import MemoryService

            self._service = MemoryService(self.home, embedder=self.embedder, store=self.store, pooled=self.pooled)
        return self._service


state = State()
