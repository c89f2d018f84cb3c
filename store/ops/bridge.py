"""Bridging: the entries that name what the best entry names, for questions answered in two steps.

"Who is Ana's uncle going to marry?" is answered by two entries said sessions apart: "My uncle
Hollis is staying with us" (which the question's words find) and "Hollis and Bastian finally set
a date" (which shares no word with the question, only the name the first one gives). So once the
candidates are ranked (fusion, then the time signal), the names the best one holds that the query
does not, and that are rare among the candidates, lift the other candidates holding them:

    relevance = min(1, relevance * (1 + BRIDGE_GAIN))

A name is a word of the entry's content (its text values; not its key or tags) that starts with
a capital and goes on in lower case ("Hollis", "Pretzel", "Leeds"; not "I" or "TV"), other than a
month or a weekday. The best entry offers the names inside its sentences (after a lower-case
letter, a comma, a colon or a semicolon), not a sentence's or a value's first word, which is
capitalised whatever it is ("Someone at work ...", a speaker field); a candidate holds a name
wherever it is. The query's words (letters only: "Hollis's" says "Hollis") are never offered.
Rare means held by at most RARE of the best POOL candidates and by at most one in SHARE of them:
a speaker's name, in nearly every turn, bridges nothing, and a handful of candidates (a small
store, or filters that leave few) bridges nothing either. Only candidates already in the pool
move (no second search), by a fixed gain, and stay below the best entry (the names came from
it); `--explain` shows the gain under "bridge", with the names and the key of the entry they
came from. The first CHARS characters of a content are read, so a long entry costs no more.

BRIDGE_GAIN and RARE were set on the dev split of bench/bench_conv.py, the fusion, diversity and
time constants as shipped, with a first version of the name rules: multi-hop evidence in the top
5 went from 0.496 to 0.561 and in the top 10 from 0.601 to 0.627, no other question type moved;
the same at a limit of 10. RARE 2 gave the same; RARE 5 lifted less; a gain of 0.15 to 0.2 lifted
multi-hop a little more but was a peak (RARE 3 there lost it again), and at 0.2 cost adversarial
questions. Offering every capitalised word lost an open-domain question at the top (a weekday and
a sentence's first word bridged to the wrong entries, past the leader); an outside audit then
found more of the same (the first word of a text after a speaker's name, key values, tags,
possessives, weekday plurals, "I"), hence the rules above, with which dev gives 0.496 -> 0.548
and 0.601 -> 0.627 (the first version's extra question came from a sentence's first word).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..timeaware import MONTHS, WEEKDAYS

POOL = 50  # candidates a query's best entry can lift (the best of the merged shard parts)
BRIDGE_GAIN = 0.1  # relative gain of a candidate holding a name of the best entry
RARE = 3  # a name held by more of the POOL candidates than this bridges nothing
SHARE = 10  # ...or by more than one in SHARE of them
CHARS = 4096  # characters of an entry's content read for names (as for its date phrases)

_WORD = re.compile(r"[^\W\d_]+")  # letters only: "Hollis's" holds "Hollis", "Jean-Luc" two names
_DAYS = tuple(WEEKDAYS)
CALENDAR = frozenset({*MONTHS, *_DAYS, *(d + "s" for d in _DAYS), *(d[:3] for d in _DAYS), "tues", "thur", "thurs"})


def _strings(content: Any) -> Iterator[str]:
    """The text values of an entry's content (a JSON value), in order."""
    stack = [content]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))


def _capitalised(word: str) -> bool:
    """A name's shape: a capital, then some lower case ("Hollis", "McKay"; not "I", "TV")."""
    return len(word) > 1 and word[0].isupper() and not word.isupper()


def names(content: Any) -> tuple[set[str], set[str]]:
    """The names of an entry's content, case-folded: (every one, those inside a sentence). Inside
    means after a lower-case letter, a comma, a colon or a semicolon: "uncle Hollis", not
    "Someone at work" (a sentence's first word, or a value's, is capitalised whatever it is).
    Months and weekdays are no names. Only the first CHARS characters are read."""
    found, inner = set(), set()
    budget = CHARS
    for text in _strings(content):
        text = text[:budget]
        budget -= len(text)
        for match in _WORD.finditer(text):
            word = match.group()
            if not _capitalised(word) or (folded := word.casefold()) in CALENDAR:
                continue
            found.add(folded)
            before = match.start() - 1
            while before >= 0 and text[before].isspace():  # each gap is walked once: linear in the text
                before -= 1
            if before >= 0 and (text[before].islower() or text[before] in ",;:"):
                inner.add(folded)
        if budget <= 0:
            break
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
    asked = {w.casefold() for w in _WORD.findall(query)}
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
        if shared:
            before = float(relevance[at])
            moved[at] = max(before, min(below_lead, before * (1.0 + BRIDGE_GAIN)))
            after = round(float(moved[at]), 6)
            why[at] = {"names": sorted(shared), "gain": BRIDGE_GAIN, "before": round(before, 6), "after": after}
    return moved, why


def rule() -> str:
    """The lifting rule as `--explain` shows it (read on each call: the benchmarks change it)."""
    return (
        f"relevance * (1 + {BRIDGE_GAIN:g}), below the best entry, for a name of the best entry held by at most "
        f"{RARE} of the best {POOL} candidates and at most 1 in {SHARE} of them"
    )
