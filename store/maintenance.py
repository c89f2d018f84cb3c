"""Looking after a store: statistics, namespaces, re-embedding, and a health check.

- `stats`: per namespace and kind, live records and their bytes, expired records still on disk
  (until the next checkpoint purges them), and the index state: rows in the checkpoint (covered
  by the Annoy index) and records written since (searched exactly).
- `delete_namespace`: removes a namespace's folder under its lock.
- `reindex`: re-embeds every searchable shard with the chosen embedder and rebuilds its
  checkpoint, holding the namespace's lock for that shard, then records the embedder.
- `doctor`: checks every file (checkpoints parse with TinyDB and agree with their columns and
  indexes, journal lines parse, permissions are owner-only, vectors match the recorded
  embedder) and says how to repair; `repair` rebuilds what is derived, never the records.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from . import checkpoint, clock
from .embed import decode_vector, get_embedder
from .engine import Engine
from .errors import NotFound
from .journal import Journal
from .schemas import SCHEMAS
from .shard import DESCRIPTOR, SEG, WAL, Shard, listing

Progress = Callable[[int, int], None]


def _shards(engine: Engine, namespace: str | None = None) -> Iterator[tuple[str, dict, Path]]:
    for name, folder in engine.namespaces():
        if namespace is None or name == namespace:
            for descriptor, shard_folder in engine.shard_folders(folder):
                yield name, descriptor, shard_folder


def stats(engine: Engine, namespace: str | None = None) -> list[dict[str, Any]]:
    now = clock.now()
    rows = []
    for name, descriptor, folder in _shards(engine, namespace):
        shard = engine.open_folder(folder)
        count, size = shard.usage(now)
        expired = 0
        if shard.seg is not None:
            expired += int(np.count_nonzero(shard.seg.expires <= now))
        expired += int(np.count_nonzero(shard.mem_alive(now) == 0)) - len(shard.mem.free)
        rows.append({
            "namespace": name, "kind": descriptor["kind"], "scope": "/".join(descriptor.get("scope", [])),
            "entries": count, "bytes": size, "expired": expired,
            "indexed": shard.seg.n if shard.seg else 0, "pending": len(shard.mem),
        })  # fmt: skip
    return rows


def namespaces(engine: Engine) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, Any]] = {}
    for row in stats(engine):
        total = totals.setdefault(row["namespace"], {"namespace": row["namespace"], "entries": 0, "bytes": 0})
        total["entries"] += row["entries"]
        total["bytes"] += row["bytes"]
    return sorted(totals.values(), key=lambda r: r["namespace"])


def delete_namespace(engine: Engine, namespace: str) -> dict[str, Any]:
    folder = engine.namespace_dir(namespace)
    if not (folder / "namespace.json").exists():
        raise NotFound(f"no namespace {namespace!r}")
    while not _delete_contents(engine, namespace, folder):
        continue
    engine.close()
    return {"namespace": namespace, "deleted": True}


def _delete_contents(engine: Engine, namespace: str, folder: Path) -> bool:
    """Remove everything in the namespace's folder but its lock file, holding the builder lock of
    every shard (no checkpoint may be writing in a folder being removed) and the namespace lock.
    False if a shard appeared meanwhile: the caller tries again."""
    with contextlib.ExitStack() as stack:
        shards = [f for _, f in engine.shard_folders(folder)]
        for shard_folder in shards:
            stack.enter_context(checkpoint.building(shard_folder))
        with engine.lock(namespace):
            if any(f not in shards for _, f in engine.shard_folders(folder)):
                return False
            for name in os.listdir(folder):
                if name != "lock":
                    engine.discard(folder / name)
    return True


def reindex(engine: Engine, name: str, progress: Progress | None = None) -> dict[str, Any]:
    """Re-embed every searchable shard with embedder `name`.

    The embedder is recorded in store.json first: every process notices it at its next use of a
    shard and embeds with it from then on, so nothing written after this point has the old
    dimension. Shards not yet rebuilt may then hold both sizes: readers search their old vectors
    by words only (see `shard.py`) until the shard's turn comes, under its builder lock and its
    namespace lock. An interrupted reindex leaves such shards, which `mem doctor` reports and
    `--repair` (or running the reindex again) re-embeds."""
    embedder = get_embedder(name)
    engine.close()
    engine.record_embedder(embedder)
    engine._embedder = embedder
    for namespace, _ in engine.namespaces():  # wait for the writes under way, made with the old one
        with engine.lock(namespace):
            pass
    targets = [(ns, d, f) for ns, d, f in _shards(engine) if d.get("schema") in ("entries", "entities")]
    total = 0
    for done, (namespace, descriptor, folder) in enumerate(targets, 1):
        with checkpoint.building(folder) as held, engine.lock(namespace):
            if not held:  # the shard was deleted meanwhile
                continue
            # dimension 0: read the records only, not the old vectors (they may have another size)
            shard = Shard(folder, SCHEMAS[descriptor["schema"]], 0, descriptor)
            shard.refresh()
            docs = list(shard.docs(clock.now()))
            shard.close()
            vectors = embedder.embed([shard.schema.text(d) for d in docs]) if docs else np.zeros((0, embedder.dim))
            _replace_checkpoint(folder, shard.schema, docs, vectors, embedder.name)
        total += len(docs)
        if progress:
            progress(done, len(targets))
    engine.close()
    return {"embedder": embedder.name, "dim": embedder.dim, "shards": len(targets), "entries": total}


def _replace_checkpoint(folder: Path, schema: Any, docs: list[dict], vectors: np.ndarray | None, embedder: str) -> None:
    """A new checkpoint holding exactly `docs`, covering every journal so far. The caller holds
    the shard's builder lock (`checkpoint.building`: no other build may run, nor remove our
    temporary folder) and then the namespace lock, and has read every journal; writers continue
    in a fresh journal."""
    segs, wals = listing(folder)
    gen = max([0, *segs, *wals]) + 1
    checkpoint.install_segment(folder, gen, docs, vectors, schema, embedder)
    Journal.create(folder / WAL.format(gen + 1), gen + 1)
    checkpoint._remove_replaced(folder, gen)
    (folder / checkpoint.STATE).unlink(missing_ok=True)


# -- doctor ---------------------------------------------------------------------------------


def doctor(engine: Engine, repair: bool = False) -> list[dict[str, Any]]:
    """One finding per problem (empty when healthy); with `repair`, derived files are rebuilt."""
    findings: list[dict[str, Any]] = []
    recorded = engine.recorded_embedder()
    findings += _check_permissions(engine.home)
    for namespace, descriptor, folder in _shards(engine):
        with checkpoint.building(folder, clean=repair) as held:  # no checkpoint replaces files meanwhile
            if not held:  # deleted meanwhile
                continue
            problems = _check_shard(folder, descriptor, recorded)
        where = f"{namespace}/{descriptor['kind']}" + (
            "/" + "/".join(descriptor["scope"]) if descriptor.get("scope") else ""
        )
        for problem in problems:
            findings.append({"where": where, "problem": problem, "repair": "mem doctor --repair (rebuilds indexes)"})
        if problems and repair:
            lost = _rebuild(engine, namespace, folder)
            findings.append({"where": where, "problem": "repaired", "repair": ""})
            if lost:
                findings.append({"where": where, "problem": lost, "repair": "mem import (from an export)"})
    return findings


def _check_permissions(home: Path) -> list[dict[str, Any]]:
    """Files and folders others may read. The files of a build under way (inside its `tmp-*`
    folder, itself owner-only) are skipped: they are made owner-only before the folder is renamed
    into place. A file a checkpoint deletes while we look is not a finding."""
    everything = [home]
    for top, dirs, files in os.walk(home):  # unlike rglob, a folder deleted meanwhile is no error
        everything += [Path(top) / name for name in (*dirs, *files)]
    loose = []
    for path in everything:
        if any(part.startswith("tmp-") for part in path.relative_to(home).parts[:-1]):
            continue
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        if mode & 0o077:
            loose.append((path, mode))
    return [
        {"where": str(p.relative_to(home)) or ".", "problem": f"readable by others ({oct(mode & 0o777)})",
         "repair": f"chmod go-rwx '{p}'"}
        for p, mode in loose
    ]  # fmt: skip


def _check_shard(folder: Path, descriptor: dict, recorded: dict | None) -> list[str]:
    from .storage import read_all

    problems = []
    segs, wals = listing(folder)
    for gen in wals:
        bad = _bad_journal_lines(folder / WAL.format(gen))
        if bad:
            problems.append(f"{WAL.format(gen)}: {bad} unreadable lines (skipped when read)")
        if recorded and descriptor.get("schema") in ("entries", "entities"):
            problems += _check_journal_vectors(folder / WAL.format(gen), int(recorded["dim"]))
    if not segs:
        return problems
    seg = folder / SEG.format(segs[-1])
    try:
        meta = orjson.loads((seg / "meta.json").read_bytes())
        count = sum(1 for _ in read_all(seg / "data.json"))
    except Exception as exc:  # noqa: BLE001 - any failure here is a finding
        return [*problems, f"{seg.name}: checkpoint unreadable ({exc})"]
    if count != meta["count"]:
        problems.append(f"{seg.name}: {count} records but the columns say {meta['count']}")
    for name in ("offsets", "hashes", "expires", "updated", "scores"):
        problems += _check_column(seg, name, count)
    if descriptor.get("schema") in ("entries", "entities") and count:
        problems += _check_vectors(seg, count, recorded)
    return problems


def _check_column(seg: Path, name: str, count: int) -> list[str]:
    try:
        length = len(np.load(seg / f"{name}.npy", mmap_mode="r"))
    except Exception as exc:  # noqa: BLE001
        return [f"{seg.name}/{name}.npy unreadable ({exc})"]
    return [] if length == count else [f"{seg.name}/{name}.npy has {length} rows for {count} records"]


def _check_vectors(seg: Path, count: int, recorded: dict | None) -> list[str]:
    from annoy import AnnoyIndex

    try:
        vectors = np.load(seg / "vectors.npy", mmap_mode="r")
        index = AnnoyIndex(vectors.shape[1], "angular")
        index.load(str(seg / "index.ann"))
        items = index.get_n_items()
    except Exception as exc:  # noqa: BLE001
        return [f"{seg.name}: vectors or index unreadable ({exc})"]
    problems = []
    if len(vectors) != count or items != count:
        problems.append(f"{seg.name}: {len(vectors)} vectors and {items} indexed for {count} records")
    if recorded and vectors.shape[1] != recorded["dim"]:
        problems.append(
            f"{seg.name}: vectors of dimension {vectors.shape[1]}, the store's embedder makes {recorded['dim']}"
        )
    return problems


def _check_journal_vectors(path: Path, dim: int) -> list[str]:
    """Vectors in a journal made by another embedder than the recorded one (a writer that had not
    seen a reindex, or a reindex that was interrupted): not searchable until re-embedded."""
    wrong: set[int | str] = set()
    journal = Journal(path, 0)
    try:
        for op in journal.read_new():
            for rec in op.get("recs", ()) if isinstance(op.get("recs"), list) else ():
                vec = rec.get("vec") if isinstance(rec, dict) else None
                try:
                    size = len(decode_vector(vec)) if isinstance(vec, str) else dim
                except ValueError:
                    size = -1
                if size != dim:
                    wrong.add(size if size >= 0 else "unreadable")
    finally:
        journal.close()
    if not wrong:
        return []
    sizes = ", ".join(str(n) for n in sorted(wrong))
    return [f"{path.name}: vectors of dimension {sizes}, the store's embedder makes {dim}"]


def _bad_journal_lines(path: Path) -> int:
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    bad = 0
    for line in complete.splitlines():
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            bad += 1
    return bad


def _rebuild(engine: Engine, namespace: str, folder: Path) -> str | None:
    """A fresh checkpoint from the records (read through TinyDB, not the derived offsets) and
    the journals after it, with vectors and indexes made anew. A checkpoint whose records cannot
    be read is never taken for an empty one: it is moved aside (kept, as `damaged-seg-*`), the
    shard is rebuilt from the journals after it, and the loss is returned to be reported."""
    from .storage import read_all

    lost = None
    with checkpoint.building(folder) as held, engine.lock(namespace):
        if not held:
            return None
        segs, wals = listing(folder)
        base = segs[-1] if segs else 0
        docs: dict[str, Any] = {}
        if segs:
            data = folder / SEG.format(base) / "data.json"
            try:
                if not data.is_file():
                    raise FileNotFoundError(f"{data.name} is missing")
                docs = {d["id"]: dict(d) for d in read_all(data)}
            except Exception as exc:  # noqa: BLE001 - whatever broke it, its records are gone
                aside = folder / f"damaged-{SEG.format(base)}-{int(clock.now())}"
                os.rename(folder / SEG.format(base), aside)
                lost = f"{SEG.format(base)}: records unreadable ({exc}), moved to {aside.name}"
        for gen in (g for g in wals if g > base):
            for op in Journal(folder / WAL.format(gen), gen).read_new():
                for rec in op.get("recs", ()):
                    docs[rec["id"]] = rec["doc"]
                for rid in op.get("ids", ()):
                    docs.pop(rid, None)
        live = [d for d in docs.values() if (d.get("expires_at") or np.inf) > clock.now()]
        schema = SCHEMAS[orjson.loads((folder / DESCRIPTOR).read_bytes())["schema"]]
        vectors = engine.embed([schema.text(d) for d in live]) if schema.indexed and live else None
        _replace_checkpoint(folder, schema, live, vectors, engine.embedder.name)
    engine.close()
    return lost
