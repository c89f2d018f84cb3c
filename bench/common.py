"""Shared pieces of the benchmarks: synthetic memories, a stdio client, timing helpers."""

from __future__ import annotations

import functools
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent

PEOPLE = "Maya Tomas Jonah Priya Lena Omar Sofia Kenji Ada Bruno Chen Elif Farah Gus Hana Ivo".split()
TOPICS = (
    "quarterly budget|staging database|kitchen renovation|greyhound adoption|marathon training|tax return|"
    "wedding venue|conference talk|onboarding plan|rust rewrite|garden irrigation|piano lessons|flight to Lisbon|"
    "dentist appointment|team offsite|pricing page|sourdough starter|insurance claim|apartment lease|board game night|"
    "security audit|customer churn|podcast episode|hiking trip|car repair|visa application|birthday party|"
    "data migration|swimming club|book club pick|solar panels|mortgage rate|school enrolment|coffee grinder"
).split("|")
VERBS = (
    "moved|cancelled|confirmed|postponed|finished|started|asked about|complained about|is excited about|"
    "wants to revisit|forgot|paid for|reviewed|rescheduled|booked|approved|rejected|documented"
).split("|")
WHEN = "on Monday|next week|in March|after lunch|before the holidays|this weekend|at 9am|in two weeks|yesterday".split(
    "|"
)
DETAIL = (
    "because the vendor was late|and it cost more than expected|with help from a neighbour|after a long call|"
    "to save money|despite the rain|for the third time|as agreed with the team|without telling anyone|"
    "and wrote it down in the shared notes|so the deadline slipped"
).split("|")


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {rng.choice(TOPICS)} {rng.choice(WHEN)} {rng.choice(DETAIL)}."


def entries(n: int, seed: int = 7, prefix: str = "e", tier: str = "semantic") -> list[dict]:
    rng = random.Random(seed)
    return [
        {"key": {"id": f"{prefix}{i}"}, "content": sentence(rng), "tier": tier, "tags": [rng.choice(TOPICS).split()[0]]}
        for i in range(n)
    ]


def queries(n: int, seed: int = 99) -> list[str]:
    rng = random.Random(seed)
    return [f"what happened with the {rng.choice(TOPICS)} {rng.choice(WHEN)}?" for _ in range(n)]


def mem_cmd(*args: str) -> list[str]:
    """`MEM_BENCH_BIN`, else the `mem` installed beside this Python. Measure a regular
    `pip install .` (an editable install routes every import through its finder, ~100 ms a
    process), ideally in an environment of its own, as users install a tool: a Python
    environment holding many packages makes every process start slower."""
    check_installed_checkout()
    script = Path(os.environ.get("MEM_BENCH_BIN") or Path(sys.executable).parent / "mem")
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "a2e_mem.cli.main", *args]


@functools.cache
def check_installed_checkout() -> None:
    """Stop unless the `a2e_mem` this Python imports is this checkout's (`pip install -e .`):
    the package is installed from store/ and cli/ under another name, so a checkout cannot be
    put on PYTHONPATH, and a bench must not time some other installed version unawares."""
    if os.environ.get("MEM_BENCH_BIN"):
        return  # timing another `mem` on purpose
    try:
        import a2e_mem
    except ImportError:
        raise SystemExit(f"bench: a2e_mem is not installed here: pip install -e {ROOT}") from None
    if Path(a2e_mem.__file__).resolve().parent != ROOT / "store":
        raise SystemExit(f"bench: a2e_mem here is {a2e_mem.__file__}, not this checkout's: pip install -e {ROOT}")


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `mem` process on `home` (see `check_installed_checkout`)."""
    env = {**os.environ, "MEM_HOME": str(home)}
    env.update(extra)
    return env


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def time_process(cmd: list[str], env: dict[str, str], runs: int, stdin: bytes | None = None) -> list[float]:
    """Wall seconds of whole-process runs (after one warm-up)."""
    out = []
    for i in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if i:
            out.append(time.perf_counter() - start)
    return out


class StdioClient:
    """A minimal A2E client for `mem serve-stdio`: one request, one response line. `options`
    are global options put before `serve-stdio` (e.g. `("--store", url)`)."""

    def __init__(self, home: Path, options: tuple[str, ...] = (), **env: str) -> None:
        self.proc = subprocess.Popen(
            mem_cmd(*options, "serve-stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env_for(home, **env)
        )
        self.n = 0

    def call(self, kind: str, **fields) -> dict:
        self.n += 1
        msg = {"type": kind, "id": f"r{self.n}", "version": "1.0", "ts": time.time(), **fields}
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        self.proc.stdin.flush()
        reply = orjson.loads(self.proc.stdout.readline())
        if reply.get("type") == "error":
            raise RuntimeError(reply)
        return reply

    def timed(self, kind: str, **fields) -> tuple[float, dict]:
        start = time.perf_counter()
        reply = self.call(kind, **fields)
        return time.perf_counter() - start, reply

    def rss_mib(self, field: str = "VmRSS") -> float:
        """The server's resident memory in MiB: `VmRSS`, all of it (with the pages of the files it
        maps), or `RssAnon`, its own."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith(f"{field}:"))
        return kib / 1024

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
