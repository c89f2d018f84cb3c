"""Every test gets its own store in a temp dir, the exact `hash` embedder, no background work.

The service-level test modules in `BOTH_BACKENDS` run every test twice, on the files backend and
on PostgreSQL (a fresh database each time, from `tests/pg.py`): `MEM_STORE` is set for the test
and so for every `mem` process it starts. A test of such a module that looks at the files of the
store itself is marked `files_only`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from a2e_mem import clock

BOTH_BACKENDS = {
    "test_service",
    "test_ranking_fusion",
    "test_documents",
    "test_episodes",
    "test_persistent",
    "test_graph",
    "test_isolation",
    "test_cli_memory",
    "test_cli_codebolt",
    "test_stdio",
    "test_mcp",
    "test_mcp_config",
    "test_audit_security",
    "test_audit_lows",
    "test_transfer",
    "test_ui_http",
    "test_api",
    "test_langgraph",
    "test_timeaware_store",
    "test_bridge",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "files_only: looks at the files backend's own files")


def pytest_generate_tests(metafunc):
    module = Path(metafunc.module.__file__).stem
    if (
        "backend" in metafunc.fixturenames
        and module in BOTH_BACKENDS
        and metafunc.definition.get_closest_marker("files_only") is None
    ):
        metafunc.parametrize("backend", ["files", "postgres"], indirect=True)


@pytest.fixture
def backend(request):
    """Which backend the test's store is on: "files", or "postgres" in the modules of both."""
    return getattr(request, "param", "files")


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch, backend):
    home = tmp_path / "home"
    monkeypatch.setenv("MEM_HOME", str(home))
    if backend == "postgres":
        from tests.pg import fresh_database

        monkeypatch.setenv("MEM_STORE", fresh_database())
    else:
        monkeypatch.delenv("MEM_STORE", raising=False)
    monkeypatch.setenv("MEM_EMBEDDER", "hash")
    monkeypatch.setenv("MEM_CHECKPOINTS", "off")
    for var in ("MEM_NAMESPACE", "MEM_AGENT", "MEM_SESSION", "MEM_FORMAT", "MEM_AUTH_SECRET", "MEM_CLOCK_OFFSET"):
        monkeypatch.delenv(var, raising=False)
    clock.set_offset(0)
    yield home
    clock.set_offset(0)


@pytest.fixture
def home(isolated_store):
    return isolated_store


@pytest.fixture
def service(home):
    from a2e_mem.service import MemoryService

    svc = MemoryService(home)
    yield svc
    svc.close()


def entry(key, content, tier="episodic", **extra):
    return {"key": key if isinstance(key, dict) else {"k": key}, "content": content, "tier": tier, **extra}


def stored_anywhere(home, text: str) -> bool:
    """Whether `text` is still kept by the test's store: in any file under `home` (the files
    backend), or in any row of the database (`MEM_STORE`)."""
    import os

    url = os.environ.get("MEM_STORE")
    if url:
        from tests.pg import records_containing

        return records_containing(url, text) > 0
    return any(p.is_file() and text.encode() in p.read_bytes() for p in home.rglob("*"))
