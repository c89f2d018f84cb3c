"""Issue 13: a segment's term ids are read from the bytes of `lex_vocab.json` (`lexical.Vocabulary`)
and must be exactly those of the parsed file, for every term and for terms it does not hold."""

from __future__ import annotations

import random

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
    assert vocab._keys is not None  # past FIND_FIRST lookups: hashed
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


def test_a_segment_saves_its_vocabulary_table_and_lookups_use_it_from_the_first(tmp_path, monkeypatch):
    """No lookup searches the bytes and no process makes the table (150-300 ms at a million
    terms) when the segment's writer saved it; a segment without it (older) still answers."""
    from a2e_mem.lexical import SegmentLexicon

    texts = [f"note {i} about topic{i % 7} and item{i}" for i in range(400)]
    write_segment_lexicon(tmp_path, texts)
    assert (tmp_path / "lex_keys.npy").exists() and (tmp_path / "lex_places.npy").exists()
    made = []
    monkeypatch.setattr(lexical, "vocabulary_table", lambda raw: made.append(raw))  # must not be called
    vocab = SegmentLexicon(tmp_path).vocab
    assert isinstance(vocab, Vocabulary) and vocab._keys is not None  # before any lookup
    parsed = orjson.loads((tmp_path / "lex_vocab.json").read_bytes())
    asked = [*parsed, "absent", "item400"]
    assert [vocab.get(term) for term in asked] == [parsed.get(term) for term in asked]
    assert made == []
    monkeypatch.undo()
    for name in ("lex_keys.npy", "lex_places.npy"):  # as a segment of an older version has it
        (tmp_path / name).unlink()
    older = SegmentLexicon(tmp_path).vocab
    assert isinstance(older, Vocabulary) and older._keys is None
    assert [older.get(term) for term in asked] == [parsed.get(term) for term in asked]


def test_a_table_of_another_size_is_not_used(tmp_path):
    ids = {f"w{i}": i for i in range(50)}
    raw = orjson.dumps(ids)
    keys, places = lexical.vocabulary_table(orjson.dumps({f"w{i}": i for i in range(49)}))
    vocab = Vocabulary.over(raw, len(ids), (keys, places))
    assert isinstance(vocab, Vocabulary) and vocab._keys is None
    assert [vocab.get(w) for w in [*ids, "w50"]] == [*ids.values(), None]
