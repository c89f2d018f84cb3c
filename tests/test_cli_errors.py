"""Hostile input at the shell: every case is one `mem: error: ...` line naming the culprit, the
documented exit code, nothing on stdout, and the store left as it was (no file created, none
changed). Over the wire and MCP, an OS error that passes (a full disk) is retryable.

The CLI cases run `python -m a2e_mem.cli.main` as a subprocess, with arguments and variables given as
bytes where they must not be UTF-8.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from a2e_mem.errors import InvalidInput
from a2e_mem.protocol import Protocol
from a2e_mem.service import MemoryService

ROOT = Path(__file__).resolve().parents[1]


def deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@dataclass
class Case:
    args: list[str | bytes]
    culprit: str  # the stderr line must contain this
    code: int = 4
    env: dict[str, str | bytes] = field(default_factory=dict)
    config: str | None = None  # written to HOME/config.json before the run
    store_json: str | None = None  # written over HOME/store.json before the run
    stdin: bytes = b""


def exported(namespace: str, depth: int) -> bytes:
    """One line of `mem export`: a key-value record whose value nests `depth` levels."""
    line = {"namespace": namespace, "kind": "kv", "scope": [], "id": "k", "doc": {"id": "k", "key": "k", "value": 0}}
    return orjson.dumps(line).replace(b'"value":0', f'"value":{deep_array(depth)}'.encode()) + b"\n"


PERSISTENT = ["--retrieval", '{"source_type": "kv", "source_id": "default"}', "--contribution", '{"format": "text"}']

CASES = {
    # -- the audit's cases --------------------------------------------------------------------
    "config-not-json": Case(["get", "seed"], "config.json: not valid JSON", config="{bad"),
    "config-wrong-type": Case(["store", "x"], "config.json: max_entries", config='{"max_entries": "lots"}'),
    "env-not-a-number": Case(["store", "x"], "MEM_MAX_ENTRIES", env={"MEM_MAX_ENTRIES": "lots"}),
    "key-not-utf8": Case(["set", b"k\xff", "v"], "argument KEY is not valid UTF-8: k\\xff"),
    "namespace-not-utf8": Case(["set", "--namespace", b"n\xff", "k", "v"], "--namespace is not valid UTF-8"),
    "deep-json-value": Case(["set", "k", deep_array(300)], "VALUE nests deeper than"),
    # -- configuration file -------------------------------------------------------------------
    "config-a-list": Case(["keys"], "config.json: must be a JSON object, not an array", config="[]"),
    "config-not-utf8": Case(["keys"], "config.json: not valid JSON", config="\udcff"),
    "config-bool-as-string": Case(
        ["set", "k", "v"], "config.json: redact must be true or false", config='{"redact": "yes"}'
    ),
    "config-fraction": Case(["store", "x"], "max_line_bytes must be a whole number", config='{"max_line_bytes": 1.5}'),
    "config-negative": Case(["store", "x"], "max_entries must be a whole number >= 0", config='{"max_entries": -1}'),
    "config-unknown-key": Case(["set", "k", "v"], "unknown key 'max_entrys'", config='{"max_entrys": 5}'),
    "config-namespaces-list": Case(["set", "k", "v"], "config.json: namespaces must be", config='{"namespaces": []}'),
    "config-namespace-not-object": Case(
        ["store", "x"], "namespaces.default must be an object", config='{"namespaces": {"default": 5}}'
    ),
    "config-namespace-wrong-type": Case(
        ["store", "x"], "namespaces.default.max_entries", config='{"namespaces": {"default": {"max_entries": "x"}}}'
    ),
    "config-writers-not-list": Case(
        ["store", "x", "--tier", "semantic"], "semantic_writers must be a list", config='{"semantic_writers": "lead"}'
    ),
    "config-unreadable": Case(["keys"], "config.json: cannot be read", config="<directory>"),
    "store-json-damaged": Case(["store", "x"], "store.json is damaged (not JSON)", code=1, store_json="{bad"),
    "store-json-no-embedder": Case(
        ["store", "x"], "store.json is damaged (no valid 'embedder')", code=1, store_json="[]"
    ),
    # -- environment variables ----------------------------------------------------------------
    "env-negative-limit": Case(["serve-stdio"], "MEM_MAX_LINE_BYTES", env={"MEM_MAX_LINE_BYTES": "-5"}),
    "env-checkpoint-bytes": Case(["set", "k", "v"], "MEM_CHECKPOINT_BYTES", env={"MEM_CHECKPOINT_BYTES": "big"}),
    "env-checkpoints": Case(["set", "k", "v"], "MEM_CHECKPOINTS must be one of", env={"MEM_CHECKPOINTS": "often"}),
    "env-clock-offset": Case(["set", "k", "v"], "MEM_CLOCK_OFFSET", env={"MEM_CLOCK_OFFSET": "soon"}),
    "env-log-level": Case(["set", "k", "v"], "MEM_LOG must be one of", env={"MEM_LOG": "loud"}),
    "env-embedder": Case(["store", "x"], "unknown embedder 'word2vec'", env={"MEM_EMBEDDER": "word2vec"}),
    "env-redact": Case(["set", "k", "v"], "MEM_REDACT must be", env={"MEM_REDACT": "maybe"}),
    "env-namespace-not-utf8": Case(["keys"], "MEM_NAMESPACE is not valid UTF-8", env={"MEM_NAMESPACE": b"n\xfe"}),
    "env-secret-not-utf8": Case(
        ["serve-stdio"], "MEM_AUTH_SECRET is not valid UTF-8", env={"MEM_AUTH_SECRET": b"\xff"}
    ),
    "home-is-a-file": Case(["set", "k", "v"], "is a file", env={"MEM_HOME": "<file>"}),
    "user-home-is-a-file": Case(["set", "k", "v"], "which is a file", env={"HOME": "<file>"}),
    # -- arguments that are not UTF-8 ---------------------------------------------------------
    "value-not-utf8": Case(["set", "k", b"v\xff"], "argument VALUE is not valid UTF-8"),
    "tag-not-utf8": Case(["store", "x", "--tag", b"t\xff"], "--tag is not valid UTF-8: t\\xff"),
    "agent-not-utf8": Case(["store", "x", "--agent", b"a\xff"], "--agent is not valid UTF-8"),
    "session-not-utf8": Case(["retrieve", "--session", b"\xff"], "--session is not valid UTF-8"),
    "key-option-not-utf8": Case(["store", "x", "--key", b"k\xff"], "--key is not valid UTF-8"),
    "content-not-utf8": Case(["store", b"\xffx"], "argument CONTENT is not valid UTF-8"),
    "relation-not-utf8": Case(["kg", "relate", "alice", b"r\xff", "bob"], "argument RELATION is not valid UTF-8"),
    "namespace-delete-not-utf8": Case(["namespaces", "delete", b"x\xff", "--yes"], "argument NAME is not valid UTF-8"),
    "markdown-file-not-utf8": Case(["markdown", "save", "<latin1-file>"], "is not UTF-8 text"),
    "markdown-stdin-not-utf8": Case(["markdown", "save", "-"], "stdin is not UTF-8 text", stdin=b"caf\xe9"),
    "kg-file-missing-not-utf8-name": Case(
        ["kg", "import", b"/nonexistent/\xff"], "cannot read /nonexistent/\\xff", code=3
    ),  # a file that is not there is not found (exit 3), as for the Python API
    "store-without-content": Case(["store"], "give the content", code=2),  # a missing argument
    "import-file-missing": Case(["import", "/nonexistent/dump.ndjson"], "cannot read /nonexistent", code=3),
    "import-a-directory": Case(["import", "/"], "cannot read /: Is a directory"),
    # -- a bad option value is a usage error (exit 2), as `--limit -1` is (an outside audit) -----
    "negative-ttl": Case(["store", "x", "--ttl", "-5"], "'--ttl': must be 0 to 9223372036854775807 seconds", code=2),
    "huge-ttl": Case(["store", "x", "--ttl", str(1 << 64)], "must be 0 to 9223372036854775807 seconds", code=2),
    "empty-tier": Case(["store", "x", "--tier", ""], "'--tier' / '-t': must be working, episodic or semantic", code=2),
    "score-over-one": Case(["store", "x", "--score", "7"], "'--score': must be a number from 0 to 1", code=2),
    "bad-tier": Case(["retrieve", "-t", "cosmic"], "'--tier' / '-t': must be working, episodic or semantic", code=2),
    # -- output format, checked before (not after) the write -----------------------------------
    "env-format": Case(["set", "k", "v"], "MEM_FORMAT must be one of", env={"MEM_FORMAT": "xml"}),
    "format-option": Case(["set", "k", "v", "--format", "xml"], "--format must be one of", code=2),
    # -- export files -------------------------------------------------------------------------
    "import-empty-namespace": Case(["import", "-"], "line 1: namespace must be", stdin=exported("", 1)),
    "import-deep-record": Case(["import", "-"], "line 1: the record cannot be stored", stdin=exported("n", 300)),
    # -- JSON nested too deeply ---------------------------------------------------------------
    "deep-json-past-the-parser": Case(["set", "k", deep_array(2000)], "VALUE is nested too deeply"),
    "deep-json-content": Case(["store", deep_array(300)], "CONTENT nests deeper than"),
    "deep-json-body": Case(["json", "save", deep_object(300)], "BODY nests deeper than"),
    "deep-json-metadata": Case(["json", "save", "{}", "--metadata", deep_object(300)], "--metadata nests deeper"),
    "deep-json-filter": Case(["todo", "list", "--filter", deep_object(300)], "--filter nests deeper than"),
    "deep-json-payload": Case(
        ["episodic", "append", "<episode>", "-e", "t", "-a", "a", "-p", deep_object(300)], "--payload nests deeper"
    ),
    "deep-json-variables": Case(
        ["persistent", "create", "--label", "l", *PERSISTENT, "--variables", deep_object(300)], "--variables nests"
    ),
}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its content (None for a directory)."""
    if root.is_file():
        return {".": root.read_bytes()}
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def prepare(case: Case, home: Path) -> tuple[dict[str, str | bytes], list[str | bytes], Path]:
    """A store with a few records (and the case's config.json); the child's env and args."""
    svc = MemoryService(home)
    svc.memory_set("seed", 1)
    svc.kg_create_entities([{"name": name, "entityType": "person", "observations": []} for name in ("alice", "bob")])
    episode = svc.episodic_memory_create("seed")["memoryId"]
    svc.close()
    if case.config == "<directory>":
        (home / "config.json").mkdir()
    elif case.config is not None:
        (home / "config.json").write_bytes(case.config.encode("utf-8", "surrogateescape"))
    if case.store_json is not None:
        (home / "store.json").write_text(case.store_json)
    env: dict[str, str | bytes] = {**os.environ, **case.env}
    watched = home
    for variable in ("MEM_HOME", "HOME"):
        if env.get(variable) == "<file>":  # the variable names a file (MEM_HOME unset: HOME's data dir)
            watched = home.parent / "a-file"
            watched.write_text("not a store")
            env[variable] = str(watched)
    if "HOME" in case.env:
        env.pop("MEM_HOME")
        env.pop("XDG_DATA_HOME", None)
    args = [episode if arg == "<episode>" else arg for arg in case.args]
    if "<latin1-file>" in args:
        latin1 = home.parent / "notes.md"
        latin1.write_bytes(b"# caf\xe9\n")
        args[args.index("<latin1-file>")] = str(latin1)
    return env, args, watched


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_one_line_naming_the_culprit_and_changes_nothing(name, home):
    case = CASES[name]
    env, args, watched = prepare(case, home)
    before = snapshot(watched)
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args],
        input=case.stdin,
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    stderr = out.stderr.decode("utf-8", "backslashreplace")
    assert out.returncode == case.code, stderr
    assert out.stdout == b""
    assert stderr.startswith("mem: error: ") and stderr.count("\n") == 1, stderr
    assert case.culprit in stderr, stderr
    assert "Traceback" not in stderr
    assert snapshot(watched) == before  # nothing created, nothing changed


