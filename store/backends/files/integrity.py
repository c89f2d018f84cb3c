"""Checksums on everything written, and reading what survives when something was damaged.

Like the blocks and log records of LevelDB, every file `mem` writes can tell whether it is still
what was written:

- A sealed JSON object (a journal line, `manifest.json`, `shard.json`, `namespace.json`,
  `store.json`) ends with its own checksum as one more key: `{...,"crc":"<16 hex>"}`. The
  checksum is the xxh3-64 of the object as written without that key, so a line stays readable
  JSON for people and older versions, and one changed byte anywhere is detected.
- A checkpoint folder carries `manifest.json`, written last: every file's size and xxh3-64. A
  reader checks every size and the small files' checksums when it opens the checkpoint, and the
  big files' when it first uses them (see `segment.py`): `data.json` record by record against
  the `checksums.npy` column, the vectors on first read, the Annoy index before it is loaded. A
  file an earlier process verified in full and that has not changed since (same size, times,
  inode: `stamps.py`) is not hashed again.

xxh3 (the `xxhash` package) rather than `zlib.crc32`: it is ten times faster on large files,
which matters because the Annoy index must be verified before it is loaded (random bytes in it
crash the process inside Annoy) and the CLI opens checkpoints on every call.

When a file is damaged, `salvage_records` recovers every intact record of a checkpoint file by
scanning it record by record, so `mem doctor --repair` and `mem export` keep what can be read.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import xxhash

from ...errors import Damaged

SEAL = b',"crc":"'
_SEALED_TAIL = len(SEAL) + 16 + 2  # ,"crc":"<16 hex>"}
MANIFEST = "manifest.json"
CHECKSUMS = "checksums.npy"  # one xxh3-64 per record of data.json, row order


def checksum(data: bytes | memoryview | mmap.mmap) -> str:
    return xxhash.xxh3_64_hexdigest(data)


def record_checksum(data: bytes | memoryview) -> int:
    return xxhash.xxh3_64_intdigest(data)


def file_checksum(path: Path) -> str:
    """xxh3-64 of a whole file, through a memory map (no copy of a large file)."""
    with open(path, "rb") as f:
        if not os.fstat(f.fileno()).st_size:
            return checksum(b"")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return checksum(view)


# -- sealed JSON objects ---------------------------------------------------------------------


def seal(obj: dict[str, Any]) -> bytes:
    """`obj` as one line of JSON (no newline) ending with its checksum."""
    payload = orjson.dumps(obj)
    assert len(payload) > 2, "an empty object cannot be sealed"
    return payload[:-1] + SEAL + checksum(payload).encode() + b'"}'


def unseal(line: bytes) -> tuple[bytes, bool | None]:
    """(payload, verdict): True when the checksum holds, False when it does not, None when the
    line carries no checksum (written by a version before checksums)."""
    if len(line) > _SEALED_TAIL and line[-_SEALED_TAIL : -_SEALED_TAIL + len(SEAL)] == SEAL and line.endswith(b'"}'):
        payload = line[:-_SEALED_TAIL] + b"}"
        return payload, checksum(payload).encode() == line[-18:-2]
    return line, None


def read_sealed(path: Path, required: dict[str, type] | None = None, sealed_only: bool = False) -> dict[str, Any]:
    """A sealed JSON file, checked: raises FileNotFoundError if absent and `Damaged` (naming the
    file) if its checksum fails, it does not parse, or a `required` key is missing or of another
    type. Unsealed files (older versions) are accepted unless `sealed_only`."""
    raw = path.read_bytes().strip()
    payload, verdict = unseal(raw)
    if verdict is False or (verdict is None and sealed_only):
        raise damaged(path, "checksum mismatch")
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise damaged(path, "not JSON") from None
    for key, kind in (required or {}).items():
        if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
            raise damaged(path, f"no valid {key!r}")
    return obj


def damaged(path: Path, why: str) -> Damaged:
    """The error for a damaged file: names it, says why, and what to run."""
    return Damaged(f"{path} is damaged ({why}): run `mem doctor --repair`", {"file": str(path), "why": why})


# -- journal lines ---------------------------------------------------------------------------


def check_op(op: Any) -> str | None:
    """Why `op` is not a well-formed journal operation, or None if it is."""
    if not isinstance(op, dict):
        return "not an object"
    kind = op.get("op")
    if kind == "put":
        recs = op.get("recs")
        if not isinstance(recs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("id"), str) and isinstance(r.get("doc"), dict) for r in recs
        ):
            return "a put without valid records"
    elif kind == "del":
        ids = op.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return "a delete without valid ids"
    elif kind == "shard":
        if not isinstance(op.get("shard"), dict):
            return "a header without a shard descriptor"
    else:
        return "an unknown operation"
    return None


def parse_line(line: bytes, sealed: bool) -> tuple[dict[str, Any] | None, str | None, bool]:
    """(op, problem, sealed): the operation on one journal line, or why it was rejected. `sealed`
    says whether an earlier line of the journal carried a checksum: from then on every line
    must (a line whose checksum marker itself was damaged is caught that way). Spaces around the
    line are not part of it (a writer puts none there)."""
    payload, verdict = unseal(line.strip())
    if verdict is False:
        return None, "checksum mismatch", True
    if verdict is None and sealed:
        return None, "no checksum", True
    try:
        op = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None, "not JSON", sealed
    problem = check_op(op)
    return (None if problem else op), problem, sealed or bool(verdict)


class LineOrder:
    """The numbers journal lines carry (`"line"`, see `journal.py`), checked as a journal is read.
    Healthy, they are 1, 2, 3... in file order (lines of older versions carry none and count one
    each). A number read before is a repeat: applying it again could bring back a record deleted
    since, so it is skipped. The header (no number) is line 1 whatever comes before it: garbage
    put in front of it made every line look like a repeat (an outside audit). A number past the
    count leaves a gap (less the unreadable lines since the last readable one, which held those
    numbers); lines after it may fill it (then the line past the gap was out of place, and
    nothing is lost), so what is missing is only known at the end of the file (`gap_problems`)."""

    def __init__(self) -> None:
        self.expected = 1  # the number the next line should carry
        self.unreadable = 0  # lines since the last readable one that could not be read
        self.holes: set[int] = set()  # numbers a gap skipped that no line has filled yet (none when healthy)
        self.gaps: list[tuple[int, range]] = []  # (where a gap was seen, the numbers it skipped)

    def next_number(self) -> int:
        """The number of a line appended after every line read so far."""
        return self.expected + self.unreadable

    def check(self, op: dict[str, Any] | None, where: int) -> OutOfSequence | None:
        """How the line `where` holding `op` (None: unreadable) is out of sequence, or None."""
        number = op.get("line") if op is not None else None
        if op is None:
            self.unreadable += 1
            return None
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:  # the header, or an older line
            header = op.get("op") == "shard" and self.expected == 1  # before any other readable line
            self.expected, self.unreadable = (2 if header else self.next_number() + 1), 0
            return None
        if number < self.expected and number not in self.holes:
            return OutOfSequence("repeat", f"{REPEATED} (it says it is line {number}): skipped")
        if number < self.expected:  # fills a gap: the line past it was the one out of place
            self.holes.discard(number)
            return None
        skipped = range(self.next_number(), number)
        self.expected, self.unreadable = number + 1, 0
        if not skipped:  # in sequence, or after lines that could not be read (which held the numbers)
            return None
        self.holes.update(skipped)
        self.gaps.append((where, skipped))
        return OutOfSequence("gap", f"{len(skipped)} lines before it are missing or out of place")

    def gap_problems(self) -> list[tuple[int, str]]:
        """(where, problem) for each gap, once the whole file is read: the lines no later line
        filled are missing; a gap later lines filled whole was a line moved ahead of them."""
        problems = []
        for where, numbers in self.gaps:
            missing = sum(n in self.holes for n in numbers)
            if missing:
                problems.append((where, f"{missing} {MISSING_LINES}"))
            else:
                problems.append((where, f"{MOVED} ({len(numbers)} lines numbered before it come after it): applied"))
        return problems


@dataclass(frozen=True)
class OutOfSequence:
    """A journal line out of sequence: a `repeat` (skipped), or after a `gap`."""

    kind: str
    text: str


def complete_lines(data: bytes) -> list[bytes]:
    """The lines of `data` that end with a newline. Only b"\\n" ends a line: a stray b"\\r" in a
    damaged line must not split it in two (`bytes.splitlines` would)."""
    return data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]


def intact_tail(data: bytes) -> bytes | None:
    """The bytes after the last newline of `data` when they are a whole sealed operation (its
    checksum holds): a line that lost only its newline (a final byte cut off the file, an editor
    that strips it), not the remains of a writer that died mid-line, which fail the checksum or
    stop before it. Such a line is read as a complete one rather than dropped: it may be an
    acknowledged write. None otherwise."""
    tail = data[data.rfind(b"\n") + 1 :]
    if not tail.strip():
        return None
    payload, verdict = unseal(tail.strip())
    if verdict is not True:
        return None
    try:
        op = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return tail if isinstance(op, dict) and check_op(op) is None else None


def whole_lines(data: bytes) -> list[bytes]:
    """`complete_lines`, and the last line if it lost only its newline (`intact_tail`)."""
    tail = intact_tail(data)
    return complete_lines(data) + ([tail] if tail is not None else [])


def is_blank(line: bytes) -> bool:
    """Whether a journal line holds nothing but spaces: no operation was written there (one that
    was, then lost, leaves the next line's number past the count: a gap), so it is passed over."""
    return not line.strip()


MISSING_LINES = "lines before it are missing"
REPEATED = "repeats an earlier line"
MOVED = "is out of place"
HEADER = "the header (a copy of shard.json, no write)"  # a damaged first line that held it


def lines_lost(bad: list[tuple[int, str]]) -> int:
    """How many journal lines `scan_journal`'s `bad` stands for: one a damaged line, the count of
    each gap, none a repeat or a moved line (read once, in the wrong place) or the header."""
    return sum(
        int(why.split()[0]) if MISSING_LINES in why else 0 if REPEATED in why or MOVED in why or HEADER in why else 1
        for _, why in bad
    )


def scan_journal(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """Every valid operation of a journal file, and (line number, problem) of each bad line and
    of each line out of sequence (`LineOrder`: lines missing before it, a moved line, or a repeat,
    skipped). A torn last line (no newline) is not counted: writers cut it off; a last line that
    lost only its newline is read (`intact_tail`)."""
    data = path.read_bytes()
    ops: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    sealed = False
    order = LineOrder()
    for number, line in enumerate(whole_lines(data), 1):
        if is_blank(line):
            continue
        op, problem, sealed = parse_line(line, sealed)
        out_of_sequence = order.check(op, number)
        if out_of_sequence and out_of_sequence.kind == "repeat":  # a gap: once the whole file is read
            bad.append((number, out_of_sequence.text))
        if op is None:
            header = number == 1 and b'"op":"shard"' in line  # its damage loses no write
            bad.append((number, f"{problem or 'unreadable'}: {HEADER}" if header else problem or "unreadable"))
        elif not (out_of_sequence and out_of_sequence.kind == "repeat"):
            op.pop("line", None)
            ops.append(op)
    bad += order.gap_problems()
    return ops, sorted(bad)


# -- checkpoint manifests ----------------------------------------------------------------------


def write_manifest(folder: Path, extra: dict[str, Any]) -> None:
    """List every file of `folder` with its size and checksum, in `manifest.json` (written last)."""
    files = {
        path.name: {"size": path.stat().st_size, "xxh3": file_checksum(path)}
        for path in sorted(folder.iterdir())
        if path.name != MANIFEST
    }
    (folder / MANIFEST).write_bytes(seal({"format": 2, "files": files, **extra}))


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The checkpoint's manifest; None if it has none (written before checksums existed)."""
    try:
        return read_sealed(folder / MANIFEST, {"files": dict}, sealed_only=True)
    except FileNotFoundError:
        return None


def file_problem(folder: Path, name: str, entry: dict[str, Any], full: bool = True) -> str | None:
    """What is wrong with file `name` of a checkpoint according to its manifest entry (size
    only unless `full`), or None."""
    try:
        size = (folder / name).stat().st_size
    except FileNotFoundError:
        return "missing"
    problem = size_problem(size, entry)
    if problem is None and full and file_checksum(folder / name) != entry.get("xxh3"):
        return "checksum mismatch"
    return problem


def size_problem(size: int, entry: dict[str, Any]) -> str | None:
    """What is wrong with a checkpoint file of `size` bytes by its manifest entry's size, or None."""
    return None if size == entry.get("size") else f"{size} bytes where {entry.get('size')} were written"


# -- salvaging records -------------------------------------------------------------------------

_RECORD_START = re.compile(rb'[{,]?"(\d+)":(?=\{)')


def scan_records(data: bytes) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """(doc id, bytes, record) of every record of a checkpoint file that still parses, however
    the file was cut or overwritten, or bytes put between its records. A record of a TinyDB
    table is `"<doc id>":{...}`, preceded by `{` or `,` unless bytes were put there; such a marker
    cannot occur inside a JSON string (its second quote would end it), only in a nested object,
    so each candidate is parsed up to one of the next few markers, the first end that parses is
    taken, and the markers inside the record taken are passed over."""
    found_at = list(_RECORD_START.finditer(data))
    marks = [m.start() for m in found_at]
    ends = [*marks[1:], len(data)]
    i = 0
    while i < len(found_at):
        body, doc_id = found_at[i].end(), int(found_at[i][1])
        for j in range(i, min(i + 8, len(found_at))):
            found = _loads_record(data[body : ends[j]])
            if found is not None:
                yield doc_id, *found
                i = bisect.bisect_left(marks, body + len(found[0])) - 1  # the next marker after it
                break
        i += 1


def _loads_record(chunk: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """The record in `chunk` (its exact bytes, and it parsed), which may be followed by the
    table's and the file's closing braces, or by anything else (bytes written past the end)."""
    for cut in (chunk, chunk[:-1], chunk[:-2], _first_value(chunk)):
        try:
            doc = orjson.loads(cut)
        except orjson.JSONDecodeError:
            continue
        return (cut, doc) if isinstance(doc, dict) and isinstance(doc.get("id"), str) else None
    return None


def _first_value(chunk: bytes) -> bytes:
    """The bytes of the JSON value `chunk` starts with, whatever follows it (b"" if none): the
    last record of a file with bytes appended runs to the end of the file. Bytes that are not
    UTF-8 map to one character each (surrogateescape), so the value's length in characters
    gives back its bytes."""
    text = chunk.decode("utf-8", "surrogateescape")
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return b""
    return text[:end].encode("utf-8", "surrogateescape")
