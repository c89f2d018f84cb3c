"""`mem`'s library. Its Python API is `Memory` (see `store/api.py`): `from a2e_mem import Memory`.

The names below are loaded on first use, so that importing a small module of the package
(`store.clock`, ...) does not load the whole store: the CLI's help and completion stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import (
        Closed,
        Conflict,
        Damaged,
        Entry,
        InvalidInput,
        Key,
        MemError,
        Memory,
        MemoryFull,
        NotFound,
        Record,
        Retrieved,
        RoleRefused,
        Session,
        StoreMismatch,
        StoreResult,
        StoreUnavailable,
        Unauthorized,
    )

__all__ = [
    "Memory", "Session", "Entry", "Retrieved", "StoreResult", "Record", "Key",
    "MemError", "NotFound", "InvalidInput", "Conflict", "MemoryFull", "Unauthorized",
    "StoreMismatch", "StoreUnavailable", "RoleRefused", "Damaged", "Closed",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
