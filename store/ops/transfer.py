"""Export and import: a lossless, diffable NDJSON dump of the store.

One record a line, keys sorted, lines sorted by (namespace, kind, scope, id), so two dumps of
the same data are byte-identical and `diff` shows what changed. A line is

    {"doc": {...every stored field...}, "id": "...", "kind": "semantic", "namespace": "...", "scope": []}

where `kind` is an A2E tier (`episodic`, `semantic`) or a codebolt collection (`kv`, `json`,
`todo`, `markdown`, `episodes`, `events`, `persistent`, `kg_entities`, `kg_relations`) or
`langgraph`, and `scope` is the agent (episodic), the episodic memory (events) or the LangGraph
namespace (`kinds.SCOPE_NAMES`). Expired entries are not exported, and neither are working tiers
(a session's scratch pad, not the store's content). Import upserts each record as it is,
timestamps included (A2E entries pass the same validation and limits as `memory/store`), so
export -> import -> export gives back the same bytes. A record given on more than one line is
one record: the last line replaces the earlier ones, and the counts (new, changed, unchanged)
are of the records the store ends with, each once. It checks every line before it writes
anything (`--dry-run` too), and refuses (`InvalidInput`, naming the line) one of another kind or
scope shape, an A2E entry `memory/store` would refuse (a wrong type, too big), one whose tier
is not its kind, one whose `id` (which may be left out) is not its doc's, and a record its
kind's tool would trip on (`shapes.py`, times written as the tools write them included). What
it cannot know before writing is room: a namespace that fills up stops the import there, the
shards written before kept (an import is an upsert: run it again once there is room).

A damaged shard does not stop an export: its readable records are exported (see `salvage.py`)
and, after the last line, `Damaged` names each damaged shard, so the CLI writes the whole dump
and then exits 1 with the message: a partial dump is never mistaken for a complete one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from .. import clock
from ..backends.base import SYSTEM, Backend, Scope
from ..errors import Damaged, InvalidInput, NotFound
from ..kinds import A2E_TIERS, SCOPE_NAMES, schema_of
from ..ndjson import objects
from .a2e import A2E, canonical_key, check_name, public
from .records import Collection, serialised_size
from .shapes import record_problem

Record = dict[str, Any]
COUNT_BATCH = 1000  # records whose stored versions an import reads at once, to count them


def export_records(backend: Backend, namespace: str | None = None) -> Iterator[bytes]:
    """The dump's lines (without newlines), in their stable order."""
    records = []
    damaged: list[str] = []
    for descriptor, docs in backend.export_scopes(namespace, clock.now(), damaged):
        name, kind, names = descriptor.get("namespace", SYSTEM), descriptor["kind"], descriptor.get("scope", [])
        if kind == "working":
            continue
        records += [{"namespace": name, "kind": kind, "scope": names, "id": doc["id"], "doc": doc} for doc in docs]
    if namespace is not None and not records and not damaged and not backend.stats(namespace):
        raise NotFound(f"no namespace {namespace!r}")  # a typo would make an empty backup, silently
    records.sort(key=lambda r: (r["namespace"], r["kind"], r["scope"], r["id"]))
    for record in records:
        yield orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    if damaged:
        problems = list(dict.fromkeys(damaged))  # store.json's damage is met by every shard
        raise Damaged(f"the store is damaged: {'; '.join(problems)}; run `mem doctor`", {"damaged": problems})


def import_records(backend: Backend, a2e: A2E, lines: Iterable[bytes | str], dry_run: bool = False) -> dict[str, int]:
    """Upsert every record; counts of new, changed and unchanged ones (nothing written if dry)."""
    counts = {"new": 0, "changed": 0, "unchanged": 0}
    groups: dict[tuple[str, str, tuple[str, ...]], list[tuple[int, Record]]] = {}
    for number, record in _parse(lines):
        key = (record["namespace"], record["kind"], tuple(record["scope"]))
        groups.setdefault(key, []).append((number, record["doc"]))
    for (namespace, kind, scope), numbered in groups.items():
        if kind in A2E_TIERS:
            _check_entries(a2e, namespace, kind, numbered)
        if backend.bounds_ids:
            try:  # a name too long for the backend: said naming the group's first line
                shard = backend.scope(namespace, kind, *scope, schema=schema_of(kind))
            except InvalidInput as exc:
                raise InvalidInput(f"line {numbered[0][0]}: {exc.message}") from None
            _check_ids(shard, kind, numbered)
    for (namespace, kind, scope), numbered in groups.items():
        docs = _last_of_each(kind, [doc for _, doc in numbered])
        collection = Collection(backend, namespace, kind, *scope, schema=schema_of(kind))
        for start in range(0, len(docs), COUNT_BATCH):  # a batch a read: one round trip on a database
            chunk = docs[start : start + COUNT_BATCH]
            olds = collection.shard.get_many(list(dict.fromkeys(doc["id"] for doc in chunk)), clock.now())
            for doc in chunk:
                old = olds.get(doc["id"])
                counts["new" if old is None else "changed" if old != doc else "unchanged"] += 1
        if not dry_run:
            _write(collection, a2e, namespace, kind, scope, docs)
    return counts


