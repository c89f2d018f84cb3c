"""The Annoy index plus the exact delta give the right answers."""

from __future__ import annotations

import numpy as np

from a2e_mem.backends.files import index, search
from a2e_mem.service import MemoryService

from .conftest import entry

WORDS = [
    "apple",
    "banana",
    "cherry",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


def sentences(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=6)) for _ in range(n)]


def exact_ranking(svc, s, query, n):
    rows = svc.retrieve(s, limit=n, query=query)["entries"]
    return [e["key"]["k"] for e in rows]


def test_annoy_neighbours_equal_exact_search_on_a_small_store(home):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, t) for i, t in enumerate(sentences(300))])
    svc.checkpoint()
    shard = svc.engine.shard("ns", "episodic", "a", schema="entries")
    vectors = np.asarray(shard.seg.vectors, dtype=np.float32)
    for query in svc.engine.embed(sentences(20, seed=1)):
        rows = shard.seg.index.nearest(query, 10)
        cos = vectors[rows] @ query
        exact = vectors @ query
        assert np.allclose(np.sort(cos)[::-1], np.sort(exact)[::-1][:10], atol=1e-3)
        assert set(rows) == set(np.argsort(-exact, kind="stable")[:10]) or np.isclose(
            exact[rows].min(), np.sort(exact)[-10]
        )


def test_hybrid_search_through_the_index_equals_exact_on_a_small_store(home, monkeypatch):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, t) for i, t in enumerate(sentences(300))])
    svc.checkpoint()
    queries = sentences(20, seed=1)
    monkeypatch.setattr(search, "EXACT_MAX", 10**9)
    exact = [exact_ranking(svc, s, q, 10) for q in queries]
    monkeypatch.setattr(search, "EXACT_MAX", 0)
    assert [exact_ranking(svc, s, q, 10) for q in queries] == exact


def test_index_and_delta_merge_with_tombstones(home, monkeypatch):
    monkeypatch.setattr(search, "EXACT_MAX", 0)
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, f"filler {' '.join(WORDS[i % 5 : i % 5 + 3])}") for i in range(200)])
    svc.store(s, [entry("old", "zebra giraffe savanna"), entry("dead", "zebra stripes")])
    svc.checkpoint()
    svc.store(s, [entry("new", "zebra crossing"), entry("old", "now about whales")])
    svc.forget(s, keys=[{"k": "dead"}])
    got = [e["key"]["k"] for e in svc.retrieve(s, query="zebra", limit=3)["entries"]]
    assert got[0] == "new"
    assert "dead" not in got and "old" not in got[:1]
    whales = svc.retrieve(s, query="whales", limit=1)["entries"][0]
    assert whales["key"]["k"] == "old" and whales["content"] == "now about whales"
    assert svc.retrieve(s, limit=1000)["total"] == 202


def test_filtered_search_finds_rare_tagged_rows_through_the_index(home, monkeypatch):
    monkeypatch.setattr(search, "EXACT_MAX", 0)
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(
        s, [entry(i, f"common words {i}") for i in range(500)] + [entry("rare", "unrelated text", tags=["needle"])]
    )
    svc.checkpoint()
    result = svc.retrieve(s, query="common words", tags=["needle"])
    assert [e["key"]["k"] for e in result["entries"]] == ["rare"] and result["total"] == 1


def test_the_search_budget_grows_with_the_square_root_of_the_size_past_100k():
    from a2e_mem.backends.files.index import SEARCH_K_PER_TREE, search_budget

    assert search_budget(96, 1_000) == search_budget(96, 100_000) == 96 * SEARCH_K_PER_TREE
    assert search_budget(96, 400_000) == 2 * 96 * SEARCH_K_PER_TREE
    assert search_budget(96, 1_000_000) == int(96 * SEARCH_K_PER_TREE * 10**0.5)


def indexed_store(home, monkeypatch):
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, t) for i, t in enumerate(sentences(300))])
    svc.checkpoint()
    monkeypatch.setattr(search, "EXACT_MAX", 0)
    return svc, s


def slow_index_search(monkeypatch, seconds):
    """Make every Annoy search take `seconds` more; the event is set when one has ended."""
    import threading
    import time

    from a2e_mem.backends.files.index import Index

    nearest = Index.nearest
    ended = threading.Event()

    def slow(self, query, k):
        time.sleep(seconds)
        try:
            return nearest(self, query, k)
        finally:
            ended.set()

    monkeypatch.setattr(Index, "nearest", slow)
    return ended


def test_an_error_of_the_index_search_reaches_the_caller(home, monkeypatch):
    import pytest

    from a2e_mem.backends.files.index import Index

    svc, s = indexed_store(home, monkeypatch)

    def broken(self, query, k):
        raise FileNotFoundError("index.ann: removed by a checkpoint")

    monkeypatch.setattr(Index, "nearest", broken)
    with pytest.raises(FileNotFoundError, match="removed by a checkpoint"):
        svc.retrieve(s, limit=5, query="apple banana")


