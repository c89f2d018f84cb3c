"""The Annoy index over a checkpoint's vectors: built once by the checkpoint, then only read.

Annoy cannot add items to a built index, so it only ever covers the checkpointed rows; entries
written since are searched exactly (see `search.py`). This is the only module that imports annoy.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np

from ...paths import naming

FILE = "index.ann"
METRIC: Literal["angular"] = "angular"
SEARCH_K_PER_TREE = 140  # nodes a query inspects per tree: recall@10 0.984 at 100k (bench/bench_store.py)
BUDGET_BASE = 100_000  # up to this many items, the budget per tree is SEARCH_K_PER_TREE


def trees_for(n_items: int) -> int:
    """More trees for bigger indexes (better recall for the same number of inspected nodes),
    capped so that a 100k-entry build stays within seconds."""
    return max(16, min(96, n_items // 1000))


def search_budget(trees: int, n_items: int) -> int:
    """Nodes a query inspects. Past BUDGET_BASE items it grows with the square root of the size:
    the trees stop growing at 96, so each leaf holds more items and a fixed budget finds fewer of
    the true neighbours (recall@10 0.934 at 1M with 140 a tree; 0.977 with 300, 0.989 with 500,
    measured on bench_store.py's 1M store). The square root gives 443 a tree at 1M."""
    growth = math.sqrt(max(n_items / BUDGET_BASE, 1.0))
    return int(trees * SEARCH_K_PER_TREE * growth)


def build(folder: Path, vectors: np.ndarray, seed: int = 42) -> None:
    """Build and save an index of `vectors` (row i is item i) in `folder`."""
    from annoy import AnnoyIndex

    index = AnnoyIndex(vectors.shape[1], METRIC)
    index.set_seed(seed)
    for i, vec in enumerate(vectors):
        index.add_item(i, vec)
    index.build(trees_for(len(vectors)), n_jobs=-1)
    with annoy_path(folder / FILE) as path, naming(folder / FILE):
        index.save(path)
    index.unload()


@contextlib.contextmanager
def annoy_path(path: Path) -> Iterator[str]:
    """`path` as Annoy can take it: Annoy wants UTF-8 text, and a home whose name holds other
    bytes (Linux allows any) would make every checkpoint fail. Such a path is given through an
    open descriptor of its folder (`/proc/self/fd/N/name`), closed once Annoy is done."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield f"/proc/self/fd/{fd}/{path.name}"
        finally:
            os.close(fd)
        return
    yield text


class Index:
    """A saved index, memory-mapped: queries return (row, cosine) pairs, best first."""

    def __init__(self, folder: Path, dim: int) -> None:
        from annoy import AnnoyIndex

        self._index = AnnoyIndex(dim, METRIC)
        path = folder / FILE
        try:
            with annoy_path(path) as given:
                self._index.load(given, prefault=False)
        except OSError as exc:  # Annoy says "Unable to open": a checkpoint removed the file meanwhile
            if not path.exists():
                raise FileNotFoundError(errno.ENOENT, "removed by a checkpoint", str(path)) from exc
            raise
        self.trees = self._index.get_n_trees()
        self.search_k = search_budget(self.trees, self._index.get_n_items())

    def nearest(self, query: np.ndarray, k: int) -> np.ndarray:
        """Rows of (about) the `k` nearest items."""
        search_k = max(k, self.search_k)
        return np.asarray(self._index.get_nns_by_vector(query, k, search_k=search_k), dtype=np.int64)

    def close(self) -> None:
        self._index.unload()
