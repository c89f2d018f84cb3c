"""Store-wide commands: export, import, stats, namespaces, reindex, doctor, gc."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from .arguments import shown
from .context import state
from .errors import CliError, unreadable
from .options import Fields, Format, fields_list
from .output import emit, emit_one, note
from .progress import progress

namespaces_app = typer.Typer(help="List namespaces, or delete one.", no_args_is_help=False, invoke_without_command=True)
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", "-n", help="Only this namespace.")]
STATS_FIELDS = ("namespace", "kind", "scope", "entries", "bytes", "expired", "indexed", "pending")  # both backends'


def export(
    output: Annotated[str, typer.Option("--output", "-o", help="File to write (default: stdout).")] = "-",
    namespace: NamespaceOpt = None,
) -> None:
    """Write a lossless, diffable NDJSON dump (sorted lines, sorted keys; expired entries and
    working tiers left out). A file is written readable by its owner only, like the store; a
    --namespace the store does not have is exit 3 (no empty dump)."""
    from a2e_mem.errors import Damaged
    from a2e_mem.paths import private_output

    lines = state.service.export(namespace)
    if output == "-" or _is_stdout(output):  # /dev/stdout, /dev/fd/1: as the shell set it up (>>, pipes)
        try:
            for line in lines:
                sys.stdout.buffer.write(line + b"\n")
        finally:
            sys.stdout.buffer.flush()
        return
    with _terminated_exits(), private_output(output, keep_on=(Damaged,)) as out:  # a failed export keeps the old file
        for line in lines:
            out.write(line + b"\n")


@contextlib.contextmanager
def _terminated_exits() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C, exiting 128 + the signal (143,
    129), as a shell reports a tool they ended: by default they end the process on the spot,
    leaving the temporary file of `-o FILE` behind."""

    def exit_signalled(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    ended_by = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous = {signum: signal.getsignal(signum) for signum in ended_by}
    for signum, handler in previous.items():
        if handler != signal.SIG_IGN:  # a signal ignored by whoever started mem stays ignored (nohup)
            signal.signal(signum, exit_signalled)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _is_stdout(path: str) -> bool:
    """Whether `path` names the file this process's standard output is."""
    try:
        named, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return (named.st_dev, named.st_ino) == (out.st_dev, out.st_ino)


def import_(
    source: Annotated[str, typer.Argument(help="An export file, or - for stdin.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would change.")] = False,
    fmt: Format = None,
) -> None:
    """Read an export back (upsert): prints how many records are new, changed and unchanged."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        unreadable(shown(source), exc)
    with progress("importing") as update:
        lines = data.splitlines()
        update(0, len(lines))
        counts = state.service.import_records(lines, dry_run=dry_run)
        update(len(lines), len(lines))
    emit_one({**counts, "dry_run": dry_run}, fmt)


def stats(namespace: NamespaceOpt = None, fmt: Format = None, fields: Fields = None) -> None:
    """Entries, bytes, expired entries and index state, per namespace and kind."""
    rows = state.service.stats(namespace)
    emit(rows, fmt, fields_list(fields, STATS_FIELDS, rows))


@namespaces_app.callback()
def namespaces(ctx: typer.Context, fmt: Format = None) -> None:
    """List namespaces with their entries and bytes."""
    if ctx.invoked_subcommand is None:
        emit(state.service.namespaces(), fmt)


@namespaces_app.command("delete")
def delete_namespace(
    name: Annotated[str, typer.Argument(help="The namespace to delete, with everything in it.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a namespace and everything in it (asks first unless --yes). The working tier of a
    session held by a running server lives in that process, and goes when the session does."""
    if not yes:
        if not sys.stdin.isatty():
            raise CliError("refusing to delete without confirmation: pass --yes", 2)
        typer.confirm(f"Delete namespace {name!r} and everything in it?", abort=True, err=True)
    state.service.delete_namespace(name)
    note(f"deleted namespace {name!r}")


def reindex(
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="static, minilm or hash (default: configured).")
    ] = None,
    fmt: Format = None,
) -> None:
    """Re-embed every entry and rebuild the indexes (needed after changing the embedder)."""
    try:
        with _terminated_exits(), progress("reindexing shards") as update:
            result = state.service.reindex(embedder, update)
    except (KeyboardInterrupt, SystemExit) as exc:  # Ctrl-C, SIGTERM, SIGHUP: say what is left, then exit
        if not isinstance(exc, SystemExit) or exc.code not in (0, None):
            note(
                "reindex did not finish: shards not rebuilt yet keep vectors of the old embedder (searched by "
                "words only); run the same `mem reindex` again, or `mem doctor --repair`"
            )
        raise
    emit_one(result, fmt)


def doctor(
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Rebuild damaged shards from every readable record; restore descriptors."),
    ] = False,
    fmt: Format = None,
) -> None:
    """Verify every file of the store (checksums, journal lines, descriptors) and name each damaged
    one; exit 1 while a problem remains or when a repair lost data, 7 when the database cannot be
    reached."""
    findings = state.service.doctor(repair)
    emit(findings, fmt, columns=["where", "problem", "repair"])
    if any(f.get("unavailable") for f in findings):  # the database cannot be reached: exit 7, not 1
        raise typer.Exit(7)
    if not findings:
        note("store is healthy")
    elif repair and all(f["fixed"] and f["lost"] == 0 for f in findings):
        note("repaired, nothing lost")
    else:
        if repair:
            note("repaired what could be; see the findings for what was lost or remains")
        raise typer.Exit(1)


def gc(fmt: Format = None) -> None:
    """Checkpoint every shard now: fold journals into TinyDB files, rebuild indexes, purge expired entries.

    A checkpoint or merge already running in a shard is waited for; the report counts the shards
    rewritten, the merges run and the running builders waited for."""
    with progress("checkpointing") as update:
        update(0, 1)
        report = state.service.gc(progress=update)
    emit_one(report, fmt)
