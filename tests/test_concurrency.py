"""Several processes writing one store at once lose nothing and corrupt nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from a2e_mem.service import MemoryService

WRITER = textwrap.dedent(
    """
    import sys
    from a2e_mem.service import MemoryService
    worker, count = sys.argv[1], int(sys.argv[2])
    svc = MemoryService()
    scope = svc.scope("shared", "agent")
    for i in range(count):
        out = svc.store(scope, [{"key": {"w": worker, "i": i}, "content": f"note {worker}-{i}", "tier": "semantic"}])
        assert out["stored"], out
        print(i, flush=True)  # acknowledged
    """
)


def run_writers(home, workers, count):
    # small journals and inline checkpoints, so that checkpoints interleave with the writes
    env = {**os.environ, "MEM_HOME": str(home), "MEM_CHECKPOINTS": "inline", "MEM_CHECKPOINT_BYTES": "4096"}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(w), str(count)], stdout=subprocess.PIPE, env=env)
        for w in range(workers)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        assert len(out.splitlines()) == count


def test_four_processes_store_at_once_and_nothing_is_lost(home):
    reader = MemoryService(home)
    scope = reader.scope("shared", "agent")
    run_writers(home, workers=4, count=40)
    result = reader.retrieve(scope, tier="semantic", limit=1000)
    assert result["total"] == 160
    assert {(e["key"]["w"], e["key"]["i"]) for e in result["entries"]} == {
        (str(w), i) for w in range(4) for i in range(40)
    }
    fresh = MemoryService(home)
    assert fresh.retrieve(scope, limit=1000)["total"] == 160
    assert list(home.rglob("seg-*")), "no checkpoint ran during the writes"
