"""The book's Python tutorial is a test: its ```python blocks run in order in one namespace, in an
empty directory, and each prints what the ```text block after it shows."""

import contextlib
import io
import os
import re
import sys

import pytest

from conftest import REPO

PAGE = REPO / "docs" / "src" / "python" / "tutorial.md"


def blocks(text):
    """``(code, expected output or None)`` for each python block, in order."""
    found = re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.S | re.M)
    out = []
    for lang, body in found:
        if lang == "python":
            out.append([body, None])
        elif lang == "text" and out and out[-1][1] is None:
            out[-1][1] = body
    return out


def test_the_tutorial_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    try:
        import torch  # noqa: F401  (its last part records a PyTorch loop)
    except ImportError:
        if os.environ.get("CPTSIM_REQUIRE_TORCH") == "1":
            raise
        print("SKIPPED: test_docs: the tutorial's last part needs torch", file=sys.stderr)
        pytest.skip("torch is not installed")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "tutorial"}
    found = blocks(PAGE.read_text())
    assert len(found) >= 5
    for n, (code, expected) in enumerate(found, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{PAGE.name} block {n}", "exec"), namespace)
        if expected is not None:
            assert out.getvalue() == expected, f"block {n} printed:\n{out.getvalue()}"
