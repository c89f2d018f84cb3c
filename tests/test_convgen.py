"""The long-conversation benchmark set (bench/convgen.py): reproducible, big enough, consistent."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest

from bench import convgen


@pytest.fixture(scope="module")
def data() -> dict:
    return convgen.generate()


def test_same_seed_same_bytes_and_the_committed_file_is_the_generators(data: dict) -> None:
    blob = convgen.dumps(data)
    assert convgen.dumps(convgen.generate()) == blob
    assert convgen.dumps(convgen.generate(convgen.SEED + 1)) != blob
    assert convgen.OUT.read_bytes() == blob, "regenerate with `python bench/convgen.py`"
    assert len(blob) < 3_000_000


def test_counts_and_types(data: dict) -> None:
    convs = data["conversations"]
    assert all(len(c["sessions"]) >= 20 for c in convs)
    assert sum(len(c["turns"]) for c in convs) >= 2000
    assert sum(len(c["questions"]) for c in convs) >= 500
    assert any(len(c["speakers"]) > 2 for c in convs)
    for split in ("dev", "test"):
        kinds = Counter(q["type"] for c in convs if c["split"] == split for q in c["questions"])
        assert set(kinds) == set(convgen.TYPES), (split, kinds)


def test_every_evidence_id_is_a_turn_of_its_conversation(data: dict) -> None:
    all_ids = [t["id"] for c in data["conversations"] for t in c["turns"]]
    assert len(all_ids) == len(set(all_ids))
    for c in data["conversations"]:
        turns = {t["id"]: t for t in c["turns"]}
        dates = {s["session"]: s["date"] for s in c["sessions"]}
        assert all(t["date"] == dates[t["session"]] for t in c["turns"])
        assert [s["date"] for s in c["sessions"]] == sorted(s["date"] for s in c["sessions"])
        for q in c["questions"]:
            assert q["evidence"] and all(e in turns for e in q["evidence"]), q
            assert q["type"] in convgen.TYPES


def test_multi_hop_evidence_is_sessions_apart(data: dict) -> None:
    for c in data["conversations"]:
        turns = {t["id"]: t for t in c["turns"]}
        for q in c["questions"]:
            if q["type"] == "multi-hop":
                assert len({turns[e]["session"] for e in q["evidence"]}) >= 2, q


def test_open_domain_questions_share_no_word_with_their_evidence(data: dict) -> None:
    for c in data["conversations"]:
        convgen.check_open_domain(c)
    broken = {**data["conversations"][0]}
    q = next(q for q in broken["questions"] if q["type"] == "open-domain")
    turn = next(t for t in broken["turns"] if t["id"] == q["evidence"][0])
    broken["questions"] = [{**q, "question": q["question"] + " " + turn["text"]}]
    with pytest.raises(ValueError):
        convgen.check_open_domain(broken)


def test_relative_dates_name_the_day_they_answer() -> None:
    rng = random.Random(3)
    session = dt.date(2023, 3, 15)  # a Wednesday
    seen = set()
    for _ in range(300):
        phrase, day, answer = convgen.past_phrase(session, rng)
        seen.add(phrase.split()[0])
        assert day < session
        if phrase == "yesterday":
            assert day == dt.date(2023, 3, 14) and answer == "2023-03-14"
        elif phrase.startswith("last ") and phrase != "last month":
            assert phrase == f"last {convgen.WEEKDAYS[day.weekday()]}" and 2 <= (session - day).days <= 7
        elif phrase.endswith("weeks ago"):
            assert (session - day).days in (14, 21) and answer == f"around {day.isoformat()}"
        elif phrase.startswith("back in "):
            assert phrase == f"back in {convgen.MONTHS[day.month - 1]}" and day.month == 1
            assert answer == "January 2023"
        else:
            assert phrase == "last month" and answer == "February 2023"
    assert {"yesterday", "last", "two", "three", "back"} <= seen
    phrase, day = convgen.next_weekday(session, rng)
    assert phrase == f"next {convgen.WEEKDAYS[day.weekday()]}" and 1 <= (day - session).days <= 7
