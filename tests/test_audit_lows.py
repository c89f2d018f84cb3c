"""Low findings an outside audit left open, each through the front door it was found at (the
`mem` CLI as a subprocess, the A2E wire), on both backends where a store is involved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent


def mem(*args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        input=input,
        capture_output=True,
        timeout=120,
    )


# -- import: a record of an unknown kind, or of a scope no shard of its kind has -----------------

KV_DOC = {"id": "k", "key": "k", "value": "v", "created_at": "2025-01-01T00:00:00.000Z",
          "updated_at": "2025-01-01T00:00:00.000Z"}  # fmt: skip
ENTRY_DOC = {"id": '{"k":"x"}', "key": {"k": "x"}, "content": "c", "tier": "episodic", "tags": [], "source": "",
             "score": 1.0, "ttl": 0, "created_at": 1.0, "updated_at": 1.0, "expires_at": None}  # fmt: skip


def line(kind: str, scope: list[str], doc: dict) -> bytes:
    return orjson.dumps({"namespace": "ns", "kind": kind, "scope": scope, "id": doc["id"], "doc": doc}) + b"\n"


@pytest.mark.parametrize(
    "bad, message",
    [
        (line("bogus", [], KV_DOC), b"line 2: unknown kind 'bogus'"),
        (line("episodic", ["alice", "bob"], ENTRY_DOC), b"line 2: an episodic record's scope holds one name, not 2"),
        (line("episodic", [], ENTRY_DOC), b"line 2: an episodic record's scope holds one name, not 0"),
        (line("semantic", ["alice"], {**ENTRY_DOC, "tier": "semantic"}), b"line 2: a semantic record's scope holds"),
        (line("kv", ["x"], KV_DOC), b"line 2: a kv record's scope holds no name, not 1"),
        (line("langgraph", [], KV_DOC), b"line 2: a langgraph record's scope holds one name or more, not 0"),
    ],
    ids=["unknown-kind", "episodic-two-names", "episodic-no-name", "semantic-a-name", "kv-a-name", "langgraph-none"],
)
def test_import_refuses_a_record_no_shard_of_mem_holds_and_writes_nothing(home, bad, message):
    good = line("kv", [], KV_DOC)  # a valid line first: the import is all or nothing, as for a malformed line
    r = mem("import", "-", input=good + bad)
    assert r.returncode == 4 and message in r.stderr, r
    assert mem("export").stdout == b""


def test_import_keeps_taking_every_kind_an_export_gives(home):
    records = [line("kv", [], KV_DOC), line("episodic", ["alice"], ENTRY_DOC), line("events", ["m1"], KV_DOC),
               line("langgraph", ["a", "b"], KV_DOC)]  # fmt: skip
    r = mem("import", "-", "--format", "json", input=b"".join(records))
    assert r.returncode == 0 and orjson.loads(r.stdout)["new"] == 4, r


# -- a postgresql:// store without the pgvector package (or psycopg, already so) -----------------

WITHOUT = "import sys; sys.modules[{!r}] = None; sys.argv[0] = 'mem'; from a2e_mem.cli.main import run; run()"


@pytest.mark.parametrize("package", ["pgvector", "psycopg"])
def test_a_postgres_store_without_its_driver_is_unavailable_and_says_what_to_install(home, backend, package):
    """On PostgreSQL the real server (where the audit met a traceback line and exit 1); on files
    a URL nobody listens at: the packages are checked before any connection."""
    url = os.environ.get("MEM_STORE") or "postgresql://mem@127.0.0.1:1/nowhere"
    r = subprocess.run(
        [sys.executable, "-c", WITHOUT.format(package), "--store", url, "keys"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 7, r
    assert r.stderr == f"mem: error: a postgresql:// store needs {package}: pip install 'a2e-mem[postgres]'\n".encode()
