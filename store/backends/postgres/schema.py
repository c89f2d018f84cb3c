"""The tables, and the migrations that make them, applied on first use.

    mem_schema (version)                      one row: how many MIGRATIONS the database has had
    mem_meta   (key, value jsonb)             "embedder": {"embedder", "dim"} the vectors were made with
    mem_records (namespace, kind, scope, id)  one row a record:
        doc jsonb       the record, for SQL users and tools (a NUL character shows as U+FFFD)
        raw text        the record exactly as written (key order, number spelling, NULs): what reads
                        return, so that an export from PostgreSQL is byte-identical to the files'
        size            its serialised bytes (the limits count them)
        vec vector(D)   its embedding (NULL for records not searched by meaning); HNSW, cosine
        terms text[]    its BM25 terms with repeats (`lexical.terms`); GIN
        tags text[]     GIN, for the tag filter
        score, updated_at, expires_at (btree with namespace, where set, holding the size: TTL), seq (write order)
        at float8       the record's own time (`timeaware.entry_time`), for --since / --until; NULL in
                        rows written before migration 2, which are dated by their `created_at`
    mem_scopes (namespace, kind, scope)       the scope's schema and BM25 statistics (rows, total
                                              term count) and bytes
    mem_terms  (namespace, kind, scope, term) document frequency of each term in the scope
    mem_usage  (namespace)                    live counters of records and bytes: the limits

Every key starts with the namespace, and no statement joins two namespaces: a deployment that
outgrows one server can partition the tables by namespace, or distribute them with Citus using
`namespace` as the distribution column, without changing a query.

The system namespace (`base.SYSTEM`, "\\x00system") cannot be stored in `text` (NUL): it is ""
in the database, a name no user namespace can have.

Migrations run in one transaction under an advisory lock, so that processes starting together
neither race nor see a half-made schema. The vector column is made without a dimension; once the
store records its embedder, the backend gives it the embedder's dimension (under the embedder
lock, see `backend.py`).

The HNSW index covers the rows written up to a watermark (`WHERE seq <= upto`, recorded in
mem_meta "vector_index"), like the files backend's checkpoint: rows written since are searched
exactly (the (namespace, kind, scope, seq) index finds them), so a write never pays for an HNSW
insertion (milliseconds a row: a bulk import could not reach thousands of records a second).
An update of an older row is an insertion into the index, as it must be. When enough rows wait,
a build (`CREATE INDEX CONCURRENTLY`: reads and writes go on) makes a new index up to a new
watermark and drops the old one (see `backend.build_index`).
"""

from __future__ import annotations

from typing import Any

from ...errors import StoreUnavailable

LOCK_CLASS = 0x6D656D  # "mem": advisory locks of the two-integer form, apart from namespace locks
SCHEMA_LOCK = (LOCK_CLASS, 1)
EMBEDDER_LOCK = (LOCK_CLASS, 2)  # writers hold it shared; a reindex or a vector-column change, exclusive
SYSTEM_NAME = ""
VECTOR_INDEX = "mem_records_vec"  # + "_<upto>": see build_vector_index
BUILD_LOCK = (LOCK_CLASS, 3)  # one index build at a time (session lock of the builder)
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 64  # pgvector's defaults
# A builder's session checks this often, while a statement runs, that its client is still there.
# Without it a killed builder's server process ran its last statement (an index build: minutes)
# to the end, holding BUILD_LOCK, and `mem doctor` took the leftovers for a build under way
# (outside audit 34b). PostgreSQL 14 and later; any role may set it.
CLIENT_CHECK = "1s"


def watch_client(conn: Any) -> None:
    """Have the session end its statement soon after its client dies (see CLIENT_CHECK)."""
    if conn.info.server_version >= 140000:
        conn.execute("SELECT set_config('client_connection_check_interval', %s, false)", [CLIENT_CHECK])


