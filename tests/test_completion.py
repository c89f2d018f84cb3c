"""Shell completion through the protocol the scripts in completions/ speak (`_MEM_COMPLETE`)."""

from __future__ import annotations

import os
import subprocess
import sys

from a2e_mem.service import MemoryService


def complete(line: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash's completion of `line` (ending where the cursor is) offers."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    extra = {"_MEM_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main"], env={**os.environ, **(env or {}), **extra},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_namespaces_and_sessions_complete_from_the_home_on_the_line(tmp_path):
    """They were read from MEM_HOME or the default home, whatever `--home` said (outside audit Q24)."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    for home, name in ((mine, "alpha"), (other, "beta")):
        svc = MemoryService(home)
        svc.store(svc.scope(name, "a"), [{"key": {"k": 1}, "content": "x", "tier": "episodic"}])
        svc.close()
    svc = MemoryService(mine)
    session = svc.init("alpha", "a", persist=True).memory_id
    svc.close()
    assert complete(f"mem --home {mine} retrieve -n ", {"MEM_HOME": str(other)}) == ["alpha"]
    assert complete(f"mem --home {mine} session close ", {"MEM_HOME": str(other)}) == [session]
    assert complete("mem retrieve -n ", {"MEM_HOME": str(other)}) == ["beta"]


def test_tier_and_format_values_complete():
    assert complete("mem retrieve --tier ") == ["working", "episodic", "semantic"]
    assert complete("mem store x -t s") == ["semantic"]
    assert complete("mem retrieve --format j") == ["json"]
