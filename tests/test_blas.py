"""A query's matrix products run on one BLAS thread (store/blas.py), and the program's own BLAS
setting is back when the call returns."""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from a2e_mem import blas
from a2e_mem.ops import diversify


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_a_query_runs_on_one_blas_thread_and_gives_the_setting_back(service, monkeypatch):
    for name in blas.ONE_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    blas._controller.cache_clear()
    seen: list[set[int]] = []
    real = diversify.diversify

    def watched(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(diversify, "diversify", watched)
    s = service.scope("ns", "agent")
    service.store(s, [{"key": {"id": str(i)}, "content": f"note number {i}", "tier": "semantic"} for i in range(5)])
    with threadpool_limits(limits=2, user_api="blas"):  # the program's own setting
        service.retrieve(s, query="note")
        assert blas_threads() == {2}
    assert seen == [{1}]
    blas._controller.cache_clear()
