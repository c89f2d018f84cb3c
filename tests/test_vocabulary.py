"""Issue 13: a segment's term ids are read from the bytes of `lex_vocab.json` (`lexical.Vocabulary`)
and must be exactly those of the parsed file, for every term and for terms it does not hold."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
