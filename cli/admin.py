"""Maintenance and showcase commands: `mem gc`, `mem demo`, `mem serve-stdio`."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .context import state
from .options import Format
from .output import emit, note

DEMO = [
    {
        "key": {"topic": "language"},
        "content": "The user writes Python and prefers concise code with type hints.",
        "tags": ["preferences"],
    },
    {"key": {"topic": "editor"}, "content": "Uses Neovim with a dark colour scheme.", "tags": ["preferences"]},
    {"key": {"topic": "deadline"}, "content": "The quarterly report is due on Friday the 14th.", "tags": ["work"]},
    {"key": {"topic": "pet"}, "content": "Has a greyhound called Pixel who loves cheese.", "tags": ["personal"]},
    {"key": {"topic": "travel"}, "content": "Flying to Lisbon in June for a conference.", "tags": ["work", "travel"]},
]
DEMO_QUERIES = ["what programming style does the user like?", "does the user have a dog?", "upcoming trips"]


def demo(fmt: Format = None) -> None:
    """Store a few sample memories in namespace `demo` and query them."""
    service = state.service
    scope = service.scope("demo", "demo-agent")
    service.store(scope, [{**d, "tier": "semantic"} for d in DEMO])
    where = getattr(service.backend, "url", None) or service.home  # a PostgreSQL store: its URL, password masked
    note(f"stored {len(DEMO)} memories in namespace 'demo' in {where}")
    for query in DEMO_QUERIES:
        note(f"\n? {query}")
        entries = service.retrieve(scope, query=query, limit=2)["entries"]
        emit([{"query": query, **e} for e in entries], fmt, columns=["content", "relevance"])


def serve_mcp(
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", envvar="MEM_NAMESPACE", help="Default namespace.")
    ] = "default",
    agent: Annotated[
        str, typer.Option("--agent", "-a", envvar="MEM_AGENT", help="Default agent (episodic tier).")
    ] = "default",
    read_only: Annotated[bool, typer.Option("--read-only", help="Expose only the tools that do not write.")] = False,
) -> None:
    """Serve the whole store to MCP clients over stdio (needs the `mcp` extra)."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        from .errors import CliError

        raise CliError("serve-mcp needs the MCP SDK: pip install 'a2e-mem[mcp]'", 1) from None
    from a2e_mem.ops.a2e import check_name

    from . import mcp_server

    refuse_empty_secret()
    check_name(namespace, "--namespace")  # refused now, not by every tool call later
    check_name(agent, "--agent")
    # With a secret configured the store is in authenticated mode: whoever could start this
    # server with the secret chose its --agent, and MCP has no handshake to prove another one.
    fixed_agent = bool(os.environ.get("MEM_AUTH_SECRET"))
    state.pooled = True
    mcp_server.main(state.service, namespace, agent, read_only, fixed_agent)


def serve_stdio(
    auth_secret: Annotated[
        str | None,
        typer.Option(
            envvar="MEM_AUTH_SECRET", help="Require handshakes with HMAC-SHA256(agent_id) tokens.", show_default=False
        ),
    ] = None,
) -> None:
    """Speak the A2E memory protocol over stdin/stdout (NDJSON), for agents that spawn `mem`."""
    from . import stdio

    if auth_secret == "":  # an empty secret would silently turn off the auth MEM_AUTH_SECRET asks for
        from .errors import usage_error

        usage_error("--auth-secret must not be empty: leave it out (and MEM_AUTH_SECRET unset) to serve without auth")
    refuse_empty_secret()
    os.environ.setdefault("MEM_LOG", "warning")
    state.pooled = True
    raise typer.Exit(stdio.main(state.service, auth_secret))


def refuse_empty_secret() -> None:
    """`MEM_AUTH_SECRET` set but empty is a mistake (an unset expansion, a blank line in an env
    file), never a way to turn auth off: refuse to serve."""
    if os.environ.get("MEM_AUTH_SECRET") == "":
        from .errors import usage_error

        usage_error("MEM_AUTH_SECRET is set but empty: unset it to serve without auth, or give it a secret")
