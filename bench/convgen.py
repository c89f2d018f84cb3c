"""Generate `bench/data/convbench.json`: long dated conversations and retrieval questions.

    python bench/convgen.py [--seed 12] [--out bench/data/convbench.json] [--check]

Everything here (people, places, companies, bands, books, templates) was written for this
project; nothing comes from a public benchmark. The output is a pure function of the seed: the
same seed gives the same bytes (`tests/test_convgen.py` checks it, and that the committed file is
what the generator makes; `--check` compares without writing).

What makes it hard, on purpose:

- **Paraphrase.** Questions use other words than their evidence ("adopt" / "brought home",
  "employer" / "accepted the offer from"). Open-domain questions share no word with the evidence
  turn's text once stopwords go and words are stemmed the way the store's lexical index stems
  them (`store.lexical.terms`; the speaker's name is allowed): only meaning links them.
- **Distractors.** Turns that share the question's words without answering it: the other person's
  neighbour's dog, a band played at home but never seen live, a city visited for a weekend, a
  trip only wished for.
- **Facts that change.** Jobs, homes and the book being read change over the sessions; a "now"
  question's evidence is the latest statement, a "before" question's the earlier one.
- **Relative dates.** Turns say "yesterday", "last Friday", "three weeks ago", "last month",
  "two years ago", "back in March", "next Monday"; each is read against the session's date, which
  every turn carries. "last <weekday>" is the most recent such day 2 to 7 days before the
  session, "next <weekday>" the first one 1 to 7 days after. Temporal answers are absolute.
- **Multi-hop.** The answer needs turns sessions apart: a relative introduced by name in one
  session and their news in another, a pet named in one and its vet visit in another, every new
  hobby or every concert over the year.

Question types (`type`): `single-hop` (one turn answers it), `multi-hop` (two or more turns, from
different sessions, are needed), `temporal` (the answer is a date, or depends on when things
were said: "now", "before", "in May 2023"), `open-domain` (no shared word, see above) and
`adversarial` (the question names the other person, or something that never happened; its
evidence is the turn(s) that show what did happen, so that a reader can refuse the premise).

Splits: by conversation. The first `DEV_CONVERSATIONS` conversations are `dev` (tune on them);
the rest are `test` (report only). A conversation's facts never leak across the split.

Output: {"description", "seed", "conversations": [{"id", "split", "speakers", "sessions":
[{"session", "date"}], "turns": [{"id", "session", "date", "speaker", "text"}], "questions":
[{"id", "type", "question", "answer", "evidence": [turn ids]}]}]}. Turn ids are
`c<conv>-s<session>-t<n>`, unique over the file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

SEED = 12
N_CONVERSATIONS = 8
DEV_CONVERSATIONS = 3
SESSIONS = (24, 28)  # sessions per conversation, inclusive range
OUT = Path(__file__).resolve().parent / "data" / "convbench.json"
TYPES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")

WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}

# ---------------------------------------------------------------------------------- vocabulary

NAMES = (
    "Maren Idris Calla Teodor Anouk Rafferty Siobhan Emeka Linnea Dario Noor Casimir Yara Florin Ines Barnaby "
    "Keziah Mateus Oona Leopold Zainab Ewan Thea Soren"
).split()
SHE_NAMES = "Petra Amara Wren Ottilie Saoirse Juno Aurelie Nadia Greta Liesel Marisol Tamsin".split()
HE_NAMES = "Lorcan Hollis Benedikt Tobiah Rashid Milos Ferdia Caspian Anselm Bastian Cormac Dmitri Evander".split()
CITIES = (
    "Porto Ghent Tallinn Bologna Lyon Leeds Krakow Bergen Valencia Cork Utrecht Graz Aarhus Brno Seville Dundee "
    "Lille Turin Gdansk Bristol"
).split()
COMPANIES = [
    "Lumen Labs", "Northwind Freight", "Harbor and Finch", "Quillstone", "Brightwater Health", "Tessellate",
    "Oakridge Analytics", "Fernhill Studio", "Cobalt Rail", "Marigold Foods", "Pinecrest Bank", "Tidewell Energy",
    "Juniper Robotics", "Saltmarsh Media", "Ironbark Games", "Kestrel Insurance",
]  # fmt: skip
ROLES = [
    "data analyst", "nurse", "product designer", "civil engineer", "primary school teacher", "sous-chef",
    "accountant", "physiotherapist", "software developer", "architect", "pharmacist", "journalist",
    "logistics planner", "marketing manager",
]  # fmt: skip
PETS = [  # species as a question says it, what the turn says, vet visits (what the turn says, the answer)
    ("dog", ["beagle puppy", "rescue greyhound", "border collie", "little dachshund", "labrador puppy"],
     [("swallowed one of my socks and needed an X-ray", "swallowed a sock"),
      ("cut a paw on broken glass at the park and needed three stitches", "a cut paw that needed stitches"),
      ("got stung on the nose by a wasp and swelled up like a balloon", "a wasp sting")]),
    ("cat", ["tabby kitten", "Maine Coon", "ginger tomcat", "black kitten from the shelter"],
     [("came home limping after a fight with the tom next door", "a fight with another cat"),
      ("stopped eating for two days, turned out to be a bad tooth", "a bad tooth"),
      ("ate a lily from a bouquet, which is poisonous for them", "ate a poisonous lily")]),
    ("rabbit", ["lop-eared bunny", "dwarf bunny"],
     [("got its teeth so overgrown it couldn't chew", "overgrown teeth"),
      ("hurt a back leg jumping off the sofa", "a hurt back leg")]),
    ("bird", ["cockatiel", "budgie"],
     [("flew into the window and sat stunned for an hour", "flew into a window"),
      ("started plucking out its own feathers from stress", "plucking its feathers")]),
]  # fmt: skip
PET_NAMES = "Biscuit Pickle Juniper Waffles Mochi Clementine Bramble Pretzel Nutmeg Sprout Toffee Ziggy".split()
RELATIONS = [("sister", "she"), ("brother", "he"), ("cousin", "she"), ("uncle", "he"), ("aunt", "she")]
RELATIVE_NEWS = [  # turn text about NAME, question about "P's RELATION", answer
    ("{n} just landed a job as a {role} in {city}!", "What job did {p}'s {rel} get?", "{role} in {city}"),
    ("{n} is opening a tiny bakery in {city}, the lease is signed.", "What business is {p}'s {rel} starting?",
     "a bakery in {city}"),
    ("{n} and {other} finally set a date, the wedding is in {city} next summer.",
     "Who is {p}'s {rel} going to marry?", "{other}"),
    ("{n} had a baby boy on the weekend, they called him {other}.", "What is the name of {p}'s {rel}'s son?",
     "{other}"),
    ("{n} broke a leg skiing in {city} and is stuck on the sofa for a month.",
     "How did {p}'s {rel} get injured?", "broke a leg skiing"),
]  # fmt: skip
BANDS = (
    "The Velvet Orchards|Paper Lanterns|Glass Harbour|Static Meadow|Northern Verse|Copper Tides|The Lindens|"
    "Moth and Lantern|Salt Choir|Violet Engine|Hollow Pines|Neon Fjord"
).split("|")
BOOKS = [
    ("The Cartographer's Daughter", "Ilse Varga"), ("Salt and Iron", "Tomasz Bell"),
    ("A Winter Without Rivers", "Odile Mercer"), ("The Glass Orchard", "Priya Hallam"),
    ("Quiet Engines", "Rune Aldous"), ("Letters from the Lighthouse", "Mabel Crane"),
    ("The Ninth Harvest", "Gideon Rusk"), ("Where the Tram Ends", "Lucia Fenn"),
    ("Paper Moons over Harrow", "Anselm Dray"), ("The Last Ferry Home", "Wilhelmina Ode"),
]  # fmt: skip
HOBBIES = [  # what the turn says, what a list answer says, a detail question, its answer
    ("I signed up for a pottery class at the community centre, Thursday nights", "pottery",
     "Which evening does {p} have the ceramics course?", "Thursday"),
    ("I went bouldering for the first time, my forearms are destroyed", "bouldering",
     "Which part of {p}'s body ached after the first climbing session?", "the forearms"),
    ("I joined a choir, we rehearse in a church hall on Tuesdays", "choir singing",
     "Where does {p}'s singing group practise?", "a church hall"),
    ("I took my first salsa lesson and stepped on everyone's toes", "salsa dancing",
     "How did {p}'s first dance class go?", "stepped on everyone's toes"),
    ("I've started a woodworking course, I made a wonky stool", "woodworking",
     "What piece of furniture did {p} build?", "a wonky stool"),
    ("I bought binoculars and a field guide and spent the morning at the wetlands spotting waders",
     "birdwatching", "Where did {p} go to look at birds?", "the wetlands"),
    ("I joined the chess club at the library, lost all four games", "chess",
     "How many matches did {p} lose on the first board-game evening?", "all four"),
    ("I've started swimming in the sea every Saturday with a group of locals", "sea swimming",
     "On which day does {p} go for an ocean dip?", "Saturday"),
    ("I'm doing a calligraphy workshop, my hand cramps after ten minutes", "calligraphy",
     "What happens to {p}'s hand during the lettering workshop?", "it cramps after ten minutes"),
    ("I joined a rowing club, we were on the river at six this morning", "rowing",
     "What time does {p}'s crew get on the water?", "six in the morning"),
]  # fmt: skip
TRIPS = [  # place, turn detail, question about it, answer
    ("Iceland", "we drove the ring road and saw the northern lights from a hot spring",
     "What natural spectacle did {p} witness on the trip to Iceland?", "the northern lights"),
    ("Morocco", "I came home with a hand-woven rug from the souk in Marrakech",
     "What souvenir did {p} bring back from Morocco?", "a hand-woven rug"),
    ("Japan", "the highlight was a cooking class in Osaka where we made okonomiyaki",
     "Which dish did {p} learn to cook while travelling in Japan?", "okonomiyaki"),
    ("Norway", "we hiked up to Trolltunga and I nearly cried at the view",
     "Which famous viewpoint did {p} hike to in Norway?", "Trolltunga"),
    ("Portugal", "we spent most days surfing in Ericeira, I finally stood up on the board",
     "What sport did {p} try on the trip to Portugal?", "surfing, in Ericeira"),
    ("Scotland", "we did a whisky tasting on Islay and I bought a bottle for my dad",
     "What gift did {p} pick up in Scotland, and for whom?", "a bottle of whisky for their dad"),
    ("Greece", "we rented a little boat on Milos and found a cave you can only swim into",
     "What did {p} discover on the Greek island?", "a cave you can only swim into"),
    ("Vietnam", "we took a night train to Hoi An and had suits tailored in a day",
     "What did {p} have made while in Vietnam?", "tailored suits"),
]  # fmt: skip
WISHES = [  # place, wish text; never visited by the wisher
    ("Patagonia", "I'd love to hike in Patagonia one day, it's been on my list forever"),
    ("New Zealand", "one day I'm going to do a road trip around New Zealand, when the money allows"),
    ("Peru", "I keep looking at flights to Peru to see Machu Picchu, but never book anything"),
    ("Canada", "someday I want to see the Canadian Rockies in autumn"),
]
LIFE_EVENTS = [  # turn (with {when}), question (paraphrase), other person's distractor
    ("I ran the {city} half marathon {when}, two hours and four minutes!",
     "When did {p} complete a half marathon?", "my legs hurt just watching the marathon on TV"),
    ("my bike got stolen outside the station {when}, the lock was cut clean through",
     "When was {p}'s bicycle stolen?", "I finally fixed the brakes on my bike"),
    ("I got a small tattoo of a fox on my shoulder {when}", "When did {p} get inked?",
     "my nephew wants a tattoo and his mum is horrified"),
    ("I passed my driving test {when}, first try!", "When did {p} get a driving licence?",
     "the driving instructor my cousin had was a nightmare"),
    ("I gave a talk at a conference in {city} {when}, my hands were shaking", "When did {p} present at a conference?",
     "our team conference was mostly free coffee and slides"),
    ("I locked myself out {when} and had to call a locksmith at midnight",
     "When did {p} get shut out of the house?", "I should really get a spare key cut for the neighbours"),
    ("I went skydiving {when} for my birthday, never again", "When did {p} jump out of a plane?",
     "I watched a video of someone skydiving and felt sick"),
    ("we planted an apple tree in the back garden {when}", "When did {p} plant a fruit tree?",
     "the garden is full of weeds again"),
    ("I won the pub quiz with my team {when}, the prize was a giant tin of biscuits",
     "When did {p}'s team win a trivia night?", "our pub quiz team came second to last"),
    ("I had my wisdom teeth out {when}, my face is still swollen", "When did {p} have dental surgery?",
     "I'm overdue a check-up with the dentist"),
]  # fmt: skip
YEARS_AGO_EVENTS = [  # something long ago: turn (with {when}), question, answer template
    ("{when} I broke my wrist snowboarding, it still clicks when it rains", "In which year did {p} fracture a wrist?"),
    ("{when} I lived in a van for the whole summer", "In which year did {p} spend a summer living in a van?"),
    ("{when} I worked a season on a vineyard picking grapes", "In which year did {p} do the grape harvest?"),
    ("{when} I was on a game show and lost on the first question", "In which year was {p} a contestant on TV?"),
]  # fmt: skip
OPEN_DOMAIN = [  # turn text, question, answer: no shared stemmed word between text and question
    ("I spent the whole evening practising scales on my {x}.", ["cello", "violin", "viola"],
     "Does {p} play a string instrument?", "yes, the {x}"),
    ("I passed the theory test, now just the practical in my instructor's little {x}.", ["Fiat", "Polo", "Corsa"],
     "Is {p} learning to drive?", "yes"),
    ("I've been up since five feeding the hens and collecting {x} eggs.", ["a dozen", "nine", "fresh"],
     "Does {p} keep chickens?", "yes, hens"),
    ("Our flight got diverted and we slept on the floor at {x}.", [("Schiphol", "the Netherlands"),
     ("Frankfurt airport", "Germany"), ("Heathrow", "the United Kingdom")],
     "Which country was {p} stranded in during that journey?", "{a}"),
    ("I just got my black belt after {x} years at the dojo.", ["six", "seven", "eight"],
     "What rank has {p} reached in karate?", "black belt"),
    ("I swapped the car for an e-bike, my commute is {x} minutes of pedalling now.", ["twenty", "twelve", "thirty"],
     "How does {p} get to work these days?", "by e-bike"),
    ("I've been sketching the herons along the {x} every Sunday.", ["canal", "river", "harbour wall"],
     "Does {p} draw birds?", "yes, herons"),
    ("I did my first shift volunteering at the food bank {x}.", ["on Saturday", "this week", "yesterday"],
     "Does {p} do charity work?", "yes, at a food bank"),
    ("I'm finally fluent enough to argue with taxi drivers in {x}.", ["Lisbon", "Rio", "Porto"],
     "Which language has {p} been studying?", "Portuguese"),
    ("I've gone completely plant-based since {x}, not even cheese.", ["January", "the spring", "my birthday"],
     "Does {p} eat meat?", "no, vegan"),
    ("We got the keys to our first house {x}, no more landlords!", ["today", "on Friday", "at last"],
     "Is {p} still renting?", "no, bought a house"),
    ("I handed in my thesis {x}, the viva is in the summer.", ["yesterday", "on Monday", "this morning"],
     "Is {p} doing a PhD?", "yes"),
    ("I've been off caffeine for {x} and the headaches are gone.", ["a month", "three weeks", "ten days"],
     "Has {p} given up coffee?", "yes"),
    ("We bought a telescope and stayed up to catch {x}.", ["Saturn's rings", "the moons of Jupiter",
     "the Orion nebula"], "Is {p} into astronomy?", "yes, stargazing"),
    ("I've been brewing my own IPA in the {x}.", ["garage", "shed", "cellar"],
     "Does {p} make beer at home?", "yes"),
    ("The allotment gave us so many {x} this year.", ["courgettes", "runner beans", "tomatoes"],
     "Does {p} grow vegetables?", "yes, {x}"),
    ("I bought a second-hand Leica and shot {x} rolls of film.", ["three", "two", "four"],
     "Is {p} a keen photographer?", "yes, with a Leica"),
    ("I knitted my nephew a jumper for his {x}.", ["birthday", "first winter", "christening"],
     "Does {p} make clothes by hand?", "yes, knitting"),
    ("The kids' school shuts for the {x} holidays on Friday.", ["summer", "Easter", "half-term"],
     "Does {p} have children?", "yes"),
    ("I passed the bar exam {x}!", ["at last", "on the first attempt", "this spring"],
     "Is {p} a qualified lawyer now?", "yes"),
    ("I was on nights on the ward again, {x} shifts in a row.", ["four", "five", "three"],
     "Does {p} work in a hospital?", "yes, on a ward"),
    ("Our little one took her first steps across the {x}.", ["kitchen", "living room", "garden"],
     "Is {p}'s daughter walking yet?", "yes"),
    ("My savings went into index funds {x}.", ["in the end", "this month", "after all"],
     "Does {p} invest in the stock market?", "yes, index funds"),
    ("We spent a night in an igloo hotel above the Arctic Circle {x}.", ["in Lapland", "in Sweden", "in Finland"],
     "Has {p} travelled somewhere freezing?", "yes, {x}"),
]  # fmt: skip

OPENERS = [
    "Hey {o}! How's your week been?", "Morning {o}, got a minute?", "Hi {o}, long time no chat!",
    "Hey, are you around?", "{o}! I have news.", "Evening! How are things on your side?",
]  # fmt: skip
GREETING_REPLIES = [
    "Hey! Busy but good. You?", "Always. What's up?", "I know, it's been ages. Tell me everything.",
    "Yep, just made a tea.", "Oh no, or oh yes?", "Not bad, tired. How about you?",
]  # fmt: skip
REACTIONS = [
    "No way, that's brilliant!", "Oh no, I'm sorry to hear that.", "Ha, classic you.", "That sounds amazing.",
    "Wow, I did not see that coming.", "Good for you, honestly.", "How are you feeling about it?",
    "Send pictures!", "That's a lot to deal with.", "I love that.", "Wait, really?", "Fair enough.",
    "You have to tell me more next time.", "Haha, I can picture it.", "That's so exciting!",
]  # fmt: skip
SMALL_TALK = [
    "It's been raining all week here, I've forgotten what the sun looks like.",
    "Work is mostly meetings at the moment, nothing exciting.", "I finally finished that series everyone talks about.",
    "I made soup for the whole week on Sunday, very proud of myself.", "Traffic was horrendous this morning.",
    "My phone screen cracked again, third time this year.", "I've been sleeping badly, too much screen time probably.",
    "The neighbours are renovating, it's drilling from eight in the morning.", "We had friends over for dinner.",
    "I'm trying to drink more water, it's not going well.", "Did you see the storm on the news?",
    "I spent the whole Saturday cleaning, very glamorous.", "I keep meaning to call my grandmother back.",
    "The heating broke and the landlord is taking his time.", "My inbox is a disaster.",
    "I tried a new recipe and it was edible, just.", "I'm so ready for a holiday.",
    "I've been walking to work to save money.", "My plants are dying again, I don't understand plants.",
    "Our internet was down for two days, I almost read a book.",
]  # fmt: skip
CLOSERS = [
    "Anyway, I have to run. Talk soon!", "OK, dinner's ready, speak later.", "Right, bedtime for me. Night!",
    "Gotta go, my train's here.", "Let's catch up properly next week.",
]  # fmt: skip
BYES = ["Bye!", "Talk soon!", "Night night.", "Take care!", "Speak soon x"]

# ------------------------------------------------------------------------------- dates


def day(d: dt.date) -> str:
    return d.isoformat()


def month(d: dt.date) -> str:
    return f"{MONTHS[d.month - 1]} {d.year}"


def past_phrase(session: dt.date, rng: random.Random) -> tuple[str, dt.date, str]:
    """A phrase for a day before `session` ("yesterday", "last Friday", "two weeks ago", "last month",
    "back in March"), the day it names and the answer to "when"."""
    kinds = ["yesterday", "weekday", "weekday", "weeks", "weeks", "month"]
    kind = rng.choice(kinds + ["month name"] if session.month >= 3 else kinds)
    if kind == "yesterday":
        d = session - dt.timedelta(days=1)
        return "yesterday", d, day(d)
    if kind == "weekday":
        d = session - dt.timedelta(days=rng.randint(2, 7))
        return f"last {WEEKDAYS[d.weekday()]}", d, day(d)
    if kind == "weeks":
        n = rng.randint(2, 3)
        d = session - dt.timedelta(weeks=n)
        return f"{NUMBERS[n]} weeks ago", d, f"around {day(d)}"
    if kind == "month":
        d = (session.replace(day=1) - dt.timedelta(days=1)).replace(day=rng.randint(1, 28))
        return "last month", d, month(d)
    d = session.replace(month=rng.randint(1, session.month - 2), day=rng.randint(1, 28))
    return f"back in {MONTHS[d.month - 1]}", d, month(d)


def next_weekday(session: dt.date, rng: random.Random) -> tuple[str, dt.date]:
    d = session + dt.timedelta(days=rng.randint(1, 7))
    return f"next {WEEKDAYS[d.weekday()]}", d


# ------------------------------------------------------------------------------- structure


@dataclass
class Beat:
    """A few consecutive turns of one session; `evidence` marks the lines a question can cite."""

    lines: list[tuple[str, str]]
    evidence: list[int]
    ids: list[str] = field(default_factory=list)

    def evidence_ids(self) -> list[str]:
        return [self.ids[i] for i in self.evidence]


@dataclass
class Question:
    type: str
    question: str
    answer: str
    beats: list[Beat]


class Conversation:
    def __init__(self, index: int, rng: random.Random, speakers: list[str]) -> None:
        self.index = index
        self.rng = rng
        self.speakers = speakers
        n = rng.randint(*SESSIONS)
        start = dt.date(2021, 1, 1) + dt.timedelta(days=rng.randint(0, 700))
        self.dates = [start]
        for _ in range(n - 1):
            self.dates.append(self.dates[-1] + dt.timedelta(days=rng.randint(6, 24)))
        self.beats: list[list[Beat]] = [[] for _ in range(n)]
        self.questions: list[Question] = []

    @property
    def n(self) -> int:
        return len(self.dates)

    def other(self, person: str) -> str:
        return self.rng.choice([s for s in self.speakers if s != person])

    def say(self, session: int, person: str, text: str, reply: bool = True) -> Beat:
        """`person` says `text` in `session` (cited as evidence), and someone else reacts."""
        lines = [(person, text)]
        if reply:
            lines.append((self.other(person), self.rng.choice(REACTIONS)))
        beat = Beat(lines, [0])
        self.beats[session].append(beat)
        return beat

    def aside(self, session: int, person: str, text: str) -> Beat:
        """A distractor: never evidence."""
        beat = Beat([(person, text)], [])
        self.beats[session].append(beat)
        return beat

    def ask(self, kind: str, question: str, answer: str, *beats: Beat) -> None:
        assert kind in TYPES
        self.questions.append(Question(kind, question, answer, list(beats)))

    def sessions(self, k: int, lo: float = 0.0, hi: float = 1.0, gap: int = 1) -> list[int]:
        """`k` sorted distinct sessions in the fraction [lo, hi) of the conversation, `gap` apart."""
        first, last = int(lo * self.n), max(int(lo * self.n), int(hi * self.n) - 1)
        for _ in range(1000):
            picked = sorted(self.rng.sample(range(first, last + 1), k))
            if all(b - a >= gap for a, b in pairwise(picked)):
                return picked
        raise ValueError("cannot place sessions")

    def render(self) -> dict:
        rng = self.rng
        turns: list[dict] = []
        for s, date in enumerate(self.dates):
            opener, closer = rng.sample(self.speakers, 2)
            lines = [
                (opener, rng.choice(OPENERS).format(o=self.other(opener))),
                (self.other(opener), rng.choice(GREETING_REPLIES)),
            ]
            beats = self.beats[s]
            rng.shuffle(beats)
            for beat in beats:
                for _ in range(rng.randint(0, 2)):
                    talker = rng.choice(self.speakers)
                    lines.append((talker, rng.choice(SMALL_TALK)))
                    lines.append((self.other(talker), rng.choice(REACTIONS)))
                start = len(lines)
                lines.extend(beat.lines)
                beat.ids = [f"{start + i}" for i in range(len(beat.lines))]  # made global below
            lines.append((closer, rng.choice(CLOSERS)))
            lines.append((self.other(closer), rng.choice(BYES)))
            ids = [f"c{self.index:02d}-s{s + 1:02d}-t{i + 1:03d}" for i in range(len(lines))]
            for beat in beats:
                beat.ids = [ids[int(i)] for i in beat.ids]
            for tid, (speaker, text) in zip(ids, lines, strict=True):
                turns.append({"id": tid, "session": s + 1, "date": day(date), "speaker": speaker, "text": text})
        questions = []
        for i, q in enumerate(self.questions):
            evidence = [tid for b in q.beats for tid in b.evidence_ids()]
            assert evidence and len(set(evidence)) == len(evidence), q
            questions.append(
                {"id": f"c{self.index:02d}-q{i + 1:03d}", "type": q.type, "question": q.question,
                 "answer": q.answer, "evidence": evidence}
            )  # fmt: skip
        return {
            "id": f"c{self.index:02d}",
            "split": "dev" if self.index <= DEV_CONVERSATIONS else "test",
            "speakers": self.speakers,
            "sessions": [{"session": s + 1, "date": day(d)} for s, d in enumerate(self.dates)],
            "turns": turns,
            "questions": questions,
        }


# ------------------------------------------------------------------------------- storylines
# Each storyline places its beats in sessions and asks its questions. `p` is the person it is
# about, `o` someone else in the conversation (adversarial questions name `o`).


def pet_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    species, kinds, troubles = rng.choice([x for x in PETS if x[0] not in taken.setdefault("species", set())])
    taken["species"].add(species)
    kind, name = rng.choice(kinds), rng.choice([x for x in PET_NAMES if x not in taken.setdefault("pets", set())])
    taken["pets"].add(name)
    s1, s2 = c.sessions(2, 0.05, 0.8, gap=4)
    when, _, answer = past_phrase(c.dates[s1], rng)
    adopt = c.say(s1, p, f"We brought home a {kind} {when}, we've called it {name}.")
    trouble, trouble_answer = rng.choice(troubles)
    vet = c.say(s2, p, f"Emergency vet trip: {name} {trouble}.")
    c.aside(rng.randrange(c.n), o, f"My neighbour's {rng.choice(kinds)} kept everyone awake again.")
    c.ask("single-hop", f"What name did {p} give the {species}?", name, adopt)
    c.ask("temporal", f"When did {p} adopt the {species}?", answer, adopt)
    c.ask("multi-hop", f"Why did {p}'s {species} need the vet?", trouble_answer, adopt, vet)
    c.ask("adversarial", f"What is the name of {o}'s {species}?", f"{o} has no {species}; {p}'s is {name}", adopt)


def job_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("companies", set())
    first, second = rng.sample([x for x in COMPANIES if x not in used], 2)
    used.update((first, second))
    role1, role2 = rng.sample(ROLES, 2)
    s1, s2, s3 = c.sessions(3, 0.0, 0.95, gap=3)
    old = c.say(s1, p, f"Another brutal week at {first}. Being a {role1} there is not what I signed up for.")
    when, start = next_weekday(c.dates[s2], rng)
    new = c.say(s2, p, f"I accepted the offer from {second}! I start {when} as a {role2}.")
    settled = c.say(s3, p, f"A few months in as a {role2} and I don't miss the old place at all.")
    c.aside(rng.randrange(c.n), o, f"My cousin interviewed at {second}, apparently they're hiring a lot.")
    c.aside(rng.randrange(c.n), o, f"A friend of mine just quit her job as a {role1}, burnt out.")
    c.ask("single-hop", f"What role was {p} hired for at {second}?", role2, new)
    c.ask("temporal", f"Who is {p}'s employer now?", second, new, settled)
    c.ask("temporal", f"Which company did {p} work for before changing jobs?", first, old, new)
    c.ask("temporal", f"What was {p}'s first day at the new company?", day(start), new)
    c.ask("multi-hop", f"What was {p}'s role at the place {p} quit to join {second}?", role1, old, new)


def move_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("cities", set())
    old_city, new_city, weekend = rng.sample([x for x in CITIES if x not in used], 3)
    used.update((old_city, new_city))
    s1, s2, s3 = c.sessions(3, 0.0, 1.0, gap=3)
    old = c.say(s1, p, f"Our landlord in {old_city} is putting the rent up again, I'm fuming.")
    when, moving = next_weekday(c.dates[s2], rng)
    new = c.say(s2, p, f"We signed for a flat in {new_city}! The removal van comes {when}.")
    unpack = c.say(s3, p, "Still living out of boxes in the new place, but the neighbourhood is lovely.")
    c.aside(rng.randrange(c.n), o, f"I had a great weekend in {weekend}, we should go together.")
    c.aside(rng.randrange(c.n), o, f"A friend from {old_city} is visiting me next month.")
    c.ask("temporal", f"In which city is {p}'s home now?", new_city, new, unpack)
    c.ask("temporal", f"Where did {p} live before relocating?", old_city, old)
    c.ask("temporal", f"On what date did {p}'s move happen?", day(moving), new)
    c.ask("multi-hop", f"Which city is {p} unpacking in?", new_city, new, unpack)


def relative_story(c: Conversation, p: str, o: str, taken: dict, relation: str, pronoun: str) -> None:
    rng = c.rng
    names = taken.setdefault("names", set())
    name = rng.choice([x for x in (SHE_NAMES if pronoun == "she" else HE_NAMES) if x not in names])
    other = rng.choice([x for x in HE_NAMES if x not in names and x != name])
    names.update((name, other))
    city = rng.choice(CITIES)
    s1, s2 = c.sessions(2, 0.0, 1.0, gap=5)
    intro = c.say(s1, p, f"My {relation} {name} is staying with us this weekend, {pronoun} never stops talking.")
    text, question, answer = rng.choice(RELATIVE_NEWS)
    fill = {"n": name, "other": other, "city": city, "role": rng.choice(ROLES), "p": p, "rel": relation}
    news = c.say(s2, p, text.format(**fill))
    c.aside(rng.randrange(c.n), o, f"My flatmate's {relation} came round for dinner, lovely person.")
    c.ask("multi-hop", question.format(**fill), answer.format(**fill), intro, news)
    c.ask("single-hop", f"What is the name of {p}'s {relation}?", name, intro)
    if relation not in taken["relations"][o]:
        c.ask("adversarial", question.format(**{**fill, "p": o}), f"{o}'s {relation} is not mentioned; "
              f"{p}'s {relation}: {answer.format(**fill)}", intro, news)  # fmt: skip


def hobby_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("hobbies", set())
    picked = rng.sample([h for h in HOBBIES if h[1] not in used], 3)
    used.update(h[1] for h in picked)
    beats = [c.say(s, p, h[0] + ".") for s, h in zip(c.sessions(3, 0.0, 1.0, gap=3), picked, strict=True)]
    c.aside(rng.randrange(c.n), o, f"Someone at work keeps trying to get me into {picked[0][1]}, not for me.")
    c.ask("multi-hop", f"Which new pastimes has {p} taken up over the year?", ", ".join(h[1] for h in picked), *beats)
    c.ask("single-hop", picked[1][2].format(p=p), picked[1][3], beats[1])
    c.ask("adversarial", f"How is {o} getting on with {picked[0][1]}?", f"{o} never mentioned it; {p} took it up",
          beats[0])  # fmt: skip


def concert_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("bands", set())
    bands = rng.sample([b for b in BANDS if b not in used], 4)
    used.update(bands)
    seen = []
    for s, band in zip(c.sessions(3, 0.0, 1.0, gap=4), bands[:3], strict=True):
        when, d, _ = past_phrase(c.dates[s], rng)
        seen.append((c.say(s, p, f"I saw {band} live {when}, the crowd sang every word."), band, d))
    c.aside(rng.randrange(c.n), p, f"I've had {bands[3]} on repeat all week, the new album is great.")
    c.aside(rng.randrange(c.n), o, f"Tickets for {seen[0][1]} sold out in four minutes, I didn't get any.")
    for beat, band, d in seen[:2]:
        c.ask("temporal", f"Which band did {p} go to see perform in {month(d)}?", band, beat)
    c.ask(
        "multi-hop",
        f"Which acts has {p} watched in concert?",
        ", ".join(b for _, b, _ in seen),
        *(b for b, _, _ in seen),
    )
    c.ask("adversarial", f"When did {p} see {bands[3]} play live?", f"never; {p} only listened to the album",
          seen[0][0])  # fmt: skip


def book_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("books", set())
    books = rng.sample([b for b in BOOKS if b[0] not in used], 3)
    used.update(b[0] for b in books)
    beats = []
    for s, (title, author) in zip(c.sessions(3, 0.0, 1.0, gap=4), books, strict=True):
        beats.append((c.say(s, p, f"I'm halfway through {title} by {author}, can't put it down."), c.dates[s]))
    c.ask("temporal", f"What novel is {p} in the middle of these days?", books[-1][0], beats[-1][0])
    c.ask("temporal", f"Which book was {p} reading in {month(beats[0][1])}?", books[0][0], beats[0][0])
    c.ask("single-hop", f"Who wrote the book {p} was enjoying, {books[1][0]}?", books[1][1], beats[1][0])


def trip_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("trips", set())
    place, detail, question, answer = rng.choice([t for t in TRIPS if t[0] not in used])
    used.add(place)
    s = rng.randrange(1, c.n)
    when, d, when_answer = past_phrase(c.dates[s], rng)
    beat = c.say(s, p, f"We got back from {place} {when}, {detail}.")
    c.aside(rng.randrange(c.n), o, f"A colleague just came back from {place} with a suitcase full of snacks.")
    c.ask("single-hop", question.format(p=p), answer, beat)
    c.ask("temporal", f"When did {p} return from {place}?", when_answer, beat)


def wish_story(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("wishes", set())
    place, text = rng.choice([w for w in WISHES if w[0] not in used])
    used.add(place)
    beat = c.say(rng.randrange(c.n), p, text[0].upper() + text[1:] + ".")
    c.ask("adversarial", f"What did {p} enjoy most about visiting {place}?", f"{p} has never been; it is a wish",
          beat)  # fmt: skip


def life_events(c: Conversation, p: str, o: str, taken: dict, k: int) -> None:
    rng = c.rng
    used = taken.setdefault("events", set())
    for text, question, distractor in rng.sample([e for e in LIFE_EVENTS if e[0] not in used], k):
        used.add(text)
        s = rng.randrange(c.n)
        when, _, answer = past_phrase(c.dates[s], rng)
        line = text.format(when=when, city=rng.choice(CITIES))
        beat = c.say(s, p, line[0].upper() + line[1:] + ".")
        c.aside(rng.randrange(c.n), o, distractor[0].upper() + distractor[1:] + ".")
        c.ask("temporal", question.format(p=p), answer, beat)
        c.ask("adversarial", question.format(p=o), f"{o} did not; {p} did, {answer}", beat)


def years_ago_event(c: Conversation, p: str, o: str, taken: dict) -> None:
    rng = c.rng
    used = taken.setdefault("long-ago", set())
    text, question = rng.choice([e for e in YEARS_AGO_EVENTS if e[0] not in used])
    used.add(text)
    s = rng.randrange(c.n)
    n = rng.randint(1, 4)
    when = "Last year" if n == 1 else f"{NUMBERS[n].capitalize()} years ago"
    beat = c.say(s, p, text.format(when=when) + ".")
    c.ask("temporal", question.format(p=p), str(c.dates[s].year - n), beat)


def open_domain(c: Conversation, p: str, o: str, taken: dict, k: int) -> None:
    rng = c.rng
    used = taken.setdefault("open", set())
    for text, fills, question, answer in rng.sample([x for x in OPEN_DOMAIN if x[0] not in used], k):
        used.add(text)
        x = rng.choice(fills)
        x, a = x if isinstance(x, tuple) else (x, x)
        beat = c.say(rng.randrange(c.n), p, text.format(x=x))
        c.ask("open-domain", question.format(p=p), answer.format(x=x, a=a), beat)


def conversation(index: int, rng: random.Random, speakers: list[str]) -> Conversation:
    c = Conversation(index, rng, speakers)
    relatives = {p: rng.sample(RELATIONS, 2) for p in speakers}
    taken: dict = {"relations": {p: {r for r, _ in rels} for p, rels in relatives.items()}}
    for p in speakers:
        o = c.other(p)
        job_story(c, p, o, taken)
        for relation, pronoun in relatives[p]:
            relative_story(c, p, o, taken, relation, pronoun)
        hobby_story(c, p, o, taken)
        trip_story(c, p, o, taken)
        wish_story(c, p, o, taken)
        life_events(c, p, o, taken, 3 if len(speakers) == 2 else 2)
        years_ago_event(c, p, o, taken)
        open_domain(c, p, o, taken, 6 if len(speakers) == 2 else 4)
    first, second = speakers[0], speakers[1]
    pet_story(c, first, second, taken)
    move_story(c, second, first, taken)
    concert_story(c, first, second, taken)
    book_story(c, second, first, taken)
    if len(speakers) == 3:
        pet_story(c, speakers[2], first, taken)
    return c


# ------------------------------------------------------------------------------- checks


def check_open_domain(conv: dict) -> None:
    """Open-domain questions share no stemmed content word with their evidence text (the speaker's
    name aside), as the store's lexical index sees words."""
    from a2e_mem.lexical import terms

    turns = {t["id"]: t for t in conv["turns"]}
    names = set(terms(" ".join(conv["speakers"])))
    for q in conv["questions"]:
        if q["type"] != "open-domain":
            continue
        text = " ".join(turns[e]["text"] for e in q["evidence"])
        shared = (set(terms(q["question"])) & set(terms(text))) - names
        if shared:
            raise ValueError(f"{q['id']} shares {sorted(shared)} with its evidence")


