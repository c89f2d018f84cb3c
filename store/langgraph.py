"""A LangGraph long-term memory store backed by `mem`: `MemStore`, a `langgraph` `BaseStore`.

    from a2e_mem.langgraph import MemStore

    memories = MemStore(home="~/.agent-memory")           # or MemStore(store="postgresql://...")
    graph = builder.compile(store=memories)                # nodes take `store: BaseStore`

Needs the `langgraph` extra (`pip install 'a2e-mem[langgraph]'`); nothing else in `mem` imports
this module, so the core never loads LangGraph.

How LangGraph's data maps onto `mem` (the same on the files backend and on PostgreSQL, so two
graphs in two processes, or on two machines, share memories through one `--home` or one URL):

- every item lives in ONE `mem` namespace, `langgraph` unless the store is given another one:
  its limits (`max_entries`, ...) are the items' limits, `mem export --namespace langgraph`
  dumps them, `mem namespaces` counts them, and nothing else of `mem` is mixed with them;
- a LangGraph namespace tuple is the *scope* of kind `langgraph` in it, label for label:
  `("users", "alice", "memories")` is the scope `users/alice/memories`. Labels are kept as they
  are (any text LangGraph accepts: no period, no NUL, not empty), nothing is escaped or joined,
  so no two tuples can meet in one scope;
- the item's key is the record's id in that scope; the record is
  `{"id", "key", "value", "text", "created_at", "updated_at", "expires_at", "ttl"}`, times in
  Unix seconds, `text` what is indexed for search (None when the item is not indexed).

Search. With a `query`, items are ranked by `mem`'s hybrid relevance (cosine of the store's
embedder fused with BM25, in [0, 1]: see `backends/base.py`), which is each item's `score`; the
query ranks, it does not filter: every item under the prefix that passes `filter` is returned,
items not indexed (`index=False`, or nothing at the indexed paths) last with score None, as
LangGraph's in-memory store does (its PostgreSQL store leaves them out). Without a query, the
newest write comes first (as LangGraph's PostgreSQL store), ties by namespace then key. What is
indexed: the store's `fields` (default `["$"]`, the whole value's words), or the put's own
`index` paths (LangGraph's path syntax); the texts found at the paths are indexed together, as
one document (LangGraph's own stores embed each path and keep the best). `filter` follows
LangGraph's rules: top-level fields, equality (a nested object matches when its given fields
do), `$eq $ne $gt $gte $lt $lte`; a comparison with a missing or non-numeric field does not
match (LangGraph's in-memory store raises there).

Writes. A put keeps the item's `created_at` and sets `updated_at` (as LangGraph's PostgreSQL
store; its in-memory store resets both); a put of None deletes. In one `batch`, reads run first
and then the writes, the last one per (namespace, key) winning, under one `mem` write lock: on
PostgreSQL one transaction.

TTL (`supports_ttl`). `ttl` is in minutes, as in LangGraph, a finite number > 0 (anything
else, 0 included, is a ValueError); the record's `expires_at` makes it
invisible from then on (the backend purges it later: `mem gc`). Reads with `refresh_ttl` (the
default, or the store's `TTLConfig.refresh_on_read`) push the expiry of the items they return
`ttl` minutes from now. `TTLConfig.default_ttl` applies to puts without a `ttl` (`ttl=None` is
no expiry, as in LangGraph); there is no sweeper thread to start, since expired items are never
returned.

Threads. One `MemStore` may serve threads (LangGraph runs parallel branches in threads): its
batches run one at a time. After `close()`, every call raises `a2e_mem.errors.Closed`.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("a2e_mem.langgraph needs LangGraph: pip install 'a2e-mem[langgraph]'") from exc

from . import clock
from .backends.base import Filters, Scope
from .errors import Closed
from .models import MAX_TTL
from .ops.filters import is_number
from .ops.records import Collection, Doc
from .schemas import flatten_text
from .service import MemoryService

KIND = "langgraph"  # the kind of the scopes holding LangGraph items (schema of the same name)
DEFAULT_NAMESPACE = "langgraph"
Namespace = tuple[str, ...]


class MemStore(BaseStore):
    """LangGraph's `BaseStore` over a `mem` store (see the module docstring for the mapping).

    `home` and `store` are `MemoryService`'s (a `--home` folder, a `postgresql://` URL; by
    default `MEM_HOME` / `MEM_STORE` as for the `mem` command), or pass an open `service`.
    `namespace` is the `mem` namespace holding the items; `fields` the paths indexed for search
    when a put gives none; `ttl` LangGraph's `TTLConfig`.
    """

    supports_ttl = True

    def __init__(
        self,
        home: Path | str | None = None,
        *,
        store: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        fields: Sequence[str] = ("$",),
        ttl: TTLConfig | None = None,
        service: MemoryService | None = None,
    ) -> None:
        if home is not None and not isinstance(home, (str, os.PathLike)):
            raise TypeError(f"home must be a path (str or Path), not {type(home).__name__}")
        for name, value in (("store", store), ("namespace", namespace)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a string, not {type(value).__name__}")
        self.fields = _paths(fields, "fields")
        self._owns_service = service is None
        self.service = service or MemoryService(Path(home).expanduser() if home else None, store=store)
        self.namespace = namespace
        self.ttl_config = ttl
        # one batch at a time per open store: LangGraph runs parallel nodes in threads, and a
        # batch's reads and writes must not interleave with another's in this process; the lock
        # is the service's, so a `Memory` given the same service waits for it too
        self._mutex = self.service.lock
        self._closed = False

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order of kind: every read (get, search, list), then the writes."""
        ops = list(ops)
        for op in ops:
            _check_op(op)
        with self._mutex:
            if self._closed:
                raise Closed("this MemStore is closed; open a new one")
            now = clock.now()
            refresh: dict[tuple[Namespace, str], None] = {}  # items read with refresh_ttl, in order
            results = [self._read(op, now, refresh) for op in ops]
            puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
            if puts or refresh:
                self._write(list(puts.values()), [k for k in refresh if k not in puts])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the store's I/O (files, PostgreSQL) is synchronous."""
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        """Close the store (once: closing again does nothing); later calls raise `Closed`."""
        with self._mutex:
            if not self._closed:
                self._closed = True
                if self._owns_service:
                    self.service.close()

    def __enter__(self) -> MemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads --------------------------------------------------------------------------------

    def _read(self, op: Op, now: float, refresh: dict[tuple[Namespace, str], None]) -> Result:
        if isinstance(op, GetOp):
            doc = self._collection(op.namespace).get(op.key)
            if doc is not None and op.refresh_ttl and doc.get("ttl") is not None:
                refresh[(op.namespace, op.key)] = None
            return _item(op.namespace, doc) if doc is not None else None
        if isinstance(op, SearchOp):
            page = self._search(op, now)
            if op.refresh_ttl:
                refresh.update(((ns, doc["key"]), None) for _, ns, doc in page if doc.get("ttl") is not None)
            return [_item(ns, doc, score, scored=True) for score, ns, doc in page]
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op, now)
        return None  # a put: written after the reads

    def _search(self, op: SearchOp, now: float) -> list[tuple[float | None, Namespace, Doc]]:
        """(score, namespace, record) of one page of the items under the prefix that pass the
        filter, ranked (see the module docstring)."""
        scored: list[tuple[float | None, Namespace, Doc]] = []
        qvec = self.service.backend.embed([op.query])[0] if op.query else None
        for namespace, scope in self._scopes(op.namespace_prefix):
            for score, doc in _scope_rows(scope, now, qvec, op.query or ""):
                if matches_filter(doc["value"], op.filter):
                    scored.append((score, namespace, doc))
        scored.sort(key=_ranking if op.query else _newest_first)
        return scored[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> list[Namespace]:
        conditions = op.match_conditions or ()
        names = [
            ns
            for ns, scope in self._scopes()
            if all(_matches(cond, ns) for cond in conditions) and scope.usage(now)[0] > 0  # items, not all expired
        ]
        if op.max_depth is not None:
            names = list({ns[: op.max_depth] for ns in names})
        return sorted(set(names))[op.offset : op.offset + op.limit]

    def _scopes(self, prefix: Namespace = ()) -> list[tuple[Namespace, Scope]]:
        """(LangGraph namespace, scope) of every scope of LangGraph items under `prefix` (some
        may hold none any more: deleted or expired)."""
        found = []
        for scope in self.service.backend.scopes(self.namespace):
            namespace = tuple(scope.descriptor.get("scope", ()))
            if scope.kind == KIND and namespace[: len(prefix)] == prefix:
                found.append((namespace, scope))
        return found

    # -- writes -------------------------------------------------------------------------------

    def _write(self, puts: list[PutOp], refresh: list[tuple[Namespace, str]]) -> None:
        """Apply `puts` (None deletes) and push back the expiry of `refresh`, in one section."""
        backend = self.service.backend
        with backend.lock(self.namespace):
            now = clock.now()
            for namespace, ops in _by_namespace(puts).items():
                self._put_many(namespace, ops, now)
            for namespace, keys in _keys_by_namespace(refresh).items():
                self._refresh(namespace, keys, now)

    def _put_many(self, namespace: Namespace, ops: list[PutOp], now: float) -> None:
        collection = self._collection(namespace)
        doomed = [op.key for op in ops if op.value is None]
        if doomed:
            collection.delete_many(doomed)
        kept = [op for op in ops if op.value is not None]
        if not kept:
            return
        olds = collection.shard.get_many([op.key for op in kept], now)
        collection.put(*(self._record(op, olds.get(op.key), now) for op in kept))

    def _record(self, op: PutOp, old: Doc | None, now: float) -> Doc:
        # `BaseStore.put` already put the TTLConfig's default in place of a missing ttl; None is none
        ttl = op.ttl if isinstance(op.ttl, (int, float)) and not isinstance(op.ttl, bool) else None
        return {
            "id": op.key,
            "key": op.key,
            "value": dict(op.value or {}),
            "text": self._indexed_text(op),
            "created_at": old["created_at"] if old else now,
            "updated_at": now,
            "expires_at": now + 60 * ttl if ttl is not None else None,
            "ttl": ttl,
        }

    def _indexed_text(self, op: PutOp) -> str | None:
        """The words search finds the item by: the texts at its index paths, or None."""
        if op.index is False:
            return None
        paths = self.fields if op.index is None else _paths(op.index, "index")
        texts = [t for path in paths for t in _texts_at(op.value, path)]
        text = "\n".join(t for t in texts if t.strip())
        return text or None

    def _refresh(self, namespace: Namespace, keys: list[str], now: float) -> None:
        collection = self._collection(namespace)
        docs = collection.shard.get_many(keys, now)
        renewed = [{**doc, "expires_at": now + 60 * doc["ttl"]} for doc in docs.values() if doc.get("ttl") is not None]
        if renewed:
            collection.put(*renewed)

    def _collection(self, namespace: Namespace) -> Collection:
        return Collection(self.service.backend, self.namespace, KIND, *namespace, schema=KIND)


# -- helpers ----------------------------------------------------------------------------------


def _check_op(op: Op) -> None:
    """LangGraph's own label rules, also for ops given to `batch` directly."""
    if isinstance(op, (GetOp, PutOp)):
        labels = op.namespace
    elif isinstance(op, SearchOp):
        labels = op.namespace_prefix
    elif isinstance(op, ListNamespacesOp):
        labels = tuple(label for cond in op.match_conditions or () for label in cond.path if label != "*")
    else:
        raise ValueError(f"unknown operation {type(op).__name__}")
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"invalid namespace label {label!r} in {labels!r}")
    if isinstance(op, PutOp) and not op.namespace:
        raise InvalidNamespaceError("namespace cannot be empty")
    if isinstance(op, (GetOp, PutOp)) and (not isinstance(op.key, str) or "\x00" in op.key):
        raise ValueError(f"a key must be text without NUL, not {op.key!r}")
    if isinstance(op, PutOp) and op.value is not None:
        _check_ttl(op.ttl)
        if op.index is not None and op.index is not False:
            _paths(op.index, "index")
    if isinstance(op, (SearchOp, ListNamespacesOp)):
        _check_page(op.limit, op.offset)


