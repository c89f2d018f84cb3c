"""Long randomised interleavings of writers, maintenance commands and SIGKILLs (issue 10).

    python bench/bench_interleave.py                      # seeds 1-5, 120 s each
    python bench/bench_interleave.py --seconds 600 --seed 7 --runs 3

Each run (see `bench/interleave.py`) starts `mem store`/`mem forget` commands, `mem serve-stdio`
and `mem serve-mcp` writers and maintenance loops (`mem gc`, `mem reindex`, `mem reindex
--embedder`, `mem doctor --repair`, `mem namespaces delete`, `mem session close`, `mem import`,
SIGKILL of a writer) on one store with tiny background checkpoints, then reads everything back
through fresh processes. The table counts, per seed, the operations, the acknowledged ones, the
acknowledged writes lost, the failed reads, the kills, and every other kind of problem; each
run's full report (every problem, the maintenance timeline) is written beside its store.
Exit status 1 when any run found a problem.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import interleave  # noqa: E402

COLUMNS = ("seed", "seconds", "ops", "acks", "lost", "failed reads", "kills", "other problems")


def row(result: interleave.RunResult) -> tuple:
    problems = result.problems()
    lost = len(problems.pop("lost writes", []))
    failed_reads = len(problems.pop("failed reads", []))
    other = ", ".join(f"{name} {len(items)}" for name, items in problems.items()) or "-"
    c = result.counters
    return (result.seed, f"{result.seconds:.0f}", c.ops, c.acks, lost, failed_reads, c.kills, other)


def print_table(rows: list[tuple]) -> None:
    widths = [max(len(str(r[i])) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    for r in [COLUMNS, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120, help="length of each run")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--runs", type=int, default=5, help="how many seeds, from --seed on")
    parser.add_argument("--writers", default="cli,stdio,stdio,mcp", help="writer kinds, comma-separated")
    parser.add_argument("--maintainers", type=int, default=2, help="maintenance loops at once")
    parser.add_argument("--checkpoint-bytes", type=int, default=2048, help="MEM_CHECKPOINT_BYTES")
    parser.add_argument(
        "--only", default="", help="only these maintenance commands, comma-separated (e.g. 'reindex,kill')"
    )
    parser.add_argument("--min-acks", type=int, default=0, help="run on past --seconds until this many acks")
    parser.add_argument("--keep", action="store_true", help="keep the stores and reports")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="mem-interleave-"))
    rows, failed = [], False
    for seed in range(args.seed, args.seed + args.runs):
        result = interleave.run(
            workdir / f"store-{seed}",
            seed,
            args.seconds,
            writers=tuple(args.writers.split(",")),
            checkpoint_bytes=args.checkpoint_bytes,
            maintainers=args.maintainers,
            only=tuple(filter(None, args.only.split(","))),
            min_acks=args.min_acks,
            every_command=True,
        )
        print(result.summary(), flush=True)
        rows.append(row(result))
        failed |= bool(result.problems())
    print()
    print_table(rows)
    if args.keep or failed:
        print(f"\nstores and reports (logs-<seed>/report.txt) in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
