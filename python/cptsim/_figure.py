"""``cptsim.Figure``: an SVG figure drawn by cptsim, shown inline by notebooks."""

import os
import tempfile

from ._cptsim import UsageError


class Figure:
    """An SVG document. A notebook shows it inline (``_repr_svg_``); ``save`` writes it."""

    def __init__(self, svg: str):
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path) -> None:
        """Writes the SVG to ``path`` (which must end in ``.svg``) atomically: a file there is
        replaced only once the new one is whole."""
        path = os.fspath(path)
        if not str(path).lower().endswith(".svg"):
            raise UsageError(f"Figure.save {path}: figures are SVG; give a path ending in .svg")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"Figure.save {path}: no directory {folder}")
        fd, staging = tempfile.mkstemp(prefix=".figure-", suffix=".svg", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(self.svg)
            os.replace(staging, path)
        except BaseException:
            if os.path.exists(staging):
                os.unlink(staging)
            raise

    def __repr__(self) -> str:
        return f"Figure(svg, {len(self.svg)} characters)"
