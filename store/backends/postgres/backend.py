"""The PostgreSQL backend: scopes, write sections, the recorded embedder.

Write sections. `lock(namespace)` opens a transaction on a connection made current for the
thread (every `Scope` read and write of the block runs in it) and takes, in one round trip,

    pg_advisory_xact_lock_shared(EMBEDDER_LOCK)      no reindex runs while a writer does
    pg_advisory_xact_lock(hashtextextended(ns, 0))   no other writer of the namespace runs

then reads the recorded embedder and the namespace's usage (`ENTRY`) in a second statement of
the same pipeline (a new snapshot: it sees a reindex that committed while we waited). The whole
transaction is one pipeline (`connection.Database.transaction`): its reads are its only round
trips, its writes travel with the COMMIT. The block commits when it exits normally
and rolls back when it raises; a nested lock (of the same or another namespace) joins the outer
transaction and takes that namespace's advisory lock too. The transaction is READ COMMITTED:
the advisory lock is what makes a read-modify-write atomic, so no serialization failure can
happen inside a block. A deadlock (two processes nesting locks of two namespaces in opposite
orders, which the operations never do) is detected by PostgreSQL and fails one request with a
retryable error: a block is the operations' Python code, so it cannot be replayed transparently.
The maintenance transactions of this backend retry themselves (`retrying`).

Early release (`EARLY_RELEASE`). The COMMIT of a write section does not wait for the WAL flush
(`synchronous_commit` off for that transaction), so its locks go to the next writer at once;
the same round trip then runs FLUSH, a transaction of its own that writes a WAL record and
commits synchronously, so returns once the WAL is flushed past our commit. `lock` exits (and
the operation acknowledges the write) only then: an acknowledged write is durable, as with a
synchronous COMMIT, and the flushes of concurrent writers are one `fsync`. What changes: between
the two commits (a flush, about a millisecond) other sessions can read the write before it is
durable; a server crash then loses it, and its writer, never answered, was not told it was
stored. A later write that read it (a replacement, the statistics) is later in the WAL, so it
is lost with it: the store stays consistent. Write sections read what they need from the usage
read at their entry and from the rows they read (`known_rows`), exact under the lock.

The embedder. It is recorded in `mem_meta` by the first write that embeds (like store.json in
the files backend). A process notices that another one changed it (`mem reindex --embedder`)
at its next write section, and outside them at most `REFRESH` seconds later; it then drops its
embedder and bumps `epoch`, so an operation that embedded before the lock embeds again. A
reindex holds EMBEDDER_LOCK exclusively for its whole transaction: it waits for the writers
under way and the next ones wait for it, so no vector of the old dimension is written after it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ... import clock
from ...embed import Embedder
from ...errors import InvalidInput, StoreMismatch, StoreUnavailable, Unauthorized
from ...log import logger
from ..base import SYSTEM, Backend, Candidates, Doc, Filters, Progress, Scope
from . import schema as sch
from .connection import GENERIC_PLAN, Database

REFRESH = 1.0  # seconds a reader outside a write section trusts the embedder it read
BUILD_MIN = 5000  # rows written since the HNSW index's watermark before it is built again...
BUILD_SHARE = 4  # ...or a quarter of the rows it covers, if more
BUILD_CHECK = 10.0  # seconds between a server's looks at whether a build is due
BUILD_POLL = 0.2  # seconds between `mem gc`'s looks at whether another process's build ended
MAX_NAME = 1024
MAX_NAME_BYTES = 1024  # in UTF-8: what PostgreSQL's btree keys leave room for beside a scope and an id
META = (
    "SELECT (SELECT value FROM mem_meta WHERE key = 'embedder'), (SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'mem_records'::regclass AND attname = 'vec'), "
    "(SELECT value FROM mem_meta WHERE key = 'vector_index')"
)
DEADLOCK_RETRIES = 5
# a WAL record of no meaning, in a transaction of its own: its synchronous commit flushes the WAL
FLUSH = "SELECT pg_logical_emit_message(true, 'mem', '')"
CAN_FLUSH = (  # whether this role may run FLUSH (a server may revoke it from PUBLIC)
    "SELECT coalesce(bool_or(has_function_privilege(oid, 'EXECUTE')), false) FROM pg_proc "
    "WHERE proname = 'pg_logical_emit_message' AND proargtypes[2] = 'text'::regtype"
)
# Whether a write section's COMMIT releases its locks before the WAL flush, the flush then
# awaited by FLUSH before the write is acknowledged (see `lock`); False: a plain synchronous COMMIT
EARLY_RELEASE = True
# A namespace's counters, its records past their expiry at %(now)s, and the next expiry after it
USAGE = (
    "SELECT coalesce((SELECT entries FROM mem_usage WHERE namespace = %(ns)s), "  # no row: a count
    "(SELECT count(*) FROM mem_records WHERE namespace = %(ns)s)), coalesce((SELECT bytes FROM mem_usage "
    "WHERE namespace = %(ns)s), (SELECT sum(size) FROM mem_records WHERE namespace = %(ns)s), 0), "
    "count(*), coalesce(sum(size), 0), (SELECT min(expires_at) FROM mem_records WHERE namespace = %(ns)s "
    "AND expires_at > %(now)s) FROM mem_records WHERE namespace = %(ns)s AND expires_at <= %(now)s"
)
# what a write section reads at its entry: the recorded embedder and the namespace's usage
ENTRY = f"SELECT meta.*, usage.* FROM ({META}) AS meta, ({USAGE}) AS usage"
# How ENTRY is planned: once a connection (the plan PostgreSQL made for each `now` took 0.6 ms a
# write, a third of the server's time), and without a scan of the whole table: with the
# statistics of a bulk import (which do not count the expiry index yet) a plan made for any `now`
# read the whole table, 160 ms a write at 100k. So it reads the expiry index (only the rows with
# an expiry, with their sizes since migration 3). Both settings are back to the session's before
# the section's own statements (RESET).
ENTRY_SETTINGS = GENERIC_PLAN
PENDING = object()  # a write section's usage before its entry's read is taken (`lock`)
ANALYZE_AFTER = 10_000  # rows a one-shot command writes before it refreshes the planner's statistics
NOT_OWNER = "42501"  # insufficient_privilege: a least-privilege role may not change the tables
DEADLOCK = "40P01"


def entry_locks(early: bool) -> str:
    """What a write section sends first: the embedder lock (shared), the namespace's lock (from
    three parameters: the embedder lock's two integers and the namespace's database name), and
    ENTRY_SETTINGS; with `early`, a COMMIT that does not wait for the disk (see `lock`)."""
    return (
        "SELECT pg_advisory_xact_lock_shared(%s, %s), pg_advisory_xact_lock(hashtextextended(%s, 0)), "
        + "".join(f"set_config('{key}', '{value}', true), " for key, value in ENTRY_SETTINGS.items())
        + ("set_config('synchronous_commit', 'off', true)" if early else "true")
    )


def deadlocked(exc: StoreUnavailable) -> bool:
    """Whether PostgreSQL ended the statement to break a deadlock (SQLSTATE 40P01)."""
    return (exc.detail or {}).get("sqlstate") == DEADLOCK


def not_owner(exc: StoreUnavailable) -> bool:
    return exc.detail.get("sqlstate") == NOT_OWNER


class PostgresBackend(Backend):
    bounds_ids = True  # btree keys hold at most 2704 bytes (`PgScope.id_problem`)

    def __init__(self, url: str, embedder: str | None = None, pooled: bool = False) -> None:
        super().__init__(embedder or os.environ.get("MEM_EMBEDDER") or None)
        self.db = Database(url, pooled, self._on_connect)
        self.url = self.db.shown  # the password masked: the only form of the URL a message shows
        self.database = self.db.target.database
        self._recorded: dict | None = None
        self._recorded_at = -1.0  # monotonic time of the last read of mem_meta (-1: never)
        self._vector_dim = 0  # the dimension the vector column has (0: none yet)
        self._index: dict | None = None  # mem_meta "vector_index": {"upto", "dim"} of the HNSW index
        self._builder: threading.Thread | None = None
        self._build_checked = -math.inf  # when a server last looked whether a build is due
        self._wrote = False  # whether this process wrote vectors (a one-shot command's close looks)
        self.waited_builds = 0  # index builds of other processes `build_index(wait=True)` waited for
        self.rows_written = 0  # rows this process wrote (a bulk import analyses the table when it ends)
        self._meta_lock = threading.Lock()
        self._locked = threading.local()  # namespaces whose advisory lock this thread's transaction holds
        self._owner = True  # False once the database refused this role a change of the tables

    # -- connection and schema ------------------------------------------------------------

    def _on_connect(self, conn: Any) -> None:
        """Migrate on the process's first connection; a read-only server (`serve-mcp
        --read-only`) writes nothing, not even the tables, so it only checks they are there."""
        if not self.read_only:
            sch.ensure_schema(conn, self.url, self.database)
            self.db.early_release = EARLY_RELEASE and conn.execute(CAN_FLUSH).fetchone()[0]
            return
        version = sch.read_version(conn)
        if version is None or sch.extension_version(conn) is None:
            raise StoreUnavailable(
                f"PostgreSQL store {self.url}: no mem store in this database yet; a read-only server creates "
                "nothing: run any mem command against it first"
            )
        if version > sch.VERSION:
            raise sch.too_new(self.url, version)
        if version < sch.VERSION:
            raise StoreUnavailable(
                f"PostgreSQL store {self.url}: its schema is version {version}, older than this mem's "
                f"({sch.VERSION}); a read-only server changes nothing: run any mem command against it first"
            )

    def _read_meta(self, conn: Any) -> None:
        row = conn.execute(META).fetchone()
        self._take_meta(*row)

    def _take_meta(self, recorded: dict | None, typmod: int | None = None, index: Any = False) -> None:
        """Take what mem_meta says; another process's reindex shows as a changed embedder."""
        with self._meta_lock:
            old = self._recorded
            if typmod is not None:
                self._vector_dim = max(int(typmod), 0)
            if index is not False:
                self._index = index
            self._recorded = recorded
            self._recorded_at = time.monotonic()
            if (
                old is not None
                and recorded is not None
                and (old.get("embedder"), old.get("dim"))
                != (
                    recorded.get("embedder"),
                    recorded.get("dim"),
                )
            ):
                self._embedder = None
                self.epoch += 1

    @property  # type: ignore[override]
    def epoch(self) -> int:
        """How many reindexes by other processes this one noticed; in a write section, as of its
        entry (read when first asked: see `lock`)."""
        if "db" in self.__dict__:
            self.db.settle()
        return self._epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._epoch = value

    def refresh(self, force: bool = False) -> None:
        """Read the recorded embedder again if it is older than `REFRESH` seconds."""
        if self.db.in_transaction and not force:
            return  # read at the lock's entry: nothing can change it meanwhile
        if force or self._recorded_at < 0 or time.monotonic() - self._recorded_at > REFRESH:
            with self.db.connection() as conn:
                self._read_meta(conn)

    # -- the embedder -----------------------------------------------------------------------

    def recorded_embedder(self) -> dict | None:
        self.db.settle()  # in a write section: what its entry read
        if self._recorded_at < 0:
            self.refresh(force=True)
        return self._recorded

    def record_embedder(self, embedder: Embedder) -> None:
        """Record the embedder of the store's first vectors (the first writer wins: a process
        told to use another one is refused, as the files backend refuses it)."""
        from psycopg.types.json import Jsonb

        meta = {"embedder": embedder.name, "dim": embedder.dim}
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO mem_meta (key, value) VALUES ('embedder', %s) ON CONFLICT (key) DO NOTHING", [Jsonb(meta)]
            )
            recorded = conn.execute("SELECT value FROM mem_meta WHERE key = 'embedder'").fetchone()[0]
        self._take_meta(recorded)
        if recorded.get("embedder") != embedder.name:
            self._embedder = None
            raise StoreMismatch(
                f"this store's vectors were made by the {recorded['embedder']!r} embedder, not {embedder.name!r}: "
                f"run `mem reindex --embedder {embedder.name}` to rebuild them",
                {"recorded": recorded, "wanted": embedder.name},
            )

    def current_dim(self) -> int:
        """The recorded dimension (0 when nothing was embedded yet): vectors of another size are
        not stored (see `scope.py`)."""
        recorded = self.recorded_embedder()
        return int(recorded["dim"]) if recorded else 0

    def ensure_vector_column(self) -> None:
        """Give the vector column the recorded dimension once the store has recorded an
        embedder. Its own transaction, holding EMBEDDER_LOCK exclusively (it waits for the
        writers under way); never inside a write section (that would wait for itself)."""
        recorded = self._recorded
        if recorded is None or self._vector_dim == int(recorded["dim"]) or self.db.in_transaction or self.read_only:
            return
        if not self._owner:
            return

        def change(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", sch.EMBEDDER_LOCK)
            value = conn.execute("SELECT value FROM mem_meta WHERE key = 'embedder'").fetchone()
            if value is None:
                return
            dim = int(value[0]["dim"])
            if sch.vector_column_dim(conn) != dim:
                sch.set_vector_dim(conn, dim)
            self._vector_dim = dim

        try:
            self.retrying(change)
        except StoreUnavailable as exc:
            if not not_owner(exc):
                raise
            self._refused_ddl()

    def _refused_ddl(self) -> None:
        """A least-privilege role (see the README) writes and reads records but may not change
        the tables: the vector column's dimension and the HNSW index wait for the owner's next
        `mem gc`. Vectors are stored all the same, and searched exactly until then."""
        if self._owner:
            logger("postgres").warning(
                "this role may not change the tables of %s: the vector index is left to the owner's `mem gc`", self.url
            )
        self._owner = False

    def index_due(self, conn: Any) -> bool:
        """Whether enough rows were written since the HNSW index's watermark to build it again."""
        upto = int((self._index or {}).get("upto", 0))
        written = conn.execute("SELECT last_value FROM mem_seq").fetchone()[0]
        return written - upto >= max(BUILD_MIN, upto // BUILD_SHARE)

    def build_index(self, force: bool = False, wait: bool = False) -> bool:
        """Build the HNSW index up to the newest row (`schema.build_vector_index`) if it is due
        (or `force`) and no other process is building one; returns whether it built. With
        `wait` (`mem gc`), a build under way in another process (the one a bulk import starts
        when it ends) is waited for, then what it left is built: the command returns with the
        store indexed, rather than while the index is half made."""
        if self.read_only or self.db.in_transaction or self.recorded_embedder() is None or not self._owner:
            return False
        for attempt in range(DEADLOCK_RETRIES):
            try:
                return self._build_index(force, wait)
            except StoreUnavailable as exc:
                if deadlocked(exc) and attempt < DEADLOCK_RETRIES - 1:
                    # CREATE INDEX CONCURRENTLY waits for every older transaction: one that waits in
                    # turn for a lock the build's session holds (an ANALYZE, a reindex's embedder
                    # lock) is a deadlock, and PostgreSQL may end the build. What it left (an
                    # invalid index) the next attempt drops.
                    time.sleep(0.1 * (attempt + 1))
                    continue
                if not not_owner(exc):
                    raise
                self._refused_ddl()
                return False
        return False

    def _build_index(self, force: bool, wait: bool) -> bool:
        self.ensure_vector_column()
        with self.db.connection() as conn:
            waited = False
            while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", sch.BUILD_LOCK).fetchone()[0]:
                if not wait:
                    return False  # another process builds it
                self.waited_builds += not waited
                waited = True
                # polled, not `pg_advisory_lock`: a statement waiting holds a snapshot, which the
                # other process's CREATE INDEX CONCURRENTLY would wait for in turn (a deadlock)
                time.sleep(BUILD_POLL)
            try:
                sch.watch_client(conn)
                self._read_meta(conn)
                dim = int(self._recorded["dim"])  # type: ignore[index]
                adopted = self._vector_dim == dim and self._adopt_finished_build(conn, dim)
                upto = conn.execute("SELECT coalesce(max(seq), 0) FROM mem_records").fetchone()[0]
                current = self._index or {}
                same = current.get("dim") == dim and int(current.get("upto", 0)) >= upto
                if same or self._vector_dim != dim or not (force or self.index_due(conn)):
                    return adopted
                leftovers = [name for name, valid in sch.vector_indexes(conn) if not valid]
                for name in leftovers:  # an interrupted build's invalid index
                    sch.drop_vector_indexes_named(conn, [name])
                sch.build_vector_index(conn, upto, dim, concurrently=True)
                sch.drop_vector_indexes(conn, keep=sch.index_name(upto), concurrently=True)
                self._read_meta(conn)
                return True
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)

    def _adopt_finished_build(self, conn: Any, dim: int) -> bool:
        """Record an index that a build finished after its process ended (`schema.finished_build`)
        instead of building it again, and drop the older ones. Returns whether it adopted one."""
        upto = sch.finished_build(conn, int((self._index or {}).get("upto", 0)))
        if upto is None:
            return False
        sch.record_vector_index(conn, upto, dim)
        sch.drop_vector_indexes(conn, keep=sch.index_name(upto), concurrently=True)
        self._read_meta(conn)
        logger("postgres").info("adopted the HNSW index of rows up to %d, finished after its builder ended", upto)
        return True

    def _build_in_background(self) -> None:
        """A long-lived server builds the index in a thread, one at a time."""
        if self._builder is not None and self._builder.is_alive():
            return

        def build() -> None:
            with contextlib.suppress(Exception):  # upkeep: the next write tries again
                self.build_index()

        self._builder = threading.Thread(target=build, name="mem-index-build", daemon=True)
        self._builder.start()

    # -- scopes and write sections --------------------------------------------------------

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
        """The scopes' searches together: their statistics in one round trip (`search.py`). A
        session's working tier is no scope of the database (it stays in the server process)."""
        from .scope import PgScope
        from .search import search_each

        query = (query_vector, query_text, k, exhaustive)
        each = iter(search_each([scope for scope in scopes if isinstance(scope, PgScope)], now, filters, *query))
        parts: list[Candidates] = []
        for scope in scopes:
            parts += next(each) if isinstance(scope, PgScope) else scope.search(now, filters, *query)
        return parts

    def scope(self, namespace: str, kind: str, *scope: str, schema: str = "records") -> Scope:
        from .scope import PgScope

        if namespace != SYSTEM:
            check_namespace(namespace)
        self.refresh()
        return PgScope(self, namespace, kind, list(scope), schema)

    def admit_namespace(self, namespace: str) -> None:
        check_namespace(namespace)  # at most MAX_NAME_BYTES in UTF-8

    def memory_scope(self, schema: str = "entries") -> Scope:
        self.refresh()
        return super().memory_scope(schema)

    @contextlib.contextmanager
    def lock(self, namespace: str) -> Iterator[Any]:
        if self.read_only:
            raise Unauthorized("this store is open read-only: nothing may be written")
        if namespace != SYSTEM:
            check_namespace(namespace)
        name = sch.db_name(namespace)
        held: set[str] | None = getattr(self._locked, "names", None)
        if held is not None:  # nested: join the transaction, and lock this namespace too
            if name not in held:
                with self.db.connection() as conn:
                    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])
                held.add(name)
            yield self
            return

        entered = clock.now()
        early = self.db.early_release

        def enter(conn: Any) -> Any:  # sent with the BEGIN: one round trip
            conn.execute(entry_locks(early), [*sch.EMBEDDER_LOCK, name], prepare=True)
            read = conn.execute(ENTRY, {"ns": name, "now": entered}, prepare=True)  # its own snapshot: after the locks
            for setting in ENTRY_SETTINGS:
                conn.execute(f"RESET {setting}")
            return read

        def durable(conn: Any) -> None:
            """After the COMMIT, which released the locks without waiting for the disk: a
            transaction of its own that writes a WAL record and commits synchronously (the
            session's synchronous_commit is on). It returns once the WAL is flushed past its own
            record, so past our commit's: the write is durable before `lock` exits and the
            caller acknowledges it. Meanwhile the next writer of the namespace already runs."""
            conn.execute(FLUSH, prepare=True)

        def settle(read: Any) -> None:
            with self.db.errors():
                row = read.fetchone()
            self._take_meta(*row[:3])
            if getattr(self._locked, "usage", None) is PENDING:  # not written meanwhile (`written`)
                self._locked.usage = (name, entered, *row[3:])

        with self.db.transaction(enter, durable if early else None) as (_, read):
            # what ENTRY read is taken when first needed (`db.settle`): a read the section queues
            # before that (the rows a store replaces, `PgScope.get_many`) shares its round trip
            self.db.defer(lambda: settle(read))
            self._locked.names = {name}
            self._locked.usage = PENDING
            self._locked.rows = {}
            try:
                yield self
                self.db.settle()  # a section that read nothing still takes its entry's news (a reindex)
            finally:
                self.db.defer(None)
                self._locked.names = self._locked.usage = self._locked.rows = None

    def written(self) -> None:
        """The write section wrote: what it read at its entry (the namespace's usage) is stale."""
        self._locked.usage = None

    def known_rows(self, key: tuple) -> dict[str, tuple[int, list[str]] | None] | None:
        """In a write section, what its reads found of scope `key` (namespace, kind, scope): id ->
        (size, terms) of the row, expired or not, or None for no row. The namespace's lock keeps
        it true until the section writes, which keeps it up to date (`PgScope.append`)."""
        rows = getattr(self._locked, "rows", None)
        return None if rows is None else rows.setdefault(key, {})

    def after_write(self, scope: Scope) -> None:
        """A write that embedded gives the vector column its dimension (once); a server builds
        the HNSW index when it is due. A one-shot command builds it when it closes."""
        if not scope.dim:
            return
        self._wrote = True
        self.ensure_vector_column()
        if self.db.pooled and not self.db.in_transaction and time.monotonic() - self._build_checked > BUILD_CHECK:
            self._build_checked = time.monotonic()
            self._build_in_background()

    def namespaces(self) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute(  # with records even if their counter row was deleted by hand
                "SELECT namespace FROM mem_usage WHERE namespace <> '' UNION "
                "SELECT DISTINCT namespace FROM mem_records WHERE namespace <> '' ORDER BY namespace"
            ).fetchall()
        return [r[0] for r in rows]

    def scopes(self, namespace: str) -> list[Scope]:
        from .scope import scopes_of

        return scopes_of(self, namespace)

    def usage(self, namespace: str, now: float) -> tuple[int, int]:
        """The live counters minus the records past their expiry that no purge removed yet. In a
        write section that has not written yet, the figures its entry read, while they still
        hold: no record of the namespace expired between that entry and `now`."""
        ns = sch.db_name(namespace)
        self.db.settle()
        cached = getattr(self._locked, "usage", None)
        if cached is not None and cached[0] == ns:
            _, entered, entries, size, gone, gone_size, next_expiry = cached
            if entered <= now and (next_expiry is None or now < next_expiry):
                return int(entries) - int(gone), int(size) - int(gone_size)
        with self.db.connection() as conn:
            row = conn.execute(USAGE, {"ns": ns, "now": now}).fetchone()
        return int(row[0]) - int(row[2]), int(row[1]) - int(row[3])

    def drop_scope(self, namespace: str, kind: str, *scope: str) -> None:
        from .scope import remove_rows

        with self.lock(namespace), self.db.connection() as conn:
            self.written()
            self._locked.rows = {}
            key = {"ns": sch.db_name(namespace), "kind": kind, "scope": list(scope)}
            remove_rows(
                conn,
                "DELETE FROM mem_records WHERE namespace = %(ns)s AND kind = %(kind)s AND scope = %(scope)s::text[] "
                "RETURNING kind, scope, size, terms",
                key,
            )
            conn.execute(
                "DELETE FROM mem_terms WHERE namespace = %(ns)s AND kind = %(kind)s AND scope = %(scope)s::text[]", key
            )
            conn.execute(
                "DELETE FROM mem_scopes WHERE namespace = %(ns)s AND kind = %(kind)s AND scope = %(scope)s::text[]", key
            )

    # -- upkeep ---------------------------------------------------------------------------

    def export_scopes(self, namespace: str | None, now: float, damaged: list[str]) -> Iterator[tuple[dict, list[Doc]]]:
        names = [namespace] if namespace is not None else self.namespaces()
        for name in names:
            for scope in self.scopes(name):
                docs = list(scope.docs(now))
                damaged += scope.damaged  # type: ignore[attr-defined]  # rows skipped as unreadable
                yield scope.descriptor, docs

    def stats(self, namespace: str | None = None) -> list[dict[str, Any]]:
        from . import maintenance

        return maintenance.stats(self, namespace)

    def delete_namespace(self, namespace: str) -> dict[str, Any]:
        from . import maintenance

        return maintenance.delete_namespace(self, namespace)

    def reindex(self, embedder: str, progress: Progress | None = None) -> dict[str, Any]:
        from . import reindex

        return reindex.reindex(self, embedder, progress)

    def doctor(self, repair: bool = False) -> list[dict[str, Any]]:
        from . import maintenance

        return maintenance.doctor(self, repair)

    def checkpoint(self, force: bool = False) -> int:
        from . import maintenance

        return maintenance.checkpoint(self, clock.now())

    def collect(self, force: bool = True, progress: Progress | None = None) -> dict[str, Any]:
        """`mem gc`'s report in the files backend's shape: `shards` counts the scopes,
        `checkpointed_shards` those the purge of expired rows touched (plus one for an index
        build), `merges` is 0 (no segments here), `waited_for_running` the index builds of other
        processes waited for."""
        waited = self.waited_builds
        touched = self.checkpoint(force)
        with self.db.connection() as conn:
            scopes = conn.execute("SELECT count(*) FROM mem_scopes").fetchone()[0]
        return {
            "shards": int(scopes), "checkpointed_shards": touched, "merges": 0,
            "waited_for_running": self.waited_builds - waited,
        }  # fmt: skip

    def retrying(self, work: Any) -> Any:
        """Run `work(conn)` in a transaction of its own, again after a serialization failure or a
        deadlock (maintenance only: its work is ours to replay)."""
        import psycopg

        with self.db.connection() as conn:
            for attempt in range(DEADLOCK_RETRIES):
                try:
                    with conn.transaction():
                        return work(conn)
                except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                    if attempt == DEADLOCK_RETRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
        return None

    def analyze(self) -> None:
        """Refresh the planner's statistics of the records (`mem gc`, and a one-shot command that
        wrote ANALYZE_AFTER rows: a bulk import would otherwise leave plans to guesses until
        autovacuum comes by). Upkeep: a role that may not analyse the table skips it."""
        if self.read_only or not self._owner:
            return
        with contextlib.suppress(StoreUnavailable), self.db.connection() as conn:
            conn.execute("ANALYZE mem_records, mem_terms, mem_scopes")

    def close(self) -> None:
        """A one-shot command that wrote enough rows for the HNSW index to be due starts a
        detached process that builds it (as a bulk import ends with one build rather than an
        index insertion per row, and does not wait for it)."""
        if not self.db.pooled and self.rows_written >= ANALYZE_AFTER:
            self.analyze()
        if not self.db.pooled and self._wrote and not self.read_only and self._owner:
            with contextlib.suppress(Exception), self.db.connection() as conn:
                if self.index_due(conn):
                    spawn_build(self.db.url)
        if self._builder is not None:
            self._builder.join(timeout=0)  # a daemon thread: an interrupted build is cleaned up by the next
        self.db.close()


def check_namespace(namespace: Any) -> None:
    """The rule of namespace names (as the files backend's): 1 to MAX_NAME characters, no NUL."""
    if not isinstance(namespace, str) or not namespace or len(namespace) > MAX_NAME or "\x00" in namespace:
        raise InvalidInput(f"namespace must be 1 to {MAX_NAME} characters without NUL", {"field": "namespace"})
    try:
        size = len(namespace.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"namespace {ascii(namespace)} is not valid UTF-8 text", {"field": "namespace"}) from None
    if size > MAX_NAME_BYTES:  # every index key starts with it (see scope.KEY_BYTES)
        raise InvalidInput(
            f"namespace too long for the PostgreSQL store: {size} bytes in UTF-8, at most {MAX_NAME_BYTES}",
            {"field": "namespace"},
        )


def spawn_build(url: str) -> None:
    """Start `python -m a2e_mem.backends.postgres.build` detached. The URL goes in the child's
    environment, not its command line, where `ps` would show a password."""
    import subprocess
    import sys

    subprocess.Popen(
        [sys.executable, "-m", f"{__package__}.build"],
        env={**os.environ, "MEM_STORE": url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
