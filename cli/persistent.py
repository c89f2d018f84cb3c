"""`mem persistent ...`: codebolt persistent memories (stored retrieval configurations)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .context import state
from .options import Fields, Format, ListLimit, Namespace, Offset, fields_list, optional_object
from .output import emit, show

app = typer.Typer(help="Persistent memories: retrieval configurations (persistent_memory_*).", no_args_is_help=True)
MemoryId = Annotated[str, typer.Argument(help="The persistent memory's ID.")]
Json = str | None
COLUMNS = ["id", "label", "status", "inputs_scope", "retrieval", "updated_at"]
FIELDS = ("id", "label", "description", "inputs_scope", "additional_variables", "retrieval", "contribution", "status",
          "created_at", "updated_at")  # fmt: skip


def _config_options(
    label: str | None, description: str | None, scope: list[str] | None, variables: str | None,
    retrieval: str | None, contribution: str | None, status: str | None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "label": label,
        "description": description,
        "inputs_scope": scope,
        "additional_variables": optional_object(variables, "--variables"),
        "retrieval": optional_object(retrieval, "--retrieval"),
        "contribution": optional_object(contribution, "--contribution"),
        "status": status,
    }


Label = Annotated[str | None, typer.Option("--label", help="Human-readable name.")]
Description = Annotated[str | None, typer.Option("--description", help="What this memory is for.")]
Scope = Annotated[list[str] | None, typer.Option("--scope", help="Input scope (repeatable).")]
Variables = Annotated[Json, typer.Option("--variables", help="additional_variables as a JSON object.")]
Retrieval = Annotated[Json, typer.Option("--retrieval", help='e.g. \'{"source_type": "kv", "source_id": "default"}\'.')]
Contribution = Annotated[
    Json, typer.Option("--contribution", help='e.g. \'{"format": "markdown", "max_tokens": 500}\'.')
]
Status = Annotated[str | None, typer.Option("--status", help="active, disabled or draft.")]


@app.command("create")
def create(
    label: Label = None, retrieval: Retrieval = None, contribution: Contribution = None,
    memory_id: Annotated[str | None, typer.Option("--id", help="Choose the ID (default: generated).")] = None,
    description: Description = None, scope: Scope = None, variables: Variables = None, status: Status = None,
    namespace: Namespace = "default", fmt: Format = None,
) -> None:  # fmt: skip
    """Create a configuration (--label, --retrieval and --contribution are required)."""
    fields = _config_options(label, description, scope, variables, retrieval, contribution, status)
    given = {k: v for k, v in fields.items() if v is not None}
    show(state.service.persistent_memory_create(id=memory_id, namespace=namespace, **given), fmt)


@app.command("get")
def get(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Show one configuration; exit 3 if unknown."""
    show(state.service.persistent_memory_get(memory_id, namespace=namespace), fmt)


@app.command("list")
def list_(
    scope: Annotated[str | None, typer.Option("--scope", help="Only those with this input scope.")] = None,
    active: Annotated[bool, typer.Option("--active", help="Only active ones.")] = False,
    limit: ListLimit = 100, offset: Offset = 0, namespace: Namespace = "default",
    fmt: Format = None, fields: Fields = None,
) -> None:  # fmt: skip
    """List configurations, newest first."""
    records = state.service.persistent_memory_list(scope, active, limit=limit, offset=offset, namespace=namespace)
    emit(records, fmt, fields_list(fields, FIELDS, records), COLUMNS)


@app.command("update")
def update(
    memory_id: MemoryId, label: Label = None, description: Description = None, scope: Scope = None,
    variables: Variables = None, retrieval: Retrieval = None, contribution: Contribution = None, status: Status = None,
    namespace: Namespace = "default", fmt: Format = None,
) -> None:  # fmt: skip
    """Change the given fields; exit 3 if the ID is unknown."""
    changes = _config_options(label, description, scope, variables, retrieval, contribution, status)
    show(state.service.persistent_memory_update(memory_id, namespace=namespace, **changes), fmt)


@app.command("delete")
def delete(memory_id: MemoryId, namespace: Namespace = "default", fmt: Format = None) -> None:
    """Delete a configuration (not the data it reads); exit 3 if unknown."""
    show(state.service.persistent_memory_delete(memory_id, namespace=namespace), fmt)


@app.command("retrieve")
def retrieve(
    memory_id: MemoryId,
    keyword: Annotated[list[str] | None, typer.Option("--keyword", "-k", help="Keyword (repeatable).")] = None,
    action: Annotated[str | None, typer.Option("--action", help="e.g. find, summarize, compare.")] = None,
    context: Annotated[Json, typer.Option("--context", help="Context as a JSON object.")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="A direct query.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print only the rendered contribution.")] = False,
    namespace: Namespace = "default", fmt: Format = None,
) -> None:  # fmt: skip
    """Run the retrieval and print the rendered contribution; exit 4 if the memory is disabled."""
    result = state.service.persistent_memory_retrieve(
        memory_id, keywords=keyword, action=action, context=optional_object(context, "--context"), query=query,
        namespace=namespace,
    )  # fmt: skip
    show(result["contribution"], "table") if raw else show(result, fmt)
