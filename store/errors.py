"""Errors raised by the store, each carrying its A2E wire code and its shell exit code.

Front doors translate them: `serve-stdio` into an `error` message, the CLI into a one-line
message and an exit code, `serve-mcp` into a tool error. Nothing else needs to know the mapping.
"""

from __future__ import annotations

from typing import Any


class MemError(Exception):
    """Base class: a failure the caller can act on, with a stable code."""

    code = "runtime_error"
    exit_code = 1
    retryable = False

    def __init__(self, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail or {}


class NotFound(MemError):
    """A session, entry, record or configuration that does not exist."""

    code = "memory_not_found"
    exit_code = 3


class InvalidInput(MemError):
    """Input that fails validation; `detail` names the fields."""

    code = "schema_violation"
    exit_code = 4


class MemoryFull(MemError):
    """A namespace limit (entries or bytes) or the per-entry size limit was hit."""

    code = "memory_full"
    exit_code = 5


class Unauthorized(MemError):
    """An agent tried something the store's policy or auth secret does not allow."""

    code = "unauthorized"
    exit_code = 6


class Conflict(MemError):
    """The target exists but refuses the operation (an archived log, a disabled configuration)."""

    code = "invalid_message"
    exit_code = 4


class StoreMismatch(MemError):
    """The store was built with another embedder; `mem reindex` rebuilds it."""

    code = "runtime_error"
    exit_code = 1


class Damaged(MemError):
    """A file of the store failed its checksum or cannot be read; `mem doctor --repair` salvages."""

    code = "runtime_error"
    exit_code = 1
