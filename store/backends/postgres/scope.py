"""A scope's records in `mem_records`: reads, and writes that keep the statistics in step.

A write (`append`) runs in the caller's write section (see `backend.py`): a batch of puts is one
`INSERT ... SELECT FROM unnest(...) ON CONFLICT DO UPDATE` (no statement per record: a bulk
import is a few statements per thousand records). The sizes and terms of the rows it replaces
adjust, in the same transaction and one statement, the scope's BM25 statistics (`mem_scopes`,
`mem_terms`) and the namespace's counters (`mem_usage`). They come from the section's own read
of those rows when it made one (`get_many` in a write section notes them: an operation reads
the records it replaces), so the writes need no result and are queued for the COMMIT's round
trip; otherwise from a CTE of the upsert that reads them first. A delete is
`DELETE ... RETURNING`, the statistics adjusted from what it returns.

Statistics count every row in the table, expired rows included until a purge (`mem gc`)
removes them, as the files backend counts a checkpoint's rows until the next checkpoint.

Reads hide rows past their `expires_at`. Outside a write section they run in autocommit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ...embed import decode_vector
from ...errors import Damaged, InvalidInput
from ...kinds import schema_of
from ...lexical import terms
from ...log import logger
from ...schemas import SCHEMAS
from ...timeaware import entry_time
from ..base import Candidates, Doc, Filters, Op, Scope
from .schema import db_name, user_name

PAGE = 2000  # records a page of `docs()` (keyset pagination on seq)
KEY = "namespace = %(ns)s AND kind = %(kind)s AND scope = %(scope)s::text[]"
LIVE = "(expires_at IS NULL OR expires_at > %(now)s)"


KEY_BYTES = 2600  # of a row's key, in UTF-8: under btree's 2704 with the tuple's own overhead


def key_bytes(*parts: Any) -> int:
    """Bytes of a key's text parts (strings, or lists of them) in UTF-8."""
    return sum(key_bytes(*part) if isinstance(part, list) else len(part.encode()) for part in parts)


def by_ids(columns: str) -> str:
    """Rows of the scope by the ids in %(ids)s, each found through the primary key: equality on
    all of its columns is one row to the planner, with or without table statistics (with
    `id = ANY(...)`, a table never analysed, just after a bulk import, was scanned whole)."""
    return (
        "unnest(%(ids)b::text[]) AS u(id) CROSS JOIN LATERAL "
        f"(SELECT {columns} FROM mem_records WHERE {KEY} AND id = u.id) AS r"
    )


def number(value: Any, default: float | None) -> float | None:
    """A numeric column value: numbers as they are, anything else (an ISO string) the default."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def load(raw: str, where: str = "mem_records") -> Doc:
    """A row's `raw` as a record; `Damaged` naming the row when it is not JSON (edited by hand:
    `mem doctor --repair` restores it from the `doc` copy)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Damaged(f"{where}: raw is not JSON: run `mem doctor --repair`", {"where": where}) from None


def scopes_of(backend: Any, namespace: str) -> list[Scope]:
    """The scopes of a namespace: those with statistics and those with records (a deleted
    `mem_scopes` row must not hide its records; its schema is then the kind's)."""
    with backend.db.connection() as conn:
        rows = conn.execute(
            "SELECT kind, scope, max(schema) FROM (SELECT kind, scope, schema FROM mem_scopes WHERE namespace = %(ns)s "
            "UNION SELECT DISTINCT kind, scope, NULL FROM mem_records WHERE namespace = %(ns)s) s "
            "GROUP BY kind, scope ORDER BY kind, scope",
            {"ns": db_name(namespace)},
        ).fetchall()
    return [PgScope(backend, namespace, kind, list(scope), schema or schema_of(kind)) for kind, scope, schema in rows]


