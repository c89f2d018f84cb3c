"""Bridging: the entries that name what the best entry names, for questions answered in two steps.

"Who is Ana's uncle going to marry?" is answered by two entries said sessions apart: "My uncle
Hollis is staying with us" (which the question's words find) and "Hollis and Bastian finally set
a date" (which shares no word with the question, only the name the first one gives). So once the
candidates are ranked (fusion, then the time signal), the names the best one holds that the query
does not, and that are rare among the candidates, lift the other candidates holding them:

    relevance = min(relevance * (1 + BRIDGE_GAIN), the best entry's relevance - 1e-6)

A name is a word of the entry's content (its text values; not its key or tags) that starts with
a capital and goes on in lower case ("Hollis", "Pretzel", "Leeds"; not "I" or "TV"), other than
a word of time or a title (`NOT_NAMES`: months, weekdays, seasons, holidays, "Dr"). The best
entry offers the names inside its sentences: right after a word in lower case ("uncle Hollis",
not "Garden Committee" in a title) or after a comma, colon or semicolon, on the same line; not a
sentence's, a line's or a value's first word, which is capitalised whatever it is ("Someone at
work ...", a speaker field). A candidate holds a name wherever it is. Names compare case-folded
and without accents (`fold`), and the query's words (letters only: "Hollis's" says "Hollis")
are never offered. Rare means held by at most RARE of the best POOL candidates and by at most
one in SHARE of them: a speaker's name, in nearly every turn, bridges nothing, and a handful of
candidates (a small store, or filters that leave few) bridges nothing either. Only candidates
already in the pool move (no second search), by a fixed gain, and stay below the best entry (the
names came from it); `--explain` shows the gain under "bridge", with the names and the key of the
entry they came from. The first CHARS characters of a content are read (every value, whatever
its type, costs at least one), so a long or wide entry costs no more.

BRIDGE_GAIN and RARE were set on the dev split of bench/bench_conv.py, the fusion, diversity and
time constants as shipped, with a first version of the name rules: multi-hop evidence in the top
5 went from 0.496 to 0.561 and in the top 10 from 0.601 to 0.627, no other question type moved;
the same at a limit of 10. RARE 2 gave the same; RARE 5 lifted less; a gain of 0.15 to 0.2 lifted
multi-hop a little more but was a peak (RARE 3 there lost it again), and at 0.2 cost adversarial
questions. Offering every capitalised word lost an open-domain question at the top (a weekday and
a sentence's first word bridged to the wrong entries, past the leader); an outside audit then
found more of the same (the first word of a text after a speaker's name, key values, tags,
possessives, weekday plurals, "I", title case, a new line, holidays, "Dr", accents in another
Unicode form), hence the rules above, with which dev gives 0.496 -> 0.548 and 0.601 -> 0.627
(the first version's extra question came from a sentence's first word).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ..schemas import text_values
from ..timeaware import MONTHS, WEEKDAYS

POOL = 50  # candidates a query's best entry can lift (the best of the merged shard parts)
BRIDGE_GAIN = 0.1  # relative gain of a candidate holding a name of the best entry
RARE = 3  # a name held by more of the POOL candidates than this bridges nothing
SHARE = 10  # ...or by more than one in SHARE of them
CHARS = 4096  # characters of an entry's content read for names (as for its date phrases)

_WORD = re.compile(r"[^\W\d_]+")  # letters only: "Hollis's" holds "Hollis", "Jean-Luc" two names
_DAYS = tuple(WEEKDAYS)
_PERIODS = ("spring", "summer", "autumn", "fall", "winter", "christmas", "easter", "halloween", "thanksgiving")
_TITLES = ("mr", "mrs", "ms", "dr", "prof", "sir", "st", "mt", "jr", "sr")
# words capitalised as names are but naming a time or a title, shared by unrelated entries
NOT_NAMES = frozenset(
    {*MONTHS, *(m + "s" for m in MONTHS), *_DAYS, *(d + "s" for d in _DAYS), *(d[:3] for d in _DAYS),
     "tues", "thur", "thurs", *_PERIODS, *_TITLES}
)  # fmt: skip
_JOINS = ("", ",", ";", ":")  # what may stand between a word and the name after it, inside a sentence


def fold(word: str) -> str:
    """A word as names are compared: case-folded, accents dropped ("José" in any Unicode form is
    "jose", "İstanbul" is "istanbul")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _capitalised(word: str) -> bool:
    """A name's shape: a capital, then some lower case ("Hollis", "McKay"; not "I", "TV")."""
    return len(word) > 1 and word[0].isupper() and not word.isupper()


def names(content: Any) -> tuple[set[str], set[str]]:
    """The names of an entry's content, folded (`fold`): (every one, those inside a sentence).
    Inside means right after a word in lower case ("uncle Hollis"; not "Garden Committee" in a
    title) or after a comma, colon or semicolon, on the same line: not "Someone at work" (a
    sentence's, a line's or a value's first word is capitalised whatever it is). Times and titles
    (`NOT_NAMES`) are no names. Only the first CHARS characters are read."""
    found, inner = set(), set()
    for text in text_values(content, CHARS):
        previous, end = "", 0
        for match in _WORD.finditer(text):
            word, gap = match.group(), text[end : match.start()]
            after_lower = previous[:1].islower() and "\n" not in gap and gap.strip() in _JOINS
            after_mark = previous and "\n" not in gap and gap.strip() in _JOINS[1:]
            previous, end = word, match.end()
            if not _capitalised(word) or (folded := fold(word)) in NOT_NAMES:
                continue
            found.add(folded)
            if after_lower or after_mark:
                inner.add(folded)
    return found, inner


def lift(
    query: str, relevance: np.ndarray, order: np.ndarray, content: Callable[[int], Any]
) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
    """The candidates' relevance once those sharing a rare name with the best one (`order[0]`;
    `order` lists candidate indexes best first) have their gain, and the "bridge" explanation of
    each one lifted, by candidate index. `content(i)` is candidate i's content."""
    if len(order) < 2 or BRIDGE_GAIN <= 0:
        return relevance, {}
    lead = int(order[0])
    asked = {fold(w) for w in _WORD.findall(query)}
    offered = names(content(lead))[1] - asked
    if not offered:  # the usual case: no further record is read
        return relevance, {}
    pool = [int(at) for at in order[:POOL]]
    held = {at: names(content(at))[0] & offered for at in pool}
    counts = Counter(name for found in held.values() for name in found)
    rare = {name for name in offered if counts[name] <= min(RARE, len(pool) / SHARE)}
    moved = relevance.copy()
    # lifted towards the leader, never to it: shown with 6 decimals, a lifted entry stays below
    below_lead = float(relevance[lead]) - 1e-6
    why: dict[int, dict[str, Any]] = {}
    for at in pool[1:]:
        shared = held[at] & rare
        before = float(relevance[at])
        after = max(before, min(below_lead, before * (1.0 + BRIDGE_GAIN)))
        if shared and after > before:  # nothing to show for a zero relevance or one at the leader's
            moved[at] = after
            why[at] = {
                "names": sorted(shared),
                "gain": BRIDGE_GAIN,
                "before": round(before, 6),
                "after": round(after, 6),
            }
    return moved, why


def rule() -> str:
    """The lifting rule as `--explain` shows it (read on each call: the benchmarks change it)."""
    return (
        f"relevance * (1 + {BRIDGE_GAIN:g}), below the best entry, for a name of the best entry held by at most "
        f"{RARE} of the best {POOL} candidates and at most 1 in {SHARE} of them"
    )
