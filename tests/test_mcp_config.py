"""`mem mcp-config` prints what an MCP client needs to start this `mem`: the printed command,
arguments and environment, and nothing else of the test's environment, start a server that
writes into the store the config was printed for (files, or PostgreSQL through MEM_STORE)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client, StdioServerParameters  # noqa: E402

from a2e_mem.service import MemoryService  # noqa: E402

SHAPES = {
    "generic": "mcpServers",
    "claude-desktop": "mcpServers",
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "windsurf": "mcpServers",
    "vscode": "servers",
    "zed": "context_servers",
}


def mcp_config(*args: str, env: dict[str, str] | None = None, command: list[str] | None = None):
    mem = command or [sys.executable, "-m", "a2e_mem.cli.main"]
    return subprocess.run([*mem, *args], capture_output=True, text=True, env=env or os.environ, timeout=60)


def printed_server(out: subprocess.CompletedProcess, key: str = "mcpServers", name: str = "mem") -> dict:
    assert out.returncode == 0, out.stderr
    config = json.loads(out.stdout)
    assert list(config) == [key]
    return config[key][name]


@pytest.mark.parametrize("client", sorted(SHAPES))
def test_each_client_gets_its_own_shape_with_an_absolute_command(home, client):
    out = mcp_config("mcp-config", "--client", client)
    server = printed_server(out, SHAPES[client])
    assert Path(server["command"]).is_absolute()
    assert server["args"][-1] == "serve-mcp"
    assert server["args"][server["args"].index("--home") + 1] == str(home.resolve())
    assert (server.get("type") == "stdio") is (client == "vscode")
    assert "paste into" in out.stderr


def test_server_options_pass_through_and_the_name_is_chosen(home):
    out = mcp_config("mcp-config", "--name", "memory", "-n", "proj", "-a", "bot", "--read-only")
    server = printed_server(out, name="memory")
    assert server["args"][-6:] == ["serve-mcp", "--namespace", "proj", "--agent", "bot", "--read-only"]
    assert "--embedder" in server["args"]  # the test's MEM_EMBEDDER is pinned too


def test_an_unknown_client_is_a_usage_error(home):
    out = mcp_config("mcp-config", "--client", "notepad")
    assert out.returncode == 2 and out.stdout == ""
    assert "--client must be one of" in out.stderr


def test_a_password_in_the_store_url_is_never_printed(home):
    env = {**os.environ, "MEM_STORE": "postgresql://alice:hunter2%40x@db.example:5432/mem?sslmode=require"}
    out = mcp_config("mcp-config", env=env)
    server = printed_server(out)
    assert server["env"] == {"MEM_STORE": "postgresql://alice@db.example:5432/mem?sslmode=require"}
    assert "hunter2" not in out.stdout + out.stderr
    assert "PGPASSWORD" in out.stderr


def test_the_secret_options_of_the_store_url_are_left_out(home):
    """`password=` and `sslpassword=` (the SSL key's passphrase: outside audit 32a, printed as
    given) are cut out of the printed URL, the other options kept in their order."""
    url = "postgresql://alice@db.example/mem?password=hunter2&sslmode=require&sslpassword=S3cret&connect_timeout=5"
    out = mcp_config("mcp-config", env={**os.environ, "MEM_STORE": url})
    assert printed_server(out)["env"] == {
        "MEM_STORE": "postgresql://alice@db.example/mem?sslmode=require&connect_timeout=5"
    }
    assert "hunter2" not in out.stdout + out.stderr and "S3cret" not in out.stdout + out.stderr


def test_a_console_script_is_named_by_its_own_path(home, tmp_path):
    """Run through a `mem` script like the one pip writes: the config names that script."""
    script = tmp_path / "bin" / "mem"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nfrom a2e_mem.cli.main import run\nrun()\n")
    script.chmod(0o755)
    server = printed_server(mcp_config("mcp-config", command=[str(script)]))
    assert server["command"] == str(script)
    assert server["args"][-1] == "serve-mcp"


def test_the_printed_config_starts_a_server_on_the_same_store(home, backend):
    server = printed_server(mcp_config("mcp-config", "--namespace", "proj"))
    assert ("MEM_STORE" in server.get("env", {})) is (backend == "postgres")
    # the client's own environment: none of the test's MEM_* variables, only what the config says
    bare = {k: v for k, v in os.environ.items() if not k.startswith("MEM_")}
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env={**bare, **server.get("env", {})}
    )
    asyncio.run(_set_a_value(params))
    svc = MemoryService(home)
    try:
        assert svc.memory_get("colour", namespace="proj")["value"] == "teal"
    finally:
        svc.close()


async def _set_a_value(params: StdioServerParameters) -> None:
    async with Client(params) as client:
        result = await client.call_tool("memory_set", {"key": "colour", "value": "teal"})
        assert not result.is_error, result.content[0].text


def test_a_home_given_with_a_tilde_is_the_home_used_and_printed(tmp_path):
    """`MEM_HOME=~/x` (a quoted tilde the shell left alone) is the user's ~/x for every command,
    and the config names that same folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEM_")}
    env.update(HOME=str(tmp_path), MEM_HOME="~/memstore", MEM_EMBEDDER="hash", MEM_CHECKPOINTS="off")
    written = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "set", "colour", "blue"], env=env, cwd=tmp_path, timeout=60
    )
    assert written.returncode == 0
    assert (tmp_path / "memstore").is_dir() and not (tmp_path / "~").exists()
    server = printed_server(mcp_config("mcp-config", env=env))
    assert server["args"][server["args"].index("--home") + 1] == str((tmp_path / "memstore").resolve())


def test_a_database_url_without_the_postgres_extra_says_what_to_install(home, tmp_path):
    """Without psycopg (the `mcp` extra alone), a postgresql:// store is refused as every other
    command refuses it: exit 7 and the pip command, never a traceback or the password."""
    blocker = tmp_path / "no_psycopg"
    blocker.mkdir()
    (blocker / "psycopg.py").write_text("raise ImportError('blocked for this test')\n")
    env = {**os.environ, "MEM_STORE": "postgresql://u:secret@db.example/mem", "PYTHONPATH": str(blocker)}
    out = mcp_config("mcp-config", env=env)
    assert out.returncode == 7, out.stderr
    assert "pip install 'a2e-mem[postgres]'" in out.stderr
    assert "secret" not in out.stdout + out.stderr