def test_a_secret_that_is_not_utf8_is_not_echoed(home):
    env = {**os.environ, "MEM_AUTH_SECRET": b"s3cr3t\xff"}
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"], capture_output=True, env=env, cwd=ROOT
    )
    assert out.returncode == 4 and b"s3cr3t" not in out.stderr


def test_a_file_name_that_is_not_utf8_is_passed_on_as_bytes(home, tmp_path):
    """File names are the one place such bytes are fine: the file is read."""
    source = os.fsencode(tmp_path) + b"/caf\xe9.md"
    Path(os.fsdecode(source)).write_text("# notes\n")
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "markdown", "save", source, "-f", "json"],
        capture_output=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert orjson.loads(out.stdout)["markdown"] == "# notes\n"


# -- a full disk over the wire and over MCP -----------------------------------------------------


def fail_with(code: int):
    def fail(*args: object) -> None:
        raise OSError(code, os.strerror(code))

    return fail


def store_request(memory_id: str, req_id: str) -> bytes:
    entry = {"key": {"k": req_id}, "content": "on a full disk", "tier": "episodic"}
    return orjson.dumps(
        {
            "type": "memory/store/req",
            "id": req_id,
            "version": "1.0",
            "ts": 0,
            "memory_id": memory_id,
            "entries": [entry],
        }
    )


