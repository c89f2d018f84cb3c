"""The storage seam: what every backend gives the operations in `store/ops/`.

The operations see a store as namespaces of *scopes*. A scope holds the records of one kind in
one (namespace, kind, scope) place: an A2E tier (`semantic`; `episodic` of an agent; `working`
of a session) or a codebolt collection (`kv`, `todo`, the events of one episodic memory, ...).
A record is a JSON document with an `"id"`, unique in its scope.

Two backends implement the seam: `files/` (journals and checkpoints under `--home`, the default)
and `postgres/` (PostgreSQL with pgvector, for a store shared by many machines). A third one is
a third folder beside them that subclasses `Backend` and `Scope`; `backends/__init__.py` picks
one from the store URL.

The contract, which both backends' tests check:

- Every write runs inside `with backend.lock(namespace):`. Inside it, reads see every write
  acknowledged before, and no other writer of the namespace (in any process, on any machine)
  runs: a read-modify-write (a todo update, a capacity check for `memory_full`) is atomic. A
  write (`Scope.append`) is durable when the `with` block exits without an exception; a block
  that raises writes nothing in the PostgreSQL backend, and in the files backend keeps the lines
  already appended (the operations append once, at the end of their block).
- Outside a lock, reads see every write acknowledged before they started.
- `Scope.search` ranks by the same contract on every backend: `relevance` in [0, 1] is
  `fuse(cosine, lexical)`, where `lexical` is BM25 normalised by the query's total IDF and
  capped at 1; each part's `total` counts the rows that pass the filters, before any cut; and
  with a query, `Candidates.vectors` gives the stored vectors of its rows (the operations list
  the merged result by diversity, `ops/diversify.py`).
- Records with an `expires_at` in the past are invisible to reads; they leave the disk when
  the backend purges them (a checkpoint, `mem gc`).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..embed import DEFAULT, Embedder, check_embedder_name, get_embedder
from ..errors import StoreMismatch, StoreUnavailable

Doc = dict[str, Any]
# {"op": "put", "recs": [{"id", "doc", "size", "vec"?}]} or {"op": "del", "ids": [...]}; `vec` is
# an encoded vector (`embed.encode_vectors`), present for the scopes whose schema is indexed
Op = dict[str, Any]
Progress = Callable[[int, int], None]

SYSTEM = "\x00system"  # the namespace of the store's own records (`mem init` sessions); no user can name it

# relevance = VECTOR_WEIGHT * max(cosine, 0) + (1 - VECTOR_WEIGHT) * lexical ** LEXICAL_POWER; both
# fitted by bench/fit_fusion.py on the dev split of bench/data/convbench.json (issue 12), with the
# diversity and time constants in the same fit. Until then they were set by hand: 0.7 and 2
# (bench/bench_conv.py's "old hybrid" mode runs them, without diversity or time signal).
VECTOR_WEIGHT = 0.5
LEXICAL_POWER = 2.0
# decimals of the relevance a retrieve shows; rankings take values equal to them as equal (the
# last bits of a cosine depend on where a record is stored, and an import stores it elsewhere)
RELEVANCE_DECIMALS = 6


def fusion_formula() -> str:
    """The fusion as `--explain` shows it (read on each call: the benchmarks change the constants)."""
    return f"{VECTOR_WEIGHT:g} * max(vector, 0) + {1 - VECTOR_WEIGHT:g} * lexical^{LEXICAL_POWER:g}"


def fuse(vector: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """Relevance from cosine similarity and normalised BM25 (see `backends/files/search.py` for
    why the lexical part is raised to a power above 1). Both parts are in [0, 1] and the weights
    sum to 1, so relevance is too; it grows with each signal, and a row matching no query word
    has relevance VECTOR_WEIGHT * cosine: that is what a `min_score` floor means."""
    lexical_part = np.power(np.clip(lexical, 0.0, 1.0), LEXICAL_POWER)
    return np.clip(VECTOR_WEIGHT * np.maximum(vector, 0) + (1 - VECTOR_WEIGHT) * lexical_part, 0.0, 1.0)


@dataclass
class Filters:
    tags: tuple[str, ...] = ()
    ids: tuple[str, ...] | None = None  # record ids to restrict to (exact key lookup)
    # the record's own time (`timeaware.entry_time`) in [since, until), Unix seconds; None: unbounded
    since: float | None = None
    until: float | None = None

    @property
    def timed(self) -> bool:
        return self.since is not None or self.until is not None


class RecordGone(StoreUnavailable):
    """A record a search ranked was deleted (by another process) before `Candidates.doc` read it:
    the search, a read, is done again (`ops/a2e.py`); past a few tries, the client is told to
    send the request again (`retryable`)."""

    retryable = True


@dataclass
class Candidates:
    """Scored rows of (part of) one scope. `fetch(row)` gives the record of a row; the arrays
    are aligned with `rows`."""

    fetch: Callable[[int], Doc]
    rows: np.ndarray
    relevance: np.ndarray
    vector: np.ndarray | None
    lexical: np.ndarray | None
    updated: np.ndarray
    total: int  # rows that pass the filters, before any cut
    path: str = "filter"  # how the rows were found: "filter" (no query), "exact" or "index"
    order: np.ndarray | None = None  # what ranks the rows when it is not relevance (no query)
    # positions (indexes into `rows`) -> their stored unit vectors, one row each (zeros for a row
    # without one); for the diversity of a result list (`ops/diversify.py`); None without a query
    vectors: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def rank(self) -> np.ndarray:
        return self.relevance if self.order is None else self.order

    def doc(self, i: int) -> Doc:
        return self.fetch(int(self.rows[i]))


class Scope(ABC):
    """The records of one (namespace, kind, scope)."""

    descriptor: dict[str, Any]  # {"namespace", "kind", "scope": [names], "schema"}
    dim: int  # the dimension of its vectors; 0 for a scope that is not searched by meaning

    @property
    def namespace(self) -> str:
        return self.descriptor.get("namespace", SYSTEM)

    @property
    def kind(self) -> str:
        return self.descriptor["kind"]

    def id_problem(self, rid: str) -> str | None:
        """Why the backend cannot keep a record of id `rid` in this scope (None: it can). The
        files backend takes any id; a database may bound the size of an indexed key."""
        return None

    @abstractmethod
    def get(self, rid: str, now: float) -> Doc | None:
        """The live record `rid`, or None (missing, deleted or expired)."""

    def get_many(self, rids: list[str], now: float) -> dict[str, Doc]:
        """The live records among `rids`, by id (one round trip where a backend can)."""
        found = {}
        for rid in rids:
            doc = self.get(rid, now)
            if doc is not None:
                found[rid] = doc
        return found

    @abstractmethod
    def docs(self, now: float) -> Iterator[Doc]:
        """Every live record, oldest write first."""

    def last(self, now: float) -> Doc | None:
        """The live record written last (in a scope whose records are only ever added, such as
        an episodic log: the last one appended). Backends find it without reading the others."""
        found = None
        for doc in self.docs(now):
            found = doc
        return found

    @abstractmethod
    def usage(self, now: float) -> tuple[int, int]:
        """(live records, their serialised bytes)."""

    @abstractmethod
    def append(self, op: Op) -> None:
        """Write `op`; the caller holds `Backend.lock(namespace)` (see the module docstring)."""

    @abstractmethod
    def search(
        self,
        now: float,
        filters: Filters,
        query_vector: np.ndarray | None = None,
        query_text: str = "",
        k: int = 10,
        exhaustive: bool = False,
    ) -> list[Candidates]:
        """Without a query: every live row passing `filters`, relevance 1.0, ranked (`order`) by
        the record's own `score`. With one: the best `k` at least by relevance (all of them if
        `exhaustive`, so that a `min_score` cut counts exactly)."""


class Backend(ABC):
    """A store: its scopes, its write locks, its embedder, and its upkeep."""

    url: str  # where the store is, as shown to users (never with a password)
    bounds_ids = False  # whether its scopes may refuse a record id (`Scope.id_problem`)

    def __init__(self, embedder: str | None = None) -> None:
        self.wanted_embedder = embedder or None
        if self.wanted_embedder:
            check_embedder_name(self.wanted_embedder)
        self._embedder: Embedder | None = None
        self.epoch = 0  # how many times another process's reindex changed the embedder under us
        # namespace -> whether its records are masked (`redact`, store-wide or the namespace's
        # own in config.json); set by MemoryService
        self.redacts: Callable[[str], bool] = lambda namespace: False
        self.read_only = False  # `serve-mcp --read-only`: write nothing at all
        # (namespace, records added, bytes grown) -> raises memory_full; set by MemoryService
        self.check_room: Callable[[str, int, int], None] | None = None
        # namespace -> the largest record it takes (`max_entry_bytes`); set by MemoryService
        self.record_limit: Callable[[str], int] | None = None

    # -- the embedder recorded with the store -------------------------------------------------

    @abstractmethod
    def recorded_embedder(self) -> dict | None:
        """{"embedder": name, "dim": n} the store's vectors were made with, None for a new store."""

    @abstractmethod
    def record_embedder(self, embedder: Embedder) -> None:
        """Record the embedder of a store's first vectors."""

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
        if recorded and self.wanted_embedder in (None, recorded.get("embedder")):
            return int(recorded["dim"])
        return self.embedder.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        embedder = self.embedder
        if self.recorded_embedder() is None and not self.read_only:
            self.record_embedder(embedder)
        return embedder.embed(texts)

    # -- scopes and writes ----------------------------------------------------------------------

    @abstractmethod
    def scope(self, namespace: str, kind: str, *scope: str, schema: str = "records") -> Scope:
        """The scope holding `kind` records of `scope` in `namespace`, up to date."""

    def search(
        self,
        scopes: Sequence[Scope],
        now: float,
        filters: Filters,
        query_vector: np.ndarray | None = None,
        query_text: str = "",
        k: int = 10,
        exhaustive: bool = False,
    ) -> list[Candidates]:
        """`Scope.search` of each of `scopes`, their parts in order: one query over several
        scopes (a retrieve's tiers). A backend whose searches cost round trips to a server may
        run the scopes' searches together."""
        found = (scope.search(now, filters, query_vector, query_text, k, exhaustive) for scope in scopes)
        return [part for parts in found for part in parts]

    def admit_namespace(self, namespace: str) -> None:
        """Refuse (`InvalidInput`) a namespace this backend cannot hold: a session opened on it
        is refused at `memory/init`, not at its first write. Every backend takes what
        `check_name` lets through, unless it says otherwise."""
        return None

    def memory_scope(self, schema: str = "entries") -> Scope:
        """A scope that lives only in this process (a `serve-stdio` session's working tier). Every
        backend keeps it the same way: in the memtable the files backend uses for its journals."""
        from ..schemas import SCHEMAS
        from .files.shard import Shard

        dim = self.embedder.dim if SCHEMAS[schema].indexed else 0
        return Shard(None, SCHEMAS[schema], dim, {"kind": "working", "schema": schema})

    @abstractmethod
    def lock(self, namespace: str) -> contextlib.AbstractContextManager[Any]:
        """The namespace's write section (see the module docstring); `Unauthorized` when the
        store is open read-only."""

    def after_write(self, scope: Scope) -> None:  # noqa: B027 (a hook: most backends need nothing)
        """Called after a write's lock is released: time for upkeep the write made due."""

    @abstractmethod
    def namespaces(self) -> list[str]:
        """The names of the namespaces holding records (the system namespace excepted)."""

    @abstractmethod
    def scopes(self, namespace: str) -> list[Scope]:
        """Every scope of a namespace, working tiers of `mem init` sessions included."""

    @abstractmethod
    def usage(self, namespace: str, now: float) -> tuple[int, int]:
        """Live records and bytes of a namespace: what `max_entries` and `max_bytes` limit."""

    @abstractmethod
    def drop_scope(self, namespace: str, kind: str, *scope: str) -> None:
        """Delete a scope and its records (a closed session's working tier)."""

    # -- upkeep -----------------------------------------------------------------------------------

    @abstractmethod
    def export_scopes(self, namespace: str | None, now: float, damaged: list[str]) -> Iterator[tuple[dict, list[Doc]]]:
        """(descriptor, live records) of each scope, for an export. A scope that cannot be read
        whole gives what can be salvaged, and a line naming the damage is added to `damaged`."""

    @abstractmethod
    def stats(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Per scope: namespace, kind, scope, entries, bytes, expired, indexed, pending."""

    @abstractmethod
    def delete_namespace(self, namespace: str) -> dict[str, Any]:
        """Remove a namespace and every record in it; `NotFound` if there is none."""

    @abstractmethod
    def reindex(self, embedder: str, progress: Progress | None = None) -> dict[str, Any]:
        """Re-embed every searchable record with `embedder` and record it as the store's."""

    @abstractmethod
    def doctor(self, repair: bool = False) -> list[dict[str, Any]]:
        """Problems found in the store (none when healthy); `repair` fixes what it can."""

    @abstractmethod
    def checkpoint(self, force: bool = False) -> int:
        """Upkeep for `mem gc`: purge deleted and expired records; returns how many scopes it touched."""

    def collect(self, force: bool = True, progress: Progress | None = None) -> dict[str, Any]:
        """`mem gc` with its report: what was done, counted (a backend with builders of its own,
        such as the files backend's checkpoints and merges, also counts the running ones it
        waited for). `progress(done, total)` follows the work."""
        return {"checkpointed_shards": self.checkpoint(force)}

    def close(self) -> None:  # noqa: B027
        """Release what the process holds (files, connections)."""

    def shutdown(self) -> None:
        """A long-lived server's clean exit."""
        self.close()
