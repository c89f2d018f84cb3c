"""Date phrases read against a fixed reference time (store/timeaware.py): no store involved."""

from __future__ import annotations

import datetime as dt

import pytest

from a2e_mem import timeaware as ta
from a2e_mem.errors import InvalidInput

REF = dt.date(2021, 6, 18)  # a Friday
NOW = dt.datetime(2021, 6, 18, 15, 30, tzinfo=dt.timezone.utc).timestamp()


def spans(text, ref=REF, query=False):
    return [
        (dt.date.fromordinal(m.span[0]).isoformat(), dt.date.fromordinal(m.span[1]).isoformat())
        for m in ta.mentions(text, ref, query)
    ]


@pytest.mark.parametrize(
    "text, first, last",
    [
        ("we got back yesterday", "2021-06-17", "2021-06-17"),
        ("the day before yesterday", "2021-06-16", "2021-06-16"),
        ("we planted it last Tuesday", "2021-06-15", "2021-06-15"),
        ("I saw them last Friday", "2021-06-11", "2021-06-11"),  # the reference is a Friday: a week back
        ("the van comes next Thursday", "2021-06-24", "2021-06-24"),
        ("I had my teeth out three weeks ago", "2021-05-25", "2021-05-31"),
        ("a couple of days ago", "2021-06-16", "2021-06-16"),
        ("3 days ago", "2021-06-15", "2021-06-15"),
        ("I gave a talk last month", "2021-05-01", "2021-05-31"),
        ("two years ago I moved", "2019-01-01", "2019-12-31"),
        ("last week was hard", "2021-06-07", "2021-06-13"),
        ("last weekend", "2021-06-12", "2021-06-13"),
        ("last year", "2020-01-01", "2020-12-31"),
        ("next month", "2021-07-01", "2021-07-31"),
        ("back in March", "2021-03-01", "2021-03-31"),
        ("in August", "2020-08-01", "2020-08-31"),  # a later month than the reference: last year's
        ("last summer", "2020-06-01", "2020-08-31"),
        ("on 12 May", "2021-05-12", "2021-05-12"),
        ("on 12 May 2019", "2019-05-12", "2019-05-12"),
        ("March 3rd, 2020", "2020-03-03", "2020-03-03"),
        ("in February 2021", "2021-02-01", "2021-02-28"),
        ("2020-02-29", "2020-02-29", "2020-02-29"),
        ("in 2017", "2017-01-01", "2017-12-31"),
        ("in two weeks", "2021-06-29", "2021-07-05"),
    ],
)
def test_a_phrase_is_read_against_the_reference(text, first, last):
    assert spans(text) == [(first, last)]


@pytest.mark.parametrize(
    "text",
    ["I may go", "two hours and four minutes", "We met at 5 pm", "1500 words", "a 31 February party", "Hey there"],
)
def test_words_that_are_not_dates_are_not_read_as_dates(text):
    assert spans(text) == []


def test_a_month_named_without_a_year_in_a_query_matches_that_month_of_any_year():
    (june,) = ta.read_query("what did we do in June?", NOW).periods
    assert june.any_year
    assert ta._inside(june, (dt.date(2017, 6, 3).toordinal(),) * 2) == 1.0
    assert ta._inside(june, (dt.date(2017, 7, 3).toordinal(),) * 2) == 0.0


def test_relative_phrases_of_a_query_are_read_against_now_or_the_date_it_gives():
    (last_week,) = ta.read_query("what happened last week?", NOW).periods
    assert dt.date.fromordinal(last_week.span[0]) == dt.date(2021, 6, 7)
    (given,) = ta.read_query("as of 2023-05-08, what happened last week?", NOW).periods
    assert (dt.date.fromordinal(given.span[0]), dt.date.fromordinal(given.span[1])) == (
        dt.date(2023, 5, 1),
        dt.date(2023, 5, 7),
    )


@pytest.mark.parametrize(
    "query, when, recent",
    [
        ("When did Ana adopt the cat?", True, False),
        ("In which year did Ana live in a van?", True, False),
        ("Who is Ana's employer now?", False, True),
        ("What novel is Ana reading these days?", False, True),
        ("What is Ana's cat called?", False, False),
    ],
)
def test_the_intent_of_a_query(query, when, recent):
    asked = ta.read_query(query, NOW)
    assert (asked.when, asked.recent, bool(asked)) == (when, recent, when or recent)


