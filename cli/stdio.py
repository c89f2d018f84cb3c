"""`mem serve-stdio`: the A2E memory protocol over stdin/stdout, one JSON message per line.

stdout carries protocol messages only, flushed per line; logs go to stderr. A line longer than
the limit is refused with an `error` (whose `req_id` is the line's `id` when the line starts with
it) and skipped without being held in memory. The loop ends at
end of input or after `shutdown`; every acknowledged write is already on disk by then (each one
is fsync'd before its response is written).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 1 << 16
HEAD_BYTES = 4096  # what is kept of a refused line: enough to find its `id`


@dataclass
class TooLong:
    """Stands for a line over the limit: only its first bytes are kept."""

    head: bytes


def read_lines(stream: BinaryIO, max_bytes: int) -> Iterator[bytes | TooLong]:
    """Lines of `stream` without their newline; `TooLong` in place of a line over `max_bytes`."""
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            head = line[:HEAD_BYTES]
            del line  # the rest of the line is skipped, never held
            _skip_rest_of_line(stream)
            yield TooLong(head)
            continue
        yield line.rstrip(b"\r\n")


def _skip_rest_of_line(stream: BinaryIO) -> None:
    while True:
        chunk = stream.readline(CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            return


def serve(service, stdin: BinaryIO, stdout: BinaryIO, auth_secret: str | None = None) -> int:  # type: ignore[no-untyped-def]
    """Answer requests until end of input or `shutdown`."""
    from a2e_mem.protocol import Protocol, error, request_id

    protocol = Protocol(service, auth_secret)
    limit = service.config.base.max_line_bytes
    try:
        for line in read_lines(stdin, limit):
            if isinstance(line, TooLong):
                response = error(request_id(line.head), "invalid_message", f"line longer than {limit} bytes: refused")
            elif not line.strip():
                continue
            else:
                response = protocol.handle(line)
            stdout.write(_encode(response, error) + b"\n")
            stdout.flush()
            if protocol.shutdown_requested:
                break
    finally:
        protocol.close()
        service.shutdown()
    return 0


def _encode(response: dict, error) -> bytes:  # type: ignore[no-untyped-def]
    """The response line; a response that cannot be encoded (a bug) still answers its request."""
    import orjson

    try:
        return orjson.dumps(response)
    except TypeError as exc:  # orjson.JSONEncodeError
        from a2e_mem.log import logger

        logger("stdio").exception("reply to %s could not be encoded", response.get("req_id"))
        req_id = response.get("req_id") if isinstance(response.get("req_id"), str) else ""
        return orjson.dumps(error(req_id, "runtime_error", f"internal error: the reply could not be encoded: {exc}"))


def main(service, auth_secret: str | None) -> int:  # type: ignore[no-untyped-def]
    """Serve on the real stdin/stdout. File descriptor 1 is pointed at stderr first, so that no
    stray print (ours, a library's, or C code's) can corrupt the protocol stream."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with os.fdopen(protocol_fd, "wb", buffering=0) as out:
        try:
            return serve(service, sys.stdin.buffer, out, auth_secret)  # type: ignore[arg-type]
        except BrokenPipeError:  # the client went away: nothing left to answer
            return 0
