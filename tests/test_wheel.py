"""The wheel installs one top-level import name, `a2e_mem`, built from store/ and cli/: no
generic `store` or `cli` lands in site-packages, and nothing of the library is left behind."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (path,) = out.glob("a2e_mem-*.whl")
    return zipfile.ZipFile(path)


def top_level_names(wheel: zipfile.ZipFile) -> set[str]:
    return {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}


def test_the_wheel_has_one_top_level_import_name(wheel):
    assert top_level_names(wheel) == {"a2e_mem"}


def test_every_module_and_data_file_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    expected = {f"a2e_mem/{p.relative_to(ROOT / 'store').as_posix()}" for p in (ROOT / "store").rglob("*.py")}
    expected |= {f"a2e_mem/cli/{p.relative_to(ROOT / 'cli').as_posix()}" for p in (ROOT / "cli").rglob("*.py")}
    assert expected - names == set()
    assert any(n.startswith("a2e_mem/models/static/") for n in names)
    assert any(n.startswith("a2e_mem/cli/ui/static/") for n in names)
    assert "a2e_mem/py.typed" in names  # the API's types reach type checkers (PEP 561)


def test_the_command_points_into_the_package(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "mem = a2e_mem.cli.main:run" in wheel.read(entry_points).decode()