class PgScope(Scope):
    def __init__(self, backend: Any, namespace: str, kind: str, scope: list[str], schema: str) -> None:
        self.backend = backend
        self.schema = SCHEMAS[schema]
        self.descriptor = {"namespace": namespace, "kind": kind, "scope": list(scope), "schema": schema}
        self.key: dict[str, Any] = {"ns": db_name(namespace), "kind": kind, "scope": list(scope)}
        self.damaged: list[str] = []  # rows whose raw could not be read (an export names them)

    def id_problem(self, rid: str) -> str | None:
        """PostgreSQL's btree indexes hold at most 2704 bytes a key: the primary key (namespace,
        kind, scope, id) is refused past KEY_BYTES in UTF-8, with this reason, rather than by
        the server in the middle of a write (which fails the whole request)."""
        size = key_bytes(self.key["ns"], self.key["kind"], self.key["scope"], rid)
        if size <= KEY_BYTES:
            return None
        return (
            f"key too long for the PostgreSQL store: namespace, scope and key take {size} bytes in UTF-8, "
            f"at most {KEY_BYTES} (its index limit)"
        )

    def _where(self, rid: str) -> str:
        """The row, as a damage report names it."""
        row = (user_name(self.key["ns"]), self.key["kind"], "/".join(self.key["scope"]), rid)
        return f"mem_records row (namespace, kind, scope, id) = {row!r}"

    def _load(self, rid: str, raw: str) -> Doc:
        """`load`, naming the row only when it is damaged (naming it costs more than reading it)."""
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return load(raw, self._where(rid))

    def _readable(self, rid: str, raw: str) -> Doc | None:
        """The record of a row, or None for a damaged one, skipped with a warning as the files
        backend skips a damaged journal line: the other records still read."""
        try:
            return self._load(rid, raw)
        except Damaged as exc:
            logger("postgres").warning("%s", exc.message)
            self.damaged.append(exc.message)
            return None

    @property  # the store's dimension as of now (a reindex may change it)
    def dim(self) -> int:  # type: ignore[override]
        return self.backend.dim if self.schema.indexed else 0

    def _run(self, sql: str, params: dict[str, Any]) -> list[tuple]:
        with self.backend.db.connection() as conn:
            return conn.execute(sql, {**self.key, **params}).fetchall()

    # -- reading ----------------------------------------------------------------------------

    def get(self, rid: str, now: float) -> Doc | None:
        if "\x00" in rid:  # text cannot hold NUL, so no record has such an id (writes refuse it)
            return None
        rows = self._run(f"SELECT raw FROM mem_records WHERE {KEY} AND id = %(id)s AND {LIVE}", {"id": rid, "now": now})
        return self._readable(rid, rows[0][0]) if rows else None

    def get_many(self, rids: list[str], now: float) -> dict[str, Doc]:
        rids = [rid for rid in rids if "\x00" not in rid]  # as in `get`
        if not rids:
            return {}
        known = self.backend.known_rows(self._cache_key)
        if known is not None:  # a write section: note what the rows hold, for the write to come
            return self._get_noting(rids, now, known)
        rows = self._run(
            f"SELECT r.id, r.raw FROM {by_ids('id, raw, expires_at')} WHERE {LIVE}",
            {"ids": list(rids), "now": now},
        )
        found = {rid: self._readable(rid, raw) for rid, raw in rows}
        return {rid: doc for rid, doc in found.items() if doc is not None}

    def _get_noting(self, rids: list[str], now: float, known: dict) -> dict[str, Doc]:
        """`get_many` in a write section: the live records, and in `known` the size and terms of
        each row, expired or not (what a write replacing it takes out of the statistics)."""
        db = self.backend.db
        # queued before the write section's entry read is taken: one round trip brings both
        if len(rids) == 1:  # most writes: a plan PostgreSQL keeps, where the list's is made each time
            cursor = db.current().execute(NOTING_ONE, {**self.key, "id": rids[0]}, prepare=True)
        else:
            cursor = db.current().execute(NOTING, {**self.key, "ids": list(rids)}, prepare=True)
        with db.errors():
            db.settle()
            rows = cursor.fetchall()
        known.update(dict.fromkeys(rids))
        found = {}
        for rid, raw, size, words, expires in rows:
            known[rid] = (size, words)
            if expires is None or expires > now:
                found[rid] = self._readable(rid, raw)
        return {rid: doc for rid, doc in found.items() if doc is not None}

    @property
    def _cache_key(self) -> tuple:
        return (self.key["ns"], self.key["kind"], tuple(self.key["scope"]))

    def docs(self, now: float) -> Iterator[Doc]:
        """Every live record in write order, a page at a time (no connection is held between pages)."""
        last = -1
        while True:
            rows = self._run(
                f"SELECT seq, id, raw FROM mem_records WHERE {KEY} AND seq > %(last)s AND {LIVE} "
                f"ORDER BY seq LIMIT {PAGE}",
                {"last": last, "now": now},
            )
            for seq, rid, raw in rows:
                doc = self._readable(rid, raw)
                if doc is not None:
                    yield doc
                last = seq
            if len(rows) < PAGE:
                return

    def last(self, now: float) -> Doc | None:
        rows = self._run(
            f"SELECT id, raw FROM mem_records WHERE {KEY} AND {LIVE} ORDER BY seq DESC LIMIT 1", {"now": now}
        )
        return self._load(*rows[0]) if rows else None

    def usage(self, now: float) -> tuple[int, int]:
        # without its statistics row (deleted by hand) the scope is counted from its rows
        rows = self._run(
            "SELECT coalesce((SELECT n_docs FROM mem_scopes WHERE " + KEY + "), (SELECT count(*) FROM mem_records "
            "WHERE " + KEY + ")), coalesce((SELECT bytes FROM mem_scopes WHERE " + KEY + "), (SELECT sum(size) FROM "
            "mem_records WHERE " + KEY + "), 0), count(*), coalesce(sum(size), 0) "
            "FROM mem_records WHERE namespace = %(ns)s AND expires_at <= %(now)s AND kind = %(kind)s "
            "AND scope = %(scope)s::text[]",
            {"now": now},
        )
        n, size, gone, gone_size = rows[0]
        return int(n) - int(gone), int(size) - int(gone_size)

    def load_docs(self, seqs: list[int]) -> dict[int, Doc]:
        """Records by their `seq` (for search results; a damaged row found by a search is named
        by `Damaged`: its rank cannot be dropped from a result already cut)."""
        return {seq: doc for seq, (doc, _) in self.load_rows(seqs, vectors=False).items()}

    def load_rows(self, seqs: list[int], vectors: bool = True) -> dict[int, tuple[Doc, Any]]:
        """(record, stored vector or None) by `seq`, in one round trip: a search's leaders are
        both listed (their records) and compared with each other (their vectors, `diversify`).
        Fetched in binary, so a vector arrives as its floats, not as text to parse."""
        # `vec::vector`: the type without the column's dimension, which a reindex changes (a
        # prepared statement whose result type changes fails: "cached plan must not change")
        vec = "vec::vector" if vectors else "NULL::vector"
        with self.backend.db.connection() as conn:
            cursor = conn.cursor(binary=True)
            rows = cursor.execute(  # prepared: every query reads its records so, and one plan fits all
                f"SELECT seq, id, raw, {vec} FROM mem_records WHERE {KEY} AND seq = ANY(%(seqs)s::bigint[])",
                {**self.key, "seqs": seqs},
                prepare=True,
            ).fetchall()
        return {seq: (self._load(rid, raw), vec) for seq, rid, raw, vec in rows}

    # -- writing ----------------------------------------------------------------------------

    def append(self, op: Op) -> None:
        with self.backend.db.transaction() as (conn, _):  # the caller's write section (or one of its own)
            self.backend.written()
            if op.get("op") == "put":
                self._put(conn, op["recs"])
            elif op.get("op") == "del":
                ids = list(dict.fromkeys(op["ids"]))
                known = self.backend.known_rows(self._cache_key)
                if known is not None:
                    known.update(dict.fromkeys(ids))
                if ids:
                    remove_rows(
                        conn,
                        f"DELETE FROM mem_records WHERE ctid = ANY(ARRAY(SELECT r.ctid FROM {by_ids('ctid')})) "
                        "RETURNING kind, scope, size, terms",
                        {**self.key, "ids": ids},
                    )

    def _put(self, conn: Any, recs: list[dict[str, Any]]) -> None:
        latest: dict[str, dict[str, Any]] = {}
        for rec in recs:  # a batch that writes an id twice keeps the last (in the first one's place)
            latest[rec["id"]] = rec
        if not latest:
            return
        batch = self._rows(list(latest.values()))
        self.backend.rows_written += len(latest)
        known = self.backend.known_rows(self._cache_key)
        if known is not None and all(rid in known for rid in latest):
            # the section read these rows already: the upsert is queued, no round trip of its own
            old = [known[rid] for rid in latest if known[rid] is not None]
            conn.execute(INSERT, {**self.key, **batch}, prepare=True)
        else:  # one statement: the CTE reads the rows being replaced in the snapshot before the upsert
            old = conn.execute(
                f"WITH old AS (SELECT r.size, r.terms FROM {by_ids('size, terms')}), "
                f"upsert AS ({INSERT}) SELECT size, terms FROM old",
                {**self.key, **batch},
            ).fetchall()
        if known is not None:
            known.update(zip(batch["ids"], zip(batch["sizes"], batch["words"], strict=True), strict=True))
        delta = Delta(self.schema.name)
        for size, words in old:
            delta.remove(size, words)
        for size, words in zip(batch["sizes"], batch["words"], strict=True):
            delta.add(size, words)
        apply_deltas(conn, self.key["ns"], {(self.key["kind"], tuple(self.key["scope"])): delta})

    def _rows(self, recs: list[dict[str, Any]]) -> dict[str, Any]:
        """The columns of `recs`, one array each, as the INSERT's unnest takes them."""
        indexed = self.schema.indexed
        dim = self.backend.current_dim() if indexed else 0
        out: dict[str, list[Any]] = {k: [] for k in ("ids", "raws", "sizes", "vecs", "terms", "tags", "scores")}
        out.update(updated=[], expires=[], words=[], when=[])
        for rec in recs:
            doc = rec["doc"]
            rid = rec["id"]
            if not isinstance(rid, str) or "\x00" in rid:
                raise InvalidInput("a record id must be text without NUL")
            problem = self.id_problem(rid)
            if problem is not None:
                raise InvalidInput(problem, {"field": "key"})
            raw = orjson.dumps(doc).decode()
            vec = decode_vector(rec["vec"]) if indexed and rec.get("vec") else None
            if vec is not None and len(vec) != dim:
                vec = None  # made with another embedder than the recorded one: found by words only
            words = terms(self.schema.text(doc)) if indexed else []
            tags = doc.get("tags")
            tags = [t for t in tags if isinstance(t, str) and "\x00" not in t] if isinstance(tags, list) else []
            out["ids"].append(rid)
            out["raws"].append(raw)
            out["sizes"].append(int(rec.get("size") or len(raw.encode())))
            out["vecs"].append(vec)
            out["words"].append(words)
            out["terms"].append(" ".join(words))  # a term never holds a space (`lexical._WORD`)
            out["tags"].append(orjson.dumps(tags).decode())
            out["scores"].append(number(doc.get("score"), 1.0))
            out["updated"].append(number(doc.get("updated_at"), 0.0))
            out["expires"].append(number(doc.get("expires_at"), None))
            out["when"].append(entry_time(doc))
        return out

    # -- searching --------------------------------------------------------------------------

    def search(
        self,
        now: float,
        filters: Filters,
        query_vector: np.ndarray | None = None,
        query_text: str = "",
        k: int = 10,
        exhaustive: bool = False,
    ) -> list[Candidates]:
        from .search import search_each

        return search_each([self], now, filters, query_vector, query_text, k, exhaustive)[0]

    def __repr__(self) -> str:
        return f"PgScope({user_name(self.key['ns'])!r}, {self.key['kind']!r}, {self.key['scope']!r})"


