"""Arguments that are not UTF-8 text (and a bad output format) are refused before a command runs.

On POSIX, Python hands argv and environment bytes that are not UTF-8 over as "surrogate
escapes" (`b"\\xff"` becomes `"\\udcff"`). Such a string can name a file, but it cannot be stored:
every name and value ends up in JSON. So every text parameter (argument, option, or the `MEM_*`
variable behind it) is checked first, and a bad one is a one-line error naming it (exit 4),
before the store is opened, so that a refused command leaves nothing on disk. File names are
the exception: they go to the operating system as the bytes they were. An empty file name is a
usage error naming its parameter (exit 2): it names no file (the OS read it as the current folder).
"""

from __future__ import annotations

from typing import Any

from .errors import invalid_input, unreadable

# (command path, parameter): parameters that name files, passed on as bytes
FILE_PARAMETERS = {
    ("markdown save", "source"),
    ("markdown update", "source"),
    ("kg import", "path"),
    ("export", "output"),
    ("import", "source"),
}


def guard_text_parameters(command: Any, path: str) -> None:
    """Make a click `command` (and its subcommands) refuse text parameters that are not UTF-8.

    The check wraps `invoke`, which runs once the parameters are parsed and before the callback.
    """
    invoke = command.invoke

    def checked_invoke(ctx: Any) -> Any:
        for param in command.params:
            if (path, param.name) in FILE_PARAMETERS:
                refuse_empty_file_name(ctx, param, ctx.params.get(param.name))
            elif param.name:
                refuse_undecodable(ctx, param, ctx.params.get(param.name))
        if "fmt" in ctx.params:  # a bad --format (or MEM_FORMAT) is refused before, not after, a write
            from .output import resolve_format

            resolve_format(ctx.params["fmt"])
        return invoke(ctx)

    command.invoke = checked_invoke
    for name, sub in getattr(command, "commands", {}).items():
        guard_text_parameters(sub, f"{path} {name}")


def refuse_undecodable(ctx: Any, param: Any, value: Any) -> None:
    """Exit 4 naming `param` if `value` (a string, or a list of them) is not UTF-8 text."""
    for text in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(text, str) and not is_utf8(text):
            value_shown = "" if "secret" in param.name else f": {shown(text)}"  # never echo a secret
            invalid_input(f"{culprit(ctx, param)} is not valid UTF-8{value_shown}")


def refuse_empty_file_name(ctx: Any, param: Any, value: Any) -> None:
    """A usage error (exit 2) if a parameter naming a file is given as the empty string."""
    if value == "":
        import typer

        stream = "stdout" if param.name == "output" else "stdin"
        raise typer.BadParameter(f"an empty file name: name a file, or - for {stream}", ctx=ctx, param=param)


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def culprit(ctx: Any, param: Any) -> str:
    """How the user gave `param`: its variable, its option, or the argument's name."""
    source = ctx.get_parameter_source(param.name)
    if source is not None and source.name == "ENVIRONMENT":
        return str(param.envvar)
    if param.param_type_name == "option":
        return max(param.opts, key=len)
    return f"argument {param.name.upper()}"


def shown(text: str) -> str:
    """`text` with the bytes that are not UTF-8 written as \\xNN escapes."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return ascii(text)


def read_text(source: str) -> str:
    """The UTF-8 text of file `source`, or of stdin for `-`; exit 4 naming it if it cannot be
    read or is not UTF-8."""
    import sys
    from pathlib import Path

    name = "stdin" if source == "-" else shown(source)
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        return data.decode("utf-8").removeprefix("\ufeff")  # an editor's byte order mark, as `store -` drops it
    except OSError as exc:
        unreadable(name, exc)
    except UnicodeDecodeError as exc:
        invalid_input(f"{name} is not UTF-8 text (byte {exc.start}: {exc.reason})")
