"""Moving a store between backends: files -> PostgreSQL -> files gives a byte-identical export,
in-process and through `mem export | mem --store URL import -`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from a2e_mem import clock
from a2e_mem.errors import InvalidInput
from a2e_mem.service import MemoryService
from tests.pg import fresh_database

from .test_maintenance import fill

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.files_only  # each test picks its backends itself


def dump(svc: MemoryService) -> bytes:
    return b"".join(line + b"\n" for line in svc.export())


def test_files_to_postgres_to_files_is_byte_identical(home, tmp_path):
    fill(MemoryService(home, store=""))
    clock.set_offset(10)  # an entry has expired: not exported, on either side
    first = dump(MemoryService(home, store=""))
    assert b"expires soon" not in first and b"turn-2" in first
    pg = MemoryService(tmp_path / "pg-home", store=fresh_database())
    assert pg.import_records(first.splitlines())["new"] == len(first.splitlines())
    assert dump(pg) == first
    assert pg.import_records(first.splitlines(), dry_run=True) == {
        "new": 0,
        "changed": 0,
        "unchanged": len(first.splitlines()),
    }
    back = MemoryService(tmp_path / "back", store="")
    back.import_records(dump(pg).splitlines())
    assert dump(back) == first
    found = pg.retrieve(pg.scope("proj", "alice"), query="python packaging")["entries"][0]
    assert found["key"] == {"k": 1} and found["score"] == 0.5
    pg.close()


def mem(home: Path, *args: str, stdin: bytes | None = None, store: str = "") -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "MEM_EMBEDDER": "hash", "MEM_CHECKPOINTS": "off", "MEM_STORE": store}
    env["MEM_CLOCK_OFFSET"] = "10"  # the 5-second entry of `fill` is expired from the start: however slow
    # the machine, every export below sees the same records
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(home), *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_export_piped_into_a_postgres_import_and_back_through_the_cli(home, tmp_path):
    fill(MemoryService(home, store=""))
    exported = mem(home, "export")
    assert exported.returncode == 0, exported.stderr
    url = fresh_database()
    imported = mem(tmp_path / "a", "--store", url, "import", "-", "--format", "json", stdin=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert orjson.loads(imported.stdout)["new"] == len(exported.stdout.splitlines())
    from_pg = mem(tmp_path / "b", "export", store=url)  # another home: another machine, same database
    assert from_pg.returncode == 0, from_pg.stderr
    assert from_pg.stdout == exported.stdout
    back = mem(tmp_path / "c", "import", "-", stdin=from_pg.stdout)
    assert back.returncode == 0, back.stderr
    assert mem(tmp_path / "c", "export").stdout == exported.stdout


@pytest.mark.parametrize("kind", ["episodic", "kv"])
def test_a_key_too_long_for_postgres_is_refused_before_the_import_writes_anything(home, tmp_path, kind):
    """An outside audit: files -> PostgreSQL with one key over PostgreSQL's index limit passed
    the dry run, then failed midway, naming no line, with the namespaces before it imported."""
    files = MemoryService(home, store="")
    long_key = "€" * 1000  # 3,000 bytes in UTF-8: within the key limits of both kinds
    for namespace in ("aaa", "bbb", "zzz"):
        scope = files.scope(namespace, "agent")
        key = long_key if namespace == "bbb" else "short"
        if kind == "episodic":
            files.store(scope, [{"key": {"id": key}, "content": "a fact", "tier": "episodic"}])
        else:
            files.memory_set(key, "a value", namespace=namespace)
    lines = dump(files).splitlines()
    bad = next(i for i, line in enumerate(lines, 1) if long_key.encode() in line)
    pg = MemoryService(tmp_path / "pg-home", store=fresh_database())
    for dry_run in (True, False):
        with pytest.raises(InvalidInput, match=rf"^line {bad}: key too long for the PostgreSQL store"):
            pg.import_records(lines, dry_run=dry_run)
    assert dump(pg) == b""
    pg.close()


def test_a_namespace_too_long_for_postgres_is_refused_naming_its_line(home, tmp_path):
    files = MemoryService(home, store="")
    files.memory_set("key", "a value", namespace="é" * 600)  # 1,200 bytes in UTF-8: over its 1,024
    lines = dump(files).splitlines()
    pg = MemoryService(tmp_path / "pg-home", store=fresh_database())
    with pytest.raises(InvalidInput, match=r"^line 1: namespace too long for the PostgreSQL store"):
        pg.import_records(lines, dry_run=True)
    pg.close()
