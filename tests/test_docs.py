"""The documentation cannot drift from the app: every command has help and is in the README,
the README's reference and the shell completion scripts are what the app generates now."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2e_mem.cli import completion, reference

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = list(reference.commands())


@pytest.mark.parametrize("name, command", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_has_help_and_is_documented(name, command):
    assert (command.help or "").strip(), f"{name} has no help text"
    assert f"`{name}" in README, f"{name} is not in README.md"
    for param in command.params:
        if param.param_type_name == "option" and param.name != "help":
            assert (param.help or "").strip(), f"{name} {param.opts[0]} has no help text"


def test_readme_reference_is_up_to_date():
    assert reference.updated(README) == README, "run: python -m a2e_mem.cli.reference"


@pytest.mark.parametrize("shell, name", sorted(completion.FILES.items()))
def test_completion_scripts_are_up_to_date(shell, name):
    assert (ROOT / "completions" / name).read_text(encoding="utf-8") == completion.script(shell), (
        "run: python -m a2e_mem.cli.completion"
    )


def test_changelog_exists():
    assert "## " in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