def generate(seed: int = SEED) -> dict:
    rng = random.Random(seed)
    names = rng.sample(NAMES, len(NAMES))  # every conversation has people of its own
    conversations = []
    for i in range(N_CONVERSATIONS):
        k = 3 if (i + 1) % 3 == 0 else 2
        speakers, names = names[:k], names[k:]
        conversations.append(conversation(i + 1, rng, speakers).render())
    return {
        "description": "Synthetic long conversations written for mem's retrieval benchmark "
        f"(bench/convgen.py, seed {seed}); see the generator's docstring.",
        "seed": seed,
        "conversations": conversations,
    }


def dumps(data: dict) -> bytes:
    """Stable bytes: one turn or question per line keeps diffs readable and the file small."""
    head = {"description": data["description"], "seed": data["seed"]}
    out = [json.dumps(head)[:-1] + ',\n"conversations": [']
    for ci, conv in enumerate(data["conversations"]):
        head = {k: conv[k] for k in ("id", "split", "speakers", "sessions")}
        out.append(json.dumps(head, ensure_ascii=False)[:-1] + ',\n"turns": [')
        out.append(",\n".join(json.dumps(t, ensure_ascii=False) for t in conv["turns"]) + '],\n"questions": [')
        out.append(",\n".join(json.dumps(q, ensure_ascii=False) for q in conv["questions"]) + "]}")
        out.append("," if ci < len(data["conversations"]) - 1 else "")
    out.append("]}\n")
    return "\n".join(out).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    data = generate(args.seed)
    for conv in data["conversations"]:
        check_open_domain(conv)
    blob = dumps(data)
    digest = hashlib.sha256(blob).hexdigest()
    if args.check:
        same = args.out.exists() and args.out.read_bytes() == blob
        print(f"{args.out}: {'matches' if same else 'DIFFERS from'} the generator (sha256 {digest})")
        return 0 if same else 1
    args.out.write_bytes(blob)
    print(f"wrote {args.out} ({len(blob)} bytes, sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
