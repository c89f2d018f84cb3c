"""Quick quality check of the static embedder against the model it was distilled from.

Compares retrieval recall@1/@5 on a small hand-written set of 40 memories and
40 queries (20 paraphrases sharing no content word with their target, 20
keyword queries) for:

    (a) the full all-MiniLM-L6-v2 via sentence-transformers,
    (b) model2vec's float32 static model (distilled afresh in-process),
    (c) the shipped int8 runtime files via scripts/static_reference.py.

It also checks that (b) and (c) agree (mean cosine > 0.99), that the
reference recipe reproduces ``StaticModel.encode`` exactly when given the
float32 table, and that the shipped int8 table matches a fresh distillation.

Runs in the developer venv only (see scripts/distill_static.py)::

    python scripts/eval_static.py [--dir store/models/static]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill_static import distill_model, model_dir, quantize_rowwise  # noqa: E402  (sets HF offline)
from static_reference import DEFAULT_DIR, StaticEmbedder  # noqa: E402

MEMORIES = [
    "The user prefers dark mode in every editor and terminal.",
    "Deploys to production happen only on Tuesdays after the standup.",
    "Alice is allergic to peanuts, so avoid them when ordering lunch.",
    "The staging database password rotates every 30 days.",
    "Our CI pipeline runs on GitHub Actions with a 90 minute timeout.",
    "Bob's birthday is on March 14th and he likes chocolate cake.",
    "The API rate limit is 100 requests per minute per token.",
    "The user lives in Berlin and works remotely for a company in London.",
    "Use pnpm instead of npm for the frontend repository.",
    "The quarterly report is due on the last Friday of the quarter.",
    "The office wifi network is called Nimbus and the guest password is on the fridge.",
    "Maria speaks Spanish and Portuguese fluently.",
    "The user's cat is named Pixel and needs medication twice a day.",
    "Backups of the photo library are stored on an external drive in the closet.",
    "The project uses PostgreSQL 16 with the pgvector extension.",
    "The user is training for a marathon in October.",
    "Never force-push to the main branch; open a pull request instead.",
    "The car needs an oil change every 10,000 kilometres.",
    "The user drinks oat milk and avoids dairy.",
    "The team's weekly sync is on Thursday at 3pm Berlin time.",
    "The landlord's phone number is saved under 'Apartment' in contacts.",
    "Python 3.11 is the minimum supported version for the CLI.",
    "The user's flight to Tokyo leaves on the 12th from gate B22.",
    "Logs older than two weeks are deleted automatically.",
    "The garden tomatoes should be watered every morning in summer.",
    "The user wants short answers without bullet points.",
    "Invoices are emailed to the accounting team on the first business day of each month.",
    "The laptop's battery drains quickly when Docker is running.",
    "Kubernetes manifests live in the infra/k8s directory.",
    "The user is learning to play the piano and practices every evening.",
    "The dentist appointment was moved to next Wednesday at 9am.",
    "The user's favourite cuisine is Thai food, especially green curry.",
    "Error messages must be written in plain English without jargon.",
    "The printer on the second floor jams with thick paper.",
    "Tom prefers to be contacted by text message rather than phone calls.",
    "The user's daughter plays soccer on Saturday mornings.",
    "The embeddings are stored as int8 to save disk space.",
    "The user's mortgage is with a local credit union at a fixed rate.",
    "Feature flags are managed in a YAML file checked into the repo.",
    "The user is vegetarian but eats fish occasionally.",
]

# (query, index of the target memory); no content word in common with the target.
PARAPHRASES = [
    ("What colour scheme does this person like for their apps?", 0),
    ("When are releases shipped to live servers?", 1),
    ("Which colleague's special day falls in early spring, and what sweet treat do they enjoy?", 5),
    ("How many calls can one key make to the service in sixty seconds?", 6),
    ("Which city is this person based in?", 7),
    ("Who could translate for our clients from Brazil or Mexico?", 11),
    ("What is the pet called and when does it take its pills?", 12),
    ("Where are copies of the pictures kept?", 13),
    ("What running race is she preparing for this autumn?", 15),
    ("Can I overwrite the history of the primary git line?", 16),
    ("How often does the vehicle need servicing for its engine lubricant?", 17),
    ("What plant-based alternative does she pour in coffee because of lactose?", 18),
    ("When does the trip to Japan depart?", 22),
    ("How often should the vegetable plants get irrigation during hot months?", 24),
    ("How does this person like responses formatted?", 25),
    ("Why does the notebook computer lose charge so fast?", 27),
    ("What instrument is being studied at night?", 29),
    ("Which office machine gets stuck with heavy cardstock?", 33),
    ("What's the best way to reach Thomas?", 34),
    ("Is meat off the menu for them, and what about seafood?", 39),
]

KEYWORDS = [
    ("dark mode", 0),
    ("deploy production Tuesday", 1),
    ("peanut allergy", 2),
    ("staging database password", 3),
    ("CI timeout", 4),
    ("API rate limit", 6),
    ("pnpm frontend", 8),
    ("quarterly report deadline", 9),
    ("wifi password", 10),
    ("PostgreSQL pgvector", 14),
    ("force push main", 16),
    ("weekly sync Thursday", 19),
    ("landlord phone", 20),
    ("minimum Python version", 21),
    ("log retention", 23),
    ("invoices accounting", 26),
    ("kubernetes manifests", 28),
    ("dentist appointment", 30),
    ("green curry", 31),
    ("feature flags yaml", 38),
]

# Texts that exercise the recipe's corners: empty, only [UNK], literal specials, truncation.
EDGE_TEXTS = ["", "🙂🙂", "[UNK] [PAD] [CLS] hello", "Ünïcödé café 東京", "word " * 5000, "x" * 4000]

STOPWORDS = set(
    "a an and are as at be by can could do does for from has have he her his how i in is it its "
    "not of on or our s she should so than that the their them they this to was what when where "
    "which who why will with would".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` minus stopwords (for the no-overlap check)."""
    return set(re.findall(r"[a-z0-9]+", text.lower())) - STOPWORDS


