"""The README's least-privilege setup, run as written: an owner role makes the tables, agents
connect as a role that may only read and write rows, and everything an agent does works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.pg import database_of, fresh_database, server_url, with_user

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.files_only  # picks its own backend: a database with two roles


def mem(url: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEM_STORE": url, "MEM_HOME": str(home), "MEM_EMBEDDER": "hash", "MEM_CHECKPOINTS": "off"}
    return subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def roles(tmp_path):
    """(owner URL, agent URL) of a fresh database set up as the README says."""
    url = fresh_database()
    name, suffix = database_of(url), os.urandom(4).hex()
    owner, agent = f"mem_owner_{suffix}", f"mem_agent_{suffix}"
    with psycopg.connect(server_url(), autocommit=True) as admin:
        for role in (owner, agent):
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner)))
    with psycopg.connect(url, autocommit=True) as conn:  # as a superuser: pgvector is not a trusted extension
        conn.execute("CREATE EXTENSION vector")
        conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(owner)))
    owner_url, agent_url = with_user(url, owner, None), with_user(url, agent, None)
    made = mem(owner_url, tmp_path / "owner", "reindex", "--embedder", "hash")  # tables, embedder, vector column
    assert made.returncode == 0, made.stderr
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}").format(
                sql.Identifier(agent)
            )
        )
        conn.execute(
            sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(sql.Identifier(agent))
        )
        conn.execute(
            sql.SQL("REVOKE INSERT, UPDATE, DELETE ON mem_schema, mem_meta FROM {}").format(sql.Identifier(agent))
        )
    return owner_url, agent_url


def test_an_agent_role_that_may_only_read_and_write_rows_does_all_an_agent_does(roles, tmp_path):
    owner_url, agent_url = roles
    home = tmp_path / "agent"
    stored = mem(agent_url, home, "store", "-n", "team", "the deploy key rotates on Mondays")
    assert stored.returncode == 0 and "WARNING" not in stored.stderr, stored.stderr
    found = mem(agent_url, home, "retrieve", "-n", "team", "-q", "when does the deploy key rotate", "--format", "json")
    assert found.returncode == 0 and "rotates on Mondays" in found.stdout, found.stderr
    assert mem(agent_url, home, "todo", "save", "-n", "team", '{"title": "rotate the key"}').returncode == 0
    assert mem(agent_url, home, "doctor").returncode == 0
    purged = mem(agent_url, home, "gc")  # purging is row work; the index is the owner's
    assert purged.returncode == 0, purged.stderr
    assert mem(owner_url, tmp_path / "owner", "gc").returncode == 0


def test_an_agent_role_cannot_change_the_tables(roles):
    _, agent_url = roles
    with psycopg.connect(agent_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DROP TABLE mem_records")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("ALTER TABLE mem_records ADD COLUMN x int")
        for statement in ("UPDATE mem_schema SET version = 99", "DELETE FROM mem_meta"):  # outside audit q26
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_an_agent_role_that_reindexes_is_told_it_may_not_with_exit_6(roles, tmp_path):
    """It exited 7, 'store unavailable', as for an outage (outside audit X24): the refusal is
    the role's (unauthorized), and nothing was written."""
    owner_url, agent_url = roles
    home = tmp_path / "agent"
    assert mem(agent_url, home, "store", "-n", "team", "kept").returncode == 0
    refused = mem(agent_url, home, "reindex")
    assert refused.returncode == 6, refused.stderr
    assert refused.stderr.startswith("mem: error: ") and refused.stderr.count("\n") == 1, refused.stderr
    assert "may not" in refused.stderr and "owner" in refused.stderr
    assert mem(agent_url, home, "doctor").returncode == 0
    assert mem(owner_url, tmp_path / "owner", "reindex").returncode == 0


def test_an_agent_role_first_on_a_store_of_an_older_schema_is_told_to_have_the_owner_upgrade_it(roles, tmp_path):
    """Found by an outside audit upgrading a fleet: every command of the agents (reads too) was
    'this role may not do that (permission denied for schema public)', exit 6 (unauthorized),
    nothing naming the schema or what to do."""
    owner_url, agent_url = roles
    home = tmp_path / "agent"
    assert mem(agent_url, home, "store", "-n", "team", "kept through the upgrade").returncode == 0
    with psycopg.connect(owner_url, autocommit=True) as conn:  # as a version 2 database has it
        conn.execute("DROP INDEX mem_records_expiring")
        conn.execute(
            "CREATE INDEX mem_records_expiry ON mem_records (namespace, expires_at) WHERE expires_at IS NOT NULL"
        )
        conn.execute("UPDATE mem_schema SET version = 2")
    refused = mem(agent_url, home, "retrieve", "-n", "team", "-q", "kept")
    assert refused.returncode == 7, refused.stderr
    assert refused.stderr.count("\n") == 1 and "schema version 2, older than this mem's" in refused.stderr
    assert "once as the store's owner" in refused.stderr
    assert mem(owner_url, tmp_path / "owner", "doctor").returncode == 0  # the owner's first command migrates
    found = mem(agent_url, home, "retrieve", "-n", "team", "-q", "kept", "--format", "json")
    assert found.returncode == 0 and "kept through the upgrade" in found.stdout, found.stderr


def test_an_agent_role_writes_while_the_owner_reindexes(roles, tmp_path):
    """The online reindex's trigger empties the new vector of a row an agent changes: it runs
    for the agent role too, whose grants predate the reindex's column (`reindex.py`)."""
    from a2e_mem.backends.postgres import open_postgres
    from tests.test_postgres import TEXTS, _vectors_match_texts, entry, put

    owner_url, agent_url = roles
    owner, agent = open_postgres(owner_url, "hash"), open_postgres(agent_url, "hash")
    put(agent, "team", "semantic", [entry(f"e{i}", text) for i, text in enumerate(TEXTS)])
    put(agent, "crew", "semantic", [entry(f"f{i}", text) for i, text in enumerate(TEXTS)])

    def meanwhile(done, total):
        if done == 1:
            put(agent, "crew", "semantic", [entry("f0", "a violin concert in the park"), entry("new", "lentil soup")])

    owner.reindex("hash:32", progress=meanwhile)
    owner.close()
    assert _vectors_match_texts(owner_url, "hash:32")
    agent.close()
    agent = open_postgres(agent_url, "hash:32")  # a process told the new embedder
    put(agent, "team", "semantic", [entry("after", "written with the new embedder")])
    assert _vectors_match_texts(owner_url, "hash:32")
    agent.close()
