"""`a2e_mem.langgraph.MemStore` against the real `langgraph` package.

- the differential tests run one sequence of operations on LangGraph's own `InMemoryStore` (the
  reference) and on ours and compare every result: a hand-written sequence, then random ones
  (hypothesis). Ranking is not compared (the reference ignores `query` without an embedder):
  a search is compared as the set of all the items it can return, and each page of ours must be
  the same slice of our own full ranking, with the reference's page size;
- a compiled `StateGraph` whose nodes use the store LangGraph injects runs in two processes
  one after the other against one store: the second run sees the first one's memories;
- TTL, async, the mapping onto `mem` (what `mem` itself sees), errors.

Module in `BOTH_BACKENDS` (conftest): every test runs on the files backend and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph")

from langgraph.store.base import BaseStore, InvalidNamespaceError  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from a2e_mem import clock  # noqa: E402
from a2e_mem.errors import InvalidInput  # noqa: E402
from a2e_mem.langgraph import MemStore  # noqa: E402
from a2e_mem.service import MemoryService  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = 10_000
_names = itertools.count()


@pytest.fixture
def memstore(home):
    with MemStore(home) as store:
        yield store


# -- the differential harness -------------------------------------------------------------------


def _items(result):
    return [(tuple(i.namespace), i.key, i.value) for i in result]


def _drop_empty_namespaces(reference: InMemoryStore) -> None:
    """The reference keeps a namespace once it was read or emptied (a defaultdict); LangGraph's
    PostgreSQL store, and ours, list only namespaces holding items."""
    for namespace in [ns for ns, items in reference._data.items() if not items]:
        del reference._data[namespace]


def run(store: BaseStore, op: tuple):
    """Apply one operation; its result in a comparable shape."""
    name, *args = op
    if name == "put":
        namespace, key, value, index = args
        store.put(namespace, key, value, index=index)
        return None
    if name == "delete":
        store.delete(*args)
        return None
    if name == "get":
        item = store.get(*args)
        return None if item is None else _items([item])[0]
    if name == "search":
        prefix, query, filter, limit, offset = args
        return _items(store.search(prefix, query=query, filter=filter, limit=limit, offset=offset))
    if name == "list":
        prefix, suffix, max_depth, limit, offset = args
        return store.list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset)
    raise AssertionError(name)


def check_same(ours: MemStore, reference: InMemoryStore, op: tuple) -> None:
    got, want = run(ours, op), run(reference, op)
    _drop_empty_namespaces(reference)
    if op[0] != "search":
        assert got == want, op
        return
    prefix, query, filter, limit, offset = op[1:]
    everything = ("search", prefix, query, filter, EVERYTHING, 0)
    ours_all, reference_all = run(ours, everything), run(reference, everything)
    _drop_empty_namespaces(reference)
    assert sorted(ours_all, key=repr) == sorted(reference_all, key=repr), op  # the same items
    assert len(got) == len(want), op  # the same page size
    assert got == ours_all[offset : offset + limit], op  # a slice of our own ranking


def check_sequence(ours: MemStore, ops: list[tuple]) -> None:
    reference = InMemoryStore()
    for op in ops:
        check_same(ours, reference, op)


ODD_KEYS = ["", " ", "a/b", "a.b", "..", "%2F", "ключ", "🙂 emoji", "x" * 500, "tab\tnew\nline", "NULL", "*"]
NAMESPACES = [
    ("users",),
    ("users", "alice"),
    ("users", "alice", "memories"),
    ("users", "bob", "memories"),
    ("ユーザー", "été", "🙂"),
    ("a b", "c/d", "*"),
]


def hand_written() -> list[tuple]:
    ops: list[tuple] = []
    for n, namespace in enumerate(NAMESPACES):
        for k, key in enumerate(ODD_KEYS[n::2]):
            value = {"text": f"note {n}-{k} about tea and chess", "n": n * 10 + k, "tags": ["x", str(k)]}
            value["nested"] = {"deep": {"level": n}, "list": [1, 2, {"k": key}]}
            ops.append(("put", namespace, key, value, None))
    ops += [
        (
            "put",
            ("users", "alice"),
            "prefs",
            {"theme": "dark", "lang": "français", "ok": True, "none": None, "n": 99},
            None,
        ),
        ("put", ("users", "alice"), "unindexed", {"text": "tea", "n": -1}, False),
        ("put", ("users", "alice"), "by-path", {"text": "green tea", "other": "chess", "n": 0.5}, ["text"]),
        ("get", ("users", "alice"), "prefs"),
        ("get", ("users", "alice"), "missing"),
        ("get", ("nowhere",), "prefs"),
        ("put", ("users", "alice"), "prefs", {"theme": "light", "n": 7}, None),  # overwrite
        ("get", ("users", "alice"), "prefs"),
        ("delete", ("users", "alice"), "prefs"),
        ("get", ("users", "alice"), "prefs"),
        ("delete", ("users", "alice"), "never-there"),
        ("put", ("users", "alice"), "prefs", {"theme": "again", "n": 8}, None),  # back after a delete
    ]
    for key in ODD_KEYS:
        ops.append(("get", ("users", "alice", "memories"), key))
        ops.append(("get", ("ユーザー", "été", "🙂"), key))
    searches = [
        ((), None, None),
        (("users",), None, None),
        (("users", "alice"), None, None),
        (("users", "al"), None, None),  # labels are whole: no item
        (("ユーザー",), None, None),
        (("users",), "tea", None),
        ((), "chess", None),
        ((), "", None),
        (("users",), None, {"n": {"$gte": 12}}),
        (("users",), None, {"n": {"$gt": 3, "$lt": 30}}),
        ((), None, {"n": {"$ne": 1}}),
        ((), None, {"theme": "again"}),
        ((), None, {"tags": ["x", "1"]}),
        ((), None, {"tags": ["x"]}),
        ((), None, {"nested": {"deep": {"level": 2}}}),
        ((), None, {"nested": {"deep": {"level": 2}, "list": [1, 2]}}),
        ((), "tea", {"text": {"$eq": "tea"}}),
    ]
    for (prefix, query, filter), (limit, offset) in itertools.product(searches, [(10, 0), (3, 0), (3, 2), (2, 7)]):
        ops.append(("search", prefix, query, filter, limit, offset))
    lists = [
        (None, None, None),
        (("users",), None, None),
        (("users", "*", "memories"), None, None),
        (None, ("memories",), None),
        (None, ("*", "memories"), None),
        (("users",), ("memories",), None),
        (None, None, 1),
        (None, None, 2),
        (("users",), None, 2),
        (("nobody",), None, None),
    ]
    for (prefix, suffix, depth), (limit, offset) in itertools.product(lists, [(100, 0), (2, 0), (2, 1), (1, 5)]):
        ops.append(("list", prefix, suffix, depth, limit, offset))
    ops += [("delete", ns, key) for ns in NAMESPACES[:3] for key in ODD_KEYS]  # namespaces empty out
    ops += [("list", None, None, None, 100, 0), ("list", None, None, 1, 100, 0), ("search", (), None, None, 100, 0)]
    return ops


def test_a_hand_written_sequence_gives_what_langgraphs_in_memory_store_gives(memstore):
    ops = hand_written()
    check_sequence(memstore, ops)
    assert len(ops) > 200


def test_a_comparison_with_a_missing_or_non_numeric_field_does_not_match(memstore):
    """Where LangGraph's in-memory store raises TypeError (its PostgreSQL store does not match)."""
    memstore.put(("f",), "number", {"n": 5})
    memstore.put(("f",), "missing", {"m": 5})
    memstore.put(("f",), "text", {"n": "five"})
    assert [i.key for i in memstore.search(("f",), filter={"n": {"$gt": 1}})] == ["number"]
    assert {i.key for i in memstore.search(("f",), filter={"n": {"$ne": 5}})} == {"missing", "text"}