def check_paraphrases() -> None:
    """Fail loudly if a paraphrase query shares a content word with its target."""
    for query, target in PARAPHRASES:
        shared = content_words(query) & content_words(MEMORIES[target])
        assert not shared, f"paraphrase {query!r} shares {shared} with its target"


def recall(queries: np.ndarray, memories: np.ndarray, targets: list[int], k: int) -> float:
    """Fraction of queries whose target is among the ``k`` most cosine-similar memories."""
    scores = queries @ memories.T
    target_scores = scores[np.arange(len(targets)), targets]
    ranks = (scores > target_scores[:, None]).sum(axis=1)
    return float((ranks < k).mean())


def main() -> None:
    """Run the evaluation and print the table and checks."""
    parser = argparse.ArgumentParser(description="Evaluate the static embedder.")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="runtime files to evaluate")
    args = parser.parse_args()
    check_paraphrases()

    from sentence_transformers import SentenceTransformer

    full = SentenceTransformer(str(model_dir()), device="cpu")
    m2v = distill_model()
    runtime = StaticEmbedder.load(args.dir)
    encoders = {
        "(a) all-MiniLM-L6-v2 (full)": lambda t: full.encode(t, normalize_embeddings=True),
        "(b) model2vec float32": lambda t: m2v.encode(t),
        "(c) int8 runtime files": runtime.embed,
    }

    queries = [q for q, _ in PARAPHRASES + KEYWORDS]
    targets = [t for _, t in PARAPHRASES + KEYWORDS]
    groups = {"paraphrase": slice(0, 20), "keyword": slice(20, 40), "all": slice(0, 40)}
    header = f"{'model':<30}" + "".join(f"{g + ' R@1':>16}{g + ' R@5':>16}" for g in groups)
    print(header)
    print("-" * len(header))
    vectors = {}
    for name, encode in encoders.items():
        mem, qry = encode(MEMORIES), encode(queries)
        vectors[name] = np.vstack([mem, qry])
        cells = "".join(
            f"{recall(qry[s], mem, targets[s], 1):>16.2f}{recall(qry[s], mem, targets[s], 5):>16.2f}"
            for s in groups.values()
        )
        print(f"{name:<30}{cells}")

    b, c = vectors["(b) model2vec float32"], vectors["(c) int8 runtime files"]
    cos = (b * c).sum(axis=1)  # both are L2-normalised
    print(f"\ncosine (b) vs (c) on {len(cos)} texts: mean {cos.mean():.5f}, min {cos.min():.5f}")
    assert cos.mean() > 0.99, "int8 table drifted from the float32 model"

    # The reference recipe with the unquantised table must equal model2vec's own encode.
    texts = MEMORIES + queries + EDGE_TEXTS
    table = np.asarray(m2v.embedding, dtype=np.float32)
    exact = StaticEmbedder(runtime.tokenizer, table, np.ones(len(table)), runtime.config)
    diff = np.abs(exact.embed(texts) - m2v.encode(texts)).max()
    print(f"reference recipe vs StaticModel.encode (float32 table, incl. edge cases): max |diff| {diff:.2e}")
    assert diff < 1e-5, "static_reference.py no longer matches model2vec's inference"

    q, _ = quantize_rowwise(table)
    same = np.array_equal(q, runtime.table)
    print(f"shipped embeddings.npy equals a fresh distillation: {same}")


if __name__ == "__main__":
    main()
