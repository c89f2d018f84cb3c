"""Time-aware retrieval: the dates in entries and queries, as a ranking signal and as filters.

An entry's own time (`entry_time`) is, first found:
  1. a top-level `date`, `time`, `timestamp`, `datetime` or `when` field of its content (an
     ISO-8601 string, Unix seconds (a number), or text holding a full date such as
     "1:56 pm on 8 May, 2023", read at the time of day it writes: `_written_time`): a
     conversation turn stored with its session's date. A number over 1e11 is read as
     milliseconds (JavaScript's `Date.now()`); a time outside the years 1800 to 2099 is no time
     (the next field, then the text, then `created_at` is taken);
  2. a full date written near the start of its text ("[8 May 2023] Ana: ...", "2023-05-08: ...");
  3. its `created_at`.
`--since` / `--until` (the wire's `since` / `until`) filter on it, and the relative dates an
entry's text mentions ("yesterday", "last Friday", "three weeks ago", "back in March") are read
against it: a turn said on 2021-06-18 that mentions "two weeks ago" is about 2021-06-04.

A query can ask about time in three ways, each a signal that moves the entries of a candidate
pool (the best `POOL` by fused relevance; see `A2E.retrieve`), never a filter:
  - a period ("in February 2021", "on 12 May", "in 2019", "last year"; relative phrases read
    against the date the query gives, else now; a month or day without a year matches it in any
    year): an entry whose text mentions a date inside it gains most, scaled by the share of the
    mentioned days inside the period ("this spring" is a third inside "April"); one whose own
    time lies inside it gains half as much (when something was said is weaker evidence than
    what it says happened);
  - "when ...?", "what date", "which year", "how long ago": entries whose text says when
    something happened (any date phrase) gain: they are the ones that can answer;
  - "now", "currently", "these days", "latest": the newer an entry among the pool, the more it gains.
Relevance becomes min(1, relevance * (1 + gain)); `--explain` shows each gain under "time". The
weights below were fitted on the dev split of `bench/bench_conv.py` together with the fusion and
diversity constants (`bench/fit_fusion.py`; W_PERIOD 0.25 to 1 gave the same figures there).

Parsing is a small set of regular expressions for English date phrases, with calendar arithmetic
from python-dateutil (`relativedelta`: month and year steps that clamp the day, weekday steps)
and its strict ISO-8601 parser (`isoparse`, the same on Python 3.10 as on 3.12, unlike
`datetime.fromisoformat`). Libraries that find dates in free text were measured and not taken:
`dateparser` takes ~3.6 ms a text once warm, 120 ms to import and 15 MB with its dependencies,
and reads "We" as a date; `parsedatetime` (no release since 2020) ~1.5 ms a text, and reads
"two hours" as a date. These expressions cost about 1 us for an entry's own time (computed as
it is stored, for the filters) and 25 us for the phrases of its text (read at query time, for
the candidates only, and cached).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .errors import InvalidInput
from .lexical import terms

POOL = 50  # candidates a time-aware query re-ranks (the best of the merged shard parts)
W_PERIOD = 0.5  # gain of an entry that mentions a date inside the query's period
W_SAID = 0.5  # the share of W_PERIOD an entry said inside the period (but mentioning no date in it) gets
W_WHEN = 0.2  # gain of an entry that mentions a date, for a "when" question
W_RECENT = 0.4  # gain of the newest entry of the pool, for a "now" question (the oldest gets 0)
TIME_FIELDS = ("date", "time", "timestamp", "datetime", "when")
LEADING = 40  # a full date this close to the start of an entry's text is the entry's own date
CACHE = 65_536  # entries whose date phrases are kept parsed
SCANNED = 4096  # characters of an entry (or a query) read for date phrases
MAX_MENTIONS = 32  # date phrases kept from one text
# A number in a time field above this is milliseconds (JavaScript's Date.now()): 1e11 seconds is
# the year 5138, 1e11 milliseconds is March 1973.
MILLISECONDS_FROM = 1e11
FIRST_SECOND = dt.datetime(1800, 1, 1, tzinfo=dt.timezone.utc).timestamp()  # the years the phrases read: 1800-2099
END_SECOND = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc).timestamp()

Span = tuple[int, int]  # first and last day (proleptic ordinals), inclusive

MONTH_NAMES = "january february march april may june july august september october november december".split()
MONTHS = {name: i for i, name in enumerate(MONTH_NAMES, 1)}
MONTHS.update({name[:3]: i for name, i in list(MONTHS.items()) if name != "may"})
MONTHS["sept"] = 9
WEEKDAYS = {name: i for i, name in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3, "several": 4,
}  # fmt: skip
SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 14)}
UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365, "decade": 3650}

_MONTH = r"(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_FULL_MONTH = r"(?:" + "|".join(MONTH_NAMES) + r")"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]\d\d|20\d\d)"
_NUMBER = r"(?:\d{1,3}|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_WEEKDAY = r"(?:" + "|".join(WEEKDAYS) + r")"
PHRASES_PATTERN = (  # every phrase starts a word: one \b before the branches makes it 3x faster
    r"\b(?=[a-z0-9])(?:"
    + "|".join(
        [
            rf"(?P<iso>{_YEAR}[-/](?:1[0-2]|0?[1-9])[-/](?:[12]\d|3[01]|0?[1-9])\b)",
            rf"(?P<dmy>{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b)",
            rf"(?P<mdy>{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b(?!\s*(?:%|am|pm|hours?|minutes?)))",
            rf"(?P<my>{_MONTH},?\s+(?:of\s+)?{_YEAR}\b)",
            rf"(?P<ago>{_NUMBER}\s+(?:day|week|month|year|decade)s?\s+(?:ago|before|earlier)\b)",
            rf"(?P<ahead>in\s+{_NUMBER}\s+(?:day|week|month|year)s?(?:'|\s+time)?\b)",
            r"(?P<rel>(?:last|this|next|past|previous|coming|earlier\s+this)\s+"
            r"(?:week(?:end)?|month|year|decade|spring|summer|autumn|fall|winter)\b)",
            rf"(?P<wd>(?:last|this|next|on|past|previous|coming)\s+{_WEEKDAY}\b)",
            rf"(?P<mon>(?:(?:in|back\s+in|during|since|early|late|last|this|next|until|by|of|from)\s+|mid-?)"
            rf"{_FULL_MONTH}\b(?!,?\s+(?:of\s+)?{_YEAR})(?!\s+{_DAY}\b))",
            rf"(?P<year>(?:in|back\s+in|during|since|year|until|by|from|of)\s+{_YEAR}\b(?![-/]\d))",
            r"(?P<day>(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight|"
            r"tomorrow|this\s+(?:morning|afternoon|evening))\b)",
        ]
    )
    + ")"
)  # matched against lower-cased text: twice as fast as re.IGNORECASE


@lru_cache(maxsize=1)
def phrases() -> re.Pattern[str]:
    """The date phrases, compiled on first use (~15 ms: not paid by commands that read no date)."""
    return re.compile(PHRASES_PATTERN)


# The patterns below are compiled on first use by `re`'s own cache (importing this module, which
# every store open does, compiles nothing). Every date phrase holds one of GATE's words: a text
# without any is not scanned by the phrases at all.
GATE = (
    r"\d|day|tonight|tomorrow|morning|afternoon|evening|week|month|year|decade|spring|summer|"
    r"autumn|fall|winter|" + "|".join(MONTHS) + "|" + "|".join(WEEKDAYS)
)
FOUR_DIGITS = r"\d{4}"
WHEN_INTENT = (
    r"(?i)\b(?:when|what\s+(?:date|day|time|year|month)|which\s+(?:date|day|year|month)|how\s+long\s+ago|"
    r"since\s+when|what\s+time)\b"
)
RECENT_INTENT = (
    r"(?i)\b(?:now|currently|current|these\s+days|nowadays|latest|most\s+recent(?:ly)?|at\s+the\s+moment|"
    r"at\s+present|any\s+more|anymore)\b"
)


# -- parsing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    """A date phrase and the days it stands for; `any_year` for a month or day named without a
    year in a query ("in June": June of whatever year)."""

    text: str
    span: Span
    any_year: bool = False
    at: int = 0  # where the phrase starts in its text

    def label(self) -> str:
        first, last = (dt.date.fromordinal(d).isoformat() for d in self.span)
        if self.any_year:
            first, last = first[5:], last[5:]
        return f"{self.text!r} = {first}" + ("" if first == last else f"..{last}")


def mentions(text: str, reference: dt.date, query: bool = False) -> list[Mention]:
    """The date phrases of `text`, relative ones read against `reference`. In a query (`query`),
    a month or day named without a year matches that month or day of any year. Only the first
    `SCANNED` characters are read, and at most `MAX_MENTIONS` phrases kept: a conversation turn
    is far shorter, and a 250 KB entry full of dates must not make every time question slow."""
    found: list[Mention] = []
    low = text[:SCANNED].lower()
    if not re.search(GATE, low):
        return found
    same = len(low) == min(len(text), SCANNED)  # lower() kept every offset: the phrase is shown as written
    for match in phrases().finditer(low):
        kind = match.lastgroup
        assert kind is not None
        try:
            mention = _READERS[kind](match.group(kind), reference, query)
        except (ValueError, OverflowError):  # "31 February", a year out of range
            continue
        if mention is not None:
            start, end = match.span(kind)
            span, any_year = mention
            found.append(Mention((text if same else low)[start:end], span, any_year, at=start))
            if len(found) >= MAX_MENTIONS:
                break
    return found


def _iso(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    y, m, d = (int(x) for x in re.split(r"[-/]", phrase))
    day = dt.date(y, m, d).toordinal()
    return (day, day), False


def _day_month(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    day = int(re.match(r"\d+", phrase).group())  # type: ignore[union-attr]
    month = _month_in(phrase)
    year = re.search(_YEAR + r"$", phrase)
    if year:
        point = dt.date(int(year.group()), month, day).toordinal()
        return (point, point), False
    if query:
        point = dt.date(2000, month, day).toordinal()  # a leap year: 29 February is a day
        return (point, point), True
    point = _latest(lambda y: dt.date(y, month, day), ref, slack=7).toordinal()
    return (point, point), False


def _month_day(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    numbers = re.findall(r"\d+", phrase)
    month = _month_in(phrase)
    day = int(numbers[0])
    if len(numbers) > 1:
        point = dt.date(int(numbers[1]), month, day).toordinal()
        return (point, point), False
    return _day_month(f"{day} {MONTH_NAMES[month - 1]}", ref, query)


def _month_year(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    return _month_span(int(re.search(_YEAR, phrase).group()), _month_in(phrase)), False  # type: ignore[union-attr]


def _month_alone(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool] | None:
    month = _month_in(phrase)
    if query:
        return _month_span(2000, month), True
    if phrase.startswith("next"):
        year = ref.year + 1 if month <= ref.month else ref.year
    elif phrase.startswith("this"):
        year = ref.year
    else:  # "in March", "back in March", "last March": the latest March not after the reference
        year = ref.year if month <= ref.month else ref.year - 1
        if phrase.startswith("last") and month == ref.month:
            year -= 1
    return _month_span(year, month), False


def _year_alone(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    year = int(re.search(_YEAR, phrase).group())  # type: ignore[union-attr]
    return (dt.date(year, 1, 1).toordinal(), dt.date(year, 12, 31).toordinal()), False


def _ago(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    count, unit = _count_unit(phrase)
    return _offset(ref, -count, unit), False


def _ahead(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    count, unit = _count_unit(phrase.removeprefix("in "))
    return _offset(ref, count, unit), False


def _relative_period(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    """last/this/next week, weekend, month, year, decade or season."""
    from dateutil.relativedelta import relativedelta

    words = phrase.split()
    which, unit = " ".join(words[:-1]), words[-1]
    step = {"last": -1, "past": -1, "previous": -1, "next": 1, "coming": 1}.get(which, 0)
    if unit in SEASONS:
        return _season(ref, unit, step), False
    if unit in ("week", "weekend"):
        monday = ref - dt.timedelta(days=ref.weekday()) + dt.timedelta(weeks=step)
        first, last = (monday + dt.timedelta(days=5), monday + dt.timedelta(days=6)) if unit == "weekend" else (
            monday, monday + dt.timedelta(days=6))  # fmt: skip
    elif unit == "month":
        first = ref.replace(day=1) + relativedelta(months=step)
        last = first + relativedelta(months=1, days=-1)
    elif unit == "year":
        first, last = dt.date(ref.year + step, 1, 1), dt.date(ref.year + step, 12, 31)
    else:  # decade: the ten years before (or after) the reference
        first, last = ref + relativedelta(years=10 * min(step, 0)), ref + relativedelta(years=10 * max(step, 0))
    if which == "earlier this":
        last = min(last, ref)
    return (first.toordinal(), last.toordinal()), False


def _weekday(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    """`last Friday`: the latest Friday before the reference (1 to 7 days back); "next Friday" the
    first one after it; "this Friday" and "on Friday" the nearest, looking back first."""
    which, name = phrase.split()
    back = (ref.weekday() - WEEKDAYS[name]) % 7
    if which in ("last", "past", "previous"):
        day = ref - dt.timedelta(days=back or 7)
    elif which in ("next", "coming"):
        day = ref + dt.timedelta(days=(7 - back) % 7 or 7)
    else:
        day = ref - dt.timedelta(days=back) if back <= 3 or which == "on" else ref + dt.timedelta(days=7 - back)
    return (day.toordinal(), day.toordinal()), False


def _single_day(phrase: str, ref: dt.date, query: bool) -> tuple[Span, bool]:
    phrase = " ".join(phrase.split())
    offset = {"the day before yesterday": -2, "yesterday": -1, "tomorrow": 1, "the day after tomorrow": 2}
    day = ref.toordinal() + offset.get(phrase, 0)
    return (day, day), False


_READERS: dict[str, Any] = {
    "iso": _iso, "dmy": _day_month, "mdy": _month_day, "my": _month_year, "mon": _month_alone,
    "year": _year_alone, "ago": _ago, "ahead": _ahead, "rel": _relative_period, "wd": _weekday,
    "day": _single_day,
}  # fmt: skip


def _month_in(phrase: str) -> int:
    for word in re.findall(r"[a-z]+", phrase):
        if word in MONTHS:
            return MONTHS[word]
    raise ValueError(phrase)


def _month_span(year: int, month: int) -> Span:
    from dateutil.relativedelta import relativedelta

    first = dt.date(year, month, 1)
    return first.toordinal(), (first + relativedelta(months=1, days=-1)).toordinal()


def _latest(make: Any, ref: dt.date, slack: int) -> dt.date:
    """The date `make(year)` of the reference's year, or of the year before when that is more
    than `slack` days after the reference ("on 12 May", said in January, is last May)."""
    this_year = make(ref.year)
    return this_year if (this_year - ref).days <= slack else make(ref.year - 1)


def _count_unit(phrase: str) -> tuple[int, str]:
    match = re.match(rf"({_NUMBER})\s+(day|week|month|year|decade)", phrase)
    if match is None:
        raise ValueError(phrase)
    number = match.group(1)
    return (int(number) if number.isdigit() else NUMBERS[" ".join(number.split())]), match.group(2)


def _offset(ref: dt.date, count: int, unit: str) -> Span:
    """The days `count` units from `ref`: a day is that day, a week that day give or take 3 days,
    a month that month, a year that year, a decade that year give or take 5 years."""
    from dateutil.relativedelta import relativedelta

    if unit == "day":
        day = ref + dt.timedelta(days=count)
        return day.toordinal(), day.toordinal()
    if unit == "week":
        day = ref + dt.timedelta(weeks=count)
        return (day - dt.timedelta(days=3)).toordinal(), (day + dt.timedelta(days=3)).toordinal()
    if unit == "month":
        first = ref.replace(day=1) + relativedelta(months=count)
        return first.toordinal(), (first + relativedelta(months=1, days=-1)).toordinal()
    years = count * (10 if unit == "decade" else 1)
    spread = 5 if unit == "decade" else 0
    return dt.date(ref.year + years - spread, 1, 1).toordinal(), dt.date(ref.year + years + spread, 12, 31).toordinal()


def _season(ref: dt.date, name: str, step: int) -> Span:
    """A season (northern hemisphere) of the reference's year; "last summer" is the latest one
    over before the reference, "next summer" the first one not begun."""
    from dateutil.relativedelta import relativedelta

    first_month, last_month = SEASONS[name]

    def bounds(year: int) -> tuple[dt.date, dt.date]:
        first = dt.date(year, first_month, 1)
        return first, first + relativedelta(months=last_month - first_month + 1, days=-1)

    first, last = bounds(ref.year - 1 if name == "winter" and ref.month < 3 else ref.year)
    if step < 0:
        while last >= ref:
            first, last = bounds(first.year - 1)
    elif step > 0:
        while first <= ref:
            first, last = bounds(first.year + 1)
    return first.toordinal(), last.toordinal()


# -- an entry's own time --------------------------------------------------------------------------


def entry_time(doc: dict[str, Any]) -> float:
    """The entry's own time in Unix seconds (see the module docstring); 0.0 when it has none.
    Called for every record stored: a few dictionary look-ups, and a regular expression over the
    first LEADING characters of its texts only when the content has no time field."""
    content = doc.get("content")
    if isinstance(content, dict):
        for name in TIME_FIELDS:
            value = content.get(name)
            seconds = _seconds(value)
            if seconds is None and isinstance(value, str):  # "1:56 pm on 8 May, 2023"
                seconds = _written_time(value[:64])
            if seconds is not None:
                return seconds
    day = _leading_day(content) if isinstance(content, str) else None
    texts = [v for v in content.values() if isinstance(v, str)][:4] if isinstance(content, dict) else []
    for text in texts:
        day = day or _leading_day(text)
    if day is not None:
        return _ordinal_seconds(day)
    created = doc.get("created_at")
    return float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else 0.0


def _written_time(value: str) -> float | None:
    """Unix seconds of a time field written as text: its full date (LoCoMo's "1:56 pm on 8 May,
    2023", LongMemEval's "2023/05/20 (Sat) 02:21", "Mon, 08 May 2023 13:56:00 GMT") at the time
    of day written in it (the first one: "10:00-11:30" is 10:00), else at midnight; UTC unless a
    numeric offset follows the time (" +0200", "+02:00", "GMT+2", "UTC-05:30"), or a "GMT" or
    "UTC" one comes anywhere after it ("2:00 pm on 8 May, 2023 GMT+2"). Zone names ("EST") are
    not read: UTC."""
    iso = re.match(ISO_PREFIX, value)
    if iso is not None:  # "2023-05-08T14:00:00 CEST", "2023-05-08T14:00 (Mon)": ISO-8601, then words
        seconds = _seconds(iso.group())
        zoned = re.search(r"(?:Z|[+-]\d\d(?::?\d\d)?)$", iso.group()) is not None
        return seconds if seconds is None or zoned else seconds - _offset_after(value[iso.end() :])
    value = _year_before_clock(value)
    day = _leading_day(value)
    if day is None:
        return None
    seconds = _ordinal_seconds(day)
    found = [m for m in (re.search(CLOCK, value, re.IGNORECASE), re.search(HOUR_ONLY, value, re.IGNORECASE)) if m]
    if not found:
        return seconds
    clock = min(found, key=lambda m: m.start())
    hour = int(clock["hour"])
    minute = int(clock.groupdict().get("minute") or 0)
    second = int(clock.groupdict().get("second") or 0)
    if clock["half"]:  # 12 am is midnight, 12 pm noon
        hour = hour % 12 + (12 if clock["half"].lower() == "p" else 0)
    return seconds + hour * 3600 + minute * 60 + second - _offset_after(value[clock.end() :])


# C's and git's date, and the `date` command's: "Mon May 8 19:00:00 2023 +0200", "Mon May  8
# 19:00:00 +02 2023" (or "CEST 2023"): the year comes after the time, where no date phrase has it
CTIME = (
    r"^\s*(?:[a-z]{3,9},?\s+)?(?P<month>[a-z]{3,9})\.?\s+(?P<day>\d{1,2})\s+(?P<clock>\d{1,2}:\d\d(?::\d\d)?)\s+"
    r"(?:(?P<zone>[+-]\d\d(?::?\d\d)?|[a-z]{2,5})\s+)?(?P<year>\d{4})\b"
)


def _year_before_clock(value: str) -> str:
    """A ctime-style `value` written day, month, year, then time and offset ("8 May 2023 19:00:00
    +0200"), as a date phrase and a time of day are read; any other value as it is. A zone
    name between the time and the year is dropped (zone names are not read: UTC)."""
    found = re.match(CTIME, value, re.IGNORECASE)
    if found is None or found["month"].lower() not in MONTHS:
        return value
    zone = found["zone"] if found["zone"] and found["zone"][0] in "+-" else ""
    rest = value[found.end() :]
    return f"{found['day']} {found['month']} {found['year']} {found['clock']}" + (f" {zone}" if zone else "") + rest


def _offset_after(tail: str) -> int:
    """Seconds east of UTC of the offset starting `tail`, else of a "GMT"/"UTC" one anywhere in
    it (named, it cannot be a range or a count); 0 for none."""
    found = next((m for m in (re.match(p, tail, re.IGNORECASE) for p in OFFSETS) if m), None)
    found = found or re.search(OFFSETS[0], tail, re.IGNORECASE)
    if found is None:
        return 0
    seconds = int(found["h"]) * 3600 + int(found["m"] or 0) * 60
    if seconds > MAX_OFFSET.total_seconds():  # "UTC-15": no zone is that far, so no offset
        return 0
    return -seconds if found["sign"] == "-" else seconds


# A time of day in a time field: "02:21", "1:56 pm", "13:56:00", "2pm"; not inside a version
# ("v1:20"), an offset ("+01:00") or a longer run of digits and colons.
_HALF = r"(?:\s*(?P<half>[ap])\.?m\b\.?)?"
CLOCK = r"(?<![\w:+-])(?P<hour>[01]?\d|2[0-3]):(?P<minute>[0-5]\d)(?::(?P<second>[0-5]\d))?(?![\d:])" + _HALF
HOUR_ONLY = r"(?<![\w:+-])(?P<hour>1[0-2]|0?[1-9])\s*(?P<half>[ap])\.?m\b\.?"
MAX_OFFSET = dt.timedelta(hours=14)  # the farthest any zone is from UTC (Kiribati, UTC+14)
OFFSETS = (  # what follows a time of day as its offset; "10:00-11:30" is a range, "-12 people" no offset
    r"\s*(?:gmt|utc)\s*(?P<sign>[+-])(?P<h>[01]?\d)(?::?(?P<m>[0-5]\d))?\b",  # "GMT+2", "UTC-05:30"
    r"\s+(?P<sign>[+-])(?P<h>[01]\d):?(?P<m>[0-5]\d)\b",  # " +0200", " -05:30": hours and minutes
    # "+02:00", " +02": a plus, even attached; hours alone not before a word ("+02 guests": a count)
    r"\s*(?P<sign>\+)(?P<h>[01]\d)(?::?(?P<m>[0-5]\d))?\b(?(m)|(?!\s+[^\W\d_]))",
)
ISO_PREFIX = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d(?::?\d\d)?)?(?![\d:])"


def _leading_day(text: str) -> int | None:
    """The day of a full date (with its year) within the first LEADING characters of `text`."""
    head = text[:LEADING].lower()
    if not re.search(FOUR_DIGITS, head):  # no year, no full date (and most texts stop here)
        return None
    for match in phrases().finditer(head):
        if match.lastgroup in ("iso", "dmy", "mdy") and re.search(_YEAR, match.group()):
            try:
                (day, _), _ = _READERS[match.lastgroup](match.group(), dt.date(2000, 1, 1), False)
            except (ValueError, OverflowError):
                continue
            return day
    return None


def _seconds(value: Any) -> float | None:
    """Unix seconds of a time field: a number of seconds (or of milliseconds, over
    MILLISECONDS_FROM), or an ISO-8601 string (UTC if naive); None outside the years the module
    reads (FIRST_SECOND to END_SECOND), which then count as no time field."""
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            seconds = value / 1000 if abs(value) > MILLISECONDS_FROM else float(value)
    elif isinstance(value, str) and 4 <= len(value) <= 64 and value[:4].isdigit():
        try:
            seconds = _iso_seconds(value)
        except (ValueError, OverflowError):
            return None
    return seconds if seconds is not None and FIRST_SECOND <= seconds < END_SECOND else None


def _iso_seconds(value: str) -> float:
    """Unix seconds of an ISO-8601 string: `datetime.fromisoformat` first (fast: this runs for
    every record stored), dateutil's `isoparse` for the forms Python 3.10 does not read ("Z",
    "20230601T0930")."""
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        from dateutil.parser import isoparse

        parsed = isoparse(value.strip())
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    elif abs(parsed.utcoffset() or dt.timedelta()) > MAX_OFFSET:  # "23:00 -2023": a year, not -20:23
        raise ValueError(f"no zone is {parsed.utcoffset()} from UTC")
    return parsed.timestamp()


def _ordinal_seconds(day: int) -> float:
    return dt.datetime.combine(dt.date.fromordinal(day), dt.time(), dt.timezone.utc).timestamp()


def _day_of(seconds: float) -> dt.date:
    try:
        return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).date()
    except (ValueError, OverflowError, OSError):
        return dt.date(1970, 1, 1)


# -- --since / --until -------------------------------------------------------------------------


def time_bound(value: Any, what: str, now: float) -> float | None:
    """A `since` (start) or `until` (end) bound in Unix seconds, from an ISO-8601 date or time
    (naive: UTC) or a date phrase ("yesterday", "last week", "3 days ago", "in May 2023", "May")
    read against `now` (see `_bound_span`). A bound naming a day or a longer period covers it
    whole: `since` is its first instant, `until` the instant after its last (the filter is
    since <= time < until). Every form is held to the years 1800 to 2099, a time (in UTC) as a
    date. None: no bound."""
    if value is None or (isinstance(value, str) and not value.strip()):  # an empty field (cleared) is no bound
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be an ISO-8601 date or time, not {value!r}", {"field": what})
    text = value.strip()
    span = _bound_span(text, now)
    if span is not None:
        first, last = span
        bound = _ordinal_seconds(first) if what == "since" else _ordinal_seconds(last + 1)
        # "300 years ago" is read, but dates are the years 1800 to 2099 everywhere else
        return bound if FIRST_SECOND <= bound <= END_SECOND else _fail(text, what)
    try:
        iso = text.upper()  # ISO 8601 (RFC 3339) lets a time say "t" and "z"
        seconds = _iso_seconds(iso) if iso[:4].isdigit() and ("T" in iso or " " in iso) else _fail(text, what)
    except (ValueError, OverflowError):
        return _fail(text, what)
    return seconds if FIRST_SECOND <= seconds < END_SECOND else _fail(text, what)  # a time: the years of a date


BOUND_PREPOSITION = r"^(?:back\s+in|in|on|during|since|from|until|till|by|of)\s+"


def _bound_span(text: str, now: float) -> Span | None:
    """The days a bound names when it is a date or a date phrase and nothing else: any phrase
    the ranking reads, with or without a leading preposition ("May 2023", "in May 2023", "on 12
    May"), a month or weekday named alone ("May", "Friday"), an ISO year or month ("2023",
    "2023-06"). "N days/weeks/months/years ago" (and "in N days") is that one day, not the
    period around it the ranking reads: `--since "two years ago"` starts two years ago to the day."""
    low = " ".join(text.lower().split())
    reference = _day_of(now)
    for form in _bound_forms(low):
        span = _whole_phrase(form, reference)
        if span is not None:
            return span
    rest = re.sub(BOUND_PREPOSITION, "", low)
    if re.fullmatch(_YEAR + r"(?:-(?:1[0-2]|0[1-9]))?", rest):  # "2023", "2023-06"
        year, month = int(rest[:4]), int(rest[5:7]) if len(rest) > 4 else 0
        return _month_span(year, month) if month else _year_alone(rest, dt.date(2000, 1, 1), False)[0]
    return None


def _bound_forms(low: str) -> list[str]:
    """The ways a bound may be read: as written, without its leading preposition, and a month or
    weekday named alone as "in May" or "on Friday" (the phrases the ranking reads)."""
    rest = re.sub(BOUND_PREPOSITION, "", low)
    forms = [low, rest] if rest != low else [low]
    bare = rest.rstrip(".")
    if bare in MONTHS:
        forms.append("in " + MONTH_NAMES[MONTHS[bare] - 1])
    elif bare in WEEKDAYS:
        forms.append("on " + bare)
    return forms


def _whole_phrase(form: str, reference: dt.date) -> Span | None:
    """The days of `form` if one date phrase is all of it."""
    for match in phrases().finditer(form):
        if match.start() == 0 and match.end() == len(form):
            kind = match.lastgroup
            try:
                if kind in ("ago", "ahead"):
                    return _one_day_away(match.group(kind), reference)
                span, _ = _READERS[kind](form, reference, False)  # type: ignore[index]
            except (ValueError, OverflowError):
                return None
            return span  # type: ignore[no-any-return]
    return None


def _one_day_away(phrase: str, ref: dt.date) -> Span:
    """The day "N units ago" (or "in N units") names, as a bound: that day, to the day."""
    from dateutil.relativedelta import relativedelta

    count, unit = _count_unit(phrase.removeprefix("in "))
    sign = 1 if phrase.startswith("in ") else -1
    step = relativedelta(years=10 * count) if unit == "decade" else relativedelta(**{unit + "s": count})
    day = (ref + sign * step).toordinal()
    return day, day


def _fail(text: str, what: str) -> float:
    raise InvalidInput(
        f"{what}: {text!r} is not a date: give an ISO-8601 date or time (2023-06-01, 2023-06-01T09:30:00Z; "
        "years 1800 to 2099) or a phrase such as 'yesterday', 'last week', '3 days ago', "
        "'May 2023', 'in May'",
        {"field": what},
    )


def check_bounds(since: float | None, until: float | None) -> None:
    if since is not None and until is not None and until <= since:
        raise InvalidInput("until must be after since", {"field": "until"})


# -- the ranking signal -------------------------------------------------------------------------


@dataclass
class QueryTime:
    """What a query asks about time (see the module docstring)."""

    periods: list[Mention] = field(default_factory=list)
    when: bool = False
    recent: bool = False

    def __bool__(self) -> bool:
        return bool(self.periods or self.when or self.recent)


def read_query(query: str, now: float) -> QueryTime:
    """The time signals of a query; relative phrases are read against a full date the query
    gives ("as of 2023-05-08, what happened last week?"), else against `now`."""
    if not query:
        return QueryTime()
    reference = _day_of(now)
    found = mentions(query, reference, query=True)
    absolute = [m for m in found if m.span[0] == m.span[1] and re.search(_YEAR, m.text)]  # a full date
    if absolute:
        reference = dt.date.fromordinal(absolute[0].span[0])
        found = mentions(query, reference, query=True)
        if len(found) > 1:  # the date is what the query's other phrases are read against, not a period
            found = [m for m in found if m.text != absolute[0].text]
    return QueryTime(found, bool(re.search(WHEN_INTENT, query)), bool(re.search(RECENT_INTENT, query)))


def undated(query: str, asked: QueryTime) -> str:
    """The query the lexical half of a search scores: without the date phrases the time signal
    reads. Their words ("may", "last", "2023") would otherwise count for entries that merely
    share the word ("we may go" for "in May"), while the time signal already ranks entries by
    the dates the phrases name. The vector half embeds the whole query; a query with no other
    word to search for ("in May 2023") is left whole."""
    rest = query
    for mention in asked.periods:
        rest = re.sub(re.escape(mention.text), " ", rest, flags=re.IGNORECASE)
    return rest if terms(rest) else query


@dataclass(frozen=True)
class EntryTime:
    day: int  # the entry's own day (ordinal)
    mentions: tuple[Mention, ...]


_cache: OrderedDict[tuple[str, float], EntryTime] = OrderedDict()


def read_entry(doc: dict[str, Any]) -> EntryTime:
    """The entry's own day and the date phrases of its text (cached by id and update time)."""
    key = (str(doc.get("id", id(doc))), float(doc.get("updated_at") or 0.0))
    cached = _cache.get(key)
    if cached is not None:
        _cache.move_to_end(key)
        return cached
    own = _day_of(entry_time(doc))
    said = mentions(_said(doc), own)
    if said and said[0].at < LEADING and said[0].span == (own.toordinal(),) * 2 and re.search(_YEAR, said[0].text):
        said = said[1:]  # "[8 May 2023] Ana: ...": the entry's own date, not one it mentions
    read = EntryTime(own.toordinal(), tuple(said))
    _cache[key] = read
    if len(_cache) > CACHE:
        _cache.popitem(last=False)
    return read


def _said(doc: dict[str, Any]) -> str:
    """The entry's text, without its time field (which is its own date, not one it mentions)."""
    from .schemas import text_values

    content = doc.get("content")
    if isinstance(content, dict):
        content = {k: v for k, v in content.items() if k not in TIME_FIELDS}
    return " ".join(text_values(content, SCANNED))  # only the start is read: see SCANNED


def _inside(target: Mention, span: Span) -> float:
    """The share of the days of `span` inside the target period: how likely what an entry dates
    to `span` ("this spring") happened in the period asked about ("in April")."""
    days = span[1] - span[0] + 1
    if not target.any_year:
        return max(0, min(span[1], target.span[1]) - max(span[0], target.span[0]) + 1) / days
    return _inside_any_year(target.span, span)


@lru_cache(maxsize=CACHE)
def _inside_any_year(target: Span, span: Span) -> float:
    """`_inside` for a month or day named without a year: the same days of any year (cached: the
    same spans come back for every entry said on the same day)."""
    wanted = _days_of_year(target)
    days = span[1] - span[0] + 1
    if days > 366:
        return min(1.0, len(wanted) / 365.25)
    return sum(_month_day_of(d) in wanted for d in range(span[0], span[1] + 1)) / days


@lru_cache(maxsize=64)
def _days_of_year(span: Span) -> frozenset[tuple[int, int]]:
    return frozenset(_month_day_of(d) for d in range(span[0], span[1] + 1))


def _month_day_of(day: int) -> tuple[int, int]:
    date = dt.date.fromordinal(day)
    return date.month, date.day


def gains(asked: QueryTime, entries: list[EntryTime]) -> list[tuple[float, dict[str, Any]]]:
    """Per entry of the pool: its gain (relevance is multiplied by 1 + gain) and what caused it."""
    days = [e.day for e in entries]
    oldest, newest = (min(days), max(days)) if days else (0, 0)
    out = []
    for entry in entries:
        gain = 0.0
        why: dict[str, Any] = {}
        if asked.periods:
            share = {m: max(_inside(t, m.span) for t in asked.periods) for m in entry.mentions}
            hits = [m for m, inside in share.items() if inside > 0]
            said = any(_inside(t, (entry.day, entry.day)) for t in asked.periods)
            if hits:
                gain += W_PERIOD * max(share.values())
                why["period"] = [m.label() + (f" ({share[m]:.0%} inside)" if share[m] < 1 else "") for m in hits]
            elif said:
                gain += W_PERIOD * W_SAID
                why["period"] = [f"said on {dt.date.fromordinal(entry.day).isoformat()}"]
        if asked.when and entry.mentions:
            gain += W_WHEN
            why["when"] = [m.label() for m in entry.mentions]
        if asked.recent and newest > oldest:
            newness = (entry.day - oldest) / (newest - oldest)
            gain += W_RECENT * newness
            day = dt.date.fromordinal(entry.day).isoformat()
            why["recent"] = f"said on {day}, {newness:.2f} of the way from the pool's oldest to its newest"
        out.append((gain, why))
    return out


def rerank(
    asked: QueryTime, relevance: np.ndarray, doc: Callable[[int], dict[str, Any]]
) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
    """The relevance of the merged candidates once the best POOL of them have their time gains
    (`doc(i)` is the record of candidate i), and the "time" explanation of each entry so moved,
    by candidate index. POOL whatever `limit` is: a pool growing with `limit` gave an entry past
    the 50th a gain at limit 125 and none at 10, so its relevance, the order and `total` under
    `min_score` changed with `limit` (outside audit C25)."""
    size = min(POOL, len(relevance))
    if not size:
        return relevance, {}
    pool = np.argpartition(-relevance, size - 1)[:size] if size < len(relevance) else np.arange(len(relevance))
    pool = pool[np.argsort(-relevance[pool], kind="stable")]  # best first: a backend reads records in rank order
    moved = relevance.copy()
    why: dict[int, dict[str, Any]] = {}
    for at, (gain, causes) in zip(pool, gains(asked, [read_entry(doc(int(i))) for i in pool]), strict=True):
        if gain:
            before = float(relevance[at])
            moved[at] = min(1.0, before * (1.0 + gain))
            why[int(at)] = {
                **causes, "gain": round(gain, 6), "before": round(before, 6), "after": round(float(moved[at]), 6)
            }  # fmt: skip
    return moved, why


def describe(asked: QueryTime) -> dict[str, Any]:
    """The query's side of the "time" explanation."""
    out: dict[str, Any] = {}
    if asked.periods:
        out["periods"] = [m.label() for m in asked.periods]
    if asked.when:
        out["asks_when"] = True
    if asked.recent:
        out["asks_recent"] = True
    return out
