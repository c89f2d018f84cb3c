"""Two builds of `mem` side by side on one store: requests alternate between them, so that a
shared, noisy machine slows both alike, and the ratio of their medians is what changed.

    python bench/bench_ab.py --store postgresql://... retrieve OLD/bin/mem NEW/bin/mem
    python bench/bench_ab.py --home DIR store OLD/bin/mem NEW/bin/mem --requests 2000

Each `mem` is a `serve-stdio` of its own on the same store (`--store URL`, or the files store in
`--home`), in namespace `bench` (what `bench_backends.py --keep` leaves). `store` sends one-entry
durable stores of new keys, `retrieve` a query with limit 10; after 10 warm-up requests each,
request i goes to one and then the other (the order swapped every other i). Printed per build:
median and p90 wall time, and the CPU time (user + system, from /proc) of its process per request.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import StdioClient, median, percentile, queries, sentence  # noqa: E402

NS = "bench"


class Side:
    def __init__(self, mem: str, args: argparse.Namespace) -> None:
        os.environ["MEM_BENCH_BIN"] = mem  # StdioClient starts this `mem`
        options = ("--store", args.store) if args.store else ()
        self.mem, self.client = mem, StdioClient(args.home, options, MEM_STORE="")
        self.client.call("handshake/req", agent_id="ab", agent_caps=[], auth_token="")
        self.mid = self.client.call("memory/init/req", namespace=NS, scope={"agent": "ab"})["memory_id"]
        self.times: list[float] = []

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.client.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request(side: Side, op: str, i: int, rng: random.Random, asked: list[str]) -> float:
    if op == "store":
        entry = {"key": {"id": f"ab-{rng.getrandbits(64):x}"}, "content": sentence(rng), "tier": "semantic"}
        return side.client.timed("memory/store/req", memory_id=side.mid, entries=[entry])[0]
    return side.client.timed("memory/retrieve/req", memory_id=side.mid, query=asked[i], limit=10)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("op", choices=("store", "retrieve"))
    parser.add_argument("old", help="the `mem` to compare against")
    parser.add_argument("new")
    parser.add_argument("--store", help="a postgresql:// store URL (else the files store in --home)")
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("MEM_HOME", ".")))
    parser.add_argument("--requests", type=int, default=400, help="timed requests to each")
    args = parser.parse_args()
    sides = [Side(args.old, args), Side(args.new, args)]
    rng, asked = random.Random(time.time()), queries(args.requests + 10, seed=int(time.time()))
    for side in sides:
        for i in range(10):
            request(side, args.op, i, rng, asked)
    began = [side.cpu() for side in sides]
    for i in range(args.requests):
        for side in sides if i % 2 == 0 else sides[::-1]:
            side.times.append(request(side, args.op, i, rng, asked))
    used = [side.cpu() - cpu for side, cpu in zip(sides, began, strict=True)]
    for side, cpu_s in zip(sides, used, strict=True):
        side.client.close()
        per = cpu_s / args.requests * 1000
        print(
            f"{side.mem}: {args.op} median {median(side.times) * 1000:.2f} ms, "
            f"p90 {percentile(side.times, 90) * 1000:.2f} ms, CPU {per:.2f} ms a request"
        )
    print(f"new / old, medians: {median(sides[1].times) / median(sides[0].times):.3f}")


if __name__ == "__main__":
    main()
