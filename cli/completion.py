"""Shell completion: the scripts in completions/ and the value completers.

    python -m a2e_mem.cli.completion     rewrites completions/mem.bash, completions/_mem, completions/mem.fish

The scripts come from Typer's completion support: they call `mem` back (with `_MEM_COMPLETE`
set) to complete commands, options and values, so they stay valid as commands change; a test
checks they match what this Typer generates. Namespaces complete from the store's folder
names without opening the store (cheap); session IDs from the session registry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

FILES = {"bash": "mem.bash", "zsh": "_mem", "fish": "mem.fish"}
FOLDER = Path(__file__).resolve().parent.parent / "completions"


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="mem", complete_var="_MEM_COMPLETE", shell=shell)


def complete_namespace(ctx: Any, incomplete: str) -> list[str]:
    import orjson

    names = []
    for path in (_home(ctx) / "ns").glob("*/namespace.json"):
        try:
            names.append(orjson.loads(path.read_bytes())["namespace"])
        except (OSError, ValueError, KeyError):
            continue
    return sorted(n for n in names if n.startswith(incomplete))


def complete_session(ctx: Any, incomplete: str) -> list[str]:
    from a2e_mem.service import MemoryService

    return [s["id"] for s in MemoryService(_home(ctx)).sessions() if s["id"].startswith(incomplete)]


def _home(ctx: Any) -> Path:
    """The store folder the command line names (`mem --home DIR ...`), else MEM_HOME's or the default."""
    from a2e_mem.paths import default_home

    given = ctx.find_root().params.get("home")
    return Path(given) if given else default_home()


def completer(*values: str) -> Callable[[str], list[str]]:
    """A completer of an option that takes one of `values`."""
    return lambda incomplete: [v for v in values if v.startswith(incomplete)]


if __name__ == "__main__":
    for shell, name in FILES.items():
        (FOLDER / name).write_text(script(shell), encoding="utf-8")
