"""The A2E memory operations: sessions, store, retrieve, forget, over the three tiers.

Scopes: `working` belongs to a session, `episodic` to (namespace, agent), `semantic` to the
namespace. Each is a scope of the backend (`backends/base.py`); a record's id is its key in
canonical form (sorted-key JSON), so storing an existing key in the same scope updates it,
keeping `created_at`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import ValidationError

from .. import clock, timeaware
from ..backends.base import (
    RELEVANCE_DECIMALS,
    SYSTEM,
    Backend,
    Candidates,
    Filters,
    RecordGone,
    Scope,
    fusion_formula,
)
from ..blas import on_one_thread
from ..config import Config, Limits
from ..embed import encode_vectors
from ..errors import InvalidInput, MemoryFull, NotFound, Unauthorized
from ..models import MAX_NAME, TIERS, MemoryEntry, new_id
from ..redact import redact
from ..schemas import entry_text
from . import bridge, diversify

Progress = Callable[[int, int], None]
EMBED_BATCH = 2000
JOURNAL_BATCH = 1000  # entries per journal line: a bulk store never writes one huge line
MAX_RETRIEVE = 1000  # entries one retrieve returns at most
READ_ATTEMPTS = 3  # a search done again when a record it ranked was deleted meanwhile (`read_again`)
MAX_NESTING = 250  # JSON levels of a content or key: the journal line wraps it in 4 more (orjson: 254)
T = TypeVar("T")
SESSIONS_PER_CONNECTION = 256  # past it, memory/init closes the connection's least recently used session
ENTRY_FIELDS = ("key", "content", "tier", "tags", "source", "score", "ttl", "created_at", "updated_at")


def canonical_key(key: dict[str, Any] | str) -> str:
    """The record id of a key: sorted-key JSON; a plain string stands for {"key": string}."""
    if isinstance(key, str):
        key = {"key": key}
    if not isinstance(key, dict):
        raise InvalidInput(f"a key must be an object (or a string), not {type(key).__name__}")
    try:
        return orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError as exc:
        raise InvalidInput(f"key: {exc}") from None


def content_key(content: Any, redacting: bool = False) -> dict[str, str]:
    """The key an entry gets when none is given (`mem store TEXT`, `Memory.store(TEXT)`): a hash
    of the content, so storing the same content twice keeps one entry, and different contents
    never share one. Text is hashed as it is (as always: text stored before keeps its key); any
    other JSON value (and text starting with NUL) as a NUL byte then its sorted-key JSON, which
    no text hashed as it is starts with: the number 42 and the text "42", or {"a": 1} and the
    text '{"a":1}', are two entries. With `redacting`, the content as it will be stored (masked,
    value by value) is hashed: no hash of a secret is kept, and two contents share a key only
    when they are stored the same."""
    import hashlib

    if redacting:
        content = redact(content)
    try:
        as_text = isinstance(content, str) and not content.startswith("\x00")
        text = content if as_text else "\x00" + orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError as exc:  # not JSON: refused as the entry's validation would
        raise _not_storable("content", exc) from None
    return {"hash": hashlib.sha256(text.encode()).hexdigest()[:16]}


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """An entry as clients see it: the spec's fields (no record id, no expiry bookkeeping)."""
    return {name: doc[name] for name in ENTRY_FIELDS if name in doc}