def _last_of_each(kind: str, docs: list[Record]) -> list[Record]:
    """One doc a record, the last line naming it: as the store keeps the last of them, counting
    every line would call one record new twice. An A2E entry is the record its canonical key
    names, the id `memory/store` gives it (a line's own id may be written otherwise); any other
    record is named by its id."""
    if kind in A2E_TIERS:
        docs = [{**doc, "id": canonical_key(doc["key"])} for doc in docs]
    last = {doc["id"]: doc for doc in docs}  # the first line's place, the last line's doc
    return list(last.values())


def _write(
    collection: Collection, a2e: A2E, namespace: str, kind: str, scope: tuple[str, ...], docs: list[Record]
) -> None:
    if kind in A2E_TIERS:
        agent = scope[0] if kind == "episodic" else "default"  # its one name (`_check_shape`)
        entries = [public(doc) for doc in docs]
        result = a2e.store(a2e.scope(namespace, agent), entries, keep_timestamps=True, partial=False)  # names checked
        if result["errors"]:
            raise InvalidInput(f"{namespace}/{kind}: {result['errors'][0]}")
    else:
        for start in range(0, len(docs), 1000):
            collection.put(*docs[start : start + 1000])


def _check_entries(a2e: A2E, namespace: str, kind: str, numbered: list[tuple[int, Record]]) -> None:
    """The A2E entries of one shard, checked as `memory/store` checks them (and in the tier their
    kind names) before the import writes anything: an invalid one found while writing would
    leave the records before it written."""
    for number, doc in numbered:
        if "tier" in doc and doc["tier"] != kind:
            raise InvalidInput(
                f"line {number}: {'an' if kind[0] in 'aeiou' else 'a'} {kind} record of tier {doc['tier']!r}"
            )
    problems = a2e.entry_problems(namespace, [public(doc) for _, doc in numbered])
    if problems:
        index, reason = problems[0]
        raise InvalidInput(f"line {numbered[index][0]}: {reason}")


def _check_ids(shard: Scope, kind: str, numbered: list[tuple[int, Record]]) -> None:
    """The id each record is stored under, checked against what the backend can keep (a key too
    long for PostgreSQL's indexes) before the import writes anything: found while writing, it
    left the shards before it imported (an outside audit), though a dry run had passed."""
    for number, doc in numbered:
        problem = shard.id_problem(canonical_key(doc["key"]) if kind in A2E_TIERS else doc["id"])
        if problem:
            raise InvalidInput(f"line {number}: {problem}")


def _parse(lines: Iterable[bytes | str]) -> Iterator[tuple[int, Record]]:
    """Every record with its line number, each checked (names, nesting) before the import writes
    anything."""
    for number, record in objects(lines):
        if not {"namespace", "kind", "scope", "doc"} <= record.keys():
            raise InvalidInput(f"line {number}: expected namespace, kind, scope and doc")
        if record["kind"] == "working" or not isinstance(record["doc"], dict) or "id" not in record["doc"]:
            raise InvalidInput(f"line {number}: not an exported record")
        if not isinstance(record["doc"]["id"], str):  # every stored record's id is text: a number damaged the shard
            raise InvalidInput(f"line {number}: the record's id must be a string, not {record['doc']['id']!r}")
        if "id" in record and record["id"] != record["doc"]["id"]:  # which one would name the record?
            raise InvalidInput(f"line {number}: id {record['id']!r} is not the doc's id {record['doc']['id']!r}")
        scope = record["scope"]
        if not isinstance(scope, list):
            raise InvalidInput(f"line {number}: scope must be a list of names")
        names = [(record["namespace"], "namespace"), (record["kind"], "kind"), *[(s, "scope") for s in scope]]
        for name, what in names:
            check_name(name, f"line {number}: {what}")
        _check_shape(record["kind"], scope, number)
        try:
            serialised_size(record["doc"])  # a record too deep to store is refused before any write
        except InvalidInput as exc:
            raise InvalidInput(f"line {number}: {exc.message}") from None
        problem = record_problem(record["kind"], scope, record["doc"])  # and one its tool would trip on
        if problem:
            raise InvalidInput(f"line {number}: {problem}")
        yield number, record


def _check_shape(kind: str, scope: list[str], number: int) -> None:
    """A known kind, with the number of scope names its shards have (`kinds.SCOPE_NAMES`)."""
    if kind not in SCOPE_NAMES:
        raise InvalidInput(f"line {number}: unknown kind {kind!r} (one of {', '.join(sorted(SCOPE_NAMES))})")
    expected = SCOPE_NAMES[kind]
    if len(scope) != expected and not (expected is None and scope):
        holds = {None: "one name or more", 0: "no name", 1: "one name"}[expected]
        article = "an" if kind[0] in "aeiou" else "a"
        raise InvalidInput(f"line {number}: {article} {kind} record's scope holds {holds}, not {len(scope)}")
