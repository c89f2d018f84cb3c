"""Standard streams a command was started without (`mem ... <&-`, `>&-`, `2>&-`).

A closed descriptor 0, 1 or 2 would be the next file the process opens: a journal or a lock
file would then take stdin's or stdout's place, and a print would write into it. So each closed
one is taken by the null device first. Then a closed stdout refuses the command before it does
anything (what it did could not be told: a write's key, a deleted count); a closed stdin reads
as an error, said by the command that reads it (`mem store - <&-`, `serve-stdio`, `serve-mcp`),
rather than as no input; a closed stderr drops the notes and errors, as asked.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any


class StdinClosed(OSError):
    pass


class ClosedInput(io.RawIOBase):
    """What a command reads from a closed stdin: an error."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise StdinClosed("standard input is closed")


def guard_closed() -> None:
    closed = {fd for fd in (0, 1, 2) if not _open(fd)}
    for fd in sorted(closed):  # lowest first: os.open takes the lowest free descriptor
        os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    if 2 in closed:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the process's stderr until it exits
    if 1 in closed:
        sys.stderr.write("mem: error: standard output is closed (redirect it to /dev/null to discard it)\n")
        sys.stderr.flush()
        os._exit(1)
    if 0 in closed:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(ClosedInput()))


def stdin_closed() -> bool:
    return isinstance(getattr(getattr(sys.stdin, "buffer", None), "raw", None), ClosedInput)


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
