"""The one place the store reads the time, so tests can move it (`clock.set_offset`)."""

from __future__ import annotations

import math
import os
import time


def env_offset() -> float:
    """MEM_CLOCK_OFFSET (seconds) lets tests that spawn `mem` move its clock too."""
    text = os.environ.get("MEM_CLOCK_OFFSET", "").strip()
    try:
        offset = float(text or 0)
    except ValueError:
        offset = math.nan
    if not math.isfinite(offset):
        from .errors import InvalidInput

        raise InvalidInput(f"MEM_CLOCK_OFFSET must be a number of seconds, not {text!r}")
    return offset


_offset = env_offset()


def now() -> float:
    """Unix time in seconds, shifted by the test offset."""
    return time.time() + _offset


def set_offset(seconds: float) -> None:
    """Move the store's clock: tests use it to expire entries without sleeping."""
    global _offset
    _offset = seconds
