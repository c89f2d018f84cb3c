"""Bridging (`store/ops/bridge.py`): the names the best entry holds, and the query does not, lift
the candidates that hold them too; on small cases, then through the store on both backends."""

from __future__ import annotations

import numpy as np
import pytest

from a2e_mem.ops import bridge

TOPICS = "rain bakery bicycle kettle violin harbour chess tomatoes printer marathon".split()
FILLER = [f"the {TOPICS[i % 10]} and the {TOPICS[(i * 3 + 1) % 10]} again, {i} times" for i in range(40)]


def lifted(query, texts, relevance=None):
    relevance = np.linspace(0.9, 0.5, len(texts)) if relevance is None else np.asarray(relevance)
    moved, why = bridge.lift(query, relevance, np.argsort(-relevance, kind="stable"), texts.__getitem__)
    return relevance, moved, why


def test_a_rare_name_of_the_best_entry_lifts_the_candidates_that_hold_it():
    texts = ["My uncle Hollis is staying with us", *FILLER, "Hollis and Bastian finally set a date"]
    before, moved, why = lifted("who is my uncle going to marry?", texts)
    last = len(texts) - 1
    assert moved[last] == pytest.approx(before[last] * (1 + bridge.BRIDGE_GAIN))
    assert why == {last: {"names": ["hollis"], "gain": bridge.BRIDGE_GAIN, "before": round(before[last], 6),
                          "after": round(moved[last], 6)}}  # fmt: skip
    assert np.array_equal(moved[:last], before[:last])  # the leader and the others do not move


def test_a_name_the_query_says_or_most_candidates_hold_bridges_nothing():
    texts = ["Ana: my uncle Hollis is staying with us", *(f"Ana: {t}" for t in FILLER), "Hollis set a date"]
    _, _, why = lifted("when is Hollis getting married?", texts)  # named by the query: nothing to bridge to
    assert why == {}
    _, _, why = lifted("who is my uncle going to marry?", texts)
    assert list(why) == [len(texts) - 1] and why[len(texts) - 1]["names"] == ["hollis"]  # not "ana": all hold it


def test_a_name_held_by_more_than_rare_candidates_or_a_small_pool_bridges_nothing():
    many = ["My uncle Hollis is staying", *FILLER[:20], *(["Hollis again"] * (bridge.RARE + 1)), *FILLER[20:]]
    assert lifted("my uncle", many)[2] == {}
    few = ["My uncle Hollis is staying", "Hollis and Bastian set a date", "the weather"]  # a tenth of 3 < 1
    assert lifted("my uncle", few)[2] == {}


def test_a_lifted_candidate_comes_close_to_the_leader_but_stays_below_it_as_shown():
    texts = ["we moved to Leeds at last", *FILLER, "a flat in Leeds"]
    relevance = [0.5] + [0.1] * len(FILLER) + [0.48]
    _, moved, why = lifted("where did we move?", texts, relevance)
    assert round(moved[-1], 6) < round(moved[0], 6) == 0.5 and why[len(texts) - 1]["after"] == 0.499999


def test_only_a_name_inside_a_sentence_offers_a_bridge():
    found, inner = bridge.names("Ana: my uncle Hollis, and Bastian. Someone said: Turin")
    assert inner == {"hollis", "bastian", "turin"} and found == inner | {"ana", "someone"}
    assert bridge.names("Someone at work keeps trying")[1] == set()  # a first word is capitalised anyway
    texts = ["Someone at work keeps trying to get me into rowing", *FILLER, "Someone at work sings in a choir"]
    assert lifted("how do I get to work?", texts)[2] == {}


def test_calendar_words_the_pronoun_i_and_acronyms_are_no_names():
    inner = bridge.names("we climb on Fridays, on Sat and every Monday in May; the dentist said I need the TV off")[1]
    assert inner == set()
    assert bridge.names("a trip with McKay and Zoë")[1] == {"mckay", "zoe"}


def test_title_case_a_new_line_times_and_titles_offer_no_name():
    for text in (
        "Weekly Status Report For The Garden Committee",
        "we fixed the garden fence today\nSorry it took so long",
        "we met last Summer, on Christmas eve, every Sept and in Junes",
        "the check-up by Dr. Wu",
    ):
        assert bridge.names(text)[1] <= {"wu"}, text


def test_accents_and_unicode_forms_compare_equal():
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "planted by uncle José")
    assert bridge.names(decomposed)[1] == {"jose"} == {bridge.fold("JOSÉ")}
    texts = [decomposed, *FILLER, unicodedata.normalize("NFD", "José sold his car")]
    assert lifted("tomatoes planted by José", texts)[2] == {}  # the query says the name, composed


def test_a_wide_content_is_read_within_the_budget():
    wide = {"text": "met uncle Hollis", "cells": [None] * 100_000, "later": "and aunt Petra"}
    assert bridge.names(wide)[1] == {"hollis"}  # the budget ran out in the cells


def test_a_candidate_that_cannot_move_is_not_shown_as_lifted():
    texts = ["my uncle Hollis is here", *FILLER, "Hollis again"]
    relevance = [0.5] + [0.3] * len(FILLER) + [0.0]
    assert lifted("who is here?", texts, relevance)[2] == {}


