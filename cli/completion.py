"""Shell completion: the scripts in completions/ and the value completers.

    python -m a2e_mem.cli.completion     rewrites completions/mem.bash, completions/_mem, completions/mem.fish

The scripts come from Typer's completion support: they call `mem` back (with `_MEM_COMPLETE`
set) to complete commands, options and values, so they stay valid as commands change; a test
checks they match what this Typer generates. Namespaces complete from the store's folder
names without opening the store (cheap); session IDs from the session registry.
"""

from __future__ import annotations

from pathlib import Path

FILES = {"bash": "mem.bash", "zsh": "_mem", "fish": "mem.fish"}
FOLDER = Path(__file__).resolve().parent.parent / "completions"


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="mem", complete_var="_MEM_COMPLETE", shell=shell)


def complete_namespace(incomplete: str) -> list[str]:
    import orjson

    from a2e_mem.paths import default_home

    names = []
    for path in (default_home() / "ns").glob("*/namespace.json"):
        try:
            names.append(orjson.loads(path.read_bytes())["namespace"])
        except (OSError, ValueError, KeyError):
            continue
    return sorted(n for n in names if n.startswith(incomplete))


def complete_session(incomplete: str) -> list[str]:
    from a2e_mem.service import MemoryService

    return [s["id"] for s in MemoryService().sessions() if s["id"].startswith(incomplete)]


if __name__ == "__main__":
    for shell, name in FILES.items():
        (FOLDER / name).write_text(script(shell), encoding="utf-8")
