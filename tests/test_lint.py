"""ruff and mypy run with the tests, so the one test command checks them too."""

from __future__ import annotations

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


def test_mypy_on_store():
    result = subprocess.run([sys.executable, "-m", "mypy", "store"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
