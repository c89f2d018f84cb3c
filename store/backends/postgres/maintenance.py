"""Looking after a PostgreSQL store: statistics, namespace deletes, purges, reindex, doctor.

- `stats`: per scope, live records and bytes, expired rows not yet purged, live rows with a
  vector in the HNSW index (`indexed`) and written since its watermark (`pending`: searched exactly).
- `purge_expired` + `build_index` (`mem gc`): deletes the rows past their expiry, namespace by
  namespace under its lock, the statistics adjusted in the same transaction; then builds the
  HNSW index up to the newest row if any row waits for it.
- `reindex`: in `reindex.py` (online: requests go on while it runs).
- `doctor`: the connection, the pgvector extension and its version, the schema version, the
  vector column against the recorded embedder, records without their vector, and the counters
  and BM25 statistics against a recount (each namespace recounted under its lock, so that
  writers under way are not mistaken for drift); `repair` recomputes what differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from ... import clock
from ...errors import NotFound, StoreUnavailable
from ...kinds import SCHEMA_OF
from ...schemas import SCHEMAS
from . import reindex as reindexing
from . import schema as sch
from .scope import KEY, load, remove_rows

Finding = dict[str, Any]
REPAIR = "mem doctor --repair"
BATCH = 1000  # records re-embedded a statement
INDEXED = reindexing.INDEXED  # the schemas searched by vector
RETRIES = 5
# seconds `mem doctor` waits for BUILD_LOCK before taking a build as under way: the server process
# of a builder killed just before ends its statement within `schema.CLIENT_CHECK`
BUILD_PATIENCE = 3.0


def stats(backend: Any, namespace: str | None = None) -> list[dict[str, Any]]:
    now = clock.now()
    where = "s.namespace <> ''" if namespace is None else "s.namespace = %(ns)s"
    sql = f"""
        SELECT s.namespace, s.kind, s.scope,
               count(r.id) FILTER (WHERE r.expires_at IS NULL OR r.expires_at > %(now)s),
               coalesce(sum(r.size) FILTER (WHERE r.expires_at IS NULL OR r.expires_at > %(now)s), 0),
               count(r.id) FILTER (WHERE r.expires_at <= %(now)s),
               count(r.vec) FILTER (WHERE r.seq <= %(upto)s AND (r.expires_at IS NULL OR r.expires_at > %(now)s)),
               count(r.vec) FILTER (WHERE r.seq > %(upto)s AND (r.expires_at IS NULL OR r.expires_at > %(now)s))
        FROM (SELECT namespace, kind, scope FROM mem_scopes UNION  -- a scope without its statistics row too
              SELECT DISTINCT namespace, kind, scope FROM mem_records) s
        LEFT JOIN mem_records r ON r.namespace = s.namespace AND r.kind = s.kind AND r.scope = s.scope
        WHERE {where}
        GROUP BY s.namespace, s.kind, s.scope
        ORDER BY s.namespace, s.kind, s.scope
    """
    backend.refresh(force=True)
    upto = int((backend._index or {}).get("upto", 0))
    with backend.db.connection() as conn:
        rows = conn.execute(sql, {"now": now, "ns": sch.db_name(namespace or ""), "upto": upto}).fetchall()
    return [
        {"namespace": sch.user_name(ns), "kind": kind, "scope": "/".join(scope), "entries": int(entries),
         "bytes": int(size), "expired": int(expired), "indexed": int(indexed), "pending": int(pending)}
        for ns, kind, scope, entries, size, expired, indexed, pending in rows
    ]  # fmt: skip


def locked(backend: Any, namespace: str, work: Callable[[Any], Any]) -> Any:
    """`work(conn)` in the namespace's write section, again after a deadlock or a serialization
    failure (maintenance work is ours to replay; see `backend.py`)."""
    for attempt in range(RETRIES):
        try:
            with backend.lock(namespace), backend.db.connection() as conn:
                return work(conn)
        except StoreUnavailable as exc:
            if exc.detail.get("sqlstate") not in ("40001", "40P01") or attempt == RETRIES - 1:
                raise
    return None


def delete_namespace(backend: Any, namespace: str) -> dict[str, Any]:
    name = sch.db_name(namespace)

    def delete(conn: Any) -> None:
        found = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM mem_usage WHERE namespace = %(ns)s) "
            "OR EXISTS (SELECT 1 FROM mem_scopes WHERE namespace = %(ns)s)",
            {"ns": name},
        ).fetchone()[0]
        if not found:
            raise NotFound(f"no namespace {namespace!r}")
        for table in ("mem_records", "mem_terms", "mem_scopes", "mem_usage"):  # constant names
            conn.execute(f"DELETE FROM {table} WHERE namespace = %s", [name])

    locked(backend, namespace, delete)
    return {"namespace": namespace, "deleted": True}


def checkpoint(backend: Any, now: float) -> int:
    """`mem gc`: purge the expired rows, then build the HNSW index if rows wait for it; returns
    how many scopes the purge touched (plus one for an index build)."""
    touched = purge_expired(backend, now)
    backend.analyze()
    if not backend.read_only and backend.recorded_embedder() is not None:
        backend.refresh(force=True)
        touched += bool(backend.build_index(force=True, wait=True))
    return touched


def purge_expired(backend: Any, now: float) -> int:
    """Delete every row past its expiry; returns how many scopes lost rows."""
    if backend.read_only:
        return 0
    with backend.db.connection() as conn:
        names = [
            r[0]
            for r in conn.execute("SELECT DISTINCT namespace FROM mem_records WHERE expires_at <= %s", [now]).fetchall()
        ]
    touched = 0
    for name in names:

        def purge(conn: Any, name: str = name) -> int:
            return remove_rows(
                conn,
                "DELETE FROM mem_records WHERE namespace = %(ns)s AND expires_at <= %(now)s "
                "RETURNING kind, scope, size, terms",
                {"ns": name, "now": now},
            )

        touched += locked(backend, sch.user_name(name), purge)
    return touched


# -- reindex ----------------------------------------------------------------------------------


def _reembed(conn: Any, key: dict[str, Any], schema: Any, embedder: Any, only_missing: bool = False) -> int:
    """Embed the scope's records again (or only those without a vector), a batch at a time."""
    last, count = -1, 0
    missing = " AND vec IS NULL" if only_missing else ""
    while True:
        rows = conn.execute(
            f"SELECT seq, id, raw FROM mem_records WHERE {KEY} AND seq > %(last)s{missing} ORDER BY seq LIMIT {BATCH}",
            {**key, "last": last},
        ).fetchall()
        if not rows:
            return count
        vectors = embedder.embed([schema.text(load(raw)) for _, _, raw in rows]).astype(np.float32)
        vecs = list(vectors)
        conn.execute(
            f"UPDATE mem_records SET vec = u.vec FROM unnest(%(ids)s::text[], %(vecs)b::vector[]) AS u(id, vec) "
            f"WHERE {KEY} AND mem_records.id = u.id",
            {**key, "ids": [r[1] for r in rows], "vecs": vecs},
        )
        count += len(rows)
        last = rows[-1][0]


