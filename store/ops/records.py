"""A collection: the records of one kind in one namespace, read and written under the store lock.

The codebolt tools (key-value, JSON, todo, markdown, episodic memories and their events,
persistent memories) and the knowledge graph all keep their records in collections; each is one
scope of the backend, so writes are as safe across processes as A2E entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from .. import clock
from ..backends.base import Backend, Scope
from ..embed import encode_vectors
from ..errors import InvalidInput, NotFound, shown_value
from ..redact import redact
from ..schemas import SCHEMAS
from .a2e import check_finite, check_name

Doc = dict[str, Any]
MAX_RECORD_BYTES = 1 << 20
KEPT = {"id", "key", "name", "from", "to", "memoryId", "created_at", "updated_at", "timestamp"}


class Collection:
    def __init__(self, backend: Backend, namespace: str, kind: str, *scope: str, schema: str = "records") -> None:
        check_name(namespace, "namespace")  # the rule of A2E namespaces: no NUL (so no system namespace), <= 1024
        self.backend = backend
        self.namespace = namespace
        self.kind = kind
        self.scope = scope
        self.schema = SCHEMAS[schema]

    @property
    def shard(self) -> Scope:
        """The collection's scope, brought up to date."""
        return self.backend.scope(self.namespace, self.kind, *self.scope, schema=self.schema.name)

    def catch_up(self) -> None:
        """Bring the scope up to date before taking the lock, so that the lock is held briefly."""
        self.backend.scope(self.namespace, self.kind, *self.scope, schema=self.schema.name)

    # -- reading ----------------------------------------------------------------------------

    def get(self, rid: str) -> Doc | None:
        return self.shard.get(rid, clock.now())

    def require(self, rid: Any, what: str) -> Doc:
        """The record `rid`, or a `memory_not_found` error naming `what`."""
        doc = self.get(rid) if isinstance(rid, str) and rid else None
        if doc is None:
            raise NotFound(f"no {what} with id {shown_value(rid)}")
        return doc

    def all(self) -> Iterator[Doc]:
        """Every live record, oldest write first."""
        return self.shard.docs(clock.now())

    def __len__(self) -> int:
        return self.shard.usage(clock.now())[0]

    # -- writing ----------------------------------------------------------------------------

    def put(self, *docs: Doc) -> None:
        """Create or replace records (each doc carries its "id")."""
        epoch = self.backend.epoch
        recs = self._recs(docs)
        self.catch_up()
        with self.backend.lock(self.namespace):
            shard = self.shard
            if self.backend.epoch != epoch:  # another process reindexed to another embedder
                recs = self._recs(docs)
            self._check_room(shard, recs)
            shard.append({"op": "put", "recs": recs})
        self.backend.after_write(shard)

    def update(self, rid: str, what: str, change: Callable[[Doc], Doc]) -> Doc:
        """Replace record `rid` by `change(old)`, atomically; `memory_not_found` if it is absent."""
        self.catch_up()
        with self.backend.lock(self.namespace):
            new = change(self.require(rid, what))
            shard = self.shard
            recs = self._recs([new])
            self._check_room(shard, recs)
            shard.append({"op": "put", "recs": recs})
        self.backend.after_write(shard)
        return new

    def _size_limit(self) -> int:
        """The largest record the namespace takes: its `max_entry_bytes`, as for A2E entries (a
        whole record counts, its metadata included: an entity grown by observations too)."""
        if self.backend.record_limit is None:
            return MAX_RECORD_BYTES
        return min(MAX_RECORD_BYTES, self.backend.record_limit(self.namespace))

    def _check_room(self, shard: Scope, recs: list[Doc]) -> None:
        """`memory_full` if the namespace cannot take `recs` (new records, or records growing)."""
        if self.backend.check_room is None:
            return
        now, added, grown = clock.now(), 0, 0
        unique = {r["id"]: r for r in recs}
        olds = shard.get_many(list(unique), now)
        for rec in unique.values():
            old = olds.get(rec["id"])
            added += old is None
            grown += rec["size"] - (len(orjson.dumps(old)) if old is not None else 0)
        self.backend.check_room(self.namespace, added, grown)

    def delete(self, rid: str, what: str) -> Doc:
        """Delete record `rid`; `memory_not_found` if it is absent."""
        with self.backend.lock(self.namespace):
            old = self.require(rid, what)
            shard = self.shard
            shard.append({"op": "del", "ids": [rid]})  # and asks for a purge (see the backend)
        self.backend.after_write(shard)
        return old

    def delete_many(self, rids: list[str]) -> int:
        """Delete whichever of `rids` exist; returns how many did."""
        with self.backend.lock(self.namespace):
            shard = self.shard
            now = clock.now()
            present = list(shard.get_many(list(dict.fromkeys(rids)), now))
            if present:
                shard.append({"op": "del", "ids": present})
        self.backend.after_write(shard)
        return len(present)

    @staticmethod
    def _redact_in_place(doc: Doc) -> None:
        """Mask secrets in the caller's own doc, so that what a tool answers is what was stored
        (an echo of the unmasked value would show the secret the store refused to keep)."""
        for name, value in list(doc.items()):
            if name not in KEPT:
                doc[name] = redact(value)

    def _recs(self, docs: Any) -> list[Doc]:
        recs = []
        limit = self._size_limit()
        redacting = self.backend.redacts(self.namespace)  # the namespace's setting, as for A2E entries
        for doc in docs:
            if redacting:  # before anything is stored or embedded; ids and keys are kept
                self._redact_in_place(doc)
            size = serialised_size(doc)
            check_finite(doc, "value")
            if size > limit:
                raise InvalidInput(f"record is {size} bytes, over the {limit}-byte limit (max_entry_bytes)")
            recs.append({"id": doc["id"], "doc": doc, "size": size})
        if self.schema.indexed and recs:
            vectors = encode_vectors(self.backend.embed([self.schema.text(r["doc"]) for r in recs]))
            for rec, vec in zip(recs, vectors, strict=True):
                rec["vec"] = vec
        return recs


def serialised_size(doc: Doc) -> int:
    """The bytes of `doc` as JSON; `InvalidInput` if it nests too deeply to be stored. The doc is
    measured three levels down, as deep as a journal line holds it, so that a record that passes
    here cannot fail later, under the lock, when its line is written."""
    try:
        return len(orjson.dumps([[[doc]]])) - 6
    except orjson.JSONEncodeError as exc:
        raise InvalidInput(f"the record cannot be stored as JSON: {exc}") from None
