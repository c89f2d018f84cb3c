"""`mem session list|close`: sessions made by `mem init`."""

from __future__ import annotations

from typing import Annotated

import typer

from .completion import complete_session
from .context import state
from .options import Fields, Format, fields_list
from .output import emit, note

app = typer.Typer(help="Sessions made by `mem init` (each keeps a working tier).", no_args_is_help=True)
SESSION_FIELDS = ("memory_id", "namespace", "agent", "created_at")


@app.command("list")
def list_sessions(fmt: Format = None, fields: Fields = None) -> None:
    """List open sessions."""
    records = [{"memory_id": d["id"], **{k: d[k] for k in SESSION_FIELDS[1:]}} for d in state.service.sessions()]
    emit(records, fmt, fields_list(fields, SESSION_FIELDS, records))


@app.command("close")
def close(
    memory_id: Annotated[str, typer.Argument(help="The session's memory_id.", autocompletion=complete_session)],
) -> None:
    """Close a session and delete its working tier."""
    state.service.close_session(memory_id)
    note(f"closed {memory_id}")
