"""The Annoy index over a checkpoint's vectors: built once by the checkpoint, then only read.

Annoy cannot add items to a built index, so it only ever covers the checkpointed rows; entries
written since are searched exactly (see `search.py`). This is the only module that imports annoy.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Literal

import numpy as np

FILE = "index.ann"
METRIC: Literal["angular"] = "angular"
SEARCH_K_PER_TREE = 140  # nodes a query inspects per tree: recall@10 0.984 at 100k (bench/bench_store.py)


def trees_for(n_items: int) -> int:
    """More trees for bigger indexes (better recall for the same number of inspected nodes),
    capped so that a 100k-entry build stays within seconds."""
    return max(16, min(96, n_items // 1000))


def build(folder: Path, vectors: np.ndarray, seed: int = 42) -> None:
    """Build and save an index of `vectors` (row i is item i) in `folder`."""
    from annoy import AnnoyIndex

    index = AnnoyIndex(vectors.shape[1], METRIC)
    index.set_seed(seed)
    for i, vec in enumerate(vectors):
        index.add_item(i, vec)
    index.build(trees_for(len(vectors)), n_jobs=-1)
    index.save(str(folder / FILE))
    index.unload()


class Index:
    """A saved index, memory-mapped: queries return (row, cosine) pairs, best first."""

    def __init__(self, folder: Path, dim: int) -> None:
        from annoy import AnnoyIndex

        self._index = AnnoyIndex(dim, METRIC)
        path = folder / FILE
        try:
            self._index.load(str(path), prefault=False)
        except OSError as exc:  # Annoy says "Unable to open": a checkpoint removed the file meanwhile
            if not path.exists():
                raise FileNotFoundError(errno.ENOENT, "removed by a checkpoint", str(path)) from exc
            raise
        self.trees = self._index.get_n_trees()

    def nearest(self, query: np.ndarray, k: int) -> np.ndarray:
        """Rows of (about) the `k` nearest items."""
        search_k = max(k, self.trees * SEARCH_K_PER_TREE)
        return np.asarray(self._index.get_nns_by_vector(query, k, search_k=search_k), dtype=np.int64)

    def close(self) -> None:
        self._index.unload()
