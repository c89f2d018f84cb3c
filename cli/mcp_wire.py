"""What `mem serve-mcp` puts on the wire, so that an MCP client never waits for an answer it
cannot read.

Results no deeper than a client parses. The store keeps values nested up to 250 levels, but the
official Python SDK's client parses a JSON-RPC message of at most 201 levels (pydantic-core's
recursion limit, measured with the SDK 2.3 client: A2E content 196 levels deep comes through,
197 does not) and drops one deeper without a word, so its call hangs. Other clients' parsers
stop sooner (serde_json, under the Rust SDK, at 128). So no message this server sends nests
deeper than `MAX_WIRE_DEPTH` levels: a value of a result that would go deeper comes back as its
JSON text (a string), and the result's `warnings` name it (`entries[3].content: ...`). The
replaced value is the outermost one the tool's output schema leaves free (any JSON: an entry's
content, a key-value's value, an event's payload, a field of a todo), so the result still
matches its schema, every other entry comes back as it was, and `json.loads` of the text gives
the value back whole.

Every request line answered (`answering_stdio`, below). A request whose id is neither a string
nor an integer (1.5, true, null; a string with a lone surrogate) gets an invalid-request or parse
error with `"id": null`, as JSON-RPC 2.0 answers a request whose id it cannot read; the SDK
would take it for a notification and answer nothing. Decided so because it helps a client: one
that sent `"id": null` gets exactly its answer, one that reads responses to unknown ids (the
TypeScript SDK reports them to its error handler) learns why nothing came, and the Python SDK's
client drops it with a debug log, which costs nothing (its own ids are integers). A message
without an id member stays a notification; a response is never answered.
"""

from __future__ import annotations

import json
import os
import re
import sys
import typing
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

MAX_WIRE_DEPTH = 100  # levels of a whole message: half of what the Python SDK's client parses
RESULT_LEVELS = 2  # the message and its `result` hold the structured content (level 3)


def fit_result(result: CallToolResult, model: type[BaseModel]) -> CallToolResult:
    """`result`, or when its structured content is too deep, the same with each too deep value
    as its JSON text (text content rebuilt from it, so that both forms still agree)."""
    structured = result.structured_content
    room = MAX_WIRE_DEPTH - RESULT_LEVELS
    if structured is None or depth(structured) <= room:
        return result
    warnings: list[str] = []
    fitted = fold(structured, model, room, "", warnings)
    fitted["warnings"] = [*fitted.get("warnings", []), *warnings]
    text = json.dumps(fitted, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=fitted, meta=result.meta)


