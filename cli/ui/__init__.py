"""`mem ui`: a local web view of the store (needs the `ui` extra: Starlette and uvicorn).

This module stays light (it is imported to build the command); the web app is in `app.py`,
its page, script and styles in `static/`, shipped in the package and served from it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..context import state


def ui(
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")] = 0,
    open_: Annotated[bool, typer.Option("--open", help="Open the page in the default web browser.")] = False,
) -> None:
    """Serve a web view of the store on 127.0.0.1 and print its URL (needs the `ui` extra).

    Search with explanations, entries (edit, delete), episodic timelines, the knowledge graph,
    documents and persistent memories. The URL carries a fresh random token: requests without
    it get 403. Ctrl-C stops the server."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from ..errors import CliError

        raise CliError("mem ui needs Starlette and uvicorn: pip install 'a2e-mem[ui]'", 1) from None
    from . import server

    state.pooled = True  # a long-lived server: a database backend keeps a connection pool
    server.serve(state.service, port, open_)
