"""Turning failures into one stderr line and a documented exit code.

    0 ok   1 runtime error   2 usage error   3 not found   4 invalid input   5 store full
    6 unauthorized   7 store unavailable   130 interrupted (Ctrl-C, SIGINT)   141 stdout closed
    by its reader (quietly, as a shell reports a tool that SIGPIPE ended)   143 ended by SIGTERM
    (`mem export -o FILE`, which removes its temporary file first; elsewhere the default: killed)

`MEM_DEBUG=1` prints the traceback as well.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from typing import NoReturn

EXIT_USAGE = 2
EXIT_PIPE = 141  # 128 + SIGPIPE
EXIT_TERM = 143  # 128 + SIGTERM
EXIT_INVALID = 4
EXIT_NOT_FOUND = 3


class CliError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def usage_error(message: str) -> NoReturn:
    raise CliError(message, EXIT_USAGE)


def invalid_input(message: str) -> NoReturn:
    raise CliError(message, EXIT_INVALID)


def unreadable(name: str, exc: OSError) -> NoReturn:
    """A file (or stdin) that cannot be read: not found (exit 3) when it is not there, as the
    Python API's `NotFound`; a closed stdin a runtime error (exit 1), as wherever it is read;
    invalid input (exit 4) otherwise (a folder, no permission)."""
    from .streams import StdinClosed

    code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else 1 if isinstance(exc, StdinClosed) else EXIT_INVALID
    raise CliError(f"cannot read {name}: {exc.strerror or exc}", code)


def output_lost(exc: OSError) -> CliError:
    """Stdout that refused the output (a full device, a descriptor not open for writing): what
    the command did stands (a write is stored), only its answer is lost; exit 1."""
    return CliError(f"cannot write the output: {exc.strerror or exc}; what the command did stands", 1)


def reader_left(exc: BaseException) -> bool:
    """Whether `exc` is the reader of stdout leaving, alone or as a group (serve-mcp's tasks: its
    writer's BrokenPipeError, and the streams that fed the writer broken or closed with it)."""
    leaves = list(_leaves(exc))
    gone = ("BrokenResourceError", "ClosedResourceError")  # anyio's, for a stream whose reader died
    return any(isinstance(leaf, BrokenPipeError) for leaf in leaves) and all(
        isinstance(leaf, BrokenPipeError) or type(leaf).__name__ in gone for leaf in leaves
    )


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    inner = getattr(exc, "exceptions", None)
    if inner is None:
        yield exc
        return
    for one in inner:
        yield from _leaves(one)


def report(exc: BaseException) -> int:
    """Print `exc` as `mem: error: ...` and return its exit code."""
    from a2e_mem.errors import MemError

    from .arguments import shown

    if os.environ.get("MEM_DEBUG"):
        traceback.print_exception(exc)
    while len(getattr(exc, "exceptions", ())) == 1:  # an exception group of one (serve-mcp's task group)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, (CliError, MemError)):
        code, message = exc.exit_code, exc.message
    elif isinstance(exc, OSError):
        code, message = 1, f"{exc.strerror or exc} ({shown(str(exc.filename))})" if exc.filename else str(exc)
    else:
        code, message = 1, f"{type(exc).__name__}: {exc} (MEM_DEBUG=1 shows the traceback)"
    sys.stderr.write(f"mem: error: {message}\n")
    return code
