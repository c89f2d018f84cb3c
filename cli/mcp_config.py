"""`mem mcp-config`: the JSON that tells an MCP client how to start this `mem` as a server.

The command line is the absolute path of the running `mem` (a virtualenv's or pipx's script is
not on the client's PATH), or this Python running the package when `mem` was started as
`python -m a2e_mem.cli.main`. The store is pinned: `--home` always (the client may run with
another environment, so the default home could differ), `--store`/`MEM_STORE` and `--embedder`
when given. Secrets are never printed: a password in the store URL is masked (put it in
`~/.pgpass` or `PGPASSWORD` instead) and `MEM_AUTH_SECRET` is left out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote

import typer

from .context import state
from .output import note

# client -> (the key its config file holds servers under, where that file is)
CLIENTS = {
    "generic": ("mcpServers", "the client's MCP configuration (the common mcpServers shape)"),
    "claude-desktop": (
        "mcpServers",
        "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)",
    ),
    "claude-code": ("mcpServers", ".mcp.json at the project's root"),
    "cursor": ("mcpServers", "~/.cursor/mcp.json, or .cursor/mcp.json in a project"),
    "windsurf": ("mcpServers", "~/.codeium/windsurf/mcp_config.json"),
    "vscode": ("servers", ".vscode/mcp.json, or the mcp.json of your user profile"),
    "zed": ("context_servers", "Zed's settings.json (zed: open settings)"),
}


def mcp_config(
    client: Annotated[
        str, typer.Option("--client", "-c", help=f"One of: {', '.join(CLIENTS)}.", show_default=True)
    ] = "generic",
    name: Annotated[str, typer.Option("--name", help="The server's name in the client.")] = "mem",
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Default namespace of the server.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Default agent of the server.")] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Expose only the tools that do not write.")] = False,
) -> None:
    """Print the JSON to paste into an MCP client's config to run this `mem serve-mcp`."""
    from .errors import usage_error

    if client not in CLIENTS:
        usage_error(f"--client must be one of {', '.join(CLIENTS)}, not {client!r}")
    serve = ["serve-mcp"] + _flag("--namespace", namespace) + _flag("--agent", agent) + (["--read-only"] * read_only)
    command, prefix = _mem_command()
    server: dict[str, Any] = {"command": command, "args": prefix + _store_options() + serve}
    env = _store_env()
    if env:
        server["env"] = env
    key, where = CLIENTS[client]
    if client == "vscode":
        server = {"type": "stdio", **server}
    typer.echo(_json({key: {name: server}}))
    note(f"paste into {where}")


def _flag(option: str, value: str | None) -> list[str]:
    return [option, value] if value is not None else []


def _mem_command() -> tuple[str, list[str]]:
    """The running `mem` as (command, leading arguments)."""
    script = Path(sys.argv[0])
    if script.name.startswith("mem") and script.suffix != ".py" and os.access(script, os.X_OK):
        # not resolved: pipx links ~/.local/bin/mem into its venv, and the link survives upgrades
        return os.path.abspath(script), []
    return sys.executable, ["-m", f"{__package__}.main"]


def _store_options() -> list[str]:
    home = Path(state.home).expanduser() if state.home else _default_home()
    options = ["--home", str(home.resolve())]
    embedder = state.embedder or os.environ.get("MEM_EMBEDDER")
    return options + _flag("--embedder", embedder)


def _default_home() -> Path:
    from a2e_mem.paths import default_home

    return default_home()


def _store_env() -> dict[str, str]:
    """MEM_STORE for a store URL given on the command line or in the environment (a URL in the
    home's config.json comes along with --home), with any password masked."""
    url = state.store if state.store is not None else os.environ.get("MEM_STORE")
    if not url:
        return {}
    from a2e_mem.backends.postgres.connection import MASK, SECRET_OPTIONS, import_psycopg, read_url

    from .errors import invalid_input

    import_psycopg()  # reading the URL as libpq does needs it: StoreUnavailable (exit 7) says so
    shown = read_url(url)
    if shown.malformed:
        invalid_input(f"the store URL is malformed: {shown.malformed}")
    if not shown.secrets:
        return {"MEM_STORE": url}
    note("the store URL's password is left out: give the client ~/.pgpass or PGPASSWORD")
    head, _, query = shown.shown.replace(f":{MASK}@", "@", 1).partition("?")
    kept = [pair for pair in query.split("&") if pair and unquote(pair.partition("=")[0]) not in SECRET_OPTIONS]
    return {"MEM_STORE": head + ("?" + "&".join(kept) if kept else "")}


def _json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, ensure_ascii=False)