def test_a_comparison_is_of_numbers_with_numbers_and_text_with_text(memstore):
    """Text that reads as a number and booleans are not numbers to `$gt`-style operators (outside
    audit 32b: "30", "Infinity" and True passed `{"$gt": 10}`); text compares with text, as in
    LangGraph's in-memory store, so ISO 8601 dates written alike compare as dates."""
    for key, value in [("text30", "30"), ("inf", "Infinity"), ("flag", True), ("real", 50), ("small", 0.5)]:
        memstore.put(("f",), key, {"n": value})
    memstore.put(("f",), "may", {"n": "2024-05-01"})
    memstore.put(("f",), "june", {"n": "2024-06-01"})

    def keys(condition):
        return sorted(i.key for i in memstore.search(("f",), filter={"n": condition}))

    assert keys({"$gt": 10}) == ["real"]
    assert keys({"$gte": 0.5}) == ["real", "small"]
    assert keys({"$lt": 100}) == ["real", "small"]
    assert keys({"$gt": "2"}) == ["inf", "june", "may", "text30"]  # text against text only
    assert keys({"$gte": "2024-05-15"}) == ["inf", "june", "text30"]  # "I" and "3" sort after "2"


def test_the_differential_harness_catches_a_difference(memstore):
    """The comparison can fail: a store that loses one write is caught."""
    reference = InMemoryStore()
    memstore.put(("ns",), "only-ours", {"a": 1})
    with pytest.raises(AssertionError):
        check_same(memstore, reference, ("search", ("ns",), None, None, 10, 0))