@pytest.mark.parametrize(
    "target, code, retryable",
    [("pwrite", errno.ENOSPC, True), ("fdatasync", errno.ENOSPC, True), ("pwrite", errno.EDQUOT, True)]
    + [("fdatasync", errno.EIO, False)],
    ids=["pwrite-enospc", "fdatasync-enospc", "pwrite-edquot", "fdatasync-eio"],
)
def test_a_full_disk_over_the_wire_is_retryable(service, monkeypatch, target, code, retryable):
    proto = Protocol(service)
    init = {"type": "memory/init/req", "id": "i", "version": "1.0", "ts": 0, "namespace": "ns", "scope": {}}
    memory_id = proto.handle(orjson.dumps(init))["memory_id"]
    monkeypatch.setattr(os, target, fail_with(code))
    reply = proto.handle(store_request(memory_id, "r1"))
    monkeypatch.undo()
    assert reply["type"] == "error" and reply["req_id"] == "r1", reply
    assert reply["code"] == "runtime_error" and reply["retryable"] is retryable, reply
    assert os.strerror(code) in reply["message"]
    # the disk was freed: the same request, sent again, is stored
    again = proto.handle(store_request(memory_id, "r1"))
    assert again["type"] == "memory/store/resp", again


def test_a_full_disk_over_mcp_is_a_tool_error_that_says_retryable(home, monkeypatch):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client

    from a2e_mem.cli.mcp_server import build_server

    async def call() -> tuple[str, bool]:
        svc = MemoryService(home)
        async with Client(build_server(svc, "default", "default", False)) as client:
            monkeypatch.setattr(os, "fdatasync", fail_with(errno.ENOSPC))
            refused = await client.call_tool("memory_set", {"key": "k", "value": 1})
            monkeypatch.undo()
            stored = await client.call_tool("memory_set", {"key": "k", "value": 1})
        svc.close()
        assert refused.is_error
        return refused.content[0].text, stored.is_error

    text, failed_again = asyncio.run(call())
    assert "runtime_error" in text and "No space left on device" in text and "retryable" in text, text
    assert not failed_again