def _paths(given: Any, name: str) -> list[str]:
    """Index paths: a lone string is one path, as `["text"]`, never its characters (each then a
    path of a field of one letter, the item indexed by the wrong words)."""
    paths = [given] if isinstance(given, str) else given
    if not isinstance(paths, (list, tuple)) or not all(isinstance(path, str) for path in paths):
        raise ValueError(f"{name} must be a path or a list of paths (strings), not {given!r}")
    return list(paths)


def _check_page(limit: Any, offset: Any) -> None:
    """A search's or a listing's `limit` and `offset`: whole numbers >= 0. A ValueError, as
    LangGraph's PostgreSQL store fails there; its in-memory store slices, so that limit=-1 drops
    the last item and a text limit is a TypeError deep inside."""
    for name, value in (("limit", limit), ("offset", offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")


MAX_TTL_MINUTES = MAX_TTL / 60  # an entry's ttl at most (`models.MAX_TTL`): 1e307 overflowed its expiry


def _check_ttl(ttl: Any) -> None:
    """A put's `ttl`: None (no expiry) or a finite number of minutes > 0. A ValueError, as
    LangGraph's own checks of a put raise (and `InvalidNamespaceError` is one): 'x', '5' or NaN
    would be kept without expiring and 0 or -1 would expire the item at once, silently."""
    number = isinstance(ttl, (int, float)) and not isinstance(ttl, bool)
    if ttl is not None and not (number and math.isfinite(ttl) and 0 < ttl <= MAX_TTL_MINUTES):
        raise ValueError(f"ttl must be None or a number of minutes > 0 and <= {MAX_TTL_MINUTES:.0f}, not {ttl!r}")


def _scope_rows(scope: Scope, now: float, qvec: Any, query: str) -> Iterable[tuple[float | None, Doc]]:
    """(score, record) of every live item of `scope`: relevance to the query, None without one
    or for an item that is not indexed."""
    if qvec is None:
        return ((None, doc) for doc in scope.docs(now))
    rows = []
    for part in scope.search(now, Filters(), qvec, query, k=1, exhaustive=True):
        for i in range(len(part.rows)):
            doc = part.doc(i)
            rows.append((float(part.relevance[i]) if doc.get("text") else None, doc))
    return rows


def _ranking(row: tuple[float | None, Namespace, Doc]) -> tuple:
    """Best score first, items without one last; ties by namespace and key (stable pages)."""
    score, namespace, doc = row
    return (score is None, -(score or 0.0), namespace, doc["key"])


def _newest_first(row: tuple[float | None, Namespace, Doc]) -> tuple:
    _, namespace, doc = row
    return (-doc["updated_at"], namespace, doc["key"])


def _texts_at(value: Mapping[str, Any] | None, path: str) -> list[str]:
    if path == "$":
        return [flatten_text(dict(value or {}))]
    return get_text_at_path(value, tokenize_path(path))


def _item(namespace: Namespace, doc: Doc, score: float | None = None, scored: bool = False) -> Item:
    times = {"created_at": _datetime(doc["created_at"]), "updated_at": _datetime(doc["updated_at"])}
    if scored:
        return SearchItem(namespace, doc["key"], doc["value"], score=score, **times)
    return Item(value=doc["value"], key=doc["key"], namespace=namespace, **times)


def _datetime(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def _by_namespace(puts: list[PutOp]) -> dict[Namespace, list[PutOp]]:
    grouped: dict[Namespace, list[PutOp]] = {}
    for op in puts:
        grouped.setdefault(op.namespace, []).append(op)
    return grouped


def _keys_by_namespace(keys: list[tuple[Namespace, str]]) -> dict[Namespace, list[str]]:
    grouped: dict[Namespace, list[str]] = {}
    for namespace, key in keys:
        grouped.setdefault(namespace, []).append(key)
    return grouped


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    """LangGraph's prefix / suffix match of a namespace, `*` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    if condition.match_type not in ("prefix", "suffix"):
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or p == label for p, label in zip(path, part, strict=True))


def matches_filter(value: Mapping[str, Any], spec: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph search `filter` (see the module docstring)."""
    return not spec or all(_compare(value.get(field), wanted) for field, wanted in spec.items())


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, Mapping) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return value == wanted


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op not in ORDERS:
        raise ValueError(f"unsupported filter operator {op!r}")
    if is_number(value) and is_number(arg) or isinstance(value, str) and isinstance(arg, str):
        return ORDERS[op](value, arg)
    # a missing field, or one of another type than the operand: no match. Not `float(...)` of
    # both: the text "30" and True passed `$gt` as numbers (outside audit 32b)
    return False


ORDERS = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
