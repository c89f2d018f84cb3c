"""Safety under load: concurrent writers, SIGKILLs, and a fuzzed wire, counted, against targets.

    python bench/bench_safety.py                 # 16 writers x 500, 60 kills, 5000 wire cases
    python bench/bench_safety.py --quick         # a smoke run of each part
    python bench/bench_safety.py --writers 32 --writes 1000 --kills 200 --fuzz 50000 --seed 7

(a) concurrency: writers of three kinds store into the semantic tier of one namespace at once
    (`mem store` commands, one entry or an NDJSON batch each; library loops over
    `MemoryService.store`; `mem serve-stdio` servers), with small journals so that checkpoints
    interleave. A `serve-stdio` started first keeps retrieving during the run. Afterwards every
    acknowledged entry must be there (fresh process and long-lived server), every checkpoint must
    open with TinyDB and every complete journal line must parse.
(b) crash: writers (library loops and `serve-stdio` servers) and checkpoint processes are killed
    with SIGKILL at random moments; after each kill the store must open and hold every write
    acknowledged before it.
(c) fuzz: seeded random lines (random bytes, invalid UTF-8, over-long and deeply nested lines,
    wrong types, unknown types, bad versions, valid memory messages) through one real
    `mem serve-stdio`: one reply per non-blank line, the right error codes, valid messages
    doing what they should, no crash, bounded memory.
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, StdioClient, env_for, mem_cmd, sentence  # noqa: E402

NS = "safety"
TARGETS = {
    "lost writes": "== 0",
    "lost in long-lived server": "== 0",
    "corrupt files": "== 0",
    "writer errors": "== 0",
    "reader errors": "== 0",
    "acknowledged then lost": "== 0",
    "stores that failed to open": "== 0",
    "replies != non-blank lines": "== 0",
    "wrong answers": "== 0",
    "server crashes": "== 0",
}

LIBRARY_WRITER = """
import sys
from a2e_mem.service import MemoryService
worker, count, namespace, agent, tiers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
svc = MemoryService()
scope = svc.scope(namespace, agent)
tiers = tiers.split(",")
i = 0
while count < 0 or i < count:  # a negative count: until killed
    key = {"w": worker, "i": str(i)}
    content = f"library note {worker} {i} " + "padding " * (i % 40)  # varied line sizes
    out = svc.store(scope, [{"key": key, "content": content, "tier": tiers[i % len(tiers)]}])
    assert out["stored"] == [key], out
    print(i, flush=True)  # acknowledged
    i += 1