# -- doctor -----------------------------------------------------------------------------------


def _finding(where: str, problem: str, repair: str = REPAIR, fixed: bool = False) -> Finding:
    return {"where": where, "problem": problem, "repair": repair, "fixed": fixed, "lost": 0}


def doctor(backend: Any, repair: bool = False) -> list[Finding]:
    try:
        with backend.db.connection() as conn:
            conn.execute("SELECT 1")
    except sch.SchemaTooNew as exc:
        return [_finding("mem_schema", exc.message, "upgrade mem (this version cannot read the store)")]
    except StoreUnavailable as exc:  # `unavailable`: the command exits 7, as every other one does then
        return [
            {**_finding(backend.url, exc.message, "make the database reachable (see the message)"), "unavailable": True}
        ]
    findings = _check_server(backend)
    findings += _check_vectors(backend, repair)
    with backend.db.connection() as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT namespace FROM mem_usage UNION SELECT namespace FROM mem_scopes "
                "UNION SELECT DISTINCT namespace FROM mem_records ORDER BY 1"
            ).fetchall()
        ]
    for name in names:

        def check(conn: Any, name: str = name) -> list[Finding]:
            return _check_rows(conn, name, repair) + _check_counts(conn, name, repair)

        findings += locked(backend, sch.user_name(name), check)
    return findings


def _check_server(backend: Any) -> list[Finding]:
    findings = []
    with backend.db.connection() as conn:
        version = sch.extension_version(conn)
        schema_version = sch.read_version(conn)
    if version is None:
        findings.append(_finding("extension vector", "not installed", f"run `{sch.extension_sql()}` as a superuser"))
    elif tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (0, 5):
        problem = f"version {version} has no HNSW index"
        findings.append(_finding("extension vector", problem, "ALTER EXTENSION vector UPDATE;"))
    if schema_version != sch.VERSION:
        problem = f"version {schema_version}, this mem knows {sch.VERSION}"
        findings.append(_finding("mem_schema", problem, "upgrade mem"))
    return findings


