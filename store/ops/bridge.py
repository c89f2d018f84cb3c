"""Bridging: the entries that name what the best entry names, for questions answered in two steps.

"Who is Ana's uncle going to marry?" is answered by two entries said sessions apart: "My uncle
Hollis is staying with us" (which the question's words find) and "Hollis and Bastian finally set
a date" (which shares no word with the question, only the name the first one gives). So once the
candidates are ranked (fusion, then the time signal), the names the best one holds that the query
does not, and that are rare among the candidates, lift the other candidates holding them:

    relevance = min(1, relevance * (1 + BRIDGE_GAIN))

A name is a capitalised word other than a month or a weekday (a rough stand-in for a named
entity: "Hollis", "Pretzel", "Leeds"). The best entry offers the names inside its sentences
(after a lower-case letter, a comma, a colon or a semicolon), not a sentence's first word, which
is capitalised whatever it is ("Someone at work ..."); a candidate holds a name wherever it is.
Rare means held by at most RARE of the best POOL candidates and by at most a tenth of them: a
speaker's name, in nearly every turn, bridges nothing, and a handful of candidates (a small store)
bridges nothing either. Only candidates already in the pool move (no second search), by a fixed
gain, and never past the best entry (the names came from it); `--explain` shows the gain under
"bridge", with the names and the key of the entry they came from.

BRIDGE_GAIN and RARE were set on the dev split of bench/bench_conv.py, the fusion, diversity and
time constants as shipped: multi-hop evidence in the top 5 went from 0.496 to 0.561 and in the top
10 from 0.601 to 0.627 (temporal +0.6 at top 10), no other question type moved; the same at a
limit of 10. RARE 2 gives the same; RARE 5 lifts less; a gain of 0.15 to 0.2 lifts multi-hop a
little more but is a peak (RARE 3 there loses it again), and at 0.2 costs adversarial questions.
Offering every capitalised word lost an open-domain question at the top (a weekday and a
sentence's first word bridged to the wrong entries, past the leader); hence the rules above.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ..timeaware import MONTHS, WEEKDAYS

POOL = 50  # candidates a query's best entry can lift (the best of the merged shard parts)
BRIDGE_GAIN = 0.1  # relative gain of a candidate holding a name of the best entry
RARE = 3  # a name held by more of the POOL candidates than this bridges nothing

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
CALENDAR = frozenset({*MONTHS, *WEEKDAYS})


def names(text: str) -> set[str]:
    """The capitalised words of `text`, case-folded (a calendar word is no name)."""
    return {w.casefold() for w in _WORD.findall(text) if w[0].isupper()} - CALENDAR


def inner_names(text: str) -> set[str]:
    """The capitalised words of `text` inside a sentence (after a lower-case letter or a comma,
    colon or semicolon), case-folded: "uncle Hollis", not "Someone at work" (a sentence's first
    word, or a value's, capitalised as any first word is)."""
    found = set()
    for match in _WORD.finditer(text):
        word, before = match.group(), text[: match.start()].rstrip()
        if word[0].isupper() and before and (before[-1].islower() or before[-1] in ",;:"):
            found.add(word.casefold())
    return found - CALENDAR


def lift(
    query: str, relevance: np.ndarray, order: np.ndarray, text: Callable[[int], str]
) -> tuple[np.ndarray, dict[int, dict[str, Any]]]:
    """The candidates' relevance once those sharing a rare name with the best one (`order[0]`;
    `order` lists candidate indexes best first) have their gain, and the "bridge" explanation of
    each one lifted, by candidate index. `text(i)` is candidate i's searchable text."""
    if len(order) < 2 or BRIDGE_GAIN <= 0:
        return relevance, {}
    lead = int(order[0])
    asked = {w.casefold() for w in _WORD.findall(query)}
    offered = inner_names(text(lead)) - asked
    if not offered:  # the usual case: no further record is read
        return relevance, {}
    pool = [int(at) for at in order[:POOL]]
    held = {at: names(text(at)) & offered for at in pool}
    counts = Counter(name for found in held.values() for name in found)
    rare = {name for name in offered if counts[name] <= min(RARE, len(pool) / 10)}
    moved = relevance.copy()
    below_lead = float(np.nextafter(relevance[lead], 0.0))  # lifted towards the leader, never past it
    why: dict[int, dict[str, Any]] = {}
    for at in pool[1:]:
        shared = held[at] & rare
        if shared and at != lead:
            before = float(relevance[at])
            moved[at] = max(before, min(below_lead, before * (1.0 + BRIDGE_GAIN)))
            after = round(float(moved[at]), 6)
            why[at] = {"names": sorted(shared), "gain": BRIDGE_GAIN, "before": round(before, 6), "after": after}
    return moved, why


def rule() -> str:
    """The lifting rule as `--explain` shows it (read on each call: the benchmarks change it)."""
    return f"relevance * (1 + {BRIDGE_GAIN:g}) for a name of the best entry held by at most {RARE} of the best {POOL}"
