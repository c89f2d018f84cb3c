"""`mem kg ...`: the knowledge graph (entities, relations, observations)."""

from __future__ import annotations

from typing import Annotated

import typer

from .context import state
from .options import Format, ListLimit, Namespace, Offset
from .output import emit, show

app = typer.Typer(help="Knowledge graph compatible with the MCP memory server.", no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="Entity name.")]
ENTITY_COLUMNS = ["name", "entityType", "observations"]


def not_there(message: str) -> None:
    """Deleting what is not there is `memory_not_found` at the shell (exit 3), as for every other
    record; the MCP tools keep the MCP memory server's answer (the counts, no error)."""
    from a2e_mem.errors import NotFound

    raise NotFound(message)


def _graph(graph: dict, fmt: str | None) -> None:
    """A graph as records: entities then relations, each with its `type` (like the JSONL format)."""
    rows = [{"type": "entity", **e} for e in graph["entities"]] + [
        {"type": "relation", **r} for r in graph["relations"]
    ]
    emit(rows, fmt)


@app.command("create")
def create(
    name: Name,
    entity_type: Annotated[str, typer.Option("--type", "-t", help="Entity type, e.g. person.")],
    observation: Annotated[list[str] | None, typer.Option("--obs", "-o", help="Observation (repeatable).")] = None,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Create an entity (no-op if the name exists)."""
    made = state.service.kg_create_entities(
        [{"name": name, "entityType": entity_type, "observations": observation or []}], namespace=namespace
    )
    emit(made, fmt, columns=ENTITY_COLUMNS)


@app.command("relate")
def relate(
    source: Name,
    relation: Annotated[str, typer.Argument(help="Relation type, e.g. works_at.")],
    target: Name,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Create the relation SOURCE RELATION TARGET between existing entities."""
    emit(
        state.service.kg_create_relations(
            [{"from": source, "to": target, "relationType": relation}], namespace=namespace
        ),
        fmt,
    )


@app.command("observe")
def observe(
    name: Name,
    text: Annotated[list[str], typer.Argument(help="Observations to add.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Add observations to an entity; exit 3 if it does not exist."""
    emit(state.service.kg_add_observations([{"entityName": name, "contents": text}], namespace=namespace), fmt)


@app.command("forget-observation")
def forget_observation(
    name: Name,
    text: Annotated[list[str], typer.Argument(help="Observations to remove.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Remove observations from an entity (exit 3 if it has none of some of them, after removing the others)."""
    done = state.service.kg_delete_observations([{"entityName": name, "observations": text}], namespace=namespace)
    emit(done, fmt)
    absent = [t for t in dict.fromkeys(text) if t not in done[0]["deletedObservations"]]
    if absent:
        not_there(f"entity {name!r} has no observation " + ", ".join(map(repr, absent)))


@app.command("delete")
def delete(
    names: Annotated[list[str], typer.Argument(help="Entities to delete, with their relations.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Delete entities and every relation touching them (exit 3 naming any not there, the rest deleted)."""
    found = {e["name"] for e in state.service.kg_open_nodes(names, namespace=namespace)["entities"]}
    show(state.service.kg_delete_entities(names, namespace=namespace), fmt)
    absent = [n for n in dict.fromkeys(names) if n not in found]
    if absent:
        not_there("no entity named " + ", ".join(map(repr, absent)))


@app.command("unrelate")
def unrelate(
    source: Name,
    relation: Annotated[str, typer.Argument()],
    target: Name,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Delete the relation SOURCE RELATION TARGET (exit 3 if there is none)."""
    wanted = [{"from": source, "to": target, "relationType": relation}]
    done = state.service.kg_delete_relations(wanted, namespace=namespace)
    show(done, fmt)
    if not done["deletedRelations"]:
        not_there(f"no relation {source!r} {relation!r} {target!r}")


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to look for (names, types, observations).")],
    limit: ListLimit = 10,
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Entities matching QUERY by substring or similarity, and the relations among them."""
    _graph(state.service.kg_search_nodes(query, limit=limit, namespace=namespace), fmt)


@app.command("open")
def open_(
    names: Annotated[list[str], typer.Argument(help="Entity names.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """The named entities and the relations among them."""
    _graph(state.service.kg_open_nodes(names, namespace=namespace), fmt)


@app.command("read")
def read(limit: ListLimit = 100, offset: Offset = 0, namespace: Namespace = "default", fmt: Format = None) -> None:
    """The graph: a page of entities (by name) and the relations among them."""
    _graph(state.service.kg_read_graph(limit=limit, offset=offset, namespace=namespace), fmt)


@app.command("import")
def import_(
    path: Annotated[str, typer.Argument(help="The MCP memory server's JSONL file, or - for stdin.")],
    namespace: Namespace = "default",
    fmt: Format = None,
) -> None:
    """Import an MCP memory server file (memory.jsonl): entities and relations."""
    from .arguments import read_text

    lines = read_text(path).splitlines()
    show(state.service.kg_import(lines, namespace=namespace), fmt)