def test_a_name_the_query_says_in_any_form_bridges_nothing():
    texts = ["Ana: my uncle Hollis is staying with us", *FILLER, "Hollis and Bastian finally set a date"]
    for query in ("Who is Hollis's partner?", "what did HOLLIS’s uncle do?", "hollis"):
        assert lifted(query, texts)[2] == {}, query


def test_names_come_from_the_content_only_and_its_first_characters():
    lead = {"text": "I booked the dentist, said Ana to Priya", "place": "Leeds"}  # a value alone: its first word
    assert bridge.names(lead)[1] == {"ana", "priya"}
    assert bridge.names({"text": "a " * 100_000 + "met Hollis"}) == (set(), set())  # past CHARS: not read


@pytest.fixture
def meaning(home, monkeypatch):
    """A store with the shipped embedder: the tests' `hash` one gives these entries no meaning."""
    from a2e_mem.service import MemoryService

    monkeypatch.setenv("MEM_EMBEDDER", "static")
    svc = MemoryService(home)
    yield svc
    svc.close()


def turn(tid, text):
    return {"key": {"id": tid}, "content": {"speaker": "Ana", "text": text}, "tier": "semantic"}


QUESTION = "who is my uncle going to marry?"


def uncle_story(service, *between):
    """Filler, the uncle named, the `between` turns, then the news that names him only."""
    s = service.scope("ns", "agent")
    service.store(s, [turn(f"f{i}", t) for i, t in enumerate(FILLER)])
    service.store(s, [turn("intro", "My uncle Hollis is staying with us this weekend, he never stops talking.")])
    for tid, text in between:
        service.store(s, [turn(tid, text)])
    service.store(s, [turn("news", "Hollis and Bastian finally set a date, the wedding is in Turin.")])
    return s


def test_the_store_lifts_the_second_hop_and_explains_it(meaning):
    service = meaning
    s = uncle_story(service)
    found = service.retrieve(s, query=QUESTION, limit=5, explain=True)
    by_id = {e["key"]["id"]: e for e in found["entries"]}
    assert found["entries"][0]["key"]["id"] == "intro"
    lift = by_id["news"]["explain"]["bridge"]
    assert lift["names"] == ["hollis"] and lift["from"] == {"id": "intro"} and lift["gain"] == bridge.BRIDGE_GAIN
    assert (
        by_id["news"]["relevance"]
        == lift["after"]
        == pytest.approx(lift["before"] * (1 + bridge.BRIDGE_GAIN), abs=1e-6)
    )
    assert all("bridge" not in e["explain"] for e in found["entries"] if e["key"]["id"] != "news")


def test_a_lift_moves_the_listing_order_not_only_the_score(meaning, monkeypatch):
    service = meaning
    s = uncle_story(
        service,
        ("d1", "My flatmate's uncle came round for dinner, lovely person."),
        ("d2", "Are you going to the market on Saturday?"),
    )

    def listed(gain):
        monkeypatch.setattr(bridge, "BRIDGE_GAIN", gain)
        found = service.retrieve(s, query=QUESTION, limit=5)
        return [e["key"]["id"] for e in found["entries"]]

    assert listed(0.0)[:4] == ["intro", "d2", "d1", "news"]  # the words and the vectors alone
    assert listed(1.0)[:4] == ["intro", "news", "d2", "d1"]  # the name the leader gives lifts the news


def test_min_score_cuts_on_the_relevance_shown_and_never_changes_the_relevance_of_what_it_keeps(meaning):
    service = meaning
    s = uncle_story(service)

    def found(min_score):
        got = service.retrieve(s, query=QUESTION, limit=5, min_score=min_score, explain=True)
        return {e["key"]["id"]: e for e in got["entries"]}, got["total"]

    everything, _ = found(0.0)
    lift = everything["news"]["explain"]["bridge"]
    kept, total = found(lift["before"] + 0.001)  # the news passes on its relevance after the lift
    assert "news" in kept and total == len(kept) < len(FILLER)
    assert {rid: e["relevance"] for rid, e in kept.items()} == {rid: everything[rid]["relevance"] for rid in kept}
    assert "news" not in found(lift["after"] + 0.001)[0]


def test_text_values_walk_no_shape_of_content_past_the_budget():
    from a2e_mem.schemas import text_values

    assert list(text_values({"a": "one", "b": [2, None, True, {"c": "three"}]}, 100)) == ["one", "2", "three"]
    assert list(text_values({"cells": [None] * 100_000, "late": "never read"}, 50)) == []
    assert "".join(text_values(["x" * 10, "y" * 10], 15)) == "x" * 10 + "y" * 3  # 1 for the list, 1 a string


def test_a_min_score_equal_to_a_shown_relevance_keeps_that_entry(meaning):
    service = meaning
    s = uncle_story(service)
    shown = {e["key"]["id"]: e["relevance"] for e in service.retrieve(s, query=QUESTION, limit=50)["entries"]}
    for rid in ("intro", "news"):  # the news is shown lifted: its unrounded relevance may be above or below
        kept = service.retrieve(s, query=QUESTION, limit=50, min_score=shown[rid])["entries"]
        assert rid in {e["key"]["id"] for e in kept}
        assert all(e["relevance"] >= shown[rid] for e in kept)
