"""Errors raised by the store, each carrying its A2E wire code and its shell exit code.

Front doors translate them: `serve-stdio` into an `error` message, the CLI into a one-line
message and an exit code, `serve-mcp` into a tool error. Nothing else needs to know the mapping.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

# OS errors that pass with time or a freed resource: the same request may succeed if sent again.
TRANSIENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EAGAIN, errno.EINTR, errno.EBUSY, errno.ENOMEM, errno.EMFILE, errno.ENFILE}
)


SHOWN_MOST = 200  # characters of a caller's value an error message repeats


def shown_value(value: Any) -> str:
    """`repr(value)` for a message, its middle left out past SHOWN_MOST characters: an error
    must stay a readable line even for a key of thousands of characters."""
    text = repr(value)
    if len(text) <= SHOWN_MOST:
        return text
    half = SHOWN_MOST // 2
    return f"{text[:half]}...{text[-half:]} ({len(text)} characters)"


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
    """The target exists but refuses the operation (an archived log, a disabled configuration,
    an ID taken already). Raised by the codebolt tools only, which the A2E wire does not carry,
    so its code need not be one of the wire's (`invalid_message` would say the request was
    malformed, which it was not)."""

    code = "conflict"
    exit_code = 4


class StoreMismatch(MemError):
    """The store was built with another embedder; `mem reindex` rebuilds it."""

    code = "runtime_error"
    exit_code = 1


class StoreUnavailable(MemError):
    """The store's database cannot be used: unreachable, refusing the credentials, or without
    the pgvector extension. `retryable` when it may pass (a server down or restarting)."""

    code = "runtime_error"
    exit_code = 7


class RoleRefused(StoreUnavailable, Unauthorized):
    """The database refused a statement to this role (SQLSTATE 42501): a least-privilege role
    (see the README) may not change the tables, as `mem reindex` must. An `Unauthorized` (exit 6),
    not an outage; a `StoreUnavailable` too, for the code that lets the owner's work wait."""

    code = "unauthorized"
    exit_code = 6


class Closed(MemError):
    """A call on a `Memory` (or one of its views, groups or sessions) after it was closed: the
    store it used is gone; open a new `Memory`. A mistake in the calling program, not the store's."""

    code = "runtime_error"
    exit_code = 1


def missing_or_wrong(name: str, given: dict[str, Any], what: str, within: str = "") -> InvalidInput:
    """The error for field `name` of `given` (itself field `within`) that is not `what`: "is
    required" when it is absent, "must be ..., not <its JSON type>" when it is there with another
    type (saying "required" of a field given as 5 sent its writer looking for a missing field)."""
    from .config import json_type

    shown = f"{within}.{name}" if within else name
    if given.get(name) in (None, ""):  # absent, or there but empty: "not a string" would puzzle
        return InvalidInput(f"{shown} is required ({what})")
    return InvalidInput(f"{shown} must be {what}, not {json_type(given[name])}")


def refuse_unknown(given: Iterable[str], known: Iterable[str], what: str) -> None:
    """Refuse names (tool arguments, fields of an object) that are not `known`, naming each and
    the close valid name if there is one: a misspelt filter must not silently match everything,
    nor a misspelt field be silently dropped."""
    allowed = list(known)
    unknown = [name for name in given if name not in allowed]
    if not unknown:
        return
    named = ", ".join(f"{name!r}{did_you_mean(name, allowed)}" for name in unknown)
    plural = "s" if len(unknown) > 1 else ""
    raise InvalidInput(
        f"unknown {what}{plural} {named}; expected: {', '.join(allowed)}", {"unknown": unknown, "allowed": allowed}
    )


def did_you_mean(name: str, allowed: list[str]) -> str:
    """` (did you mean 'x'?)` for the valid name closest to `name`, or nothing."""
    import difflib

    def squash(text: str) -> str:  # eventType, event-type and EVENT_TYPE all mean event_type
        return text.replace("_", "").replace("-", "").lower()

    same = [a for a in allowed if squash(a) == squash(name)]
    close = same or difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def os_failure(exc: OSError) -> MemError:
    """An `OSError` met while serving a request, as a store error to send back: `runtime_error`,
    `retryable` when its cause passes (a full disk or quota, too many open files, no memory).
    The message says so too, for front doors (MCP) that have no retryable flag."""
    failure = MemError(f"storage error: {exc.strerror or exc}")
    if exc.errno in TRANSIENT_ERRNOS:
        failure.retryable = True
        failure.message += " (retryable: the request can be sent again once the condition clears)"
    return failure


class Damaged(MemError):
    """A file of the store failed its checksum or cannot be read; `mem doctor --repair` salvages."""

    code = "runtime_error"
    exit_code = 1
