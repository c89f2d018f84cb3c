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
"""

from __future__ import annotations

import json
import typing
from typing import Any

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