KEYS = st.sampled_from(["a", "b", "", "ключ", "x/y"])
SPACES = st.sampled_from([("p",), ("p", "q"), ("p", "q", "r"), ("s", "q"), ("🙂",)])
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3), "word": st.sampled_from(["tea", "chess", "été", ""])},
    optional={"flag": st.booleans(), "sub": st.fixed_dictionaries({"m": st.integers(0, 2)})},
)
FILTERS = st.one_of(
    st.none(),
    st.fixed_dictionaries({"n": st.integers(-3, 3)}),
    st.fixed_dictionaries({"n": st.sampled_from([{"$gt": 0}, {"$lte": -1}, {"$ne": 2}])}),
    st.fixed_dictionaries({"word": st.sampled_from(["tea", "chess"])}),
    st.fixed_dictionaries({"sub": st.fixed_dictionaries({"m": st.integers(0, 2)})}),
)
PREFIXES = st.sampled_from([(), ("p",), ("p", "q"), ("s",), ("🙂",), ("z",)])
OPS = st.one_of(
    st.tuples(st.just("put"), SPACES, KEYS, VALUES, st.sampled_from([None, False, ["word"]])),
    st.tuples(st.just("delete"), SPACES, KEYS),
    st.tuples(st.just("get"), SPACES, KEYS),
    st.tuples(
        st.just("search"),
        PREFIXES,
        st.sampled_from([None, "tea", "chess q"]),
        FILTERS,
        st.integers(0, 4),
        st.integers(0, 5),
    ),
    st.tuples(
        st.just("list"),
        st.sampled_from([None, ("p",), ("p", "*")]),
        st.sampled_from([None, ("q",), ("*", "r")]),
        st.sampled_from([None, 1, 2]),
        st.integers(1, 4),
        st.integers(0, 3),
    ),
)


@given(ops=st.lists(OPS, min_size=1, max_size=25))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_sequences_give_what_langgraphs_in_memory_store_gives(home, ops):
    # each example gets a mem namespace of its own: the examples share the test's store
    service = MemoryService(home)
    try:
        check_sequence(MemStore(service=service, namespace=f"lg-{next(_names)}"), ops)
    finally:
        service.close()


# -- what is not compared: times, scores, the batch ---------------------------------------------


def test_an_overwrite_keeps_created_at_and_moves_updated_at(memstore):
    memstore.put(("u",), "k", {"v": 1})
    first = memstore.get(("u",), "k")
    clock.set_offset(5)
    memstore.put(("u",), "k", {"v": 2})
    second = memstore.get(("u",), "k")
    assert second.created_at == first.created_at
    assert (second.updated_at - first.updated_at).total_seconds() >= 5
    assert second.value == {"v": 2}


def test_a_query_ranks_by_relevance_with_scores_and_unindexed_items_last(memstore):
    memstore.put(("docs",), "tea", {"text": "green tea from japan"})
    memstore.put(("docs",), "chess", {"text": "a chess opening"})
    memstore.put(("docs",), "hidden", {"text": "green tea"}, index=False)
    found = memstore.search(("docs",), query="green tea")
    assert [i.key for i in found] == ["tea", "chess", "hidden"]
    assert 0 <= found[1].score < found[0].score <= 1
    assert found[2].score is None
    assert all(i.score is None for i in memstore.search(("docs",)))  # no query, no score


def test_index_paths_choose_what_a_query_finds(memstore):
    memstore.put(("docs",), "a", {"title": "chess", "body": "tea"}, index=["title"])
    memstore.put(("docs",), "b", {"title": "tea", "body": "chess"}, index=["title"])
    assert [i.key for i in memstore.search(("docs",), query="chess")][0] == "a"
    assert [i.key for i in memstore.search(("docs",), query="tea")][0] == "b"