def _check_vectors(backend: Any, repair: bool) -> list[Finding]:
    """The vector column and its index against the recorded embedder; records of searchable
    scopes without a vector (written by a process that had not seen a reindex)."""
    findings = []
    backend.refresh(force=True)
    recorded = backend.recorded_embedder()
    if recorded is None:
        return []
    dim = int(recorded["dim"])
    with backend.db.connection() as conn:
        column, indexes = sch.vector_column_dim(conn), sch.vector_indexes(conn)
    index = backend._index or {}
    if column != dim:
        problem = f"vector column of dimension {column or 'none'}; the recorded embedder {recorded['embedder']!r} "
        problem += f"makes {dim}"
        if repair:
            backend._vector_dim = 0
            backend.ensure_vector_column()
        findings.append(_finding("mem_records.vec", problem, "dimension set" if repair else REPAIR, repair))
    if any(not valid for _, valid in indexes):
        findings += _interrupted_builds(backend, repair)
    findings += _interrupted_reindex(backend, repair)
    valid = [name for name, ok in indexes if ok]
    if index and (index.get("dim") != dim or sch.index_name(index.get("upto", 0)) not in valid):
        problem = f"the HNSW index on record ({index}) is missing or made for another dimension than {dim}"
        if repair:
            with backend.db.connection() as conn:
                conn.execute("DELETE FROM mem_meta WHERE key = 'vector_index'")
            backend.refresh(force=True)
            backend.build_index(force=True)
        findings.append(_finding("mem_records.vec", problem, "rebuilt" if repair else REPAIR, repair))
    with backend.db.connection() as conn:
        rows = conn.execute(
            "SELECT r.namespace, r.kind, r.scope, count(*) FROM mem_records r LEFT JOIN mem_scopes s ON "
            "s.namespace = r.namespace AND s.kind = r.kind AND s.scope = r.scope "  # the row may be missing
            "WHERE r.vec IS NULL AND coalesce(s.schema, %s::jsonb ->> r.kind, 'records') = ANY(%s::text[]) "
            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            [orjson.dumps(SCHEMA_OF).decode(), INDEXED],
        ).fetchall()
    for ns, kind, scope, count in rows:
        where = f"mem_records[{_label(ns, kind, scope)}]"
        problem = f"{count} records without a vector (found by their words only)"
        if repair:
            schema = SCHEMAS[_schema_of(backend, ns, kind, scope)]
            key = {"ns": ns, "kind": kind, "scope": list(scope)}

            def reembed(conn: Any, key: dict = key, schema: Any = schema) -> int:
                return _reembed(conn, key, schema, backend.embedder, only_missing=True)

            locked(backend, sch.user_name(ns), reembed)
        findings.append(_finding(where, problem, "re-embedded" if repair else REPAIR, repair))
    return findings


def _schema_of(backend: Any, ns: str, kind: str, scope: list[str]) -> str:
    with backend.db.connection() as conn:
        row = conn.execute(
            "SELECT schema FROM mem_scopes WHERE namespace = %s AND kind = %s AND scope = %s::text[]", [ns, kind, scope]
        ).fetchone()
    return row[0] if row else SCHEMA_OF.get(kind, "records")  # a deleted statistics row: the kind's


def _interrupted_builds(backend: Any, repair: bool) -> list[dict[str, Any]]:
    """The HNSW indexes an interrupted build left invalid. An index is invalid while its build
    runs too: a build holds BUILD_LOCK (`backend._build_index`), so none is reported (or
    dropped) while another session holds it, and this one holds it while it looks and drops.
    (Outside audit 32a: a build under way after a large import was reported interrupted, and
    `--repair` said it dropped an index that went on being built.)"""
    with backend.db.connection() as conn:
        if not _build_lock(conn):
            return []  # a build is under way: its index is valid once it ends
        try:
            invalid = [name for name, valid in sch.vector_indexes(conn) if not valid]
            if invalid and repair:
                sch.drop_vector_indexes_named(conn, invalid)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)
    if not invalid:
        return []
    problem = f"{', '.join(invalid)}: left invalid by an interrupted index build (ignored by searches)"
    return [_finding("mem_records.vec", problem, "dropped" if repair else REPAIR, repair)]


def _build_lock(conn: Any) -> bool:
    """BUILD_LOCK taken, waiting at most BUILD_PATIENCE for it; False: a build is under way."""
    deadline = time.monotonic() + BUILD_PATIENCE
    while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", sch.BUILD_LOCK).fetchone()[0]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)  # polled: a statement waiting for it would hold a snapshot (`backend._build_index`)
    return True


