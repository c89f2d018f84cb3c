"""ruff and mypy run with the tests, so the one test command checks them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "store", "cli", "tests", "bench", "scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_on_store(tmp_path):
    """The library is installed as `a2e_mem` from store/ (pyproject's package-dir), which mypy
    cannot follow through the editable install's import hook: a link named `a2e_mem` shows it
    the package under its real name, so that every `from a2e_mem...` import is checked."""
    (tmp_path / "a2e_mem").symlink_to(ROOT / "store", target_is_directory=True)
    env = {**os.environ, "MYPYPATH": str(tmp_path)}
    command = [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "-p", "a2e_mem"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found in" in result.stdout