NOTING = f"SELECT r.id, r.raw, r.size, r.terms, r.expires_at FROM {by_ids('id, raw, size, terms, expires_at')}"
# one row by its whole primary key: the generic plan costs what a custom one does, so after five
# executions PostgreSQL keeps it (a list's length is known only to a custom plan: 0.26 ms a write)
NOTING_ONE = f"SELECT id, raw, size, terms, expires_at FROM mem_records WHERE {KEY} AND id = %(id)s"
# doc: the jsonb copy cannot hold NUL characters (the raw text keeps them, escaped)
INSERT = """INSERT INTO mem_records
    (namespace, kind, scope, id, doc, raw, size, vec, terms, tags, score, updated_at, expires_at, at)
SELECT %(ns)s, %(kind)s, %(scope)s::text[], u.id, replace(u.raw, '\\u0000', '\\ufffd')::jsonb, u.raw, u.size, u.vec,
       string_to_array(u.terms, ' '), ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)),
       u.score, u.updated_at, u.expires_at, u.at
FROM unnest(%(ids)b::text[], %(raws)b::text[], %(sizes)s::int[], %(vecs)b::vector[], %(terms)b::text[],
            %(tags)b::text[], %(scores)s::real[], %(updated)s::float8[], %(expires)s::float8[],
            %(when)s::float8[])
     WITH ORDINALITY AS u(id, raw, size, vec, terms, tags, score, updated_at, expires_at, at, ord)
ORDER BY u.ord
ON CONFLICT (namespace, kind, scope, id) DO UPDATE SET
    doc = EXCLUDED.doc, raw = EXCLUDED.raw, size = EXCLUDED.size, vec = EXCLUDED.vec, terms = EXCLUDED.terms,
    tags = EXCLUDED.tags, score = EXCLUDED.score, updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
    at = EXCLUDED.at
"""