MIGRATIONS: list[list[str]] = [
    [
        "CREATE SEQUENCE mem_seq",
        "CREATE TABLE mem_meta (key text PRIMARY KEY, value jsonb NOT NULL)",
        """CREATE TABLE mem_records (
            namespace text NOT NULL,
            kind text NOT NULL,
            scope text[] NOT NULL,
            id text NOT NULL,
            doc jsonb NOT NULL,
            raw text NOT NULL,
            size integer NOT NULL,
            vec vector,
            terms text[] NOT NULL DEFAULT '{}',
            tags text[] NOT NULL DEFAULT '{}',
            score real NOT NULL DEFAULT 1,
            updated_at float8 NOT NULL DEFAULT 0,
            expires_at float8,
            seq bigint NOT NULL DEFAULT nextval('mem_seq'),
            PRIMARY KEY (namespace, kind, scope, id)
        )""",
        "CREATE INDEX mem_records_order ON mem_records (namespace, kind, scope, seq)",
        "CREATE INDEX mem_records_terms ON mem_records USING gin (terms)",
        "CREATE INDEX mem_records_tags ON mem_records USING gin (tags)",
        "CREATE INDEX mem_records_expiry ON mem_records (namespace, expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE mem_scopes (
            namespace text NOT NULL,
            kind text NOT NULL,
            scope text[] NOT NULL,
            schema text NOT NULL,
            n_docs integer NOT NULL DEFAULT 0,
            total_len float8 NOT NULL DEFAULT 0,
            bytes bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (namespace, kind, scope)
        )""",
        """CREATE TABLE mem_terms (
            namespace text NOT NULL,
            kind text NOT NULL,
            scope text[] NOT NULL,
            term text NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (namespace, kind, scope, term)
        )""",
        """CREATE TABLE mem_usage (
            namespace text PRIMARY KEY,
            entries bigint NOT NULL DEFAULT 0,
            bytes bigint NOT NULL DEFAULT 0
        )""",
    ],
    ["ALTER TABLE mem_records ADD COLUMN at float8"],  # 2: time-aware retrieval (issue 12)
    [  # 3: the expiry index carries the sizes: what every write section reads at its entry (the
        # records past their expiry, `backend.USAGE`) is an index-only scan for any `now`, so one
        # plan made once serves every write (`backend.lock`) instead of a plan made for each
        "CREATE INDEX mem_records_expiring ON mem_records (namespace, expires_at) INCLUDE (size) "
        "WHERE expires_at IS NOT NULL",
        "DROP INDEX mem_records_expiry",
    ],
]
VERSION = len(MIGRATIONS)


class SchemaTooNew(StoreUnavailable):
    """The database was migrated by a newer `mem`: this one must not write into it."""


def extension_sql() -> str:
    return "CREATE EXTENSION vector;"


def missing_extension(shown: str, database: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"PostgreSQL store {shown}: the pgvector extension is not installed in database {database!r} and this "
        f"role may not install it: as a superuser (or the database owner where pgvector is trusted), "
        f"connect to it and run `{extension_sql()}`"
    )


def db_name(name: str) -> str:
    from ..base import SYSTEM

    return SYSTEM_NAME if name == SYSTEM else name


def user_name(name: str) -> str:
    from ..base import SYSTEM

    return SYSTEM if name == SYSTEM_NAME else name


def read_version(conn: Any) -> int | None:
    """The schema version, None for a database without our tables."""
    row = conn.execute("SELECT to_regclass('mem_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    row = conn.execute("SELECT max(version) FROM mem_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def ensure_schema(conn: Any, shown: str, database: str) -> int:
    """Install pgvector if missing and apply the migrations this database lacks (an autocommit
    connection). Returns the version. `SchemaTooNew` for a database a newer `mem` migrated."""
    version = read_version(conn)
    if version == VERSION and extension_version(conn) is not None:
        return version
    if version is not None and version > VERSION:
        raise too_new(shown, version)
    import psycopg

    try:
        _migrate(conn, shown, database)
    except psycopg.errors.InsufficientPrivilege:  # an agent's role, first on a store to make or upgrade
        raise not_migrated(shown, version) from None
    return VERSION


def _migrate(conn: Any, shown: str, database: str) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", SCHEMA_LOCK)
        _ensure_extension(conn, shown, database)
        conn.execute("CREATE TABLE IF NOT EXISTS mem_schema (version integer NOT NULL)")
        version = read_version(conn) or 0
        if version > VERSION:
            raise too_new(shown, version)
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        if version < VERSION:
            conn.execute("DELETE FROM mem_schema")
            conn.execute("INSERT INTO mem_schema (version) VALUES (%s)", [VERSION])


def not_migrated(shown: str, version: int | None) -> StoreUnavailable:
    """A role that may not change the tables (an agent's, see the README) on a database whose
    schema this mem must make or upgrade first: what the owner must do, as a store unavailable
    until then (exit 7), not as the role's refusal of something it asked for (exit 6)."""
    state = "no mem store yet" if version is None else f"schema version {version}, older than this mem's ({VERSION})"
    return StoreUnavailable(
        f"PostgreSQL store {shown}: {state}, and this role may not change the tables: run any mem command "
        "against it once as the store's owner (the role that made the tables), then again as this one"
    )


def too_new(shown: str, version: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"PostgreSQL store {shown}: its schema is version {version}, newer than this mem knows ({VERSION}): "
        "upgrade mem on this machine"
    )


def extension_version(conn: Any) -> str | None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return row[0] if row else None


def _ensure_extension(conn: Any, shown: str, database: str) -> None:
    if extension_version(conn) is not None:
        return
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a refusal must not abort the migration's transaction
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile):
        raise missing_extension(shown, database) from None
    except psycopg.errors.UndefinedObject:  # not even available on the server
        raise missing_extension(shown, database) from None


def vector_column_dim(conn: Any) -> int:
    """The dimension the vector column was given (0: none yet)."""
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'mem_records'::regclass AND attname = 'vec'"
    ).fetchone()
    return max(int(row[0]), 0) if row else 0