def test_one_batch_reads_first_then_writes_the_last_put_of_each_key(memstore):
    from langgraph.store.base import GetOp, PutOp

    memstore.put(("b",), "k", {"v": "old"})
    results = memstore.batch(
        [
            PutOp(("b",), "k", {"v": "first"}),
            GetOp(("b",), "k"),
            PutOp(("b",), "k", {"v": "last"}),
            PutOp(("b",), "gone", {"v": 1}),
            PutOp(("b",), "gone", None),
        ]
    )
    assert results[0] is None and results[1].value == {"v": "old"}
    assert memstore.get(("b",), "k").value == {"v": "last"}
    assert memstore.get(("b",), "gone") is None


def test_async_methods(memstore):
    async def main():
        await memstore.aput(("a", "sync"), "k", {"text": "async tea"})
        item = await memstore.aget(("a", "sync"), "k")
        found = await memstore.asearch(("a",), query="tea")
        spaces = await memstore.alist_namespaces(prefix=("a",))
        await memstore.adelete(("a", "sync"), "k")
        return item, found, spaces, await memstore.aget(("a", "sync"), "k")

    item, found, spaces, after = asyncio.run(main())
    assert item.value == {"text": "async tea"} and [i.key for i in found] == ["k"]
    assert spaces == [("a", "sync")] and after is None


# -- TTL ------------------------------------------------------------------------------------------


def test_an_item_with_a_ttl_disappears_after_it(memstore):
    memstore.put(("t",), "short", {"v": 1}, ttl=1)  # minutes
    memstore.put(("t",), "forever", {"v": 2})
    clock.set_offset(30)
    assert memstore.get(("t",), "short", refresh_ttl=False) is not None
    clock.set_offset(61)
    assert memstore.get(("t",), "short") is None
    assert [i.key for i in memstore.search(("t",))] == ["forever"]
    memstore.delete(("t",), "forever")
    assert memstore.list_namespaces() == []  # expired items hold no namespace


def test_a_read_refreshes_the_ttl_unless_told_not_to(memstore):
    memstore.put(("t",), "read", {"v": 1}, ttl=1)
    memstore.put(("t",), "searched", {"v": 1}, ttl=1)
    memstore.put(("t",), "untouched", {"v": 1}, ttl=1)
    clock.set_offset(50)
    assert memstore.get(("t",), "read") is not None  # expires 60 s from now
    assert {i.key for i in memstore.search(("t",), filter={"v": 1})} == {"read", "searched", "untouched"}
    assert memstore.get(("t",), "untouched", refresh_ttl=False) is not None
    clock.set_offset(100)
    assert memstore.get(("t",), "read", refresh_ttl=False) is not None
    assert memstore.get(("t",), "untouched", refresh_ttl=False) is not None  # the search refreshed it too
    memstore.search(("t",), refresh_ttl=False)
    clock.set_offset(155)
    assert memstore.get(("t",), "read", refresh_ttl=False) is None  # 100 + 60 would be 160: not refreshed at 100


def test_the_store_ttl_config_sets_a_default_and_the_refresh(home):
    with MemStore(home, ttl={"default_ttl": 1, "refresh_on_read": False}) as store:
        store.put(("t",), "k", {"v": 1})
        store.put(("t",), "kept", {"v": 1}, ttl=None)  # LangGraph: an explicit None is no expiry
        clock.set_offset(40)
        assert store.get(("t",), "k") is not None  # no refresh by default
        clock.set_offset(70)
        assert store.get(("t",), "k") is None
        assert store.get(("t",), "kept") is not None


# -- the mapping onto mem -------------------------------------------------------------------------


def test_items_are_mem_records_in_one_namespace_one_scope_per_tuple(home, memstore):
    memstore.put(("users", "alice", "memories"), "m1", {"text": "likes tea"})
    memstore.put(("users", "bob"), "m1", {"text": "plays chess"})
    service = MemoryService(home)
    try:
        assert [n["namespace"] for n in service.namespaces()] == ["langgraph"]
        scopes = sorted(s["scope"] for s in service.stats("langgraph") if s["kind"] == "langgraph")
        assert scopes == ["users/alice/memories", "users/bob"]  # as `mem stats` shows a scope
        dump = [json.loads(line) for line in service.export("langgraph")]
        assert {(tuple(r["scope"]), r["id"], r["doc"]["value"]["text"]) for r in dump} == {
            (("users", "alice", "memories"), "m1", "likes tea"),
            (("users", "bob"), "m1", "plays chess"),
        }
    finally:
        service.close()


