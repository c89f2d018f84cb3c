"""`mem serve-stdio`: the A2E memory protocol over stdin/stdout, one JSON message per line.

stdout carries protocol messages only, flushed per line; logs go to stderr. A line longer than
the limit is refused with an `error` (whose `req_id` is the line's `id` when the line starts with
it) and skipped without being held in memory. The loop ends at end of input or after
`shutdown`: the requests already sent after the `shutdown` are answered with a `runtime_error`
(not processed, retryable) so that each request still gets one response. Every acknowledged
write is already on disk by then (each one is fsync'd before its response is written).
"""

from __future__ import annotations

import os
import select
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


class LineReader:
    """The lines of a byte stream without their newline, `TooLong` in place of a line over
    `max_bytes` (the rest of which is skipped, never held). Bytes are read in chunks into a
    buffer of our own, so that the server can tell whether a next line is already here (read,
    or waiting in the pipe) without blocking: see `serve`, after a `shutdown`."""

    def __init__(self, stream: BinaryIO, max_bytes: int) -> None:
        self.stream, self.max_bytes = stream, max_bytes
        self.buffer = bytearray()
        self.searched = 0  # how much of the buffer is known to hold no newline
        self.eof = False
        self.fd = _descriptor(stream)

    def __iter__(self) -> Iterator[bytes | TooLong]:
        while (line := self.next(wait=True)) is not None:
            yield line

    def next(self, wait: bool) -> bytes | TooLong | None:
        """The next line; None at end of input, or (`wait` false) when it is not all here yet."""
        while True:
            end = self.buffer.find(b"\n", self.searched, self.max_bytes + 1)
            if end >= 0:
                return self._take(end, end + 1)
            if len(self.buffer) > self.max_bytes:
                return self._too_long(wait)
            if self.eof:
                return self._take(len(self.buffer), len(self.buffer)) if self.buffer else None
            self.searched = len(self.buffer)
            if not self._fill(wait):
                return None

    def _take(self, end: int, skip: int) -> bytes:
        line = bytes(self.buffer[:end]).rstrip(b"\r\n")
        del self.buffer[:skip]
        self.searched = 0
        return line

    def _too_long(self, wait: bool) -> TooLong | None:
        head = bytes(self.buffer[: min(HEAD_BYTES, self.max_bytes + 1)])  # holds no newline: all of this line
        while (end := self.buffer.find(b"\n")) < 0:  # drop what came of the line, read on to its end
            self.buffer.clear()
            if self.eof or not self._fill(wait):
                break
        else:
            del self.buffer[: end + 1]
        self.searched = 0
        return TooLong(head)

    def _fill(self, wait: bool) -> bool:
        """Read one more chunk; False when none could be had without waiting."""
        if not wait and not self._readable():
            return False
        read = getattr(self.stream, "read1", self.stream.read)
        chunk = read(CHUNK)
        if chunk:
            self.buffer += chunk
        else:
            self.eof = True
        return True

    def _readable(self) -> bool:
        """Whether a read would return at once. A stream with no descriptor (in memory) never
        waits; where `select` cannot watch the descriptor (a pipe on Windows), only what is
        already buffered counts."""
        if self.fd is None:
            return True
        try:
            ready, _, _ = select.select([self.fd], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(ready)


def _descriptor(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.BytesIO: io.UnsupportedOperation is an OSError
        return None


def serve(service, stdin: BinaryIO, stdout: BinaryIO, auth_secret: str | None = None) -> int:  # type: ignore[no-untyped-def]
    """Answer requests until end of input or `shutdown`. After a `shutdown`, each request line
    that is already here (read, or waiting in the pipe) gets an error saying the server is
    shutting down, so that every request has its one response; the server then exits without
    waiting for more."""
    from a2e_mem.protocol import Protocol

    protocol = Protocol(service, auth_secret)
    lines = LineReader(stdin, service.config.base.max_line_bytes)
    try:
        while (line := lines.next(wait=True)) is not None:
            _answer(stdout, _response(protocol, line, lines.max_bytes))
            if protocol.shutdown_requested:
                break
        while protocol.shutdown_requested and (line := lines.next(wait=False)) is not None:
            _answer(stdout, _refused_after_shutdown(line))
    finally:
        protocol.close()
        service.shutdown()
    return 0


def _response(protocol, line: bytes | TooLong, limit: int) -> dict | None:  # type: ignore[no-untyped-def]
    """The response to one line (None for a blank line, which is no request)."""
    from a2e_mem.ndjson import without_bom
    from a2e_mem.protocol import error, request_id

    if isinstance(line, TooLong):
        return error(request_id(line.head), "invalid_message", f"line longer than {limit} bytes: refused")
    if not without_bom(line).strip():  # a blank line, or one holding only a byte order mark
        return None
    return protocol.handle(line)


def _refused_after_shutdown(line: bytes | TooLong) -> dict | None:
    """The answer to a request that came after `shutdown`: not done (nothing of it was), and safe
    to send again to a new server, hence `retryable`."""
    from a2e_mem.protocol import error, message_id, request_id

    if isinstance(line, TooLong):
        req_id = request_id(line.head)
    elif not line.strip():
        return None
    else:
        req_id = message_id(line)
    message = "the server is shutting down (a shutdown came first): request not processed"
    return error(req_id, "runtime_error", message, retryable=True)


def _answer(stdout: BinaryIO, response: dict | None) -> None:
    from a2e_mem.protocol import error

    if response is not None:
        stdout.write(_encode(response, error) + b"\n")
        stdout.flush()


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