def test_a_failing_query_waits_for_its_index_search_before_it_returns(home, monkeypatch):
    """The index search runs on a worker thread while the query scores the words; when the
    scoring fails, the query still returns only after the search ended (no search of a closed
    index can follow)."""

    import pytest

    svc, s = indexed_store(home, monkeypatch)
    ended = slow_index_search(monkeypatch, 0.3)

    def failing(*args):
        raise RuntimeError("scoring failed")

    monkeypatch.setattr(search, "_bm25_weights", failing)
    with pytest.raises(RuntimeError, match="scoring failed"):
        svc.retrieve(s, limit=5, query="apple banana")
    assert ended.is_set()


def test_a_process_forked_after_a_query_still_answers_queries(home, monkeypatch):
    """The index searches run on worker threads, which a forked child does not inherit: the
    child makes its own instead of waiting forever for its parent's."""
    import os
    import time

    svc, s = indexed_store(home, monkeypatch)
    expected = exact_ranking(svc, s, "apple banana", 5)
    pid = os.fork()
    if pid == 0:  # the child: a query, then its verdict as the exit status
        try:
            os._exit(0 if exact_ranking(svc, s, "apple banana", 5) == expected else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done[0] == pid, "the forked child's query never returned"
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_an_interrupted_query_still_waits_for_its_index_search(home, monkeypatch):
    """Ctrl-C while the query waits for its index search (here: again and again) is raised only
    once the search has ended."""
    import signal

    import pytest

    svc, s = indexed_store(home, monkeypatch)
    ended = slow_index_search(monkeypatch, 0.4)

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(search, "_bm25_weights", interrupt)
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)  # interrupts the wait for the search too
    try:
        with pytest.raises(KeyboardInterrupt):
            svc.retrieve(s, limit=5, query="apple banana")
        assert ended.is_set()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_query_while_the_interpreter_exits_is_answered(home, tmp_path):
    """At exit Python shuts its thread pools down before atexit handlers and late threads run:
    a query then searches the index on its own thread."""
    import subprocess
    import sys

    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    svc.store(s, [entry(i, t) for i, t in enumerate(sentences(300))])
    svc.checkpoint()
    svc.close()
    script = tmp_path / "late.py"
    script.write_text(
        "import atexit, sys\n"
        "from a2e_mem.backends.files import search\n"
        "from a2e_mem.service import MemoryService\n"
        "search.EXACT_MAX = 0\n"
        "svc = MemoryService(sys.argv[1])\n"
        "s = svc.scope('ns', 'a')\n"
        "print('first', len(svc.retrieve(s, limit=3, query='apple banana')['entries']), flush=True)\n"
        "atexit.register(lambda: print('at exit', len(svc.retrieve(s, limit=3, query='apple banana')['entries'])))\n"
    )
    done = subprocess.run([sys.executable, str(script), str(home)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["first 3", "at exit 3"], done.stdout + done.stderr


def test_a_home_whose_name_is_not_utf8_checkpoints_and_searches_its_index(tmp_path, monkeypatch):
    """Found by an outside audit: Annoy takes its file name as UTF-8 text, so in a home whose
    name holds other bytes every checkpoint failed (UnicodeEncodeError) and nothing was ever
    indexed or purged."""
    import os
    from pathlib import Path

    home = Path(os.fsdecode(bytes(tmp_path) + b"/odd\xffname"))
    monkeypatch.setenv("MEM_HOME", str(home))
    svc = MemoryService(home)
    scope = svc.scope("ns", "a")
    svc.store(scope, [{"key": {"i": i}, "content": f"note number {i} about topic {i % 7}", "tier": "semantic"}
                      for i in range(400)])  # fmt: skip
    assert svc.checkpoint(force=True) >= 1
    assert list(home.rglob("index.ann"))
    (saved,) = home.rglob("index.ann")
    dim = svc.backend.dim  # the tests' embedder
    loaded = index.Index(saved.parent, dim)
    vector = np.zeros(dim, dtype=np.float32)
    vector[0] = 1.0
    assert len(loaded.nearest(vector, 5)) == 5
    loaded.close()
    fresh = MemoryService(home)
    assert fresh.retrieve(scope, query="note number 17")["entries"][0]["key"] == {"i": 17}
    fresh.close()
    svc.close()


def test_a_row_of_every_query_word_is_found_past_the_bm25_leaders(home, monkeypatch):
    """Found by an outside audit on 30k-row scopes: lexical relevance is capped at 1, so a row
    holding every query word in a short text can be first while more rows have a higher raw
    BM25 (repeats, in long texts) and a higher cosine (one query word alone): it is neither a
    leader nor a neighbour, and the index path must still find it by its words."""
    svc = MemoryService(home)
    s = svc.scope("ns", "a")
    near = [entry(f"near{i}", "harbor harbor") for i in range(200)]  # cosine 0.63, one query word (in every row)
    repeats = [entry(f"rep{i}", "harbor " * 6 + "lantern " * 6 + "ballast " * 20) for i in range(200)]
    target = [entry("target", "harbor lantern quay dock pier")]  # cosine 0.58, both words once
    svc.store(s, near + repeats + target)
    svc.checkpoint()
    firsts = []
    for exact_max in (10**9, 0):
        monkeypatch.setattr(search, "EXACT_MAX", exact_max)
        found = svc.retrieve(s, query="harbor lantern", limit=1)["entries"][0]
        firsts.append((found["key"]["k"], found["relevance"]))
    assert firsts[0][0] == "target" and firsts[1] == firsts[0]
