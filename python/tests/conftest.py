"""Shared fixtures: the ``cptsim`` program the results are compared with."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _binary():
    given = os.environ.get("CPTSIM_BIN")
    if given:
        return Path(given)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    built = target / "release" / "cptsim"
    if built.exists():
        return built
    found = shutil.which("cptsim")
    return Path(found) if found else built


class Cli:
    """Runs the ``cptsim`` program."""

    def __init__(self, path: Path):
        self.path = path

    def run(self, *args, check=True):
        p = subprocess.run([str(self.path), *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"cptsim {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
        return p

    def json(self, *args):
        return json.loads(self.run(*args, "--format", "json").stdout)


@pytest.fixture(scope="session")
def cli():
    path = _binary()
    if not path.exists():
        reason = f"no cptsim program at {path} (cargo build --release -p cptsim, or CPTSIM_BIN)"
        if os.environ.get("CPTSIM_REQUIRE_PYTHON") == "1":
            pytest.fail(reason)
        print(f"SKIPPED: {reason}", file=sys.stderr)
        pytest.skip(reason)
    return Cli(path)