def test_an_export_imported_elsewhere_is_the_same_langgraph_store(home, tmp_path, memstore):
    memstore.put(("users", "alice"), "m1", {"text": "green tea"})
    memstore.put(("users", "alice"), "m2", {"text": "chess"}, index=False)
    lines = list(memstore.service.export("langgraph"))
    other = MemoryService(tmp_path / "other-home", store="")
    try:
        assert other.import_records(lines)["new"] == 2
        with MemStore(service=other) as copy:
            found = copy.search(("users",), query="green tea")
            assert [(i.key, i.score is None) for i in found] == [("m1", False), ("m2", True)]
    finally:
        other.close()


def test_a_reindex_to_another_embedder_re_embeds_the_items(home, monkeypatch):
    with MemStore(home) as store:
        store.put(("docs",), "tea", {"text": "green tea from japan", "other": "chess"}, index=["text"])
        store.put(("docs",), "chess", {"text": "a chess opening"})
        store.put(("docs",), "hidden", {"text": "green tea"}, index=False)
        store.service.checkpoint(force=True)  # on files, the records are in a checkpoint too
    monkeypatch.setenv("MEM_EMBEDDER", "hash:32")
    service = MemoryService(home)
    try:
        assert service.reindex("hash:32")["dim"] == 32
        assert [f for f in service.doctor() if "readable" not in f["problem"]] == []
        with MemStore(service=service) as store:
            found = store.search(("docs",), query="green tea")
            assert [i.key for i in found] == ["tea", "chess", "hidden"]
            assert found[0].score > 0 and found[2].score is None
            store.put(("docs",), "new", {"text": "black tea"})  # written with the new embedder
            assert {i.key for i in store.search(("docs",), query="black tea", limit=2)} == {"new", "tea"}
    finally:
        service.close()


def test_the_core_never_imports_langgraph():
    code = "import sys, cli.main, store.service; assert not [m for m in sys.modules if m.startswith('langgraph')]"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_two_namespace_options_keep_two_stores_apart(home):
    with MemStore(home, namespace="team-a") as a, MemStore(home, namespace="team-b") as b:
        a.put(("shared",), "k", {"v": "a"})
        assert b.get(("shared",), "k") is None
        assert b.list_namespaces() == []