def test_an_entry_time_is_its_date_field_then_a_leading_date_then_created_at():
    day = dt.datetime(2021, 3, 2, tzinfo=dt.timezone.utc).timestamp()
    assert ta.entry_time({"content": {"text": "hi", "date": "2021-03-02"}, "created_at": 5.0}) == day
    assert ta.entry_time({"content": {"text": "hi", "timestamp": day}, "created_at": 5.0}) == day
    assert ta.entry_time({"content": "[2 March 2021] Ana: hi", "created_at": 5.0}) == day
    assert ta.entry_time({"content": {"text": "2021-03-02: hi"}, "created_at": 5.0}) == day
    assert ta.entry_time({"content": {"text": "hi", "date": "soon"}, "created_at": 5.0}) == 5.0
    late = "a long way into this text there is a date: 2021-03-02"
    assert ta.entry_time({"content": late, "created_at": 5.0}) == 5.0


@pytest.mark.parametrize(
    "written, iso",
    [
        ("2023/05/20 (Sat) 02:21", "2023-05-20T02:21:00"),  # LongMemEval
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00"),  # LoCoMo
        ("May 8, 2023 1:56 PM", "2023-05-08T13:56:00"),
        ("Mon, 08 May 2023 13:56:00 GMT", "2023-05-08T13:56:00"),
        ("8 May 2023 13:56 +0200", "2023-05-08T11:56:00"),
        ("12:30 am on 8 May, 2023", "2023-05-08T00:30:00"),
        ("12 pm on 8 May, 2023", "2023-05-08T12:00:00"),
        ("2pm on 8 May 2023", "2023-05-08T14:00:00"),
        ("8 May 2023", "2023-05-08T00:00:00"),  # no time of day: midnight
        ("8 May 2023 13:56 GMT+2", "2023-05-08T11:56:00"),
        ("8 May 2023 13:56 UTC-05:30", "2023-05-08T19:26:00"),
        ("10:00-11:30 on 8 May 2023", "2023-05-08T10:00:00"),  # a range: its start, no offset
        ("8 May 2023, 10:30 -12 people", "2023-05-08T10:30:00"),
        ("8 May 2023 at 9 am (+01:00)", "2023-05-08T09:00:00"),  # the first time, not the offset
        ("8 May 2023 v1:20 release", "2023-05-08T00:00:00"),  # a version is no time
        ("8 May 2023 14:00+02:00", "2023-05-08T12:00:00"),  # a plus offset, attached (audit T24)
        ("8 May 2023 2:00pm+02:00", "2023-05-08T12:00:00"),
        ("8 May 2023 14:00 +02", "2023-05-08T12:00:00"),
        ("8 May 2023 14:00 +02, then lunch", "2023-05-08T12:00:00"),
        ("8 May 2023 19:00 +02 guests", "2023-05-08T19:00:00"),  # a count of guests, no offset (audit 30d)
        ("8 May 2023 19:00 +0200 guests", "2023-05-08T17:00:00"),  # with minutes it is an offset
        ("Mon May 8 19:00:00 2023 +0200", "2023-05-08T17:00:00"),  # git's date (audit 31c)
        ("Mon May  8 19:00:00 +02 2023", "2023-05-08T17:00:00"),  # the `date` command's
        ("Mon May  8 19:00:00 CEST 2023", "2023-05-08T19:00:00"),  # a zone name: not read, UTC
        ("Thu, Dec 7 09:05 2023", "2023-12-07T09:05:00"),
        ("2023-05-08T14:00:00 CEST", "2023-05-08T14:00:00"),  # ISO-8601, then words (was no date)
        ("2023-05-08T14:00:00+02:00 (CEST)", "2023-05-08T12:00:00"),
        ("2023-05-08T14:00 (Mon)", "2023-05-08T14:00:00"),
        # an offset after an ISO-8601 time without one (outside audit 30c: read as UTC)
        ("2023-05-08 14:00 +0200", "2023-05-08T12:00:00"),
        ("2023-05-08 14:00 GMT+2", "2023-05-08T12:00:00"),
        ("2023-05-08 14:00 UTC-05:30", "2023-05-08T19:30:00"),
        ("2023-05-08T14:00Z GMT+2", "2023-05-08T14:00:00"),  # its own zone first
        ("2:00 pm on 8 May, 2023 GMT+2", "2023-05-08T12:00:00"),  # a named offset after the date
        ("2023-05-08 14:00 -12 people", "2023-05-08T14:00:00"),
        # no zone is past 14 hours from UTC (outside audit 30d: "-2023" was read as -20:23)
        ("2023-05-20 23:00 -2023", "2023-05-20T23:00:00"),
        ("2023-05-20 23:00 UTC-15", "2023-05-20T23:00:00"),
        ("2023-05-20 23:00 UTC-14", "2023-05-21T13:00:00"),
    ],
)
def test_a_time_field_written_as_text_keeps_its_time_of_day(written, iso):
    """Benchmarks write a turn's time so (outside audit S24): a same-day `since` with a time and
    the order of two sessions of one day need the hour, which was read as midnight."""
    want = dt.datetime.fromisoformat(iso).replace(tzinfo=dt.timezone.utc).timestamp()
    assert ta.entry_time({"content": {"text": "hi", "date": written}, "created_at": 5.0}) == want