def set_vector_dim(conn: Any, dim: int) -> None:
    """Give the vector column dimension `dim` (vectors of another size become NULL: found by
    words until re-embedded), dropping the vector indexes. The caller holds EMBEDDER_LOCK
    exclusively in this transaction. `dim` is formatted as an SQL literal by psycopg."""
    from psycopg import sql

    for name, _ in vector_indexes(conn):
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
    conn.execute("DELETE FROM mem_meta WHERE key = 'vector_index'")
    conn.execute(
        sql.SQL(
            "ALTER TABLE mem_records ALTER COLUMN vec TYPE vector({dim}) "
            "USING CASE WHEN vector_dims(vec) = {dim} THEN vec::vector({dim}) END"
        ).format(dim=sql.Literal(int(dim)))
    )


def vector_indexes(conn: Any) -> list[tuple[str, bool]]:
    """(name, valid) of the HNSW indexes (an invalid one is what an interrupted build left)."""
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'mem_records'::regclass AND c.relname LIKE %s ORDER BY c.relname",
        [VECTOR_INDEX.replace("_", "\\_") + "\\_%"],
    ).fetchall()
    return [(name, bool(valid)) for name, valid in rows]


def index_name(upto: int) -> str:
    return f"{VECTOR_INDEX}_{int(upto)}"


def build_vector_index(conn: Any, upto: int, dim: int, concurrently: bool) -> None:
    """The HNSW index of the rows with `seq <= upto` (written before the build; later rows are
    searched exactly until the next build), recorded in mem_meta as "vector_index". CONCURRENTLY
    (outside a transaction) lets reads and writes go on during the build."""
    from psycopg import sql

    conn.execute("SET maintenance_work_mem = '256MB'")
    conn.execute(
        sql.SQL(
            "CREATE INDEX {how} IF NOT EXISTS {name} ON mem_records USING hnsw (vec vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef}) WHERE seq <= {upto}"
        ).format(
            how=sql.SQL("CONCURRENTLY" if concurrently else ""),
            name=sql.Identifier(index_name(upto)),
            m=sql.Literal(HNSW_M),
            ef=sql.Literal(HNSW_EF_CONSTRUCTION),
            upto=sql.Literal(int(upto)),
        )
    )
    conn.execute("RESET maintenance_work_mem")
    record_vector_index(conn, upto, dim)


def record_vector_index(conn: Any, upto: int, dim: int) -> None:
    """Make the index of the rows with `seq <= upto` the one searches use (mem_meta "vector_index")."""
    from psycopg.types.json import Jsonb

    conn.execute(
        "INSERT INTO mem_meta (key, value) VALUES ('vector_index', %s) ON CONFLICT (key) DO UPDATE "
        "SET value = EXCLUDED.value",
        [Jsonb({"upto": int(upto), "dim": int(dim)})],
    )


def finished_build(conn: Any, recorded_upto: int) -> int | None:
    """The watermark of the newest valid HNSW index above `recorded_upto`: a build whose
    CREATE INDEX ended after its process did (a server that exited, a builder killed: the
    statement runs on in PostgreSQL, and completes, but nobody is left to record it). Called
    under BUILD_LOCK, so no build is under way and the index was made on the column as it is."""
    prefix = f"{VECTOR_INDEX}_"
    uptos = [
        int(name[len(prefix) :]) for name, valid in vector_indexes(conn) if valid and name[len(prefix) :].isdigit()
    ]
    newer = [upto for upto in uptos if upto > recorded_upto]
    return max(newer) if newer else None


def drop_vector_indexes(conn: Any, keep: str | None, concurrently: bool) -> None:
    drop_vector_indexes_named(conn, [name for name, _ in vector_indexes(conn) if name != keep], concurrently)


def drop_vector_indexes_named(conn: Any, names: list[str], concurrently: bool = True) -> None:
    from psycopg import sql

    how = sql.SQL("CONCURRENTLY" if concurrently else "")
    for name in names:
        conn.execute(sql.SQL("DROP INDEX {} IF EXISTS {}").format(how, sql.Identifier(name)))
