"""`mem set KEY VALUE`, `mem get KEY`, `mem delete KEY`, `mem keys`: the codebolt key-value memory."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

from .context import state
from .options import Fields, Format, ListLimit, Namespace, Offset, fields_list, parse_value
from .output import emit, show

KV_COLUMNS = ["key", "value", "updated_at"]
KV_FIELDS = ("key", "value", "created_at", "updated_at")


def set_value(
    key: Annotated[str, typer.Argument(help="The key.")],
    value: Annotated[str, typer.Argument(help="The value: JSON if it parses, else a string.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Store VALUE under KEY (memory_set)."""
    record = state.service.memory_set(key, parse_value(value, "VALUE"), namespace=namespace)
    show(record, fmt)


def get_value(
    key: Annotated[str, typer.Argument(help="The key.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print only the value (strings unquoted).")] = False,
    namespace: Namespace = "default",
    fmt: Format = None,
    fields: Fields = None,
) -> None:
    """Print the value under KEY (memory_get); exit 3 if there is none."""
    record = state.service.memory_get(key, namespace=namespace)
    if raw:
        value = record["value"]
        print(value if isinstance(value, str) else orjson.dumps(value).decode())
    else:
        show(record, fmt, fields_list(fields, KV_FIELDS, [record]))


def delete_value(
    key: Annotated[str, typer.Argument(help="The key.")], namespace: Namespace = "default", fmt: Format = None
) -> None:
    """Delete KEY and its value (memory_delete); exit 3 if there is none."""
    show(state.service.memory_delete(key, namespace=namespace), fmt)


def keys(namespace: Namespace = "default", limit: ListLimit = 100, offset: Offset = 0, fmt: Format = None) -> None:
    """List key-value pairs, newest first."""
    emit(state.service.memory_list_keys(namespace=namespace, limit=limit, offset=offset), fmt, columns=KV_COLUMNS)