def test_bad_namespaces_and_keys_are_refused(memstore):
    from langgraph.store.base import GetOp, PutOp

    for bad in [("a.b",), ("",), ("ok", "x\x00y")]:
        with pytest.raises(InvalidNamespaceError):
            memstore.put(bad, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        memstore.batch([PutOp((), "k", {"v": 1})])  # batch checks what put would
    with pytest.raises(InvalidNamespaceError):
        memstore.batch([GetOp(("a.b",), "k")])
    with pytest.raises(ValueError):
        memstore.put(("a",), "nul\x00key", {"v": 1})
    with pytest.raises(InvalidInput, match="max_entry_bytes"):
        memstore.put(("a",), "huge", {"text": "x" * 300_000})  # over the 256 KiB default
    assert memstore.list_namespaces() == []


# -- LangGraph itself: a compiled graph in two processes ----------------------------------------

GRAPH = textwrap.dedent(
    """
    import json, sys
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    from a2e_mem.langgraph import MemStore


    class State(TypedDict):
        user: str
        fact: str
        recalled: list


    def remember(state: State, *, store: BaseStore) -> dict:
        # the store LangGraph injects into a node that asks for it
        key = f"fact-{len(store.search(('users', state['user'], 'facts'), limit=100))}"
        store.put(("users", state["user"], "facts"), key, {"text": state["fact"]})
        return {}


    def recall(state: State) -> dict:
        store = get_store()  # the same store, reached through the run's config
        found = store.search(("users", state["user"]), query="what does the user like to drink", limit=10)
        return {"recalled": [[i.key, i.value["text"], i.score] for i in found]}


    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)

    with MemStore() as memories:  # MEM_HOME / MEM_STORE, as for the mem command
        graph = builder.compile(store=memories)
        out = graph.invoke({"user": sys.argv[1], "fact": sys.argv[2], "recalled": []})
    print(json.dumps(out["recalled"]))
    """
)


def run_graph(user: str, fact: str) -> list:
    done = subprocess.run(
        [sys.executable, "-c", GRAPH, user, fact],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_compiled_graph_run_in_two_processes_shares_its_memories(home):
    first = run_graph("alice", "Alice drinks green tea every morning")
    assert [(key, text) for key, text, _ in first] == [("fact-0", "Alice drinks green tea every morning")]
    second = run_graph("alice", "Alice plays chess on Sundays")
    assert {(key, text) for key, text, _ in second} == {
        ("fact-0", "Alice drinks green tea every morning"),
        ("fact-1", "Alice plays chess on Sundays"),
    }
    assert all(isinstance(score, float) for _, _, score in second)
    other_user = run_graph("bob", "Bob drinks coffee")
    assert [text for _, text, _ in other_user] == ["Bob drinks coffee"]  # one user's namespace only
    with MemStore(home) as memories:  # and this process sees what both wrote
        assert memories.list_namespaces() == [("users", "alice", "facts"), ("users", "bob", "facts")]


def test_parallel_nodes_and_an_async_graph_use_the_injected_store(memstore):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        seen: int

    def writer(name: str):
        def write(state: State, *, store: BaseStore) -> dict:
            for i in range(10):
                store.put(("par", name), str(i), {"text": f"{name} {i}"})
            return {}

        return write

    async def count(state: State, *, store: BaseStore) -> dict:
        return {"seen": len(await store.asearch(("par",), limit=100))}

    builder = StateGraph(State)
    for name in ("left", "right"):  # two branches: LangGraph runs them at once
        builder.add_node(name, writer(name))
        builder.add_edge(START, name)
    builder.add_node("count", count)
    builder.add_edge(["left", "right"], "count")
    builder.add_edge("count", END)
    graph = builder.compile(store=memstore)
    assert asyncio.run(graph.ainvoke({"seen": 0}))["seen"] == 20
    assert memstore.list_namespaces(prefix=("par",)) == [("par", "left"), ("par", "right")]


WRITER = textwrap.dedent(
    """
    import sys
    from a2e_mem.langgraph import MemStore

    worker, count = sys.argv[1], int(sys.argv[2])
    with MemStore() as memories:
        for i in range(count):
            memories.put(("shared", "notes"), f"{worker}-{i}", {"text": f"note {i} from {worker}"})
    """
)


def test_two_processes_writing_at_once_lose_nothing(home):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, w, "25"], cwd=ROOT, env=dict(os.environ)) for w in ("a", "b")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    with MemStore(home) as memories:
        found = memories.search(("shared",), limit=1000)
    assert sorted(i.key for i in found) == sorted(f"{w}-{i}" for w in "ab" for i in range(25))


# -- issue 14: the outside audit ------------------------------------------------------------------


@pytest.mark.parametrize("ttl", ["x", "5", [1], float("nan"), float("inf"), 0, -1, True, 1e307])
def test_a_ttl_that_is_not_a_finite_positive_number_of_minutes_is_refused(memstore, ttl):
    with pytest.raises(ValueError, match="ttl"):
        memstore.put(("t",), "k", {"v": 1}, ttl=ttl)
    assert memstore.search(("t",)) == []  # nothing was written
    memstore.put(("t",), "k", {"v": 1}, ttl=0.5)  # half a minute is a finite positive number
    memstore.put(("t",), "k", {"v": 1}, ttl=None)  # None: no expiry, as in LangGraph


@pytest.mark.parametrize("page", [{"limit": -1}, {"offset": -1}, {"limit": "3"}, {"limit": 2.0}, {"offset": True}])
def test_a_negative_or_non_integer_limit_or_offset_is_refused(memstore, page):
    for key in ("a", "b", "c"):
        memstore.put(("t", key), key, {"v": key})
    with pytest.raises(ValueError, match="limit|offset"):
        memstore.search(("t",), **page)  # LangGraph's in-memory store: limit=-1 drops the last item
    with pytest.raises(ValueError, match="limit|offset"):
        memstore.list_namespaces(prefix=("t",), **page)
    assert len(memstore.search(("t",), limit=0)) == 0
    assert len(memstore.list_namespaces(prefix=("t",), offset=1)) == 2