@dataclass
class Delta:
    """How a write changes one scope's statistics and its namespace's counters."""

    schema: str = "records"
    n_docs: int = 0
    total_len: int = 0
    bytes: int = 0
    df: Counter = field(default_factory=Counter)

    def add(self, size: int, words: list[str]) -> None:
        self.n_docs += 1
        self.bytes += size
        self.total_len += len(words)
        self.df.update(set(words))

    def remove(self, size: int, words: list[str]) -> None:
        self.n_docs -= 1
        self.bytes -= size
        self.total_len -= len(words)
        self.df.subtract(set(words))


def remove_rows(conn: Any, delete: str, params: dict[str, Any]) -> int:
    """Run `delete` (a DELETE ... RETURNING kind, scope, size, terms within one namespace,
    `params["ns"]`) and take its rows out of the statistics. Returns how many scopes it touched."""
    deltas: dict[tuple[str, tuple[str, ...]], Delta] = {}
    rows = conn.execute(delete, params).fetchall()
    for kind, scope, size, words in rows:
        deltas.setdefault((kind, tuple(scope)), Delta()).remove(size, words)
    if deltas:
        apply_deltas(conn, params["ns"], deltas)
    return len(deltas)


def apply_deltas(conn: Any, ns: str, deltas: dict[tuple[str, tuple[str, ...]], Delta]) -> None:
    """Adjust mem_scopes, mem_terms and mem_usage of namespace `ns` (database name) by `deltas`."""
    from psycopg import pq

    if conn.info.pipeline_status != pq.PipelineStatus.OFF:  # a write section: queued with its other writes
        _apply(conn, ns, deltas)
        return
    with conn.pipeline():  # one round trip: no statement here needs another's result
        _apply(conn, ns, deltas)


