"""The one place the store reads the time, so tests can move it (`clock.set_offset`)."""

from __future__ import annotations

import os
import time

# MEM_CLOCK_OFFSET lets tests that spawn `mem` move its clock too.
_offset = float(os.environ.get("MEM_CLOCK_OFFSET", "0") or 0)


def now() -> float:
    """Unix time in seconds, shifted by the test offset."""
    return time.time() + _offset


def set_offset(seconds: float) -> None:
    """Move the store's clock: tests use it to expire entries without sleeping."""
    global _offset
    _offset = seconds