"""


def writer_env(home: Path, args: argparse.Namespace) -> dict[str, str]:
    return env_for(
        home,
        MEM_CHECKPOINTS=args.checkpoints,
        MEM_CHECKPOINT_BYTES=str(args.checkpoint_bytes),
        MEM_LOG="error",
    )


def files_corrupt(home: Path) -> int:
    """Checkpoints TinyDB cannot open, plus complete journal lines that are not JSON objects."""
    from tinydb import TinyDB

    bad = 0
    for path in home.rglob("seg-*/data.json"):
        try:
            db = TinyDB(path, access_mode="r")
            db.table("records").all()
            db.close()
        except Exception:  # noqa: BLE001 - counted, not raised
            bad += 1
    for path in home.rglob("wal-*.ndjson"):
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            try:
                bad += not isinstance(orjson.loads(line), dict)
            except orjson.JSONDecodeError:
                bad += 1
    return bad


def key_list(keys: set[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"w": w, "i": i} for w, i in sorted(keys)]


def count_present(home: Path, namespace: str, keys: set[tuple[str, str]]) -> int:
    """How many of `keys` a fresh process finds in the namespace (semantic, and bench's episodic)."""
    from a2e_mem.service import MemoryService

    if not keys:
        return 0
    svc = MemoryService(home)
    try:
        return svc.retrieve(svc.scope(namespace, "bench"), keys=key_list(keys), limit=1)["total"]
    finally:
        svc.close()


# -- (a) concurrency ------------------------------------------------------------------------------


def report(worker: str, output: str | bytes) -> None:
    """The last line of a failed writer's output, on stderr: the table only counts failures."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    lines = text.strip().splitlines()
    print(f"# writer {worker} failed: {lines[-1][:300] if lines else '(no output)'}", file=sys.stderr, flush=True)


def library_writer(home: Path, args: argparse.Namespace, worker: str) -> tuple[set, int]:
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY_WRITER, worker, str(args.writes), NS, worker, "semantic"],
        capture_output=True,
        env=writer_env(home, args),
        cwd=ROOT,
    )
    acked = {(worker, x.decode()) for x in out.stdout.splitlines()}
    if out.returncode:
        report(worker, out.stderr)
    return acked, int(out.returncode != 0)


def stdio_writer(home: Path, args: argparse.Namespace, worker: str) -> tuple[set, int]:
    client = StdioClient(home, **writer_env(home, args))
    acked, errors = set(), 0
    try:
        mid = client.call("memory/init/req", namespace=NS, scope={"agent": worker})["memory_id"]
        for i in range(args.writes):
            key = {"w": worker, "i": str(i)}
            entry = {"key": key, "content": f"wire note {worker} {i}", "tier": "semantic"}
            try:
                if client.call("memory/store/req", memory_id=mid, entries=[entry])["stored"] == [key]:
                    acked.add((worker, str(i)))
            except RuntimeError as exc:
                report(worker, str(exc))
                errors += 1
    finally:
        client.close()
    return acked, errors + int(client.proc.returncode != 0)


def shell_writer(home: Path, args: argparse.Namespace, worker: str) -> tuple[set, int]:
    """Five `mem store` commands of one entry, the rest as `mem store -` batches of 25."""
    acked, errors, env = set(), 0, writer_env(home, args)
    singles = min(5, args.writes)
    for i in range(singles):
        cmd = mem_cmd("store", "-n", NS, "-a", worker, "-t", "semantic", "-k", f"w={worker}", "-k", f"i={i}", f"n {i}")
        out = subprocess.run(cmd, capture_output=True, env=env)
        errors += out.returncode != 0
        if out.returncode:
            report(worker, out.stderr)
        acked |= {(r["key"]["w"], r["key"]["i"]) for r in map(orjson.loads, out.stdout.splitlines())}
    for start in range(singles, args.writes, 25):
        batch = [
            {"key": {"w": worker, "i": str(i)}, "content": f"batch note {worker} {i}", "tier": "semantic"}
            for i in range(start, min(start + 25, args.writes))
        ]
        body = b"".join(orjson.dumps(e) + b"\n" for e in batch)
        out = subprocess.run(mem_cmd("store", "-", "-n", NS, "-a", worker), input=body, capture_output=True, env=env)
        errors += out.returncode != 0
        if out.returncode:
            report(worker, out.stderr)
        acked |= {(r["key"]["w"], r["key"]["i"]) for r in map(orjson.loads, out.stdout.splitlines()) if r["stored"]}
    return acked, errors


def concurrency(base: Path, args: argparse.Namespace) -> dict[str, float]:
    home = base / "concurrency"
    reader = StdioClient(home, **writer_env(home, args))
    reader_mid = reader.call("memory/init/req", namespace=NS, scope={"agent": "reader"})["memory_id"]
    stop, reader_errors, totals = threading.Event(), [0], [0]

    def watch() -> None:  # retrieve again and again: never an error, never fewer entries
        while not stop.is_set():
            try:
                total = reader.call("memory/retrieve/req", memory_id=reader_mid, tier="semantic", limit=1)["total"]
                reader_errors[0] += total < totals[-1]
                totals.append(total)
            except RuntimeError:
                reader_errors[0] += 1
            time.sleep(0.1)

    kinds = itertools.cycle([shell_writer, library_writer, stdio_writer, library_writer, stdio_writer])
    writers = [(next(kinds), f"w{n}") for n in range(args.writers)]
    watcher = threading.Thread(target=watch)
    watcher.start()
    start = time.perf_counter()
    with ThreadPoolExecutor(len(writers)) as pool:
        results = list(pool.map(lambda w: w[0](home, args, w[1]), writers))
    wall = time.perf_counter() - start
    stop.set()
    watcher.join()
    acked = set().union(*(r[0] for r in results))
    seen = reader.call("memory/retrieve/req", memory_id=reader_mid, keys=key_list(acked), limit=1)["total"]
    reader.close()
    gens = [int(p.name[4:12]) for p in home.rglob("*") if p.name.startswith(("seg-", "wal-"))]
    return {
        "writers": args.writers,
        "writes acknowledged": len(acked),
        "writes expected": args.writers * args.writes,
        "lost writes": len(acked) - count_present(home, NS, acked),
        "lost in long-lived server": len(acked) - seen,
        "corrupt files": files_corrupt(home),
        "writer errors": sum(r[1] for r in results),
        "reader errors": reader_errors[0],
        "reader retrieves": len(totals) - 1,
        "checkpoint generations": max(gens, default=0),
        "wall s": wall,
        "acknowledged writes/s": len(acked) / wall,
    }


# -- (b) crash ------------------------------------------------------------------------------------


def kill_library_writer(home: Path, args: argparse.Namespace, run: int, rng: random.Random) -> set:
    proc = subprocess.Popen(
        [sys.executable, "-c", LIBRARY_WRITER, f"k{run}", "-1", "crash", "bench", "episodic,semantic"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=writer_env(home, args),
        cwd=ROOT,
    )
    assert proc.stdout
    first = proc.stdout.readline()
    time.sleep(rng.uniform(0, 0.5))
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait()
    return {(f"k{run}", x.decode()) for x in (first + rest).split(b"\n")[:-1]}


def kill_stdio_writer(home: Path, args: argparse.Namespace, run: int, rng: random.Random) -> set:
    """A server storing as fast as its client asks, killed from a timer mid-stream."""
    client = StdioClient(home, **writer_env(home, args))
    acked: set = set()
    timer = threading.Timer(rng.uniform(0.3, 0.8), client.proc.send_signal, (signal.SIGKILL,))
    timer.start()  # the server takes ~0.3 s to start: most kills land in the stores
    try:
        mid = client.call("memory/init/req", namespace="crash", scope={"agent": "bench"})["memory_id"]
        for i in itertools.count():
            key = {"w": f"k{run}", "i": str(i)}
            entry = {"key": key, "content": f"wire note {run} {i}", "tier": "episodic" if i % 2 else "semantic"}
            client.call("memory/store/req", memory_id=mid, entries=[entry])
            acked.add((f"k{run}", str(i)))  # a reply came back: acknowledged
    except (orjson.JSONDecodeError, OSError):
        pass  # killed: the request in flight was not acknowledged
    finally:
        timer.join()
        client.proc.wait()
    return acked


def kill_checkpoint(home: Path, args: argparse.Namespace, folder: Path, rng: random.Random) -> None:
    """A checkpoint process killed once its temporary folder exists (mid-build), or earlier."""
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)  # one more write, so that the checkpoint has work to do
    more = {"key": {"w": "big", "i": uuid.uuid4().hex}, "content": "one more", "tier": "semantic"}
    svc.store(svc.scope("big", "bench"), [more])
    svc.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.backends.files.checkpoint", str(home), str(folder)], env=env_for(home)
    )
    if rng.random() < 0.7:
        deadline = time.monotonic() + 60
        while not any(folder.glob("tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.1))
    else:
        time.sleep(rng.uniform(0, 1.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def crash(base: Path, args: argparse.Namespace) -> dict[str, float]:
    from a2e_mem.service import MemoryService

    home = base / "crash"
    rng = random.Random(args.seed)
    svc = MemoryService(home)
    big = [{"key": {"w": "big", "i": str(i)}, "content": sentence(rng), "tier": "semantic"} for i in range(args.big)]
    svc.store(svc.scope("big", "bench"), big)
    svc.close()
    (big_folder,) = {p.parent for p in home.rglob("wal-*.ndjson")}
    acked: set = set()
    big_count = args.big
    counts = {"kills": 0, "kills mid-checkpoint": 0, "acknowledged then lost": 0, "stores that failed to open": 0}
    start = time.perf_counter()
    for run in range(args.kills):
        temporary = set(home.rglob("tmp-*"))
        if run % 5 == 4:
            kill_checkpoint(home, args, big_folder, rng)
            big_count += 1
        elif run % 5 == 3:
            acked |= kill_stdio_writer(home, args, run, rng)
        else:
            acked |= kill_library_writer(home, args, run, rng)
        counts["kills"] += 1
        counts["kills mid-checkpoint"] += bool(set(home.rglob("tmp-*")) - temporary)
        try:
            lost = len(acked) - count_present(home, "crash", acked)
            counts["acknowledged then lost"] = max(counts["acknowledged then lost"], lost)
            svc = MemoryService(home)
            counts["stores that failed to open"] += (
                svc.retrieve(svc.scope("big", "bench"), limit=1)["total"] != big_count
            )
            svc.close()
        except Exception as exc:  # noqa: BLE001 - counted, not raised
            print(f"# kill {run}: the store failed to open: {exc!r}", file=sys.stderr)
            counts["stores that failed to open"] += 1
    counts["corrupt files"] = files_corrupt(home)
    svc = MemoryService(home)
    svc.checkpoint(force=True)  # and a full checkpoint afterwards keeps everything
    svc.close()
    lost = len(acked) - count_present(home, "crash", acked)
    counts["acknowledged then lost"] = max(counts["acknowledged then lost"], lost)
    counts["writes acknowledged before kills"] = len(acked)
    counts["wall s"] = time.perf_counter() - start
    return counts


# -- (c) fuzz -------------------------------------------------------------------------------------

FUZZ_LIMIT = 65536
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80"]
WRONG = [
    ("memory/retrieve/req", "limit", "10"),
    ("memory/retrieve/req", "limit", -1),
    ("memory/retrieve/req", "min_score", 2),
    ("memory/retrieve/req", "tags", [5]),
    ("memory/retrieve/req", "tier", "cosmic"),
    ("memory/store/req", "entries", "x"),
    ("memory/store/req", "memory_id", 5),
    ("memory/forget/req", "tier", ""),
    ("memory/init/req", "namespace", "nul\x00"),
    ("memory/init/req", "namespace", "n" * 1025),
    ("memory/init/req", "scope", []),
    ("handshake/req", "agent_caps", "x"),
    ("ping", "ts", "yesterday"),
]
KINDS = ["ping", "handshake/req", "shutdown", "memory/init/req", "memory/store/req", "memory/retrieve/req"]


class Fuzzer:
    """Seeded random lines, each with the answer it must get; a model of the session's entries."""

    def __init__(self, rng: random.Random, memory_id: str) -> None:
        self.rng, self.mid, self.n = rng, memory_id, 0
        self.model: dict[tuple[str, str], object] = {}

    def msg(self, kind: str, **fields) -> tuple[str, bytes]:
        self.n += 1
        rid = f"f{self.n}"
        return rid, orjson.dumps({"type": kind, "id": rid, "version": "1.0", "ts": 0.0, **fields})

    def case(self) -> tuple[bytes, dict | None]:
        r = self.rng
        pick = r.randrange(14)
        if pick == 0:  # random bytes, no newline
            raw = bytes(r.randrange(256) for _ in range(r.randrange(200))).replace(b"\n", b"")
            return raw, self.classify(raw)
        if pick == 1:
            raw = b'{"type": "ping", "id": "' + r.choice(BAD_UTF8) + b'"}'
            return raw, {"type": "error", "code": "parse_error", "req_id": ""}
        if pick == 2:
            raw = r.choice([b"x", b" ", b"[", b"{"]) * (FUZZ_LIMIT + r.randrange(1, 4 * FUZZ_LIMIT))
            return raw, {"type": "error", "code": "invalid_message", "req_id": ""}
        if pick == 3:
            depth = r.randrange(1, 20000)
            raw = b"[" * depth + (b"]" * depth if r.random() < 0.5 else b"")
            return raw, self.classify(raw)
        if pick == 4:
            value = r.choice([[1, 2], 3, 4.5, "text", True, None, []])
            return orjson.dumps(value), {"type": "error", "code": "invalid_message", "req_id": ""}
        if pick == 5:
            kind, name, value = r.choice(WRONG)
            rid, raw = self.msg(kind, memory_id=self.mid)
            raw = orjson.dumps({**orjson.loads(raw), name: value})
            return raw, {"type": "error", "code": "schema_violation", "req_id": rid}
        if pick == 6:
            rid, raw = self.msg(r.choice(["memory/teleport/req", "", "PING", "memory/store"]))
            return raw, {"type": "error", "code": "invalid_message", "req_id": rid}
        if pick == 7:
            rid, raw = self.msg(r.choice(KINDS), version=r.choice(["2.0", "0.1", "", "v1"]))
            return raw, {"type": "error", "code": "version_mismatch", "req_id": rid}
        if pick == 8:
            rid, raw = self.msg("memory/retrieve/req", memory_id=uuid.uuid4().hex)
            return raw, {"type": "error", "code": "memory_not_found", "req_id": rid}
        if pick == 9:
            return r.choice([b"", b"  ", b"\t", b"\r"]), None
        return self.valid()

    def valid(self) -> tuple[bytes, dict]:
        r = self.rng
        tier, letter = r.choice(["working", "episodic", "semantic"]), r.choice("abcdef")
        cell = (tier, letter)
        pick = r.randrange(4)
        if pick == 0:
            content = r.choice([sentence(r), r.randrange(-(2**63), 2**63), {"n": r.random()}, [1, "two"], None])
            self.model[cell] = content
            rid, raw = self.msg("memory/store/req", memory_id=self.mid, entries=[
                {"key": {"f": letter}, "content": content, "tier": tier}
            ])  # fmt: skip
            return raw, {"type": "memory/store/resp", "req_id": rid, "stored": [{"f": letter}], "errors": []}
        if pick == 1:
            rid, raw = self.msg("memory/retrieve/req", memory_id=self.mid, keys=[{"f": letter}], tier=tier)
            found = [self.model[cell]] if cell in self.model else []
            return raw, {"type": "memory/retrieve/resp", "req_id": rid, "contents": found}
        if pick == 2:
            rid, raw = self.msg("memory/forget/req", memory_id=self.mid, keys=[{"f": letter}], tier=tier)
            deleted = int(cell in self.model)
            self.model.pop(cell, None)
            return raw, {"type": "memory/forget/resp", "req_id": rid, "deleted": deleted}
        rid, raw = self.msg("ping")
        return raw, {"type": "pong", "req_id": rid}

    @staticmethod
    def classify(raw: bytes) -> dict | None:
        if len(raw) > FUZZ_LIMIT:
            return {"type": "error", "code": "invalid_message", "req_id": ""}
        if not raw.strip():
            return None
        try:
            value = orjson.loads(raw.rstrip(b"\r"))
        except orjson.JSONDecodeError:
            return {"type": "error", "code": "parse_error", "req_id": ""}
        return {"type": "error", "code": "invalid_message", "req_id": ""} if not isinstance(value, dict) else {}


def wrong(reply: dict, expect: dict) -> bool:
    if not isinstance(reply, dict) or not isinstance(reply.get("req_id"), str) or "type" not in reply:
        return True
    if reply["type"] == "error" and reply.get("code") == "runtime_error":
        return True
    contents = expect.get("contents")
    if contents is not None and [e["content"] for e in reply.get("entries", [])] != contents:
        return True
    return any(reply.get(k) != v for k, v in expect.items() if k != "contents")


def fuzz(base: Path, args: argparse.Namespace) -> dict[str, float]:
    from a2e_mem.service import MemoryService

    home = base / "fuzz"
    rng = random.Random(args.seed)
    svc = MemoryService(home)
    mid = svc.init("fuzz", "fuzz", persist=True).memory_id  # a `mem init` session: its id is known up front
    svc.close()
    fuzzer = Fuzzer(rng, mid)
    cases = [fuzzer.case() for _ in range(args.fuzz)]
    expected = [(raw, expect) for raw, expect in cases if expect is not None]
    proc = subprocess.Popen(
        mem_cmd("serve-stdio"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env_for(home, MEM_MAX_LINE_BYTES=str(FUZZ_LIMIT), MEM_LOG="critical"),
    )
    assert proc.stdin and proc.stdout

    def feed() -> None:
        try:
            for raw, _ in cases:
                proc.stdin.write(raw + b"\n")
            proc.stdin.close()
        except BrokenPipeError:
            pass

    peak = [0]

    def sample() -> None:  # VmHWM only grows: its last reading before exit is the peak
        while proc.poll() is None:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak[0] = max(peak[0], next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM")))
            except (OSError, StopIteration):
                break
            time.sleep(0.05)

    start = time.perf_counter()
    writer, sampler = threading.Thread(target=feed), threading.Thread(target=sample)
    writer.start()
    sampler.start()
    replies, bad_lines = [], 0
    for line in proc.stdout:
        try:
            replies.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            bad_lines += 1
    writer.join()
    code = proc.wait()
    sampler.join()
    wall = time.perf_counter() - start
    wrong_answers = sum(wrong(reply, expect) for reply, (_, expect) in zip(replies, expected, strict=False))
    check = MemoryService(home)
    session = check.session(mid)
    on_disk = {
        (e["tier"], e["key"]["f"]): e["content"] for e in check.retrieve(session, limit=1000)["entries"]
    }  # fmt: skip
    check.close()
    return {
        "lines sent": len(cases),
        "non-blank lines": len(expected),
        "replies": len(replies),
        "replies != non-blank lines": abs(len(replies) - len(expected)),
        "replies that are not JSON": bad_lines,
        "wrong answers": wrong_answers + (on_disk != fuzzer.model),
        "server crashes": int(code != 0),
        "bytes sent MiB": sum(len(raw) + 1 for raw, _ in cases) / 2**20,
        "lines/s": len(cases) / wall,
        "peak RSS MiB": peak[0] / 1024,
    }


def meets(value: float, target: str) -> bool:
    if not target:
        return True
    op, bound = target.split()
    return {"==": value == float(bound), ">=": value >= float(bound), "<=": value <= float(bound)}[op]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=16, help="concurrent writer processes")
    parser.add_argument("--writes", type=int, default=500, help="acknowledged writes per writer")
    parser.add_argument("--kills", type=int, default=60, help="SIGKILLs (every fifth hits a checkpoint process)")
    parser.add_argument("--big", type=int, default=20000, help="entries in the shard whose checkpoints are killed")
    parser.add_argument("--fuzz", type=int, default=5000, help="random wire lines")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--checkpoints", default="inline", choices=["inline", "background"])
    parser.add_argument("--checkpoint-bytes", type=int, default=4096, help="MEM_CHECKPOINT_BYTES for the writers")
    parser.add_argument("--only", choices=["concurrency", "crash", "fuzz"], help="run one part")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 x 30 writes, 10 kills, 500 lines")
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    args = parser.parse_args()
    if args.quick:
        args.writers, args.writes, args.kills, args.big, args.fuzz = 4, 30, 10, 3000, 500
    base = args.keep or Path(tempfile.mkdtemp(prefix="mem-safety-"))
    parts = {"concurrency": concurrency, "crash": crash, "fuzz": fuzz}
    rows: list[tuple[str, str, float]] = []
    for name, part in parts.items():
        if args.only and name != args.only:
            continue
        shutil.rmtree(base / name, ignore_errors=True)
        rows += [(name, figure, value) for figure, value in part(base, args).items()]
        print(f"# {name} done", file=sys.stderr, flush=True)
    failed = 0
    print(
        f"# seed {args.seed}: {args.writers} writers x {args.writes} writes, {args.kills} kills, "
        f"{args.fuzz} wire lines; checkpoints {args.checkpoints} from {args.checkpoint_bytes} journal bytes"
    )
    print(f"{'part':12} {'figure':32} {'measured':>12}  target")
    for name, figure, value in rows:
        target = f"== {args.kills}" if figure == "kills" else TARGETS.get(figure, "")
        ok = meets(value, target)
        failed += not ok
        shown = f"{value:12.1f}" if isinstance(value, float) else f"{value:12d}"
        print(f"{name:12} {figure:32} {shown}  {target}{'' if ok else '  MISSED'}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
