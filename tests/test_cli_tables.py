"""What a table shows of stored values: text, never terminal control or rich markup (an agent
writes the values; a person reads the table in a terminal)."""

from __future__ import annotations

import pytest
from rich.console import Console

from a2e_mem.cli import output
from a2e_mem.service import MemoryService


@pytest.mark.parametrize(
    "value, shown",
    [
        ("evil \x1b]0;pwned\x07 \x1b[2J", "evil \\u001b]0;pwned\\u0007 \\u001b[2J"),
        ("del\x7f c1\x9b", "del\\u007f c1\\u009b"),
        ("plain text, ünïcode ✓", "plain text, ünïcode ✓"),
    ],
)
def test_a_cell_writes_control_characters_as_escapes(value, shown):
    assert output.cell("content", value) == shown


def test_a_table_prints_markup_and_escapes_as_text(monkeypatch, capsys):
    monkeypatch.setattr("rich.console.Console", lambda: Console(force_terminal=True, width=200))
    output._table([{"key": "bad\x1b[5mkey", "value": "[bold red]x[/] [/]"}], ["key", "value"])
    printed = capsys.readouterr().out
    assert "\x1b[1m" in printed  # the header is bold: styles are written
    assert "\x1b[5m" not in printed and "bad\\u001b[5mkey" in printed
    assert "[bold red]x[/] [/]" in printed  # not taken as markup (and "[/]" alone does not crash)


def test_a_reader_that_leaves_early_ends_the_command_quietly_with_141(home):
    """`mem export | head -1`: the command stops without an error line, exit 141 as a shell
    reports a tool ended by SIGPIPE, and the writes it acknowledged stand."""
    import os
    import subprocess
    import sys

    from .test_audit_followup import REPO, mem

    lines = "".join(f'{{"key":{{"id":{i}}},"content":"{"x" * 200}","tier":"semantic"}}\n' for i in range(2000))
    store = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "store", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=REPO, env={**os.environ, "MEM_HOME": str(home)},
    )  # fmt: skip
    assert store.stdin is not None and store.stdout is not None
    store.stdin.write(lines.encode())
    store.stdin.close()
    store.stdout.readline()
    store.stdout.close()  # the reader leaves after one line
    assert store.wait(timeout=120) == 141 and store.stderr.read() == b""  # type: ignore[union-attr]
    assert b'"entries":2000' in mem(home, "stats").stdout


@pytest.mark.parametrize("fmt", ["json", "table", "ndjson"])
def test_a_reader_that_leaves_mid_output_ends_the_command_with_141_in_every_format(home, fmt):
    """JSON and tables exited 0 with most of their output lost: CPython's one write of a large
    text that a pipe takes only in part returns without an error (outside audit Q24)."""
    import os
    import subprocess
    import sys

    from .test_audit_followup import REPO

    svc = MemoryService(home)
    svc.store(svc.scope("default", "default"), [
        {"key": {"i": i}, "content": "x" * 300 + str(i), "tier": "semantic"} for i in range(1000)
    ])  # fmt: skip
    svc.close()
    env = {**os.environ, "MEM_HOME": str(home), "COLUMNS": "200"}
    reader = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "retrieve", "-t", "semantic", "--limit", "1000", "--format", fmt],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env,
    )  # fmt: skip
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.read(10)
    reader.stdout.close()  # the reader leaves: the output (over 300 KB) cannot all have gone
    assert reader.wait(timeout=120) == 141 and b"error" not in reader.stderr.read()