@pytest.mark.parametrize("digits", ["1683554160", "202305081356", "2125551234"])
def test_digits_in_a_time_field_are_no_time(digits):
    """A compact date, a phone number or Unix seconds as text cannot be told apart (outside audit
    R24): the entry's time is its created_at, as for any text that holds no date."""
    assert ta.entry_time({"content": {"text": "hi", "date": digits}, "created_at": 5.0}) == 5.0


def test_relative_dates_in_an_entry_are_read_against_its_own_time():
    doc = {"id": "t1", "content": {"text": "I ran a half marathon two weeks ago", "date": "2021-06-18"}}
    (seen,) = ta.read_entry(doc).mentions
    assert dt.date.fromordinal(seen.span[0]) <= dt.date(2021, 6, 4) <= dt.date.fromordinal(seen.span[1])
    assert ta.read_entry(doc).day == REF.toordinal()


@pytest.mark.parametrize(
    "value, since, until",
    [
        ("2023-06-01", "2023-06-01T00:00:00", "2023-06-02T00:00:00"),
        ("2023-06", "2023-06-01T00:00:00", "2023-07-01T00:00:00"),
        ("2023", "2023-01-01T00:00:00", "2024-01-01T00:00:00"),
        ("2023-06-01T09:30:00Z", "2023-06-01T09:30:00", "2023-06-01T09:30:00"),
        ("2023-06-01T11:30:00+02:00", "2023-06-01T09:30:00", "2023-06-01T09:30:00"),
        ("yesterday", "2021-06-17T00:00:00", "2021-06-18T00:00:00"),
        ("3 days ago", "2021-06-15T00:00:00", "2021-06-16T00:00:00"),
        ("last week", "2021-06-07T00:00:00", "2021-06-14T00:00:00"),
    ],
)
def test_since_and_until_bounds(value, since, until):
    def utc(text):
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp()

    assert ta.time_bound(value, "since", NOW) == utc(since)
    assert ta.time_bound(value, "until", NOW) == utc(until)


@pytest.mark.parametrize(
    "value", ["garbage", "2023-13-01", "12", "2023-02-30", "next blue moon", 5, "300 years ago", "in 100 years"]
)
def test_a_bound_that_is_not_a_date_is_invalid_input(value):
    with pytest.raises(InvalidInput) as caught:
        ta.time_bound(value, "since", NOW)
    assert caught.value.detail == {"field": "since"}


@pytest.mark.parametrize("value", [None, "", "  ", "\t"])
def test_a_blank_bound_is_no_bound(value):
    assert ta.time_bound(value, "since", NOW) is None and ta.time_bound(value, "until", NOW) is None


def test_a_pool_entry_gains_from_the_period_it_mentions_more_than_from_when_it_was_said():
    asked = ta.read_query("Which band did Ana see in February 2021?", NOW)
    mentions_it = ta.read_entry({"id": "a", "content": {"text": "I saw them live last Sunday", "date": "2021-03-02"}})
    said_in_it = ta.read_entry({"id": "b", "content": {"text": "I saw them live", "date": "2021-02-10"}})
    neither = ta.read_entry({"id": "c", "content": {"text": "I saw them live", "date": "2021-04-10"}})
    (g1, why), (g2, _), (g3, _) = ta.gains(asked, [mentions_it, said_in_it, neither])
    assert g1 == ta.W_PERIOD > g2 == ta.W_PERIOD * ta.W_SAID > g3 == 0.0
    assert why["period"] == ["'last Sunday' = 2021-02-28"]


def test_a_huge_text_full_of_dates_is_read_only_so_far():
    """A 250 KB entry of date phrases costs what its first few KB cost (the audit's slow query)."""
    from a2e_mem import timeaware

    text = "on 1 May 2023 and in June, 3 days ago, last Friday; " * 5000
    found = timeaware.mentions(text, dt.date(2023, 6, 15))
    assert 0 < len(found) <= timeaware.MAX_MENTIONS
    assert all(m.at < timeaware.SCANNED for m in found)


def test_a_date_alone_outside_the_years_read_says_which_years_are():
    """`--until 2100-01-01` is refused, and the message names the range (the audit found it silent)."""
    from a2e_mem import timeaware
    from a2e_mem.errors import InvalidInput

    with pytest.raises(InvalidInput, match="1800 to 2099"):
        timeaware.time_bound("2100-01-01", "until", 0.0)


