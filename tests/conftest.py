"""Every test gets its own store in a temp dir, the exact `hash` embedder, no background work."""

from __future__ import annotations

import pytest

from store import clock


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEM_HOME", str(home))
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
    from store.service import MemoryService

    svc = MemoryService(home)
    yield svc
    svc.close()


def entry(key, content, tier="episodic", **extra):
    return {"key": key if isinstance(key, dict) else {"k": key}, "content": content, "tier": tier, **extra}