def _interrupted_reindex(backend: Any, repair: bool) -> list[dict[str, Any]]:
    """The column an interrupted `mem reindex` left (`reindex.py`): the store is whole on its
    recorded embedder, the column only takes room (and its trigger a little of each write). A
    reindex under way holds BUILD_LOCK: then nothing is reported."""
    with backend.db.connection() as conn:
        if not reindexing.leftovers(conn):
            return []
        if not _build_lock(conn):
            return []  # a reindex (or an index build) is under way
        try:
            if repair:
                reindexing.drop_leftovers(conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", sch.BUILD_LOCK)
    problem = f"column {reindexing.NEXT}: left by an interrupted `mem reindex` (the store is whole on its embedder)"
    return [_finding("mem_records", problem, "dropped" if repair else REPAIR, repair)]


def _label(ns: str, kind: str, scope: list[str]) -> str:
    return "/".join([sch.user_name(ns) if ns else "(system)", kind, *scope])


RECOUNT_SCOPES = """
    SELECT coalesce(s.kind, c.kind), coalesce(s.scope, c.scope),
           s.n_docs, s.total_len, s.bytes, coalesce(c.n, 0), coalesce(c.len, 0), coalesce(c.bytes, 0)
    FROM (SELECT * FROM mem_scopes WHERE namespace = %(ns)s) s
    FULL JOIN (SELECT kind, scope, count(*) AS n, sum(cardinality(terms))::float8 AS len, sum(size) AS bytes
               FROM mem_records WHERE namespace = %(ns)s GROUP BY kind, scope) c
         ON c.kind = s.kind AND c.scope = s.scope
    WHERE s.n_docs IS DISTINCT FROM coalesce(c.n, 0) OR s.total_len IS DISTINCT FROM coalesce(c.len, 0)
       OR s.bytes IS DISTINCT FROM coalesce(c.bytes, 0)
"""
RECOUNT_TERMS = """
    WITH c AS (SELECT r.kind, r.scope, t.term, count(*) AS df FROM mem_records r,
               LATERAL (SELECT DISTINCT unnest(r.terms) AS term) t WHERE r.namespace = %(ns)s GROUP BY 1, 2, 3)
    SELECT coalesce(m.kind, c.kind), coalesce(m.scope, c.scope), count(*)
    FROM (SELECT * FROM mem_terms WHERE namespace = %(ns)s) m
    FULL JOIN c ON c.kind = m.kind AND c.scope = m.scope AND c.term = m.term
    WHERE coalesce(m.df, 0) <> coalesce(c.df, 0)
    GROUP BY 1, 2
"""
RECOUNT_USAGE = """
    SELECT u.entries, u.bytes, c.n, c.bytes FROM
    (SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM mem_records WHERE namespace = %(ns)s) c
    LEFT JOIN mem_usage u ON u.namespace = %(ns)s
"""


def _check_counts(conn: Any, ns: str, repair: bool) -> list[Finding]:
    """mem_usage, mem_scopes and mem_terms of namespace `ns` against a recount (the caller holds
    its lock); `repair` replaces them by the recount."""
    findings = []
    params = {"ns": ns}
    done = "recounted" if repair else REPAIR
    entries, size, n, n_bytes = conn.execute(RECOUNT_USAGE, params).fetchone()
    if (entries, size) != (n, n_bytes) and not (entries is None and n == 0):
        counted = "has no counter row" if entries is None else f"counts {entries} records and {size} bytes"
        findings.append(_finding(
            f"mem_usage[{sch.user_name(ns) if ns else '(system)'}]",
            f"{counted}; the table holds {n} records and {n_bytes} bytes", done, repair,
        ))  # fmt: skip
    for kind, scope, n_docs, total_len, nbytes, c_n, c_len, c_bytes in conn.execute(RECOUNT_SCOPES, params).fetchall():
        said = f"BM25 statistics say {n_docs} records, {total_len} terms, {nbytes} bytes"
        if n_docs is None:  # the row was deleted
            said = "no BM25 statistics row"
        findings.append(_finding(
            f"mem_scopes[{_label(ns, kind, scope)}]",
            f"{said}; the table holds {c_n} records, {c_len} terms, {c_bytes} bytes", done, repair,
        ))  # fmt: skip
    for kind, scope, wrong in conn.execute(RECOUNT_TERMS, params).fetchall():
        findings.append(_finding(
            f"mem_terms[{_label(ns, kind, scope)}]", f"{wrong} document frequencies differ from a recount", done, repair
        ))  # fmt: skip
    if findings and repair:
        _recount(conn, ns)
    return findings


# A row's `raw` (what reads return) must be a JSON object, and `doc` (the jsonb copy SQL users
# and tools read) the same record. `IS JSON` is PostgreSQL 16's; the CASE keeps the cast from
# ever seeing a garbled raw (SQL does not promise the order of an AND).
NOT_JSON = "raw IS NOT JSON OBJECT"
DOC_DIFFERS = "CASE WHEN raw IS JSON OBJECT THEN doc <> replace(raw, '\\u0000', '\\ufffd')::jsonb END"
ROW_CHECKS = [
    (NOT_JSON, "raw is not a JSON object (listings and exports skip it; a search meeting it fails naming it)",
     "SET raw = doc::text, size = octet_length(doc::text)",
     "restored raw from doc"),
    (DOC_DIFFERS, "doc (the jsonb copy) differs from raw (the record reads return)",
     "SET doc = replace(raw, '\\u0000', '\\ufffd')::jsonb", "rewrote doc from raw"),
]  # fmt: skip


def _check_rows(conn: Any, ns: str, repair: bool) -> list[Finding]:
    """Rows of namespace `ns` whose raw is not JSON (edited by hand), or whose doc disagrees with
    raw; `repair` restores raw from doc (nothing is lost unless doc shows a NUL as U+FFFD), then
    doc from raw. Each row is named. Needs PostgreSQL 16 (older servers skip the check)."""
    if conn.info.server_version < 160000:
        return []
    findings = []
    for condition, problem, fix, fixed in ROW_CHECKS:
        where = f"namespace = %(ns)s AND {condition}"
        rows = conn.execute(
            f"SELECT kind, scope, id, strpos(doc::text, U&'\\FFFD') > 0 FROM mem_records WHERE {where} "
            "ORDER BY kind, scope, id",
            {"ns": ns},
        ).fetchall()
        for kind, scope, rid, replaced in rows:
            finding = _finding(
                f"mem_records[{_label(ns, kind, scope)}] id {rid!r}", problem, fixed if repair else REPAIR, repair
            )
            finding["lost"] = int(repair and condition == NOT_JSON and replaced)  # a NUL, or a real U+FFFD
            findings.append(finding)
        if rows and repair:
            conn.execute(f"UPDATE mem_records {fix} WHERE {where}", {"ns": ns})
    return findings


def _recount(conn: Any, ns: str) -> None:
    params = {"ns": ns}
    conn.execute("DELETE FROM mem_terms WHERE namespace = %(ns)s", params)
    conn.execute(
        "INSERT INTO mem_terms (namespace, kind, scope, term, df) SELECT %(ns)s, r.kind, r.scope, t.term, count(*) "
        "FROM mem_records r, LATERAL (SELECT DISTINCT unnest(r.terms) AS term) t WHERE r.namespace = %(ns)s "
        "GROUP BY r.kind, r.scope, t.term",
        params,
    )
    conn.execute(
        "UPDATE mem_scopes s SET n_docs = coalesce(c.n, 0), total_len = coalesce(c.len, 0), "
        "bytes = coalesce(c.bytes, 0) "
        "FROM mem_scopes s2 LEFT JOIN (SELECT kind, scope, count(*) AS n, sum(cardinality(terms))::float8 AS len, "
        "sum(size) AS bytes FROM mem_records WHERE namespace = %(ns)s GROUP BY kind, scope) c "
        "ON c.kind = s2.kind AND c.scope = s2.scope "
        "WHERE s.namespace = %(ns)s AND s2.namespace = s.namespace AND s2.kind = s.kind AND s2.scope = s.scope",
        params,
    )
    conn.execute(
        "INSERT INTO mem_scopes (namespace, kind, scope, schema, n_docs, total_len, bytes) "
        "SELECT %(ns)s, kind, scope, coalesce(%(schemas)s::jsonb ->> kind, 'records'), count(*), "
        "sum(cardinality(terms)), sum(size) FROM mem_records "
        "WHERE namespace = %(ns)s GROUP BY kind, scope ON CONFLICT (namespace, kind, scope) DO NOTHING",
        {**params, "schemas": orjson.dumps(SCHEMA_OF).decode()},
    )
    conn.execute(
        "INSERT INTO mem_usage (namespace, entries, bytes) SELECT %(ns)s, count(*), coalesce(sum(size), 0) "
        "FROM mem_records WHERE namespace = %(ns)s ON CONFLICT (namespace) DO UPDATE "
        "SET entries = EXCLUDED.entries, bytes = EXCLUDED.bytes",
        params,
    )