def test_a_value_holding_nan_is_refused(memstore):
    with pytest.raises(InvalidInput, match="finite"):
        memstore.put(("t",), "k", {"v": float("nan")})


def test_one_memstore_shared_by_threads_loses_nothing(home):
    """LangGraph runs parallel branches in threads on one store: its batches go one at a time."""
    from tests.threads import run_in_threads

    store = MemStore(home)

    def work(worker: int) -> None:
        for i in range(40):
            store.put(("w", str(worker)), f"k{i}", {"text": f"note {worker} {i}"})
            if i % 10 == 0:
                store.search(("w",), query=f"note {worker}", limit=5)

    failures = run_in_threads(work, 6)
    try:
        assert failures == []
        assert len(store.search(("w",), limit=EVERYTHING)) == 240
    finally:
        store.close()


def test_a_memory_and_a_memstore_sharing_one_service_share_its_lock(home):
    """A `MemStore` given a `Memory`'s service: threads using both go one at a time (the engine
    is not thread-safe), so none fails and nothing is lost."""
    from a2e_mem import Memory
    from tests.threads import run_in_threads

    memory = Memory(home)
    store = MemStore(service=memory.service)

    def work(worker: int) -> None:
        for i in range(30):
            if worker % 2:
                store.put(("w", str(worker)), f"k{i}", {"text": f"note {worker} {i}"})
            else:
                memory.store({"text": f"fact {worker} {i}"}, key={"id": f"{worker}-{i}"})

    try:
        assert run_in_threads(work, 6) == []
        assert len(store.search(("w",), limit=EVERYTHING)) == 90
        assert memory.retrieve(limit=1000)["total"] == 90
    finally:
        store.close()
        memory.close()


def test_a_closed_memstore_refuses_every_call_and_closes_once(home):
    from a2e_mem.errors import Closed

    store = MemStore(home)
    store.close()
    store.close()
    with pytest.raises(Closed):
        store.get(("t",), "k")


@pytest.mark.parametrize("checkpoints", ["inline", "background"])
def test_editing_what_a_read_returned_changes_nothing_stored(home, monkeypatch, checkpoints):
    """Found by an outside audit: `get` and `search` handed out the files backend's own records
    (those written since the last checkpoint), so editing a returned value changed every later
    read in the process, and an inline checkpoint saved the edit to disk, with no write."""
    monkeypatch.setenv("MEM_CHECKPOINTS", checkpoints)
    monkeypatch.setenv("MEM_CHECKPOINT_BYTES", "2000")
    with MemStore(home=home) as store:
        store.put(("users", "u1"), "prefs", {"n": 1, "tags": ["a"]})
        store.get(("users", "u1"), "prefs").value["tags"].append("edited")
        store.search(("users",))[0].value["n"] = 999
        for i in range(60):  # enough to make a checkpoint due
            store.put(("users", "u1"), f"other{i}", {"i": i, "pad": "x" * 50})
        assert store.get(("users", "u1"), "prefs").value == {"n": 1, "tags": ["a"]}
    with MemStore(home=home) as fresh:
        assert fresh.get(("users", "u1"), "prefs").value == {"n": 1, "tags": ["a"]}


def test_a_lone_string_of_index_paths_is_one_path(home):
    """`fields="text"` (or a put's `index="text"`) indexed the fields "t", "e", "x", "t": the
    item was found by the wrong words (outside audit 30b). A lone string is one path."""
    value = {"text": "hello world", "t": "zebra", "e": "elephant"}
    with MemStore(home, fields="text") as store:  # type: ignore[arg-type]
        store.put(("a",), "by-fields", value)
        store.put(("b",), "by-index", value, index="text")  # type: ignore[arg-type]
        for labels in (("a",), ("b",)):
            (found,) = store.search(labels, query="hello world")
            assert found.score is not None and found.score > 0.9
            (other,) = store.search(labels, query="zebra elephant")
            assert other.score is not None and other.score < 0.5
        with pytest.raises(ValueError, match="index must be a path"):
            store.put(("a",), "k", value, index=[3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "options, error", [({"namespace": 5}, TypeError), ({"store": 5}, TypeError), ({"fields": 5}, ValueError)]
)
def test_opening_with_an_option_of_the_wrong_type_says_which(home, options, error):
    with pytest.raises(error, match=next(iter(options))):
        MemStore(home, **options)