def depth(value: Any) -> int:
    """Levels of arrays and objects in `value` (a scalar: 0). Recursion is bounded: the store
    refuses values nested deeper than 250 levels."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def fold(value: Any, kind: Any, room: int, path: str, warnings: list[str]) -> Any:
    """`value` (declared as `kind` in the output model, found at `path`) in at most `room`
    levels: objects and arrays the schema declares are kept and looked into, the outermost
    free value that does not fit becomes its JSON text."""
    if depth(value) <= room:
        return value
    if kind is Any or kind is None or not declared_container(kind, value):
        warnings.append(
            f"{path}: nests deeper than MCP clients read ({MAX_WIRE_DEPTH} levels a message), "
            "so it comes as its JSON text"
        )
        return json.dumps(value, ensure_ascii=False)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        fields = {field.alias or name: field.annotation for name, field in kind.model_fields.items()}
        return {k: fold(v, fields.get(k), room - 1, f"{path}.{k}".lstrip("."), warnings) for k, v in value.items()}
    item = typing.get_args(kind)[-1]  # list[X] or dict[str, X]
    if isinstance(value, dict):
        return {k: fold(v, item, room - 1, f"{path}.{k}", warnings) for k, v in value.items()}
    return [fold(v, item, room - 1, f"{path}[{i}]", warnings) for i, v in enumerate(value)]


def declared_container(kind: Any, value: Any) -> bool:
    """Whether the schema declares `value`'s shape: a model or dict for an object, a list for an
    array (an extra field, `Any` or a union leaves it free)."""
    if isinstance(value, dict):
        return (isinstance(kind, type) and issubclass(kind, BaseModel)) or typing.get_origin(kind) is dict
    return isinstance(value, list) and typing.get_origin(kind) is list


# -- every request line answered ------------------------------------------------------------------
#
# The SDK's stdio transport (`mcp.server.stdio`) hands a line it cannot parse or validate to the
# server as an exception, which logs it at debug level and answers nothing: a request nested
# over 200 levels, with a lone surrogate or a number of thousands of digits left its client
# waiting forever. So `answering_stdio` reads the requests itself: a line the SDK's parser
# refuses gets a JSON-RPC error carrying the line's id, as `serve-stdio` answers every line.
# Writing stays the SDK's (`stdio_server`, which also keeps stray prints off stdout).
#
# Every request answered, also at the end of input. The SDK's loop ends when its read stream
# does, and cancels the calls still running: a client that wrote its requests and closed stdin
# (`printf ... | mem serve-mcp`) got no answer to them, though their writes were done. So the
# read stream closes only once every request sent to the server has had its answer (or the
# client cancelled it: `notifications/cancelled`, which the server never answers), as
# `serve-stdio` answers every line before it exits.


@asynccontextmanager
async def answering_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_server` streams, with requests read here (see above)."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    wire, restore_stdin = claim_stdin()
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    from_server, answered = anyio.create_memory_object_stream[SessionMessage | object](0)
    done = anyio.Event()
    pending = Pending()
    try:
        async with stdio_server(stdin=no_lines(done)) as (_, write_stream):  # its reader gets no line
            try:
                async with anyio.create_task_group() as tg, write_stream:  # its writer ends once all are closed
                    tg.start_soon(read_requests, lines(wire), to_server, write_stream.clone(), pending)
                    tg.start_soon(pass_answers, answered, write_stream.clone(), pending)
                    last = from_server.clone()  # the server may keep clones of its stream open
                    yield read_stream, from_server
                    async with last:
                        await last.send(END)  # after the server's last answer: `pass_answers` passed it
            finally:
                done.set()
    finally:
        restore_stdin()


END = object()  # sent after the server's last message: `pass_answers` is done


class Pending:
    """The ids of the requests sent to the server and not answered yet (see above), counted: a
    client that reuses an id gets an answer for each of its requests."""

    def __init__(self) -> None:
        import anyio

        self.ids: Counter[Any] = Counter()
        self.changed = anyio.Event()

    def add(self, rid: Any) -> None:
        self.ids[rid] += 1

    def remove(self, rid: Any) -> None:
        if self.ids[rid] > 1:
            self.ids[rid] -= 1
        else:
            del self.ids[rid]
        self.changed.set()

    def close(self) -> None:
        """No answer will come any more (the server's side ended): nothing to wait for."""
        self.ids.clear()
        self.changed.set()

    async def drained(self) -> None:
        """Return once every request sent has its answer."""
        import anyio

        while self.ids:
            await self.changed.wait()
            self.changed = anyio.Event()


async def pass_answers(answered: Any, out: Any, pending: Pending) -> None:
    """The server's messages to the client, each answer taking its request off `pending`."""
    from mcp_types import JSONRPCError, JSONRPCResponse

    try:
        async with answered, out:
            async for item in answered:
                if item is END:
                    return
                await out.send(item)
                message = getattr(item, "message", None)
                if isinstance(message, (JSONRPCResponse, JSONRPCError)):
                    pending.remove(message.id)
    finally:
        pending.close()


def claim_stdin() -> tuple[BinaryIO, Callable[[], None]]:
    """The request stream: a private copy of fd 0, while fd 0 itself reads the null device (as
    the SDK does with a stdin it claims), so that nothing else in the process, nor a child,
    takes bytes of a request. The copy is never closed: a worker thread may still read it."""
    from .streams import StdinClosed, stdin_closed

    if stdin_closed():  # fd 0 is the null device then (`streams.py`): no request would ever come
        raise StdinClosed("standard input is closed")
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return os.fdopen(wire, "rb", closefd=False), lambda: os.dup2(wire, 0)


async def lines(wire: BinaryIO) -> AsyncIterator[bytes]:
    """The request lines, each read on a worker thread that a cancellation abandons: a read
    waiting for a client that sends nothing held Ctrl-C off until stdin closed (anyio's file
    wrapper waits for its thread), where `serve-stdio` exits 130 at once (outside audit D25)."""
    import anyio

    while line := await anyio.to_thread.run_sync(wire.readline, abandon_on_cancel=True):
        yield line


async def no_lines(done: Any) -> AsyncIterator[str]:
    """What the SDK's own reader reads: nothing, until the server is done."""
    await done.wait()
    return
    yield  # an async generator


async def read_requests(wire: Any, to_server: Any, answers: Any, pending: Pending) -> None:
    """Each line to the server as the SDK's reader would send it, or, when the SDK's parser
    refuses it or reads a request as a notification, an error answer (or, without an id, a
    line on stderr). At the end of input, the server's stream ends once it answered them all."""
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_REQUEST, JSONRPCNotification, JSONRPCRequest, jsonrpc_message_adapter
    from pydantic import ValidationError

    from a2e_mem.ndjson import without_bom

    async with to_server, answers:
        async for raw in wire:
            try:
                line = without_bom(raw).decode("utf-8")
            except UnicodeDecodeError as exc:  # not U+FFFD, as the SDK's reader makes it: two keys would meet
                await refuse_undecodable(without_bom(raw), exc, answers)
                continue
            if not line.strip():
                continue
            if line.lstrip(" \t\r").startswith("["):
                await refuse_batch(line, answers)
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValidationError as exc:
                await answer_unreadable(line, exc, answers)
                continue
            if isinstance(message, JSONRPCNotification) and (rid := id_of(first_object(line))) is not NO_REPLY:
                # an id neither string nor integer (1.5, true, null): the SDK reads a notification
                await send_error(answers, rid, INVALID_REQUEST, "the id must be a string or an integer")
                continue
            if isinstance(message, JSONRPCRequest):
                pending.add(message.id)
            elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                pending.remove((message.params or {}).get("requestId"))  # never answered
            await to_server.send(SessionMessage(message))
        await pending.drained()


async def answer_unreadable(line: str, exc: Any, answers: Any) -> None:
    """A JSON-RPC error for a line that cannot be read: a parse error (-32700) for JSON the
    server cannot parse (malformed, too deep, a lone surrogate, a huge number), an invalid
    request (-32600) for JSON that is no JSON-RPC message; to the id the line carries."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR

    unparsed = any(error["type"] == "json_invalid" for error in exc.errors())
    reason = exc.errors()[0]["msg"] if unparsed else "not a JSON-RPC request, notification or response"
    request_id = id_of(first_object(line))
    if request_id is NO_REPLY:
        sys.stderr.write(f"mem serve-mcp: dropped a message without an id that cannot be read: {reason}\n")
        return
    code = PARSE_ERROR if unparsed else INVALID_REQUEST
    await send_error(answers, request_id, code, f"cannot read the request: {reason}")


async def refuse_undecodable(raw: bytes, exc: UnicodeDecodeError, answers: Any) -> None:
    """A parse error (-32700) for a line that is not UTF-8, to the id it carries (read with the
    bad bytes replaced), as `serve-stdio` refuses it. The SDK's own reader replaces them with
    U+FFFD: keys `a\\xff` and `a\\xfe` would both be stored as `a\ufffd`, the second over the first."""
    from mcp_types import PARSE_ERROR

    request_id = id_of(first_object(raw.decode("utf-8", "replace")))
    reason = f"the request is not valid UTF-8 (byte {exc.start})"
    if request_id is NO_REPLY:
        sys.stderr.write(f"mem serve-mcp: dropped a message without an id that cannot be read: {reason}\n")
        return
    await send_error(answers, request_id, PARSE_ERROR, f"cannot read the request: {reason}")


async def refuse_batch(line: str, answers: Any) -> None:
    """An invalid-request error (-32600) to each request of a batch (a JSON array of messages,
    which MCP does not support), each error a message of its own: the official SDK clients
    (Python and TypeScript) read a line as one message and drop an array they cannot validate,
    so an array of errors would leave a client waiting on one of those ids as before. A batch
    of notifications and responses only gets a line on stderr."""
    from mcp_types import INVALID_REQUEST

    ids = [rid for members in shallow_objects(line) if (rid := id_of(members)) is not NO_REPLY]
    if not ids:
        sys.stderr.write("mem serve-mcp: dropped a batch without an id to answer: batches are not supported\n")
    for request_id in ids:
        await send_error(answers, request_id, INVALID_REQUEST, "batches are not supported")


async def send_error(answers: Any, request_id: str | int | None, code: int, message: str) -> None:
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    error = ErrorData(code=code, message=message)
    await answers.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))


NO_REPLY = object()  # what `id_of` gives for a message that gets no reply


def id_of(members: dict[str, Any]) -> Any:
    """The id a reply to a message with these members carries (see `shallow_objects`): its own
    when a reply can carry it (an integer, a string without lone surrogates), else null. NO_REPLY
    for a notification (no id member) or a response."""
    if "id" not in members or ("method" not in members and ("result" in members or "error" in members)):
        return NO_REPLY
    request_id = members["id"]
    if isinstance(request_id, str) and not any("\ud800" <= c <= "\udfff" for c in request_id):
        return request_id
    return request_id if type(request_id) is int else None


def first_object(line: str) -> dict[str, Any]:
    """The members of the JSON object on `line` (see `shallow_objects`), none if it holds none."""
    return next(iter(shallow_objects(line)), {})


# A token of JSON text: a string (escapes kept), a structural character, or a run of anything
# else (a number, true, false, null, or garbage).
TOKEN = re.compile(r'[ \t\r\n]*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([\[\]{}:,])|([^\[\]{}:,"\s]+))')
NESTED = object()  # the value of a member that is an object or an array: not read
UNREADABLE = object()  # the value of a member that no JSON parser reads (1e, "\x", a 5000-digit number)


def shallow_objects(line: str) -> list[dict[str, Any]]:
    """The members of the JSON object on `line`, or of each object in the JSON array on it (a
    batch), with their values when they are no object or array. A scan of the tokens that counts
    depth outside strings, so that a member after a value too deep, too big or malformed for a
    JSON parser is still found (an id may come last); it stops where the line stops being JSON
    tokens (an unterminated string). A member written twice keeps its last value, as parsers do."""
    objects: list[dict[str, Any]] = []
    depth, shallow, name, expect = 0, 0, "", ""  # expect: the next token of a shallow object
    at = 0
    while token := TOKEN.match(line, at):
        at = token.end()
        string, mark, scalar = token.groups()
        if not shallow:  # the first token: an object, a batch, or no message
            shallow = {"{": 1, "[": 2}.get(mark, -1)
        if mark in ("{", "["):
            depth += 1
            if mark == "{" and depth == shallow:
                objects.append({})
                expect = "name"
            elif depth == shallow + 1 and expect == "value":
                objects[-1][name], expect = NESTED, ""
        elif mark in ("}", "]"):
            depth -= 1
        elif depth != shallow or not objects:
            continue
        elif mark == ",":
            expect = "name"
        elif mark == ":":
            expect = "value" if expect == "colon" else ""
        elif expect == "name" and string:
            name, expect = scalar_value(string), "colon"
        elif expect == "value":
            objects[-1][name], expect = scalar_value(string or scalar), ""
        else:
            expect = ""
    return objects


def scalar_value(text: str) -> Any:
    """A string, number, true, false or null as JSON text reads, else `UNREADABLE`."""
    try:
        return json.loads(text)
    except ValueError:  # malformed, or digits beyond what Python converts
        return UNREADABLE