def test_the_lexical_query_leaves_out_the_date_phrases_the_time_signal_reads():
    now = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc).timestamp()
    asked = ta.read_query("What did Ana plant in May 2023?", now)
    assert ta.undated("What did Ana plant in May 2023?", asked).split() == ["What", "did", "Ana", "plant", "in", "?"]
    assert ta.undated("in May 2023", ta.read_query("in May 2023", now)) == "in May 2023"  # nothing else: whole
    assert ta.undated("we may go", ta.read_query("we may go", now)) == "we may go"  # no date phrase in it


def test_a_millisecond_timestamp_is_read_as_milliseconds():
    """Audit F11: Date.now() (ms) was read as seconds, about the year 55,000."""
    seconds = dt.datetime(2023, 7, 22, 4, 26, 40, tzinfo=dt.timezone.utc).timestamp()
    assert seconds == 1690000000
    assert ta.entry_time({"content": {"timestamp": 1690000000000}, "created_at": 5.0}) == seconds
    assert ta.entry_time({"content": {"timestamp": 1690000000}, "created_at": 5.0}) == seconds
    assert ta.entry_time({"content": {"timestamp": 1690000000123.0}, "created_at": 5.0}) == seconds + 0.123


@pytest.mark.parametrize(
    "value", [1690000000000000, 1e18, -1e11 + 1, "0001-01-01", "9999-12-31T00:00:00Z", "2100-01-01", "1799-12-31"]
)
def test_an_entry_time_outside_1800_to_2099_falls_back(value):
    day = dt.datetime(2021, 3, 2, tzinfo=dt.timezone.utc).timestamp()
    assert ta.entry_time({"content": {"timestamp": value, "text": "hi"}, "created_at": 5.0}) == 5.0
    assert ta.entry_time({"content": {"timestamp": value, "date": "2021-03-02"}, "created_at": 5.0}) == day
    assert ta.entry_time({"content": {"when": value, "text": "[2 March 2021] hi"}, "created_at": 5.0}) == day


NOV_30 = dt.datetime(2026, 11, 30, 15, 0, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize(
    "value, since, until",
    [
        ("in May 2023", "2023-05-01", "2023-06-01"),
        ("May", "2026-05-01", "2026-06-01"),
        ("on 12 May", "2026-05-12", "2026-05-13"),
        ("Sept.", "2026-09-01", "2026-10-01"),
        ("December", "2025-12-01", "2026-01-01"),  # the latest December not after now
        ("Friday", "2026-11-27", "2026-11-28"),
        ("during last summer", "2026-06-01", "2026-09-01"),
        ("since May 8, 2023", "2023-05-08", "2023-05-09"),
        ("back in 2023", "2023-01-01", "2024-01-01"),
        ("by 2023-06", "2023-06-01", "2023-07-01"),
        ("two years ago", "2024-11-30", "2024-12-01"),  # the day, not the calendar year 2024
        ("3 months ago", "2026-08-30", "2026-08-31"),
        ("a decade ago", "2016-11-30", "2016-12-01"),
        ("last year", "2025-01-01", "2026-01-01"),  # a period stays a period
        ("in 2023", "2023-01-01", "2024-01-01"),
    ],
)
def test_bounds_read_the_phrases_of_the_ranking_with_or_without_a_preposition(value, since, until):
    """Audit F10: "in May 2023", "May" and "on 12 May" were refused as bounds, and "two years
    ago" meant the whole calendar year."""

    def utc(text):
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc).timestamp()

    assert (ta.time_bound(value, "since", NOV_30), ta.time_bound(value, "until", NOV_30)) == (utc(since), utc(until))


READ_BY_THE_RANKING = [
    "2023-05-08", "8 May 2023", "8th of May", "May 8", "May 8, 2023", "May 2023", "May, 2023", "two weeks ago",
    "a few years before", "in 3 days", "last summer", "this month", "earlier this year", "next weekend",
    "last Friday", "on Friday", "in May", "back in March", "mid-May", "early June", "in 2023", "since 2019",
    "yesterday", "the day before yesterday", "this morning",
]  # fmt: skip
PREPOSITIONS = ["", "in ", "on ", "during ", "since ", "from ", "until ", "by ", "of ", "back in "]


@pytest.mark.parametrize("phrase", READ_BY_THE_RANKING)
def test_every_phrase_the_ranking_reads_is_a_bound_after_any_preposition(phrase):
    (read,) = ta.mentions(phrase, dt.date(2026, 11, 30), query=True)
    assert read.text == phrase  # the ranking reads the whole phrase
    for preposition in PREPOSITIONS:
        bound = preposition + phrase
        assert ta.time_bound(bound, "since", NOV_30) < ta.time_bound(bound, "until", NOV_30), bound
