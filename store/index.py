"""The Annoy index over a checkpoint's vectors: built once by the checkpoint, then only read.

Annoy cannot add items to a built index, so it only ever covers the checkpointed rows; entries
written since are searched exactly (see `search.py`). This is the only module that imports annoy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

FILE = "index.ann"
METRIC: Literal["angular"] = "angular"
SEARCH_K_PER_RESULT = 400  # nodes inspected per wanted neighbour; tuned in bench/ for recall@10


def trees_for(n_items: int) -> int:
    """More trees for bigger indexes, capped so a 100k-entry build stays in seconds."""
    return max(8, min(48, n_items // 2000 + 8))


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
        self._index.load(str(folder / FILE), prefault=False)
        self.trees = self._index.get_n_trees()

    def nearest(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        search_k = max(k * SEARCH_K_PER_RESULT, 4000)
        rows, dist = self._index.get_nns_by_vector(query, k, search_k=search_k, include_distances=True)
        cos = 1.0 - np.square(np.asarray(dist, dtype=np.float32)) / 2.0
        return np.asarray(rows, dtype=np.int64), cos

    def close(self) -> None:
        self._index.unload()