# -- the same gates for every front door (MCP and library calls go through the service) --------


@pytest.mark.parametrize(
    "namespace", ["", "a\x00b", "x" * 1025, "bad\udcff"], ids=["empty", "nul", "long", "surrogate"]
)
def test_a_namespace_no_store_may_have_is_refused_before_a_folder_is_made(service, home, namespace):
    writes = [
        lambda: service.memory_set("k", 1, namespace=namespace),
        lambda: service.memory_json_save({"a": 1}, namespace=namespace),
        lambda: service.kg_create_entities([{"name": "n", "entityType": "t", "observations": []}], namespace=namespace),
        lambda: service.episodic_memory_create("title", namespace=namespace),
    ]
    for write in writes:
        with pytest.raises(InvalidInput, match="namespace"):
            write()
    assert not (home / "ns").exists()


@pytest.mark.parametrize("value", [orjson.loads(deep_array(254)), "bad\udcff"], ids=["nested-254-deep", "surrogate"])
def test_a_value_that_cannot_be_stored_is_invalid_input_and_writes_nothing(service, home, value):
    service.memory_set("seed", 1)
    before = snapshot(home)
    with pytest.raises(InvalidInput, match="cannot be stored as JSON"):
        service.memory_set("k", value)
    with pytest.raises(InvalidInput, match="cannot be stored as JSON"):
        service.memory_json_save({"deep": value})
    assert snapshot(home) == before


@pytest.mark.parametrize(
    "closed, args, message",
    [
        (1, ["store", "-t", "semantic", "not stored"], "standard output is closed"),
        (1, ["retrieve"], "standard output is closed"),
        (0, ["store", "-"], "standard input is closed"),
        (0, ["serve-stdio"], "standard input is closed"),
        (0, ["serve-mcp"], "standard input is closed"),  # it read the null device, or a store file on fd 0
    ],
)
def test_a_closed_stdin_or_stdout_is_one_line_and_changes_nothing(home, closed, args, message):
    """`mem store x >&-` gave 'internal error: AttributeError' and a traceback (outside audit Q24)."""
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(home), *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL if closed == 0 else None, stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(closed), timeout=60,
    )  # fmt: skip
    err = out.stderr.decode()
    assert out.returncode == 1 and err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert MemoryService(home).stats() == [] or all(s["entries"] == 0 for s in MemoryService(home).stats())


