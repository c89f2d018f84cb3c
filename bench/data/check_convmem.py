#!/usr/bin/env python3
"""Validate the conversational-memory retrieval dataset (convmem.json).

Checks:
  * memory and question ids are unique and sequential (m001.., q001..)
  * every answer id refers to an existing memory, 1-2 answers per question
  * kinds are "keyword" or "paraphrase"
  * paraphrase questions share NO content word with their answer memory(s)
  * keyword questions share >= 1 distinctive content word (person names of
    the `people` list do not count)

Content words: lowercase, split on non-letters, drop STOPWORDS and 1-letter
tokens, crude stemming (strip one trailing "ing", "ed", "es" or "s").

With --strict, paraphrase questions are also checked against near-matches
the crude stemmer misses (one stem a prefix of the other, e.g. run/running,
or a shared 5-letter prefix) and against shared numbers.

Usage: python3 check_convmem.py [path/to/convmem.json] [--strict]
Exit status is 1 if any problem is found. Stdlib only.
"""

import json
import os
import re
import sys
from collections import Counter

STOPWORDS = set(
    """
i me my myself we our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs
themselves what which who whom whose this that these those am is are was were
be been being have has had having do does did doing a an the and but if or
because as until while of at by for with about against between into through
during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few
more most other some such no nor not only own same so than too very can will
just should now would could also
s t d ll m o re ve y don won ain aren couldn didn doesn hadn hasn haven isn
ma mightn mustn needn shan shouldn wasn weren wouldn
say says said tell tells told mention mentions mentioned ask asks asked
""".split()
)

SUFFIXES = ("ing", "ed", "es", "s")


def tokens(text):
    return re.findall(r"[^\W\d_]+", text.lower())


def stem(word):
    for suf in SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            return word[: -len(suf)]
    return word


def content_words(text, drop=()):
    return {stem(t) for t in tokens(text) if len(t) > 1 and t not in STOPWORDS and t not in drop}


def near_matches(qwords, awords):
    hits = set()
    for q in qwords:
        for a in awords:
            if q == a:
                hits.add(q)
            elif (
                min(len(q), len(a)) >= 3
                and (q.startswith(a) or a.startswith(q))
                or min(len(q), len(a)) >= 5
                and q[:5] == a[:5]
            ):
                hits.add(f"{q}~{a}")
    return hits


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if not a.startswith("--")]
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "convmem.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)

    problems = []
    memories = data["memories"]
    questions = data["questions"]
    names = {p["name"].lower() for p in data.get("people", [])}

    mem_by_id = {}
    for i, m in enumerate(memories, 1):
        if m["id"] != f"m{i:03d}":
            problems.append(f"memory #{i} has id {m['id']}, expected m{i:03d}")
        if m["id"] in mem_by_id:
            problems.append(f"duplicate memory id {m['id']}")
        for key in ("session", "date", "speaker", "text"):
            if key not in m or m[key] in ("", None):
                problems.append(f"{m['id']}: missing {key}")
        mem_by_id[m["id"]] = m

    sessions = Counter(m["session"] for m in memories)
    dates = [m["date"] for m in memories]
    if dates != sorted(dates):
        problems.append("memory dates are not in chronological order")

    kinds = Counter()
    answered = set()
    para_overlap = []
    para_strict = []
    kw_no_overlap = []
    seen_q = set()
    for i, q in enumerate(questions, 1):
        if q["id"] != f"q{i:03d}":
            problems.append(f"question #{i} has id {q['id']}, expected q{i:03d}")
        if q["id"] in seen_q:
            problems.append(f"duplicate question id {q['id']}")
        seen_q.add(q["id"])
        kinds[q["kind"]] += 1
        if q["kind"] not in ("keyword", "paraphrase"):
            problems.append(f"{q['id']}: bad kind {q['kind']!r}")
        ans = q["answers"]
        if not 1 <= len(ans) <= 2:
            problems.append(f"{q['id']}: {len(ans)} answers (expected 1-2)")
        missing = [a for a in ans if a not in mem_by_id]
        if missing:
            problems.append(f"{q['id']}: unknown answer ids {missing}")
            continue
        answered.update(ans)
        atext = " ".join(mem_by_id[a]["text"] for a in ans)
        qw = content_words(q["question"])
        aw = content_words(atext)
        overlap = qw & aw
        if q["kind"] == "paraphrase":
            if overlap:
                para_overlap.append((q, sorted(overlap)))
            if strict:
                near = near_matches(qw, aw)
                qnum = set(re.findall(r"\d+", q["question"]))
                anum = set(re.findall(r"\d+", atext))
                near |= qnum & anum
                if near:
                    para_strict.append((q, sorted(near)))
        elif q["kind"] == "keyword":
            distinctive = content_words(q["question"], names) & content_words(atext, names)
            if not distinctive:
                kw_no_overlap.append(q)

    print(f"file:               {os.path.basename(path)}")
    print(f"people:             {len(data.get('people', []))}")
    print(f"sessions:           {len(sessions)}")
    print(f"memories:           {len(memories)}")
    print(f"speakers:           {dict(Counter(m['speaker'] for m in memories))}")
    print(f"questions:          {len(questions)}")
    print(f"  keyword:          {kinds['keyword']}")
    print(f"  paraphrase:       {kinds['paraphrase']}")
    print(f"  with 2 answers:   {sum(1 for q in questions if len(q['answers']) == 2)}")
    print(f"memories answering a question: {len(answered)}")

    print(f"\nparaphrase questions with content-word overlap: {len(para_overlap)}")
    for q, ov in para_overlap:
        print(f"  {q['id']} {ov}: {q['question']}")
    if strict:
        print(f"paraphrase questions with near-match overlap (--strict): {len(para_strict)}")
        for q, ov in para_strict:
            print(f"  {q['id']} {ov}: {q['question']}")
    print(f"keyword questions without a distinctive shared word: {len(kw_no_overlap)}")
    for q in kw_no_overlap:
        print(f"  {q['id']}: {q['question']}")

    for p in problems:
        print("PROBLEM:", p)
    bad = problems or para_overlap or kw_no_overlap or (strict and para_strict)
    print("\nOK" if not bad else "\nFAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
