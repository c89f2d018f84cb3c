"""Looking after a store: statistics, namespaces, re-embedding, and a health check.

- `stats`: per namespace and kind, live records and their bytes, expired records still on disk
  (until the next checkpoint purges them), and the index state: rows in the checkpoint (covered
  by the Annoy index) and records written since (searched exactly).
- `delete_namespace`: removes a namespace's folder under its lock.
- `reindex`: re-embeds every searchable shard with the chosen embedder and rebuilds its
  checkpoint, holding the namespace's lock for that shard, then records the embedder.
- `doctor`: verifies every file (every checksum of every checkpoint file, every journal line,
  the descriptors, store.json, owner-only permissions, vectors of the recorded embedder's
  dimension) and names each damaged file; `repair` rebuilds each damaged shard from every record
  that can still be read, restores lost descriptors from their copies, and says what was lost.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ... import clock
from ...embed import DEFAULT, decode_vector, get_embedder
from ...errors import Damaged, NotFound
from ...paths import digest, write_atomic
from ...schemas import SCHEMAS
from ...timefmt import iso
from . import checkpoint
from .engine import FORMAT, NAMESPACE, SYSTEM, Engine, namespace_name, shard_descriptor
from .integrity import (
    CHECKSUMS,
    MANIFEST,
    file_problem,
    lines_lost,
    read_manifest,
    read_sealed,
    scan_journal,
    seal,
)
from .journal import Journal
from .salvage import Salvage, read_checkpoint, salvage_shard
from .segment import expiry
from .shard import (
    DAMAGED,
    DESCRIPTOR,
    WAL,
    MissingCheckpoint,
    Shard,
    check_chain,
    foreign_header,
    listing,
    live_ranges,
    recorded_descriptor,
    scan,
    seg_name,
    segment_chain,
)

Progress = Callable[[int, int], None]


def _shards(engine: Engine, namespace: str | None = None) -> Iterator[tuple[str, dict, Path]]:
    for name, folder in engine.namespace_folders():
        if namespace is None or name == namespace:
            for descriptor, shard_folder in engine.shard_folders(folder):
                yield name, descriptor, shard_folder


def readable_docs(engine: Engine, folder: Path, now: float, damaged: list[str]) -> list[dict[str, Any]]:
    """The shard's live records; for a damaged shard, those that can still be read (its
    problem is added to `damaged`, as is a journal whose damaged lines were skipped)."""
    try:
        shard = engine.open_folder(folder)
        docs = list(shard.docs(now))
        damaged += [
            f"{journal.path} ({journal.skipped} damaged or out-of-sequence lines, skipped when read)"
            for journal in shard.journals
            if journal.skipped
        ]
        return docs
    except (Damaged, OSError) as exc:
        try:
            saved = salvage_shard(folder, shard_descriptor(folder) or recorded_descriptor(folder))
        except OSError as failure:  # the folder itself cannot be listed
            damaged.append(f"{failure.filename or folder} ({failure.strerror}): none of its records could be read")
            return []
        detail = exc.detail if isinstance(exc, Damaged) else {}
        named = str(detail.get("file") or "")
        if named:
            damaged.append(f"{named} ({detail.get('why', 'unreadable')})")
        damaged += [f"{path}: {why} (not read)" for path, why in saved.unread if path != named]
        if saved.lost is None or saved.lost or saved.bad_lines:
            lost = "an unknown number of" if saved.lost is None else saved.lost
            damaged.append(f"{folder}: {lost} records and {saved.bad_lines} journal lines could not be read")
        return [doc for doc in saved.docs.values() if expiry(doc) > now]


def stats(engine: Engine, namespace: str | None = None) -> list[dict[str, Any]]:
    now = clock.now()
    rows = []
    for name, descriptor, folder in _shards(engine, namespace):
        shard = engine.open_folder(folder)
        count, size = shard.usage(now)
        indexed, expired = _sealed_counts(shard, now)
        journalled = shard.mem_alive(now)
        pending = int(np.count_nonzero(journalled))  # live records not yet in a segment
        expired += len(journalled) - pending - len(shard.mem.free)
        rows.append({
            "namespace": name, "kind": descriptor["kind"], "scope": "/".join(descriptor.get("scope", [])),
            "entries": count, "bytes": size, "expired": expired, "indexed": indexed, "pending": pending,
        })  # fmt: skip
    return rows


def _sealed_counts(shard: Shard, now: float) -> tuple[int, int]:
    """(live, expired) records of the shard's segments: a record a newer segment shadows or
    deletes is neither (it was counted in both, so `indexed` could exceed `entries`)."""
    live = expired = 0
    for i in range(len(shard.segs)):
        alive = shard.part_alive(i, now)  # visible and not expired
        live += int(np.count_nonzero(alive))
        visible = ~shard.dead[i]
        if shard.tombs[i]:
            visible[np.fromiter(shard.tombs[i], dtype=np.int64)] = False
        expired += int(np.count_nonzero(visible & ~alive))
    return live, expired


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
    for namespace, _ in engine.namespace_folders():  # wait for the writes under way, made with the old one
        with engine.lock(namespace):
            pass
    targets = [(ns, d, f) for ns, d, f in _shards(engine) if _indexed(d)]
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


def _indexed(descriptor: dict[str, Any]) -> bool:
    """Whether a shard's records have vectors: every indexed schema's (entries, entities, and
    the LangGraph items), not a list of names that a new schema would miss."""
    schema = SCHEMAS.get(descriptor.get("schema", ""))
    return schema is not None and schema.indexed


def _replace_checkpoint(
    folder: Path,
    schema: Any,
    docs: list[dict],
    vectors: np.ndarray | None,
    embedder: str,
    descriptor: dict | None = None,
) -> None:
    """A new checkpoint holding exactly `docs`, covering every journal so far. The caller holds
    the shard's builder lock (`checkpoint.building`: no other build may run, nor remove our
    temporary folder) and then the namespace lock, and has read every journal; writers continue
    in a fresh journal."""
    segs, wals = listing(folder)
    gen = max([0, *segs, *wals]) + 1
    descriptor = descriptor or shard_descriptor(folder) or recorded_descriptor(folder)
    Journal.create(folder / WAL.format(gen + 1), gen + 1, descriptor)  # first: a segment never lands without it
    checkpoint.install_segment(folder, seg_name(1, gen), docs, vectors, schema, embedder, descriptor)
    checkpoint.remove_replaced(folder)
    (folder / checkpoint.STATE).unlink(missing_ok=True)


# -- doctor ---------------------------------------------------------------------------------
#
# A finding is {"where": a path relative to the store, "problem", "repair": what to do (or, with
# --repair, what was done), "fixed": bool, "lost": records and journal lines lost by the repair
# (None: unknown, a whole checkpoint was gone)}.

Finding = dict[str, Any]
REPAIR = "mem doctor --repair"


def doctor(engine: Engine, repair: bool = False) -> list[Finding]:
    """Verify the whole store: every checksum, every journal line, every descriptor (empty when
    healthy). With `repair`, each damaged shard is rebuilt from every record that can still be
    read (see `salvage.py`), lost descriptors are restored from their copies, and each finding
    says what was done and how much was lost."""
    findings = _check_permissions(engine.home, repair)
    findings += _check_store_file(engine, repair)
    for folder in sorted(p for p in (engine.home / "ns").glob("*") if p.is_dir()):
        try:
            findings += _check_namespace(engine, folder, repair)
        except OSError as exc:  # a namespace.json or shard.json that cannot be read, or replaced
            findings.append(_unreadable(engine, folder, exc))
    system = engine.namespace_dir(SYSTEM)  # the session registry: shards without a namespace.json
    for folder in sorted(p for p in system.glob("*") if p.is_dir()):
        descriptor = shard_descriptor(folder) or recorded_descriptor(folder)
        if descriptor is not None:
            findings += _check_shard(engine, SYSTEM, folder, descriptor, repair)
    return findings


def _finding(engine: Engine, path: Path, problem: str, repair: str = REPAIR, fixed: bool = False) -> Finding:
    where = str(path.relative_to(engine.home)) if path.is_relative_to(engine.home) else str(path)
    return {"where": where or ".", "problem": problem, "repair": repair, "fixed": fixed, "lost": 0}


def _check_permissions(home: Path, repair: bool) -> list[Finding]:
    """Files and folders others may read (made private with `repair`). The files of a build
    under way (inside its `tmp-*` folder, itself owner-only) are skipped: they are made
    owner-only before the folder is renamed into place. A file deleted while we look is not a
    finding."""
    everything = [home]
    for top, dirs, files in os.walk(home):  # unlike rglob, a folder deleted meanwhile is no error
        everything += [Path(top) / name for name in (*dirs, *files)]
    findings = []
    for path in everything:
        if any(part.startswith("tmp-") for part in path.relative_to(home).parts[:-1]):
            continue
        refused = None
        try:
            mode = os.stat(path).st_mode & 0o777
            if mode & 0o077 and repair:
                try:
                    os.chmod(path, mode & 0o700)
                except PermissionError as exc:  # another user's file: said, and the other repairs go on
                    refused = exc.strerror
        except FileNotFoundError:
            continue
        if mode & 0o077:
            done = f"not made private ({refused}): its owner must" if refused else "made private"
            findings.append({
                "where": str(path.relative_to(home)) or ".", "problem": f"readable by others ({oct(mode)})",
                "repair": done if repair else f"chmod go-rwx '{path}'", "fixed": repair and not refused, "lost": 0,
            })  # fmt: skip
    return findings


def _check_store_file(engine: Engine, repair: bool) -> list[Finding]:
    """store.json: readable and sealed, and present once the store has checkpoints with vectors
    (a store of key-value pairs only never embeds anything, so never records an embedder)."""
    path = engine.home / "store.json"
    try:
        if engine.recorded_embedder() is not None or engine.embedder_on_record() is None:
            return []
        problem = "missing (the store has checkpoints)"
    except Damaged as exc:
        problem = f"damaged: {exc.detail['why']}"
    if not repair:
        return [_finding(engine, path, problem, f"{REPAIR} (restores it from the checkpoints' records)")]
    name, dim = _embedder_on_record(engine)
    write_atomic(path, seal({"format": FORMAT, "embedder": name, "dim": dim}))
    engine._recorded = engine._embedder = None
    return [_finding(engine, path, problem, f"restored: embedder {name!r}, dimension {dim}", fixed=True)]


def _embedder_on_record(engine: Engine) -> tuple[str, int]:
    """The embedder the checkpoints record (`Engine.embedder_on_record`), else the configured one."""
    on_record = engine.embedder_on_record()
    if on_record is not None:
        return on_record
    embedder = get_embedder(engine.wanted_embedder or DEFAULT)
    return embedder.name, embedder.dim


def _check_namespace(engine: Engine, folder: Path, repair: bool) -> list[Finding]:
    """namespace.json (restored from the shards' descriptors, which hold the name), then each shard."""
    findings: list[Finding] = []
    shards = []
    for shard_folder in sorted(p for p in folder.iterdir() if p.is_dir()):
        descriptor = shard_descriptor(shard_folder) or recorded_descriptor(shard_folder)
        if descriptor is not None:
            shards.append((shard_folder, descriptor))
        elif any(listing(shard_folder)):
            problem = "shard.json missing or damaged, and no copy of it left: this data cannot be placed"
            findings.append(_finding(engine, shard_folder / DESCRIPTOR, problem, "restore it from a backup"))
    name = namespace_name(folder)
    if name is None and not shards and not findings:  # a deleted namespace keeps its lock file alone
        return []
    if name is None:
        named = [d.get("namespace") for _, d in shards]
        name = next((n for n in named if isinstance(n, str) and digest(n) == folder.name), None)
        if name is None:
            return [*findings, _finding(engine, folder / NAMESPACE, "missing or damaged, and no shard names it",
                                        "restore it from a backup")]  # fmt: skip
        if repair:
            write_atomic(folder / NAMESPACE, seal({"namespace": name}))
        done = f"restored: namespace {name!r}" if repair else f"{REPAIR} (restores {name!r} from the shards)"
        findings.append(_finding(engine, folder / NAMESPACE, "missing or damaged", done, fixed=repair))
    elif not _sealed(folder / NAMESPACE):  # right name, but its checksum is gone: seal it again
        if repair:
            write_atomic(folder / NAMESPACE, seal({"namespace": name}))
        done = "sealed again" if repair else f"{REPAIR} (writes it with its checksum)"
        findings.append(_finding(engine, folder / NAMESPACE, "no checksum (edited, or older than checksums)", done,
                                 fixed=repair))  # fmt: skip
    for shard_folder, descriptor in shards:
        findings += _check_shard(engine, name, shard_folder, descriptor, repair)
    return findings


def _sealed(path: Path) -> bool:
    try:
        read_sealed(path, sealed_only=True)
    except (OSError, Damaged):
        return False
    return True


def _check_shard(engine: Engine, namespace: str, folder: Path, descriptor: dict, repair: bool) -> list[Finding]:
    try:
        with checkpoint.building(folder, clean=repair) as held:  # no checkpoint replaces files meanwhile
            if not held:  # deleted meanwhile
                return []
            problems = _shard_problems(engine, folder, descriptor)
            failing = _failed_checkpoints(folder)
    except OSError as exc:  # a file this user cannot read, a folder in its place: not damage to rebuild
        return [_unreadable(engine, folder, exc)]
    findings = _report_shard(engine, namespace, folder, descriptor, problems, repair)
    return findings + _report_failing(engine, folder, failing, repair) if failing else findings


def _unreadable(engine: Engine, folder: Path, exc: OSError) -> Finding:
    """The finding for a shard with a file that cannot be read at all. `--repair` leaves it: the
    records may all be there, for another user or once what stands in its place is moved."""
    named = exc.filename2 or exc.filename  # a rename names its source first: the file it replaces is the second
    path = Path(named) if named else folder
    repair = "not repaired (its records may be intact): give this user access to it, or move what stands in its place"
    return {**_finding(engine, path, f"cannot be read: {exc.strerror}", repair), "lost": None}


def _failed_checkpoints(folder: Path) -> str | None:
    """What `checkpoint.state` says when the shard's last FAILING checkpoints or more failed (a
    full disk, a folder name Annoy cannot take; one failure, or a builder killed, is retried by
    the next and not reported): nothing is damaged, but the journal grows and deleted
    records stay on disk until one succeeds. Read under the builder lock, so no build under
    way is counted (a build records a failure until it succeeds)."""
    try:
        state = orjson.loads((folder / checkpoint.STATE).read_bytes())
        count, when = int(state["failures"]), float(state["at"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if count < FAILING:
        return None
    return (
        f"its last {count} checkpoint{'s' if count > 1 else ''} failed (the last at {iso(when)}): "
        "its journal grows and deleted records stay on disk until one succeeds"
    )


def _report_failing(engine: Engine, folder: Path, problem: str, repair: bool) -> list[Finding]:
    """The finding for failing checkpoints; with `repair`, one run now (and why it fails, if it does)."""
    where = folder / checkpoint.STATE
    if not repair:
        return [_finding(engine, where, problem, "mem doctor --repair (runs one now and says why it fails)")]
    try:
        engine.checkpoint_folder(folder, force=True, wait=True)
    except (OSError, Damaged) as exc:
        return [_finding(engine, where, problem, f"tried again, still failing: {exc}")]
    return [_finding(engine, where, problem, "checkpointed", fixed=True)]


def _shard_problems(engine: Engine, folder: Path, descriptor: dict) -> list[tuple[Path, str]]:
    """(file, problem) for everything wrong with the shard in `folder`."""
    problems: list[tuple[Path, str]] = []
    if shard_descriptor(folder) is None:
        problems.append((folder / DESCRIPTOR, "missing or damaged (copies are kept in checkpoints and journals)"))
    chain: list[tuple[int, int]] = []
    try:
        chain, wals = segment_chain(folder)
    except MissingCheckpoint as exc:
        problems.append((Path(exc.detail["file"]), f"{exc.detail['why']}: the segments after it remain, {GONE}"))
        ranges, wals = scan(folder)
        chain = live_ranges(ranges)
    base = chain[-1][1] if chain else 0
    try:
        check_chain(folder, base, wals)
    except MissingCheckpoint as exc:
        problems.append((Path(exc.detail["file"]), f"missing: the journals after it remain, {GONE}"))
    if base and (base + 1) not in wals:  # every checkpoint starts the journal after it before it lands
        problems.append((folder / WAL.format(base + 1), LOST_JOURNAL))
    dim = _recorded_dim(engine) if _indexed(descriptor) else None
    for gen in (g for g in wals if g > base):
        ops, bad = scan_journal(folder / WAL.format(gen))
        stranger = foreign_header(ops, descriptor)
        if stranger:  # none of its lines is this shard's: what this shard's journal held is gone
            problems.append((folder / WAL.format(gen), f"{stranger} {LOST_UNKNOWN}"))
            continue
        problems += [(folder / WAL.format(gen), f"line {n}: {why} (skipped when read)") for n, why in bad]
        if dim:
            problems += _check_journal_vectors(folder / WAL.format(gen), ops, dim)
    for kept in sorted(folder.glob(f"{DAMAGED}*")):
        count = lines_lost(scan_journal(kept)[1])
        problems.append((kept, f"kept aside by a checkpoint: {count} damaged or missing lines were not folded in"))
    for lo, hi in chain:
        problems += _check_checkpoint(engine, folder / seg_name(lo, hi), descriptor)
    return problems


FAILING = 2  # checkpoints of a shard that failed in a row before `mem doctor` reports it
LOST_JOURNAL = "missing: the writes acknowledged after the checkpoint are lost (how many is unknown)"
GONE = "its records are gone (how many is unknown)"  # a whole checkpoint is missing
LOST_UNKNOWN = "(not read: this shard's writes it stands for are lost, how many is unknown)"


def _report_shard(
    engine: Engine, namespace: str, folder: Path, descriptor: dict, problems: list[tuple[Path, str]], repair: bool
) -> list[Finding]:
    """The findings for a shard's problems; with `repair`, the shard rebuilt and what was lost."""
    if not problems:
        return []
    if not repair:  # what damage costs is known only once a repair has salvaged what can be read: `lost` null
        return [{**_finding(engine, path, problem), "lost": None} for path, problem in problems]
    saved = _repair_shard(engine, namespace, folder, descriptor)
    # what was lost is counted once, in the shard's own finding below (outside audit 33a: a file's
    # "lost": 0 beside the shard's 1 read as nothing lost)
    done = "rebuilt with its shard (what was lost: see the shard's finding)"
    findings = [_finding(engine, path, problem, done, fixed=True) for path, problem in problems]
    lost = None if saved.lost is None else saved.lost + saved.bad_lines
    what = f"{len(saved.docs)} records kept; lost: " + (
        f"every record of {Path(saved.missing).name} (how many is unknown; what it deleted or "
        "overwrote may be back in an older version)" if saved.missing else
        f"every record of {', '.join(Path(path).name for path, _ in saved.unread)} (how many is unknown)"
        if saved.unread else f"{saved.lost} of {saved.expected or 0} checkpointed records"
    ) + f", {saved.bad_lines} journal lines"  # fmt: skip
    lost_journal = [path.name for path, problem in problems if problem.startswith(LOST_JOURNAL)]
    if lost_journal:  # the journal after the last checkpoint is gone: what it held cannot be counted
        what += f"; every write of {', '.join(lost_journal)} (how many is unknown; what it deleted may be back)"
        lost = None
    if saved.untrusted_tombs:  # not applied: deleted records may be back, never live ones deleted
        what += "; damaged tombstones not applied (records they deleted may be back): " + ", ".join(
            Path(t).parent.name for t in saved.untrusted_tombs
        )
        lost = None
    label = "/".join(
        [namespace if namespace != SYSTEM else "(system)", descriptor.get("kind", "?"), *descriptor.get("scope", [])]
    )
    summary = _finding(engine, folder, f"shard {label} was damaged", f"rebuilt: {what}", fixed=True)
    summary["lost"] = lost
    return [*findings, summary]


def _recorded_dim(engine: Engine) -> int | None:
    try:
        recorded = engine.recorded_embedder()
    except Damaged:
        return None  # reported on its own
    return int(recorded["dim"]) if recorded else None


def _check_journal_vectors(path: Path, ops: list[dict[str, Any]], dim: int) -> list[tuple[Path, str]]:
    """Vectors in a journal made by another embedder than the recorded one (a writer that had not
    seen a reindex, or a reindex that was interrupted): not searchable until re-embedded."""
    wrong: set[int | str] = set()
    for op in ops:
        for rec in op.get("recs", ()) if isinstance(op.get("recs"), list) else ():
            vec = rec.get("vec") if isinstance(rec, dict) else None
            try:
                size = len(decode_vector(vec)) if isinstance(vec, str) else dim
            except ValueError:
                size = -1
            if size != dim:
                wrong.add(size if size >= 0 else "unreadable")
    if not wrong:
        return []
    sizes = ", ".join(str(n) for n in sorted(wrong, key=str))
    return [(path, f"vectors of dimension {sizes}, the store's embedder makes {dim}")]


def _check_checkpoint(engine: Engine, seg: Path, descriptor: dict) -> list[tuple[Path, str]]:
    """Every file against the manifest, or for an older checkpoint without one, the old checks."""
    try:
        manifest = read_manifest(seg)
    except Damaged:
        return [(seg / MANIFEST, "damaged (checksum mismatch): the files cannot be verified")]
    if manifest is None:
        return [(seg / MANIFEST, "missing (or written before checksums): the files cannot be verified"),
                *_check_legacy(seg, descriptor)]  # fmt: skip
    problems = []
    for name, entry in manifest["files"].items():
        problem = file_problem(seg, name, entry)
        if problem is not None:
            problems.append((seg / name, f"damaged: {problem}"))
    meta = manifest.get("meta") or {}
    try:
        recorded = engine.recorded_embedder()
    except Damaged:
        recorded = None  # reported on its own
    if recorded and meta.get("dim") and meta["dim"] != recorded["dim"]:
        problems.append((seg, f"vectors of dimension {meta['dim']}, the store's embedder makes {recorded['dim']}"))
    return problems


def _check_legacy(seg: Path, descriptor: dict) -> list[tuple[Path, str]]:
    """A checkpoint written before manifests: it parses, and its columns agree with it."""
    from .storage import read_all

    try:
        meta = orjson.loads((seg / "meta.json").read_bytes())
        count = sum(1 for _ in read_all(seg / "data.json"))
    except Exception as exc:  # noqa: BLE001 - any failure here is a finding
        return [(seg, f"checkpoint unreadable ({exc})")]
    problems = []
    if count != meta["count"]:
        problems.append((seg, f"{count} records but the columns say {meta['count']}"))
    if (seg / CHECKSUMS).exists():  # its manifest was lost, not its record checksums
        saved = Salvage()
        read_checkpoint(seg, saved)
        if saved.lost:
            problems.append((seg / "data.json", f"damaged: {saved.lost} records fail their checksum"))
    names = ["offsets", "hashes", "expires", "updated", "scores"]
    if _indexed(descriptor) and count:
        names.append("vectors")
    for name in names:
        try:
            length = len(np.load(seg / f"{name}.npy", mmap_mode="r"))
        except Exception as exc:  # noqa: BLE001
            problems.append((seg / f"{name}.npy", f"unreadable ({exc})"))
            continue
        if length != count:
            problems.append((seg / f"{name}.npy", f"{length} rows for {count} records"))
    return problems


def _repair_shard(engine: Engine, namespace: str, folder: Path, descriptor: dict) -> Salvage:
    """A fresh checkpoint of every record that can be read (the derived files and indexes made
    anew), replacing every checkpoint and journal of the shard; `shard.json` restored."""
    # the builder lock first (as every builder takes it), then the namespace lock, which also
    # restores namespace.json if it is missing
    with checkpoint.building(folder) as held, engine.lock(namespace):
        if not held:  # deleted meanwhile (a namespace delete): nothing to bring back
            return Salvage()
        saved = salvage_shard(folder, descriptor)
        write_atomic(folder / DESCRIPTOR, seal(descriptor))
        now = clock.now()
        live = [d for d in saved.docs.values() if expiry(d) > now]
        schema = SCHEMAS[descriptor["schema"]]
        vectors = engine.embed([schema.text(d) for d in live]) if schema.indexed and live else None
        _replace_checkpoint(folder, schema, live, vectors, engine.embedder.name, descriptor)
        for kept in folder.glob(f"{DAMAGED}*"):  # counted as lost by the salvage
            kept.unlink()
    engine.close()
    return saved
