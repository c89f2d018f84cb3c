"""The records written since the last checkpoint, held in memory in numbered slots.

Slots mirror a checkpoint's rows (columns for expiry, recency, own time and score, a vector
matrix, BM25 postings), so one search routine serves both; a freed slot is reused by the next
record.

The records are the memtable's own: a read hands out a copy (`record`), as a checkpoint's rows
are parsed anew at every read. A caller (the Python API, a LangGraph node) that edits what it
read must not change the store without a write, nor what the next checkpoint saves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import orjson

from ...lexical import DeltaLexicon
from ...timeaware import entry_time
from .segment import expiry, number


class Memtable:
    def __init__(self, dim: int, text: Callable[[dict[str, Any]], str] | None) -> None:
        self.dim = dim
        self._text = text
        self.slot_of: dict[str, int] = {}
        self.docs: list[dict[str, Any] | None] = []
        self.sizes: list[int] = []
        self.free: list[int] = []
        self.expires = np.zeros(0, dtype=np.float64)
        self.updated = np.zeros(0, dtype=np.float64)
        self.when = np.zeros(0, dtype=np.float64)  # the record's own time, for --since / --until
        self.scores = np.zeros(0, dtype=np.float32)
        self.vectors = np.zeros((0, dim), dtype=np.float32)
        self.lexicon = DeltaLexicon() if text else None
        self.tags: dict[str, set[int]] = {}

    @property
    def n(self) -> int:
        """Number of slots in use or free (the length of the column arrays that matter)."""
        return len(self.docs)

    def __len__(self) -> int:
        return len(self.slot_of)

    def put(self, rid: str, doc: dict[str, Any], size: int, vec: np.ndarray | None) -> None:
        self.remove(rid)
        slot = self.free.pop() if self.free else self._grow()
        self.slot_of[rid] = slot
        self.docs[slot] = doc
        self.sizes[slot] = size
        self.expires[slot] = expiry(doc)
        self.updated[slot] = number(doc.get("updated_at"), 0.0)
        self.when[slot] = entry_time(doc)
        self.scores[slot] = number(doc.get("score"), 1.0)
        if vec is not None and self.dim:
            self.vectors[slot] = vec
        for tag in doc.get("tags") or ():
            self.tags.setdefault(tag, set()).add(slot)
        if self.lexicon is not None and self._text is not None:
            self.lexicon.add(slot, self._text(doc))

    def remove(self, rid: str) -> bool:
        slot = self.slot_of.pop(rid, None)
        if slot is None:
            return False
        doc = self.docs[slot] or {}
        for tag in doc.get("tags") or ():
            self.tags[tag].discard(slot)
        if self.lexicon is not None:
            self.lexicon.remove(slot)
        self.docs[slot] = None
        self.expires[slot] = -np.inf  # a free slot never looks alive
        self.free.append(slot)
        return True

    def get(self, rid: str) -> dict[str, Any] | None:
        """A copy of record `rid`, if held."""
        slot = self.slot_of.get(rid)
        return None if slot is None else self.record(slot)

    def record(self, slot: int) -> dict[str, Any]:
        """A copy of the record in `slot` (see the module's docstring)."""
        doc = self.docs[slot]
        assert doc is not None
        return orjson.loads(orjson.dumps(doc))

    def items(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(slot, doc) in order of writing, oldest first: `slot_of` keeps it (an overwrite is
        removed and put anew), where slot order does not (a freed slot is reused), and listings
        break ties of one millisecond by it."""
        for slot in list(self.slot_of.values()):
            doc = self.docs[slot]
            assert doc is not None
            yield slot, doc

    def tag_slots(self, tag: str) -> np.ndarray:
        return np.fromiter(self.tags.get(tag, ()), dtype=np.int64)

    def _grow(self) -> int:
        slot = len(self.docs)
        self.docs.append(None)
        self.sizes.append(0)
        if slot >= len(self.expires):
            cap = max(64, 2 * len(self.expires))
            self.expires = _resize(self.expires, cap)
            self.updated = _resize(self.updated, cap)
            self.when = _resize(self.when, cap)
            self.scores = _resize(self.scores, cap)
            self.vectors = _resize(self.vectors, cap)
        return slot


def _resize(array: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *array.shape[1:]), dtype=array.dtype)
    out[: len(array)] = array
    return out
