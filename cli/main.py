"""The `mem` command: a root app with global options and one small module per command group.

Nothing heavy is imported here: each command imports the store when it runs. Commands are
also built lazily: Typer turns every command's signature into a click command (~35 ms for all
of them), so the root group builds only the one being run (help and completion build what
they list).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from . import streams
from .context import state
from .errors import EXIT_PIPE, output_lost, report

# name -> (module, attribute): a command function, or a Typer group
COMMANDS = {
    "init": ("memory", "init"),
    "store": ("memory", "store"),
    "retrieve": ("memory", "retrieve"),
    "forget": ("memory", "forget"),
    "session": ("session", "app"),
    "set": ("kv", "set_value"),
    "get": ("kv", "get_value"),
    "delete": ("kv", "delete_value"),
    "keys": ("kv", "keys"),
    "json": ("docs", "json_app"),
    "todo": ("docs", "todo_app"),
    "markdown": ("docs", "markdown_app"),
    "episodic": ("episodic", "app"),
    "persistent": ("persistent", "app"),
    "kg": ("kg", "app"),
    "gc": ("maintain", "gc"),
    "export": ("maintain", "export"),
    "import": ("maintain", "import_"),
    "stats": ("maintain", "stats"),
    "namespaces": ("maintain", "namespaces_app"),
    "reindex": ("maintain", "reindex"),
    "doctor": ("maintain", "doctor"),
    "demo": ("admin", "demo"),
    "serve-stdio": ("admin", "serve_stdio"),
    "serve-mcp": ("admin", "serve_mcp"),
    "mcp-config": ("mcp_config", "mcp_config"),
    "ui": ("ui", "ui"),
}


# BLAS on one thread in `mem` processes (store/blas.py says why; kept in step with its list)
ONE_THREAD_BLAS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def help_on_stderr(group: Any) -> None:
    """Make `group` (and the groups under it), called without a subcommand, print its help to
    stderr and exit 2: a missing subcommand is a usage error, and stdout carries data only
    (`mem json | jq` must not feed the help to jq). `--help` still prints to stdout: asked for,
    the help is the command's output. Typer's rich help prints as it renders, to sys.stdout of
    the moment, so the rendering is redirected rather than the text moved."""
    if not getattr(group, "no_args_is_help", False) or not hasattr(group, "commands"):
        return
    parse = group.parse_args

    def parse_args(ctx: Any, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            with contextlib.redirect_stdout(sys.stderr):
                text = ctx.get_help()  # rich help prints itself and returns ""; plain click returns it
            if text:
                sys.stderr.write(text + "\n")
            ctx.exit(2)
        return parse(ctx, args)

    group.parse_args = parse_args
    for sub in group.commands.values():
        help_on_stderr(sub)


class MemGroup(TyperGroup):
    """The root command group: builds a command when it is needed, and turns any failure in
    a command into one stderr line and an exit code."""

    _built: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        help_on_stderr(self)

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, name: str) -> Any:  # type: ignore[override]
        if name not in COMMANDS:
            return None
        if name not in self._built:
            self._built[name] = build(name)
        return self._built[name]

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's own running, except that a usage error is one stderr line (`mem: error: ...`,
        exit 2) instead of the usage text and a boxed message: a script reads one line, and the
        line says where the help is."""
        # click's exceptions, wherever this Typer keeps them (0.29 vendors click)
        clicks = sys.modules[typer.BadParameter.__module__]
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except clicks.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            sys.stderr.write(f"mem: error: {exc.format_message()}{where}\n")
            code = exc.exit_code
        except clicks.ClickException as exc:
            sys.stderr.write(f"mem: error: {exc.format_message()}\n")
            code = exc.exit_code
        except typer.Abort:  # Ctrl-C or end of input at a prompt
            sys.stderr.write("Aborted!\n")
            code = 1
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except BrokenPipeError:  # `mem export | head -1`: the reader left; what was done stands
            self._reader_left()
        except Exception as exc:  # noqa: BLE001 - every failure becomes an exit code
            from .errors import reader_left, report

            if reader_left(exc):  # the same, seen by serve-mcp's tasks as a group
                self._reader_left()
            raise typer.Exit(report(exc)) from None

    @staticmethod
    def _reader_left() -> None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush to it
        raise typer.Exit(EXIT_PIPE) from None


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


def _home(value: str | None) -> str | None:
    """`--home DIR`; an empty one is a usage error, not the current directory (`Path("")` is
    "."), as an empty file name is for `-o` and `import`. An empty MEM_HOME is no MEM_HOME."""
    if value == "":
        raise typer.BadParameter("is empty: give the store's directory")
    return value


@app.callback()
def root(
    ctx: typer.Context,
    home: Annotated[
        str | None, typer.Option("--home", envvar="MEM_HOME", callback=_home, help="Store directory.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Store URL: postgresql://... for a shared PostgreSQL store (env MEM_STORE; default: files in --home).",
            show_default=False,
        ),
    ] = None,
    embedder: Annotated[
        str | None, typer.Option("--embedder", envvar="MEM_EMBEDDER", help="static (default), minilm or hash.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No informational output.")] = False,
    redact: Annotated[
        bool, typer.Option("--redact", help="Mask secret-shaped strings before storing (env MEM_REDACT=1).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    state.home, state.embedder, state.quiet, state._service = Path(home) if home else None, embedder, quiet, None
    state.store, state.pooled = store, False
    if redact:
        os.environ["MEM_REDACT"] = "1"
    ctx.call_on_close(_close_store)


def _close_store() -> None:
    if state._service is not None:
        state._service.close()
        state._service = None


def build(name: str) -> Any:
    """The click command for `mem NAME`, made from its module's function or Typer group."""
    from importlib import import_module

    import typer.main

    from .arguments import guard_text_parameters

    module, attribute = COMMANDS[name]
    target = getattr(import_module(f"{__package__}.{module}"), attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer()
        single.command(name)(target)
        target = single
    target._add_completion = False  # completion options belong to the root command only
    command = typer.main.get_command(target)
    command.name = name
    guard_text_parameters(command, name)
    help_on_stderr(command)
    return command


def run() -> None:
    """Console entry point. Ends with `os._exit`, skipping the interpreter's teardown (~40 ms of
    freeing numpy, pydantic and tokenizer state on every call): everything a command
    acknowledged is fsync'd before it prints, and the output streams are flushed here."""
    code: int | str | None = 0
    streams.guard_closed()
    for name in ONE_THREAD_BLAS:  # before numpy loads: see store/blas.py (a user's setting stands)
        os.environ.setdefault(name, "1")
    try:
        app(prog_name="mem")  # also under `python -m a2e_mem.cli.main`: help and errors name `mem`
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `mem ... --format json | head -c 10`: the reader left before the end
        code = code or EXIT_PIPE  # as when it leaves mid-NDJSON (`invoke`): quietly, 141
    except OSError as exc:  # `>/dev/full`: the answer is lost, not what the command did
        code = code or report(output_lost(exc))
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    run()
