"""The `mem` command: a root app with global options and one small module per command group.

Nothing heavy is imported here: each command imports the store when it runs, so `mem --help`
and TAB completion stay fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from . import admin, docs, episodic, kg, kv, maintain, memory, persistent, session
from .context import state


class MemGroup(TyperGroup):
    """The root command group: any failure in a command becomes one stderr line and an exit code."""

    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes an exit code
            from .errors import report

            raise typer.Exit(report(exc)) from None


app = typer.Typer(
    cls=MemGroup,
    name="mem",
    help="A local-first memory store for AI agents: A2E memory, codebolt memory tools, MCP.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(version("a2e-mem"))
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    home: Annotated[Path | None, typer.Option("--home", envvar="MEM_HOME", help="Store directory.")] = None,
    embedder: Annotated[
        str | None, typer.Option("--embedder", envvar="MEM_EMBEDDER", help="static (default), minilm or hash.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No informational output.")] = False,
    redact: Annotated[
        bool, typer.Option("--redact", envvar="MEM_REDACT", help="Mask secret-shaped strings before storing.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    state.home, state.embedder, state.quiet, state._service = home, embedder, quiet, None
    if redact:
        os.environ["MEM_REDACT"] = "1"
    ctx.call_on_close(_close_store)


def _close_store() -> None:
    if state._service is not None:
        state._service.close()
        state._service = None


app.command()(memory.init)
app.command()(memory.store)
app.command()(memory.retrieve)
app.command()(memory.forget)
app.add_typer(session.app, name="session")
app.command("set")(kv.set_value)
app.command("get")(kv.get_value)
app.command("keys")(kv.keys)
app.add_typer(docs.json_app, name="json")
app.add_typer(docs.todo_app, name="todo")
app.add_typer(docs.markdown_app, name="markdown")
app.add_typer(episodic.app, name="episodic")
app.add_typer(persistent.app, name="persistent")
app.add_typer(kg.app, name="kg")
app.command()(maintain.gc)
app.command()(maintain.export)
app.command("import")(maintain.import_)
app.command()(maintain.stats)
app.add_typer(maintain.namespaces_app, name="namespaces")
app.command()(maintain.reindex)
app.command()(maintain.doctor)
app.command()(admin.demo)
app.command("serve-stdio")(admin.serve_stdio)
app.command("serve-mcp")(admin.serve_mcp)


def run() -> None:
    """Console entry point. Ends with `os._exit`, skipping the interpreter's teardown (~40 ms of
    freeing numpy, pydantic and tokenizer state on every call): everything a command
    acknowledged is fsync'd before it prints, and the output streams are flushed here."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `mem ... | head`: the reader left, which is not an error
        pass
    os._exit(code or 0)


if __name__ == "__main__":
    run()