@dataclass
class Session:
    memory_id: str
    namespace: str
    agent: str
    working: Scope | None = None  # None: the persisted working tier of a CLI session
    persisted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class A2E:
    def __init__(self, backend: Backend, config: Config) -> None:
        self.backend = backend
        self.config = config
        self.sessions: dict[str, Session] = {}

    # -- sessions ---------------------------------------------------------------------------

    def open_session(self, namespace: str, agent: str, persist: bool = False) -> Session:
        """A new session. In-process ones keep their working tier in memory; persisted ones
        (`mem init`) keep it on disk until `close_session`."""
        check_name(namespace, "namespace")
        check_name(agent, "agent")
        self.backend.admit_namespace(namespace)
        memory_id = new_id()
        if persist:
            doc = {"id": memory_id, "namespace": namespace, "agent": agent, "created_at": clock.now()}
            with self.backend.lock(SYSTEM):
                self._registry().append({"op": "put", "recs": [{"id": memory_id, "doc": doc}]})
            return Session(memory_id, namespace, agent, persisted=True)
        session = Session(memory_id, namespace, agent, working=self.backend.memory_scope())
        self.sessions[memory_id] = session
        return session

    def session(self, memory_id: str) -> Session:
        """A session of this process, else one made by `mem init`; `memory_not_found` if none.
        A `mem init` session is looked up in the registry at every use, so one that another
        process closed (`mem session close`) is refused from then on."""
        session = self.sessions.get(memory_id)
        if session is not None and not session.persisted:
            return session
        doc = self._registry().get(memory_id, clock.now())
        if doc is None:
            self.sessions.pop(memory_id, None)
            raise NotFound(f"unknown memory_id {memory_id!r}: call memory/init (or `mem init`) first")
        if session is None:
            session = self.sessions[memory_id] = Session(memory_id, doc["namespace"], doc["agent"], persisted=True)
        return session

    def _still_open(self, session: Session) -> None:
        """Refuse a write for a `mem init` session closed since it was looked up. The caller holds
        the namespace lock, which `close_session` takes after unregistering the session and
        before removing its working tier: a write either lands before that or is refused."""
        if session.persisted and self._registry().get(session.memory_id, clock.now()) is None:
            self.sessions.pop(session.memory_id, None)
            raise NotFound(f"session {session.memory_id!r} was closed")

    def scope(self, namespace: str, agent: str) -> Session:
        """A scope without a session, for scripts: episodic and semantic tiers only."""
        check_name(namespace, "namespace")
        check_name(agent, "agent")
        return Session("", namespace, agent)

    def list_sessions(self) -> list[dict[str, Any]]:
        return list(self._registry().docs(clock.now()))

    def close_session(self, memory_id: str) -> None:
        """End a session and drop its working tier: unregister it first (every process refuses
        it from then on), then drop its working tier."""
        session = self.session(memory_id)
        self.sessions.pop(memory_id, None)
        if not session.persisted:
            return
        with self.backend.lock(SYSTEM):
            registry = self._registry()
            registry.append({"op": "del", "ids": [memory_id]})
        self.backend.drop_scope(session.namespace, "working", memory_id)

    def _registry(self) -> Scope:
        return self.backend.scope(SYSTEM, "sessions")

    def _tiers(self, session: Session, tier: str) -> list[str]:
        """The tiers a request covers: the given one, or every tier the session can see."""
        if tier:
            return [_known_tier(tier)]
        return list(TIERS) if session.memory_id else ["episodic", "semantic"]

    def _shard(self, session: Session, tier: str) -> Scope:
        if tier == "working":
            if not session.memory_id:
                raise InvalidInput(
                    "the working tier belongs to a session: start one with `mem init` and pass --session"
                )
            if session.working is not None:
                if session.working.dim != self.backend.dim:  # another process reindexed
                    session.working = self._reembedded(session.working)
                return session.working
            return self.backend.scope(session.namespace, "working", session.memory_id, schema="entries")
        if tier == "episodic":
            return self.backend.scope(session.namespace, "episodic", session.agent, schema="entries")
        return self.backend.scope(session.namespace, "semantic", schema="entries")

    def _reembedded(self, working: Scope) -> Scope:
        """An in-memory working tier made anew with the store's current embedder."""
        fresh = self.backend.memory_scope()
        docs = list(working.docs(clock.now()))
        if docs:
            vectors = encode_vectors(self.backend.embed([entry_text(d) for d in docs]))
            recs = [{"id": d["id"], "doc": d, "vec": v} for d, v in zip(docs, vectors, strict=True)]
            fresh.append({"op": "put", "recs": recs})
        return fresh

    # -- store ------------------------------------------------------------------------------

    def store(
        self,
        session: Session,
        entries: list[Any],
        keep_timestamps: bool = False,
        progress: Progress | None = None,
        partial: bool = True,
    ) -> dict[str, Any]:
        """Store the entries that can be stored, in one go; report each other one in `errors` by index.

        An entry is refused on its own when it is invalid, when it is a semantic entry this agent may
        not write, or (with `partial`) when the namespace has no room left for it: the entries
        that fit are stored in request order. Only when none is stored, and some were refused for
        lack of room or of permission, is the request as a whole refused (`memory_full`, else
        `unauthorized`), with every entry's problem in `detail.errors`. Without `partial` (import),
        a batch that does not fit is refused whole. A key given twice in one tier keeps its last
        value; the entries it replaced are named in `warnings`.
        `progress(done, total)` is called as the entries are embedded (the long part of a bulk store)."""
        limits = self.config.for_namespace(session.namespace)
        valid, problems, warnings = self._validate(entries, limits)
        valid, refused, forbidden = self._semantic_allowed(session, valid, limits)
        valid, unkept = self._ids_kept(session, valid)
        problems += unkept
        if not valid:
            return self._store_result([], problems + refused, warnings, forbidden)
        if limits.redact:  # before anything is stored or embedded
            for _, entry, _ in valid:
                entry.content, entry.tags, entry.source = (
                    redact(entry.content),
                    redact(entry.tags),
                    redact(entry.source),
                )
        texts = [entry_text({"content": e.content, "key": e.key, "tags": e.tags}) for _, e, _ in valid]
        epoch = self.backend.epoch
        encoded = self._embed(texts, progress)
        for tier in {entry.tier for _, entry, _ in valid}:  # catch up on the journals before taking the lock
            self._shard(session, tier)
        with self.backend.lock(session.namespace):
            self._still_open(session)
            now = clock.now()
            shards = {tier: self._shard(session, tier) for tier in {entry.tier for _, entry, _ in valid}}
            # the records replaced are read first: a backend can send that read with its lock's
            # (PostgreSQL: one round trip), which the epoch check below would otherwise wait for
            olds = {
                tier: shard.get_many([r for _, e, r in valid if e.tier == tier], now) for tier, shard in shards.items()
            }
            if self.backend.epoch != epoch:  # another process reindexed to another embedder
                encoded = encode_vectors(self.backend.embed(texts))
            puts = [
                (i, entry, self._put_rec(olds[entry.tier].get(rid), entry, rid, vec, now, keep_timestamps))
                for (i, entry, rid), vec in zip(valid, encoded, strict=True)
            ]
            fitting, full, no_room = self._fit(session, puts, limits, now, partial)
            if not fitting:
                return self._store_result([], problems + refused + full, warnings, no_room)
            for tier, shard in shards.items():
                recs = [rec for _, entry, (rec, _, _) in fitting if entry.tier == tier]
                for start in range(0, len(recs), JOURNAL_BATCH):  # bounded journal lines, even in bulk
                    shard.append({"op": "put", "recs": recs[start : start + JOURNAL_BATCH]})
        for shard in shards.values():
            self.backend.after_write(shard)
        stored = [entry.key for _, entry, _ in fitting]
        return self._store_result(stored, problems + refused + full, warnings)

    def _ids_kept(
        self, session: Session, valid: list[tuple[int, MemoryEntry, str]]
    ) -> tuple[list[tuple[int, MemoryEntry, str]], list[tuple[int, str]]]:
        """The entries whose record id the backend can keep in their tier's scope, and (index,
        reason) for each other one (a key too long for PostgreSQL's indexes). A backend that takes
        any id is not asked: taking a scope refreshes it, which a store does once already."""
        if not self.backend.bounds_ids:
            return valid, []
        kept, problems = [], []
        shards = {tier: self._shard(session, tier) for tier in {entry.tier for _, entry, _ in valid}}
        for i, entry, rid in valid:
            problem = shards[entry.tier].id_problem(rid)
            if problem is None:
                kept.append((i, entry, rid))
            else:
                problems.append((i, problem))
        return kept, problems

    @staticmethod
    def _store_result(
        stored: list[Any],
        problems: list[tuple[int, str]],
        warnings: list[tuple[int, str]],
        refusal: MemoryFull | Unauthorized | None = None,
    ) -> dict[str, Any]:
        """The reply: `stored`, `errors` in entry order, and `warnings` when there are any. When
        nothing was stored and some entries were refused for lack of room or permission, the
        request is refused whole with that `refusal`, every entry's reason in `detail.errors`."""
        errors = [f"entries[{i}]: {text}" for i, text in sorted(problems)]
        if not stored and refusal is not None:
            refusal.detail["errors"] = errors
            raise refusal
        reply: dict[str, Any] = {"stored": stored, "errors": errors}
        if warnings:
            reply["warnings"] = [f"entries[{i}]: {text}" for i, text in sorted(warnings)]
        return reply

    def _embed(self, texts: list[str], progress: Progress | None) -> list[str]:
        if progress is None:
            return encode_vectors(self.backend.embed(texts))
        encoded: list[str] = []
        for start in range(0, len(texts), EMBED_BATCH):
            encoded += encode_vectors(self.backend.embed(texts[start : start + EMBED_BATCH]))
            progress(len(encoded), len(texts))
        return encoded

    def entry_problems(self, namespace: str, entries: list[Any]) -> list[tuple[int, str]]:
        """(index, reason) of each of `entries` that `store` would refuse as invalid (types, key,
        nesting, size), without storing anything: the import checks every line before it writes."""
        return self._validate(entries, self.config.for_namespace(namespace))[1]

    def _validate(
        self, entries: list[Any], limits: Limits
    ) -> tuple[list[tuple[int, MemoryEntry, str]], list[tuple[int, str]], list[tuple[int, str]]]:
        """(index, entry, record id) of the valid entries, (index, reason) for each other one, and
        (index, note) for each valid entry replaced by a later one with the same key and tier."""
        valid: list[tuple[int, MemoryEntry, str]] = []
        errors: list[tuple[int, str]] = []
        for i, raw in enumerate(entries):
            try:
                entry = MemoryEntry.model_validate(raw)
            except ValidationError as exc:
                errors.append((i, _first_error(exc)))
                continue
            try:
                rid = canonical_key(entry.key)
                _check_nesting(entry)
                check_finite(entry.key, "key")
                check_finite(entry.content, "content")
                size = len(orjson.dumps(entry.content)) + len(rid)  # the key is stored (twice) too
            except (orjson.JSONEncodeError, InvalidInput) as exc:
                errors.append((i, str(exc) if isinstance(exc, InvalidInput) else f"content: {exc}"))
                continue
            if size > limits.max_entry_bytes:
                errors.append((i, f"key and content are {size} bytes, over the {limits.max_entry_bytes}-byte limit"))
                continue
            valid.append((i, entry, rid))
        kept, replaced = _last_write_wins(valid)
        return kept, errors, replaced

    def _semantic_allowed(
        self, session: Session, valid: list[tuple[int, MemoryEntry, str]], limits: Limits
    ) -> tuple[list[tuple[int, MemoryEntry, str]], list[tuple[int, str]], Unauthorized | None]:
        """The entries this agent may write, (index, reason) for its semantic ones when it may not,
        and the refusal itself."""
        try:
            if any(e.tier == "semantic" for _, e, _ in valid):
                self._check_semantic_writer(session, limits)
        except Unauthorized as exc:
            refused = [(i, f"unauthorized: {exc.message}") for i, e, _ in valid if e.tier == "semantic"]
            return [item for item in valid if item[1].tier != "semantic"], refused, exc
        return valid, [], None

    @staticmethod
    def _put_rec(
        old: dict | None, entry: MemoryEntry, rid: str, vec: str, now: float, keep: bool
    ) -> tuple[dict, int, int]:
        """The record for one entry replacing `old`, and how many entries and bytes it adds."""
        created = entry.created_at if keep and entry.created_at else (old["created_at"] if old else now)
        updated = entry.updated_at if keep and entry.updated_at else now
        doc = {
            "id": rid, "key": entry.key, "content": entry.content, "tier": entry.tier, "tags": entry.tags,
            "source": entry.source, "score": entry.score, "ttl": entry.ttl, "created_at": created,
            "updated_at": updated, "expires_at": updated + entry.ttl if entry.ttl else None,
        }  # fmt: skip
        size = len(orjson.dumps(doc))
        grown = size - (len(orjson.dumps(old)) if old else 0)
        return {"id": rid, "doc": doc, "vec": vec, "size": size}, int(old is None), grown

    def _fit(
        self, session: Session, puts: list[tuple[int, MemoryEntry, Any]], limits: Limits, now: float, partial: bool
    ) -> tuple[list[tuple[int, MemoryEntry, Any]], list[tuple[int, str]], MemoryFull | None]:
        """The puts that fit the namespace's limits, taken in request order, (index, reason) for the
        others, and the refusal that stands for them. An update that adds neither an entry nor
        bytes always fits. Without `partial`, a batch that does not fit whole is refused."""
        used_before = count, size = self.usage(session.namespace, now)
        fitting, full = [], []
        for i, entry, (rec, added, grown) in puts:
            if (added and count + added > limits.max_entries) or (grown > 0 and size + grown > limits.max_bytes):
                full.append(i)
                continue
            count, size = count + added, size + grown
            fitting.append((i, entry, (rec, added, grown)))
        if not full:
            return fitting, [], None
        wanted = used_before[0] + sum(added for _, _, (_, added, _) in puts)
        wanted_bytes = used_before[1] + sum(grown for _, _, (_, _, grown) in puts)
        refusal = MemoryFull(
            f"namespace {session.namespace!r} is full: storing these would make {wanted} entries / {wanted_bytes} "
            f"bytes (limits {limits.max_entries} / {limits.max_bytes})",
            {
                "entries": wanted,
                "bytes": wanted_bytes,
                "max_entries": limits.max_entries,
                "max_bytes": limits.max_bytes,
            },
        )
        if not partial:
            raise refusal
        used = f"{count} / {limits.max_entries} entries, {size} / {limits.max_bytes} bytes used"
        reason = f"memory_full: namespace {session.namespace!r} has no room for it ({used})"
        return fitting, [(i, reason) for i in full], refusal

    def check_room(self, namespace: str, added: int, grown: int, now: float | None = None) -> None:
        """`memory_full` if adding `added` records and `grown` bytes would take the namespace past
        its limits (A2E entries and codebolt records count alike). Called under the lock."""
        limits = self.config.for_namespace(namespace)
        count, size = self.usage(namespace, clock.now() if now is None else now)
        count, size = count + added, size + grown
        if count > limits.max_entries or size > limits.max_bytes:
            raise MemoryFull(
                f"namespace {namespace!r} is full: storing these would make {count} entries / {size} bytes "
                f"(limits {limits.max_entries} / {limits.max_bytes})",
                {"entries": count, "bytes": size, "max_entries": limits.max_entries, "max_bytes": limits.max_bytes},
            )

    def usage(self, namespace: str, now: float) -> tuple[int, int]:
        """Live records and bytes of a namespace: every tier and every codebolt collection, plus
        this process's working tiers (see `usage.py`)."""
        count, size = self.backend.usage(namespace, now)
        for session in self.sessions.values():
            if session.namespace == namespace and session.working is not None:
                c, b = session.working.usage(now)
                count, size = count + c, size + b
        return count, size

    def _check_semantic_writer(self, session: Session, limits: Limits) -> None:
        if limits.semantic_writers is not None and session.agent not in limits.semantic_writers:
            raise Unauthorized(f"agent {session.agent!r} may not write the semantic tier of {session.namespace!r}")

    # -- retrieve ---------------------------------------------------------------------------

    @on_one_thread
    def retrieve(
        self,
        session: Session,
        keys: Sequence[dict[str, Any] | str] = (),
        query: str = "",
        tags: Sequence[str] = (),
        tier: str = "",
        limit: int = 10,
        min_score: float = 0.0,
        explain: bool = False,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """Entries matching every given filter, best first; `total` counts them before `limit`.
        With `explain`, each entry says how it ranked (scores, fusion, time, filters, search path).
        `since` / `until` keep the entries whose own time is in [since, until) (`timeaware.py`).
        A `limit` over MAX_RETRIEVE is clamped to it, and the reply's `warnings` says so."""
        check_paging(limit, min_score)
        query = query if query.strip() else ""  # blanks alone ask for nothing: as no query
        warnings = []
        if limit > MAX_RETRIEVE:
            warnings.append(f"limit {limit} is over the maximum of {MAX_RETRIEVE}: clamped to {MAX_RETRIEVE}")
            limit = MAX_RETRIEVE
        now = clock.now()
        bounds = timeaware.time_bound(since, "since", now), timeaware.time_bound(until, "until", now)
        timeaware.check_bounds(*bounds)
        filters = Filters(tuple(tags), tuple(canonical_key(k) for k in keys) if keys else None, *bounds)
        shards = [self._shard(session, name) for name in self._tiers(session, tier)]
        qvec = self.backend.embed([query])[0] if query else None  # after the shards: same embedder
        asked = timeaware.read_query(query, now)
        text, depth = timeaware.undated(query, asked), _depth(limit, asked)
        applied = {"keys": list(keys), "tags": list(tags), "tier": tier or "any", "min_score": min_score}
        if since or until:
            applied.update(since=since, until=until)

        def ranked() -> dict[str, Any]:
            parts = self.backend.search(shards, now, filters, qvec, text, depth, min_score > 0)
            return _rank(parts, limit, min_score, applied if explain else None, asked, query)

        found = read_again(ranked)
        return {**found, "warnings": warnings} if warnings else found

    @on_one_thread
    def search_namespace(
        self,
        namespace: str,
        query: str,
        tier: str = "",
        agent: str | None = None,
        tags: Sequence[str] = (),
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Search a namespace's persisted tiers as a whole (a persistent memory's `vectordb`
        source): semantic, and episodic of every agent (or of `agent`)."""
        check_name(namespace, "namespace")
        if tier not in ("", "semantic", "episodic"):
            raise InvalidInput("tier must be semantic, episodic or empty")
        shards = [self.backend.scope(namespace, "semantic", schema="entries")] if tier != "episodic" else []
        if tier != "semantic":
            for scope in self.backend.scopes(namespace):
                if scope.kind == "episodic" and agent in (None, *scope.descriptor.get("scope", [])):
                    shards.append(scope)
        now, filters = clock.now(), Filters(tuple(tags))
        qvec = self.backend.embed([query])[0] if query else None

        def ranked() -> list[dict[str, Any]]:
            depth = _depth(limit)
            parts = self.backend.search(shards, now, filters, qvec, query, depth, min_score > 0)
            return _rank(parts, limit, min_score, query=query)["entries"]

        return read_again(ranked)

    # -- forget -----------------------------------------------------------------------------

    def forget(
        self,
        session: Session,
        keys: Sequence[dict[str, Any] | str] = (),
        tags: Sequence[str] = (),
        tier: str = "episodic",
        everything: bool = False,
    ) -> int:
        """Delete the entries of `tier` matching the keys and tags. Emptying a whole tier takes
        `everything` (the wire's `all: true`, the CLI's --all): without keys, tags or it, nothing
        is deleted and the request is refused, so that a bare forget can never wipe a tier."""
        _known_tier(tier)
        _check_forget_scope(keys, tags, everything)
        if tier == "semantic":
            self._check_semantic_writer(session, self.config.for_namespace(session.namespace))
        filters = Filters(tuple(tags), tuple(canonical_key(k) for k in keys) if keys else None)
        with self.backend.lock(session.namespace):
            self._still_open(session)
            shard = self._shard(session, tier)
            now = clock.now()
            doomed = [c.doc(i)["id"] for c in shard.search(now, filters) for i in range(len(c.rows))]
            if doomed:
                shard.append({"op": "del", "ids": doomed})  # and asks for a purge (see the backend)
        self.backend.after_write(shard)
        return len(doomed)


def read_again(read: Callable[[], T]) -> T:
    """`read()`, done again when a record it ranked was deleted before it was read (`RecordGone`:
    another process's forget, on a database backend): a search is a read, so doing it again is
    safe, and the client gets an answer rather than an error to resend (outside audit 32c: 11
    of 228 retrieves racing a forget failed). Past READ_ATTEMPTS, the error goes out."""
    for _ in range(READ_ATTEMPTS - 1):
        try:
            return read()
        except RecordGone:
            pass
    return read()


def _depth(limit: int, asked: timeaware.QueryTime | None = None) -> int:
    """How many candidates a query asks of each shard: the pool `_rank` diversifies, and the
    pool the time signals re-rank when the query asks about time. The bridge's pool is not asked
    for: a shard gives every row it scored (all of them up to `EXACT_MAX` rows, else the index's
    and the postings' over-fetch, at least 32 of each), and `_rank` keeps the best of them."""
    return max(diversify.pool_size(limit), timeaware.POOL if asked else 0)


def _rank(
    parts: list[Candidates],
    limit: int,
    min_score: float,
    explain: dict | None = None,
    asked: timeaware.QueryTime | None = None,
    query: str = "",
) -> dict[str, Any]:
    """Merge candidates of several shards: order (by relevance, or without a query by importance;
    moved by the time signals a query `asked` for, then by the names its best entry bridges to,
    `bridge.py`), then by recency, keep those whose relevance (after the gains: the relevance
    shown) reaches `min_score`, cut to `limit`. The gains are computed over the best candidates
    whatever `min_score` is, so that it only ever removes entries, never changes the relevance of
    one it keeps, and an entry that moves others is one it keeps (the best). With a query,
    near-copies of entries already listed give way to other entries (`diversify.py`): the pool is
    larger than `limit` so that a demoted copy can be replaced."""
    total = 0
    queried = any(p.order is None and p.vectors is not None for p in parts)
    # the pools of diversity and time, and the bridge's: from every row the shards scored
    pool_size = (
        max(_depth(limit, asked), bridge.POOL if query else 0)
        if queried
        else max(limit, timeaware.POOL if asked else 0)
    )
    pool: list[tuple[Candidates, np.ndarray]] = []
    for part in parts:
        total += int(np.count_nonzero(_passes(part.relevance, min_score))) if min_score > 0 else part.total
        pool.append((part, _leaders(part.rank, np.arange(len(part.rank)), pool_size)))
    relevance = np.concatenate([p.relevance[i] for p, i in pool]) if pool else np.zeros(0)
    passed_before = int(np.count_nonzero(_passes(relevance, min_score)))
    rank = np.concatenate([p.rank[i] for p, i in pool]) if pool else np.zeros(0)
    updated = np.concatenate([p.updated[i] for p, i in pool]) if pool else np.zeros(0)
    refs = [(p, int(i)) for p, rows in pool for i in rows]
    timing: dict[int, dict] = {}
    if asked and all(p.order is None for p, _ in pool):  # a query: relevance ranks
        relevance, timing = timeaware.rerank(asked, relevance, lambda at: refs[at][0].doc(refs[at][1]))
        rank = relevance
    bridged: dict[int, dict] = {}
    if query and queried and all(p.order is None for p, _ in pool):  # after the time signal: the leader bridges
        relevance, bridged = _bridge(query, relevance, updated, refs)
        rank = relevance
    eligible = _passes(relevance, min_score)  # the relevance shown, after the gains
    if min_score > 0:  # a gain can lift a pooled entry over the floor: `total` counts what passes now
        total += int(np.count_nonzero(eligible)) - passed_before
    ordered = _best_first(rank, updated, refs, pool_size)
    ordered = ordered[eligible[ordered]][:pool_size]
    listed, penalties, twins = (
        _diversified(refs, ordered, relevance, limit) if queried else (ordered[:limit], None, None)
    )
    entries = []
    for n, at in enumerate(listed):
        part, row = refs[at]
        entry = {**public(part.doc(row)), "relevance": round(float(relevance[at]), RELEVANCE_DECIMALS)}
        if explain is not None:
            entry["explain"] = _explanation(part, row, explain)
            if penalties is not None and twins is not None and penalties[n] > 0:
                twin = refs[listed[twins[n]]]
                entry["explain"]["diversity"] = {
                    "penalty": round(float(penalties[n]), 6),
                    "like": public(twin[0].doc(twin[1])).get("key"),
                    "rule": diversify.rule(),
                }
            if asked:
                entry["explain"]["time"] = {"query": timeaware.describe(asked), **timing.get(int(at), {"gain": 0.0})}
            if int(at) in bridged:
                entry["explain"]["bridge"] = {**bridged[int(at)], "rule": bridge.rule()}
        entries.append(entry)
    return {"entries": entries, "total": total}


def _passes(relevance: np.ndarray, min_score: float) -> np.ndarray:
    """Which relevances reach `min_score` as shown (rounded to 6 decimals): a `min_score` equal
    to an entry's shown relevance keeps it (what rounds up to it lies within half the last digit)."""
    return relevance >= min_score - 5e-7


def _bridge(
    query: str, relevance: np.ndarray, updated: np.ndarray, refs: list[tuple[Candidates, int]]
) -> tuple[np.ndarray, dict[int, dict]]:
    """`bridge.lift` over the merged candidates, the leader as it ranks now (ties: the newest),
    each explanation naming the leader's key."""

    def content(at: int) -> Any:
        return refs[at][0].doc(refs[at][1]).get("content")

    best_first = _best_first(relevance, updated, refs, bridge.POOL)
    relevance, bridged = bridge.lift(query, relevance, best_first, content)
    if bridged:
        lead = refs[int(best_first[0])]
        for why in bridged.values():
            why["from"] = public(lead[0].doc(lead[1])).get("key")
    return relevance, bridged


def _best_first(rank: np.ndarray, updated: np.ndarray, refs: list[tuple[Candidates, int]], head: int) -> np.ndarray:
    """Pool positions best first: by `rank` as shown (6 decimals), then newest, and entries tied
    on both within the first `head` by record id. Without the id, ties came in the order a
    backend stored the records, which an export and import changes: the bridge's leader among
    entries tied at the top, and so every relevance it lifts, moved with it (outside audit 30c).
    As shown, since two copies of a text can differ in the last bits of their cosine, and which
    copy gets which bits depends on where each is stored (audit 30d). A tie group that runs past
    `head` is ordered within it only (its members past it are not read)."""
    shown = np.round(rank.astype(np.float64), RELEVANCE_DECIMALS)
    order = np.lexsort((-updated, -shown))
    top = order[:head]
    if len(top) < 2 or not np.any((shown[top][1:] == shown[top][:-1]) & (updated[top][1:] == updated[top][:-1])):
        return order  # the usual case: no record is read
    placed: list[int] = []
    for _, run in itertools.groupby(top.tolist(), key=lambda at: (shown[at], updated[at])):
        placed += sorted(run, key=lambda at: str(refs[at][0].doc(refs[at][1]).get("id", "")))
    return np.concatenate([np.array(placed, dtype=order.dtype), order[head:]])


def _diversified(
    refs: list[tuple[Candidates, int]], ordered: np.ndarray, relevance: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The pool positions `ordered` (best first) as listed: the first `MAX_LISTED` by `diversify`
    (among the head of the pool), the rest by relevance; with each one's penalty and the index
    (into the listing) of the entry it was most like. When the entries' vectors have different
    dimensions (a reindex under way) or a part has none, the list is by relevance alone."""
    listed = min(limit, diversify.MAX_LISTED)
    head = ordered[: diversify.pool_size(listed)]
    vectors = _vectors_of([refs[int(at)] for at in head])
    if vectors is None:
        return ordered[:limit], None, None
    picks, penalties, twins = diversify.diversify(relevance[head], vectors, listed)
    chosen = head[picks]
    rest = np.setdiff1d(ordered, chosen, assume_unique=True)  # sorted: put back in `ordered`'s order
    rest = ordered[np.isin(ordered, rest)][: limit - len(chosen)]
    positions = {int(p): n for n, p in enumerate(picks)}
    twins = np.array([positions.get(int(t), -1) for t in twins] + [-1] * len(rest), dtype=np.int64)
    penalties = np.concatenate([penalties, np.zeros(len(rest))])
    return np.concatenate([chosen, rest]).astype(np.int64), penalties, twins


def _vectors_of(refs: list[tuple[Candidates, int]]) -> np.ndarray | None:
    """The stored vectors of (part, row) pairs, one round trip per part; None when a part has no
    vectors or two parts' dimensions differ."""
    by_part: dict[int, list[int]] = {}
    for n, (part, _) in enumerate(refs):
        by_part.setdefault(id(part), []).append(n)
    out: np.ndarray | None = None
    for positions in by_part.values():
        part = refs[positions[0]][0]
        if part.vectors is None:
            return None
        block = part.vectors(np.array([refs[n][1] for n in positions], dtype=np.int64))
        if out is None:
            out = np.zeros((len(refs), block.shape[1]), dtype=np.float32)
        if block.shape[1] != out.shape[1]:
            return None
        out[positions] = block
    return out


def _leaders(rank: np.ndarray, kept: np.ndarray, limit: int) -> np.ndarray:
    """The kept rows that can make the first `limit`: the best `limit`, and any row tied with the
    last of them (recency decides ties), without sorting them all."""
    if len(kept) <= limit:
        return kept
    if limit == 0:
        return kept[:0]
    cut = np.partition(rank[kept], len(kept) - limit)[len(kept) - limit]
    return kept[rank[kept] >= cut]


def _explanation(part: Candidates, row: int, filters: dict) -> dict[str, Any]:
    """Why an entry ranked where it did."""
    if part.vector is None or part.lexical is None:
        return {
            "fusion": "no query: relevance 1.0 for every match, ranked by the entry's own score",
            "filters": filters,
            "path": part.path,
        }
    return {
        # a cosine, in [-1, 1]: float32 products of unit vectors can pass 1 by rounding (1.000116
        # was shown: outside audit 32d); the relevance clips it the same way
        "vector": round(float(np.clip(part.vector[row], -1.0, 1.0)), 6),
        "lexical": round(float(part.lexical[row]), 6),
        "fusion": fusion_formula(),
        "path": part.path,
        "filters": filters,
    }


def _check_forget_scope(keys: Sequence[Any], tags: Sequence[str], everything: bool) -> None:
    if everything and (keys or tags):
        raise InvalidInput(
            "forget: `all` deletes the whole tier and cannot be combined with keys or tags", {"field": "all"}
        )
    if not everything and not keys and not tags:
        raise InvalidInput(
            "forget needs keys or tags, or `all: true` (CLI --all) to empty the whole tier: nothing was deleted",
            {"field": "all"},
        )


def _known_tier(tier: Any) -> str:
    if tier not in TIERS:
        raise InvalidInput(f"tier must be one of {', '.join(TIERS)}, not {tier!r}", {"field": "tier"})
    return tier


def check_name(value: Any, what: str) -> None:
    """Names may be any text but empty, over-long or containing NUL (they are never paths)."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or "\x00" in value:
        raise InvalidInput(f"{what} must be 1 to {MAX_NAME} characters without NUL", {"field": what})


def _last_write_wins(
    valid: list[tuple[int, MemoryEntry, str]],
) -> tuple[list[tuple[int, MemoryEntry, str]], list[tuple[int, str]]]:
    """Within one batch, a key stored twice in a tier keeps its last value (it is stored, and
    listed in `stored`, once); each entry so replaced is noted by index."""
    latest: dict[tuple[str, str], tuple[int, MemoryEntry, str]] = {}
    replaced: list[tuple[int, str]] = []
    for i, entry, rid in valid:
        earlier = latest.get((entry.tier, rid))
        if earlier is not None:
            replaced.append((earlier[0], f"replaced by entries[{i}], which has the same key and tier"))
        latest[(entry.tier, rid)] = (i, entry, rid)
    return sorted(latest.values(), key=lambda item: item[0]), replaced


def check_finite(value: Any, where: str) -> None:
    """`InvalidInput` if `value` holds a NaN or an infinity anywhere: JSON has no such numbers and
    orjson would silently write them as null. Every stored value passes here (A2E entries in
    `_validate`, records in `Collection`), so the CLI, the wire, MCP and the API all refuse them."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            message = f"{where}: {item} is not a finite number (JSON has no NaN or Infinity)"
            raise InvalidInput(message, {"field": where})
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)


def check_paging(limit: Any, min_score: Any) -> None:
    """A retrieve's `limit` (a whole number >= 0) and `min_score` (a number in 0..1), as the
    wire's RetrieveRequest checks them, for callers that do not come through the wire."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise InvalidInput(f"limit must be a whole number >= 0, not {limit!r}", {"field": "limit"})
    number = isinstance(min_score, (int, float)) and not isinstance(min_score, bool)
    if not number or not 0.0 <= min_score <= 1.0:  # (NaN fails the comparison too)
        raise InvalidInput(f"min_score must be a number from 0 to 1, not {min_score!r}", {"field": "min_score"})


def _check_nesting(entry: MemoryEntry) -> None:
    """Content and key must fit, nested, in the deepest JSON the store writes (a journal line:
    {"recs": [{"doc": {"content": ...}}]}); orjson writes at most 254 levels."""
    for name in ("content", "key"):
        try:
            orjson.dumps({"recs": [{"doc": {name: getattr(entry, name)}}]})
        except orjson.JSONEncodeError as exc:
            raise _not_storable(name, exc) from None


def _not_storable(name: str, exc: orjson.JSONEncodeError) -> InvalidInput:
    """Why a value cannot be written: too deep, or not JSON (bytes, a set, an object, an
    integer outside 64 bits)."""
    why = f"nested deeper than {MAX_NESTING} levels" if "ecursion" in str(exc) else f"not JSON: {exc}"
    return InvalidInput(f"{name}: {why}", {"field": name})


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "entry"
    return f"{where}: {err['msg']}"


def raise_invalid(exc: ValidationError) -> None:
    raise InvalidInput(_first_error(exc), {"errors": exc.errors(include_url=False)})
