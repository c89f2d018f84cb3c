"""Appending to a long episodic log costs the same as to a short one.

    python bench/bench_episodic.py [--sizes 1000 100000] [--appends 200]

For each size: build a log of N events (written in batches, then checkpointed, as a long-lived
log would be), then time single `episodic_memory_append_event` calls in process and print the
median and p99, and the median of whole `mem episodic append` processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import env_for, median, mem_cmd, percentile, time_process  # noqa: E402

BATCH = 5000


def event(i: int) -> dict:
    return {"event_type": ("user_action", "message", "tool_call")[i % 3], "emitting_agent_id": f"agent-{i % 7}",
            "tags": ["ui"] if i % 2 else [], "payload": {"n": i, "text": f"event number {i}"}}  # fmt: skip


def build_log(svc, n: int) -> str:
    """A memory holding `n` events, written in batches and checkpointed."""
    from a2e_mem.ops.episodes import _event, _event_id
    from a2e_mem.timefmt import iso

    mid = svc.episodic_memory_create(f"log of {n}")["memoryId"]
    events = svc._events("default", mid)
    for start in range(0, n, BATCH):
        docs = [{"id": _event_id(), "memoryId": mid, **_event(event(i)), "timestamp": iso(time.time())}
                for i in range(start, min(n, start + BATCH))]  # fmt: skip
        events.put(*docs)
    svc.checkpoint(force=True)
    return mid


def measure(n: int, appends: int, runs: int) -> dict[str, float]:
    from a2e_mem.service import MemoryService

    home = Path(tempfile.mkdtemp(prefix="mem-episodic-"))
    os.environ["MEM_HOME"] = str(home)
    mid = build_log(MemoryService(home, checkpoints="off"), n)
    svc = MemoryService(home)  # then appends as a user would make them, checkpoints on
    times = []
    for i in range(appends):
        start = time.perf_counter()
        svc.episodic_memory_append_event(mid, event(n + i))
        times.append(time.perf_counter() - start)
    assert svc.episodic_memory_get(mid)["eventCount"] == n + appends
    cli = time_process(mem_cmd("episodic", "append", mid, "-e", "cli", "-a", "bench", "-p", "x"), env_for(home), runs)
    return {"append median ms": median(times) * 1e3, "append p99 ms": percentile(times, 99) * 1e3,
            "cli append ms": median(cli) * 1e3}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"{'events in log':>14} {'append median ms':>17} {'append p99 ms':>14} {'cli append ms':>14}")
    for n in args.sizes:
        r = measure(n, args.appends, args.runs)
        print(f"{n:14} {r['append median ms']:17.3f} {r['append p99 ms']:14.3f} {r['cli append ms']:14.1f}")


if __name__ == "__main__":
    main()