def _apply(conn: Any, ns: str, deltas: dict[tuple[str, tuple[str, ...]], Delta]) -> None:
    """One statement a scope (its statistics and terms; the last one the namespace's counters
    too), and a DELETE of the terms no row holds any more where some were taken out."""
    entries = size = 0
    items = list(deltas.items())
    for number, ((kind, scope), delta) in enumerate(items):
        entries += delta.n_docs
        size += delta.bytes
        changed = {t: n for t, n in delta.df.items() if n}
        values = {
            "ns": ns, "kind": kind, "scope": list(scope), "schema": delta.schema, "n": delta.n_docs,
            "len": delta.total_len, "bytes": delta.bytes, "terms": list(changed), "dfs": list(changed.values()),
        }  # fmt: skip
        last = number == len(items) - 1
        if last:
            values |= {"entries": entries, "size": size}
        conn.execute(STATISTICS + (USAGE_PART if last else "") + "SELECT 1", values, prepare=True)
        gone = [t for t, n in changed.items() if n < 0]
        if gone:
            conn.execute(
                f"DELETE FROM mem_terms WHERE {KEY} AND term = ANY(%(terms)s::text[]) AND df <= 0",
                {**values, "terms": gone},
            )


# A missing statistics row (the first write, or one deleted by hand) is made from a count of the
# rows, this write's included (written by an earlier statement): adding the write's delta to
# nothing would count the write alone (and lift `max_entries`). Every part of the statement sees
# the snapshot of its start, so the INSERT's NOT EXISTS sees the row the UPDATE found, if any: one
# of the two acts. WHERE's NOT EXISTS, checked once, spares the count when the row exists;
# HAVING's drops the one row an aggregate gives even then.
STATISTICS = f"""WITH scope_delta AS (
    UPDATE mem_scopes SET n_docs = n_docs + %(n)s, total_len = total_len + %(len)s, bytes = bytes + %(bytes)s
    WHERE {KEY}),
scope_recount AS (
    INSERT INTO mem_scopes (namespace, kind, scope, schema, n_docs, total_len, bytes)
    SELECT %(ns)s, %(kind)s, %(scope)s::text[], %(schema)s, count(*), coalesce(sum(cardinality(terms)), 0),
           coalesce(sum(size), 0)
    FROM mem_records WHERE {KEY} AND NOT EXISTS (SELECT 1 FROM mem_scopes WHERE {KEY})
    HAVING NOT EXISTS (SELECT 1 FROM mem_scopes WHERE {KEY})),
term_delta AS (
    INSERT INTO mem_terms (namespace, kind, scope, term, df)
    SELECT %(ns)s, %(kind)s, %(scope)s::text[], t, d FROM unnest(%(terms)s::text[], %(dfs)s::int[]) AS u(t, d)
    ON CONFLICT (namespace, kind, scope, term) DO UPDATE SET df = mem_terms.df + EXCLUDED.df)
"""
USAGE_PART = """, usage_delta AS (
    UPDATE mem_usage SET entries = entries + %(entries)s, bytes = bytes + %(size)s WHERE namespace = %(ns)s),
usage_recount AS (
    INSERT INTO mem_usage (namespace, entries, bytes)
    SELECT %(ns)s, count(*), coalesce(sum(size), 0)
    FROM mem_records WHERE namespace = %(ns)s AND NOT EXISTS (SELECT 1 FROM mem_usage WHERE namespace = %(ns)s)
    HAVING NOT EXISTS (SELECT 1 FROM mem_usage WHERE namespace = %(ns)s))
"""
