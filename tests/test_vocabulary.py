"""Issue 13: a segment's term ids are read from the bytes of `lex_vocab.json` (`lexical.Vocabulary`)
and must be exactly those of the parsed file, for every term and for terms it does not hold."""

from __future__ import annotations

import os
import random
import threading
import time

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2e_mem import lexical
from a2e_mem.lexical import Vocabulary, terms, write_segment_lexicon

# words as the tokeniser makes them, with long ones sharing their first and last 8 bytes
WORD = st.text(st.characters(categories=["Ll", "Lo", "Nd"]), min_size=1, max_size=24)


MODES = {"search the bytes": 10**9, "hashes": 0}


def lookups(raw: bytes, n_terms: int, asked: list[str], mode: str) -> list[int | None]:
    vocab = Vocabulary.over(raw, n_terms)
    assert isinstance(vocab, Vocabulary)
    vocab.FIND_FIRST = MODES[mode]
    return [vocab.get(term) for term in asked]


@settings(max_examples=60, deadline=None)
@given(st.lists(WORD, unique=True, max_size=200), st.lists(WORD, max_size=20))
def test_every_term_and_no_other_is_found_with_its_id(words, others):
    ids = dict(zip(words, random.Random(len(words)).sample(range(10**6), len(words)), strict=True))
    raw = orjson.dumps(ids)
    asked = words + others + [f"abcdefgh{w}ijklmnop" for w in words[:5]]
    for mode in MODES:
        assert lookups(raw, len(ids), asked, mode) == [ids.get(term) for term in asked], mode


def test_the_hashed_lookups_of_a_server_find_the_same_ids():
    words = [f"abcdefgh{i}ijklmnop" for i in range(500)] + [f"e{i}" for i in range(500)]  # same ends, long
    ids = {w: i for i, w in enumerate(words)}
    vocab = Vocabulary.over(orjson.dumps(ids), len(ids))
    assert isinstance(vocab, Vocabulary)
    found = [vocab.get(w) for w in [*words, "e1000", "abcdefgh9ijklmnoq", "zz"]]
    assert vocab._table is not None  # past FIND_FIRST lookups: hashed (a small vocabulary: at once)
    assert found == [*range(1000), None, None, None]


@pytest.mark.parametrize("vocab", [{}, {"a": 0}, {'quo"te': 0, "b": 1}, {"back\\slash": 0}])
def test_a_file_not_laid_out_as_expected_is_parsed_instead(vocab):
    raw = orjson.dumps(vocab)
    found = Vocabulary.over(raw, len(vocab))
    assert isinstance(found, Vocabulary) == (raw.count(b'"') == 2 * len(vocab) and b"\\" not in raw)
    assert [found.get(term) for term in vocab] == list(vocab.values()) and found.get("zz") is None


def test_a_written_segment_lexicon_reads_back_through_it(tmp_path):
    texts = [f"note {i} about caf\u00e9 na\u00efve r\u00e9sum\u00e9 item{i}" for i in range(300)]
    write_segment_lexicon(tmp_path, texts)
    from a2e_mem.lexical import SegmentLexicon

    lexicon = SegmentLexicon(tmp_path)
    assert isinstance(lexicon.vocab, Vocabulary)
    parsed = orjson.loads((tmp_path / "lex_vocab.json").read_bytes())
    for term in {t for text in texts for t in terms(text)} | {"absent"}:
        assert lexicon.vocab.get(term) == parsed.get(term)
        assert list(lexicon.term_rows(term)) == [row for row, text in enumerate(texts) if term in terms(text)]


def test_a_large_vocabulary_makes_its_table_aside_and_answers_meanwhile(monkeypatch):
    """A server's query never waits the 150-200 ms a million terms take to hash: the table of a
    large vocabulary is made on a thread, and lookups search the bytes until it is there."""
    words = [f"w{i}" for i in range(2000)]
    ids = {w: i for i, w in enumerate(words)}
    vocab = Vocabulary.over(orjson.dumps(ids), len(ids))
    assert isinstance(vocab, Vocabulary)
    monkeypatch.setattr(Vocabulary, "BUILD_ASIDE", 0)  # every vocabulary counts as large
    release, made = threading.Event(), threading.Event()

    def held(raw):  # the table is made only once the test lets it
        assert release.wait(30)
        table = make(raw)
        made.set()
        return table

    make = lexical._Table.of
    monkeypatch.setattr(lexical._Table, "of", held)
    asked = [*words[:300], "absent", "w99999"]
    assert [vocab.get(w) for w in asked] == [*range(300), None, None]  # answered while the table waits
    assert vocab._table is None
    release.set()
    assert made.wait(30)
    deadline = time.monotonic() + 30
    while vocab._table is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert vocab._table is not None
    assert [vocab.get(w) for w in [*words[300:], "w2000"]] == [*range(300, 2000), None]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_child_forked_while_the_table_is_made_makes_its_own(monkeypatch):
    words = [f"w{i}" for i in range(500)]
    vocab = Vocabulary.over(orjson.dumps({w: i for i, w in enumerate(words)}), len(words))
    assert isinstance(vocab, Vocabulary)
    monkeypatch.setattr(Vocabulary, "BUILD_ASIDE", 0)
    release = threading.Event()
    make = lexical._Table.of
    monkeypatch.setattr(lexical._Table, "of", lambda raw: (release.wait(30), make(raw))[1])
    assert [vocab.get(w) for w in words[:20]] == list(range(20))  # the parent's thread waits on `release`
    pid = os.fork()
    if pid == 0:  # the child: its own thread makes the table, the parent's is not here
        release.set()
        deadline = time.monotonic() + 20
        while vocab._table is None and time.monotonic() < deadline:
            vocab.get(f"probe{time.monotonic()}")
            time.sleep(0.01)
        os._exit(0 if vocab._table is not None and vocab.get("w400") == 400 else 1)
    _, status = os.waitpid(pid, 0)
    release.set()
    assert os.waitstatus_to_exitcode(status) == 0
