"""`mem json|todo|markdown save|update|delete|list`: the codebolt document memories.

No `from __future__ import annotations` here: the groups are made by one factory whose option
help texts are built at run time, so their annotations must be evaluated eagerly.
"""

from typing import Annotated, Any

import typer

from .context import state
from .errors import invalid_input
from .options import Fields, Filters, Format, ListLimit, Metadata, Namespace, Offset, fields_list, optional_object
from .options import parse_json_object as parse_object
from .output import emit, show

MemoryId = Annotated[str, typer.Argument(help="The memory ID printed by save or list.")]
COLUMNS = {kind: ["memoryId", kind, "metadata", "updated_at"] for kind in ("json", "todo", "markdown")}
FIELDS = {kind: ("memoryId", kind, "metadata", "created_at", "updated_at") for kind in ("json", "todo", "markdown")}


def memory_app(kind: str, noun: str, objects: bool = True) -> typer.Typer:
    """The save/update/delete/list group of `json`, `todo` or `markdown` memories (markdown
    adds its own save and update, which read text rather than a JSON object)."""
    app = typer.Typer(help=f"{noun} memories (memory_{kind}_*).", no_args_is_help=True)
    service = lambda: state.service  # noqa: E731 - opened on first use
    if objects:
        add_object_commands(app, kind, noun, service)

    @app.command("delete")
    def delete(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
        """Delete it; exit 3 if the ID is unknown."""
        result = getattr(service(), f"memory_{kind}_delete")(memory_id, namespace=namespace)
        show(result, fmt)

    @app.command("list")
    def list_(
        filter_: Filters = None,
        limit: ListLimit = 100,
        offset: Offset = 0,
        namespace: Namespace = "default",
        fmt: Format = None,
        fields: Fields = None,
    ) -> None:
        """List them, newest first, optionally filtered (see README: Filters)."""
        method = getattr(service(), f"memory_{kind}_list")
        records = method(optional_object(filter_, "--filter"), limit=limit, offset=offset, namespace=namespace)
        emit(records, fmt, fields_list(fields, FIELDS[kind], records), COLUMNS[kind])

    return app


def add_object_commands(app: typer.Typer, kind: str, noun: str, service: Any) -> None:
    """`save` and `update` for memories whose body is a JSON object."""

    @app.command("save")
    def save(
        body: Annotated[str, typer.Argument(help=f"The {noun.lower()} as a JSON object.")],
        metadata: Metadata = None,
        namespace: Namespace = "default",
        fmt: Format = None,
    ) -> None:
        """Save and print the record with its new memoryId."""
        method = getattr(service(), f"memory_{kind}_save")
        show(method(parse_object(body, "BODY"), optional_object(metadata, "--metadata"), namespace=namespace), fmt)

    @app.command("update")
    def update(
        memory_id: MemoryId,
        body: Annotated[str, typer.Argument(help="The new JSON object.")],
        namespace: Namespace = "default",
        fmt: Format = None,
    ) -> None:
        """Replace the object (keeps the memoryId); exit 3 if the ID is unknown."""
        update = getattr(service(), f"memory_{kind}_update")
        show(update(memory_id, parse_object(body, "BODY"), namespace=namespace), fmt)


json_app = memory_app("json", "JSON")
todo_app = memory_app("todo", "Todo")
markdown_app = memory_app("markdown", "Markdown", objects=False)
Source = Annotated[str | None, typer.Argument(help="A markdown file, or - for stdin.")]
Text = Annotated[str | None, typer.Option("--text", "-t", help="The markdown itself.")]


def read_markdown(source: str | None, text: str | None) -> str:
    """Markdown from --text, a file, or stdin (`-`)."""
    if (source is None) == (text is None):
        invalid_input("give a FILE, - for stdin, or --text")
    if text is not None:
        return text
    from .arguments import read_text

    return read_text(source)  # type: ignore[arg-type]


@markdown_app.command("save")
def markdown_save(
    source: Source = None,
    text: Text = None,
    metadata: Metadata = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Save markdown from FILE, stdin (-) or --text; prints the record with its memoryId."""
    markdown = read_markdown(source, text)
    show(
        state.service.memory_markdown_save(markdown, optional_object(metadata, "--metadata"), namespace=namespace), fmt
    )


@markdown_app.command("update")
def markdown_update(
    memory_id: MemoryId,
    source: Source = None,
    text: Text = None,
    metadata: Metadata = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Replace the markdown (and the metadata, if given); exit 3 if the ID is unknown."""
    markdown = read_markdown(source, text)
    meta = optional_object(metadata, "--metadata")
    show(state.service.memory_markdown_update(memory_id, markdown, meta, namespace=namespace), fmt)