def test_an_empty_home_is_a_usage_error_not_the_current_directory(tmp_path):
    """`mem --home '' store x` made a store in the current directory (outside audit Q24)."""
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "--home", "", "store", "x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "--home" in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [[], ["json"], ["episodic"], ["kg"], ["session"]])
def test_a_missing_subcommand_is_a_usage_error_with_the_help_on_stderr(home, args):
    """`mem json` alone printed its help to stdout (exit 2): a script piping it fed the help to
    the next command (outside audit Q24, low). `--help`, asked for, stays on stdout."""
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "a2e_mem.cli.main", *args, *extra],
        env={**os.environ, "MEM_HOME": str(home)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    alone = run()
    assert alone.returncode == 2 and alone.stdout == "" and "Usage: mem" in alone.stderr, alone
    asked = run("--help")
    assert asked.returncode == 0 and "Usage: mem" in asked.stdout and asked.stderr == "", asked


def test_a_line_that_is_not_utf8_is_said_so_not_a_surrogate(home):
    """orjson says "surrogates not allowed" for any byte that is not UTF-8 (outside audit Q24)."""
    bad = b'{"key":{"a":1},"content":"caf\xe9","tier":"semantic"}\n'
    out = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "store", "-"], input=bad, capture_output=True, timeout=60
    )
    assert out.returncode == 4 and b"not valid UTF-8 (byte 29)" in out.stderr, out.stderr
    served = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"], input=bad, capture_output=True, timeout=60
    )
    reply = orjson.loads(served.stdout)
    assert reply["code"] == "parse_error" and "not valid UTF-8 (byte 29)" in reply["message"], reply
    lone = b'{"key":{"a":1},"content":"\\ud800","tier":"semantic"}\n'  # a real lone surrogate keeps its message
    out = subprocess.run([sys.executable, "-m", "a2e_mem.cli.main", "store", "-"], input=lone, capture_output=True)
    assert out.returncode == 4 and b"surrogate" in out.stderr, out.stderr


def test_a_closed_stderr_drops_the_notes_and_the_command_runs(home):
    """`mem store x 2>&-` stored nothing and exited 1; `mem get nokey 2>&-` exited 1, not 3."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(home), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2), timeout=60,
        )  # fmt: skip

    stored = run("store", "-t", "semantic", "kept")
    assert stored.returncode == 0 and b'"stored":true' in stored.stdout
    assert run("get", "nokey").returncode == 3
    assert MemoryService(home).retrieve(MemoryService(home).scope("default", "default"), tier="semantic")["total"] == 1


def test_output_that_cannot_be_written_says_the_command_did_its_work(home):
    """`mem store x >/dev/full` said only '[Errno 28] No space left on device', yet the entry was
    stored (outside audit T24): a script must know not to store it again under another key."""
    with open(os.devnull if not os.path.exists("/dev/full") else "/dev/full", "wb") as full:
        out = subprocess.run(
            [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(home), "store", "-t", "semantic", "kept"],
            stdout=full, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    err = out.stderr.decode()
    assert out.returncode == 1 and "cannot write the output" in err and "stands" in err, err
    assert err.count("\n") == 1
    svc = MemoryService(home)
    assert svc.retrieve(svc.scope("default", "default"), tier="semantic")["total"] == 1


def test_an_exception_group_of_one_is_reported_as_its_one_exception(capsys):
    """serve-mcp's task group wrapped a full stdout as 'ExceptionGroup: unhandled errors in a
    TaskGroup (1 sub-exception)' (outside audit T24)."""
    from a2e_mem.cli.errors import report

    class Group(Exception):  # what anyio raises, without needing Python 3.11's ExceptionGroup
        def __init__(self, inner: BaseException) -> None:
            super().__init__("unhandled errors in a TaskGroup (1 sub-exception)")
            self.exceptions = (inner,)

    assert report(Group(Group(OSError(errno.ENOSPC, "No space left on device")))) == 1
    assert capsys.readouterr().err == "mem: error: [Errno 28] No space left on device\n"
