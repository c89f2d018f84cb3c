"""The command reference in README.md, generated from the app so that it cannot drift.

python -m a2e_mem.cli.reference          rewrites the block between the markers in README.md
python -m a2e_mem.cli.reference --check  exits 1 if it is out of date (the tests run the same check)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

START, END = "<!-- reference:start -->", "<!-- reference:end -->"
README = Path(__file__).resolve().parent.parent / "README.md"


def commands() -> Iterator[tuple[str, Any]]:
    """(full name, click command) for every leaf command, in order."""
    import typer
    import typer.main

    from .main import app

    def walk(prefix: str, group: Any) -> Iterator[tuple[str, Any]]:
        ctx = typer.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            full = f"{prefix} {name}"
            if getattr(command, "commands", None):
                if command.callback is not None and getattr(command, "invoke_without_command", False):
                    yield full, command
                yield from walk(full, command)
            else:
                yield full, command

    yield from walk("mem", typer.main.get_command(app))


def _option(param: Any) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    text = (param.help or "").strip()
    return f"  - {names}: {text}" if text else f"  - {names}"


COMMON = {"--namespace", "--agent", "--session", "--format", "--fields", "--limit", "--offset"}


def markdown() -> str:
    """The reference block: one short section per command (options shared by many commands,
    described once in the README, are listed by name only)."""
    parts = []
    for name, command in commands():
        args = " ".join(p.name.upper() for p in command.params if p.param_type_name == "argument")
        summary = " ".join((command.help or "").strip().split("\n\n")[0].split())  # the first paragraph, whole
        options = [p for p in command.params if p.param_type_name == "option" and p.name != "help"]
        own = [_option(p) for p in options if p.opts[0] not in COMMON]
        shared = [f"`{p.opts[0]}`" for p in options if p.opts[0] in COMMON]
        lines = [f"#### `{name}{' ' + args if args else ''}`", "", summary, "", *own]
        if shared:
            lines.append(f"  - also {', '.join(shared)}")
        parts.append("\n".join(lines).rstrip())
    return "\n\n".join(parts) + "\n"


def updated(readme: str) -> str:
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n\n{markdown()}\n{END}{tail}"


if __name__ == "__main__":
    current = README.read_text(encoding="utf-8")
    fresh = updated(current)
    if "--check" in sys.argv:
        sys.exit(0 if fresh == current else 1)
    README.write_text(fresh, encoding="utf-8")
