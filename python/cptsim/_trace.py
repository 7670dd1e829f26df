"""``cptsim.Trace``: a precision trace in memory — rows of ``(iter_start, iter_end, layer, b_w,
b_a, b_g, samples)`` for one model — read from and written to ``.csv`` and ``.pb`` files."""

from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _cptsim
from ._cptsim import UsageError
from ._figure import Figure

COLUMNS = ("iter_start", "iter_end", "layer", "b_w", "b_a", "b_g", "samples")

Row = Tuple[int, int, int, int, int, int, int]


class Trace:
    """A precision trace of ``model``. Build one with ``Trace.read`` or ``Trace.from_arrays``;
    both check it as cptsim's readers check a file (spans tiling the run, equal samples per
    layer, bits in 0..32, 0 meaning fp32)."""

    def __init__(
        self,
        model: str,
        rows: List[Row],
        iterations: int,
        batch: int,
        layer_names: List[str],
        model_name: str,
        path: Optional[str] = None,
    ):
        self.model = model
        self.rows = rows
        self.iterations = iterations
        self.batch = batch
        self.layer_names = layer_names
        self.model_name = model_name
        self.path = path

    @classmethod
    def read(cls, path: str, model: str, seq_len: Optional[int] = None) -> "Trace":
        """The trace in ``path`` (``.csv`` or ``.pb``), checked against ``model``."""
        rows, iterations, batch, name, names = _cptsim.read_trace(str(path), str(model), seq_len)
        return cls(str(model), list(rows), iterations, batch, list(names), name, str(path))

    @classmethod
    def from_arrays(
        cls,
        model: str,
        iter_start: Sequence[int],
        iter_end: Sequence[int],
        layer: Sequence[Union[int, str]],
        b_w: Sequence[int],
        b_a: Sequence[int],
        b_g: Sequence[int],
        samples: Sequence[int],
        seq_len: Optional[int] = None,
    ) -> "Trace":
        """A trace from one sequence (list, tuple or numpy array) per column; ``layer`` holds
        indices or layer names. Iterations and batch follow from the rows, as for a CSV file."""
        columns = (iter_start, iter_end, layer, b_w, b_a, b_g, samples)
        lengths = {len(c) for c in columns}
        if len(lengths) != 1:
            said = ", ".join(f"{n} {len(c)}" for n, c in zip(COLUMNS, columns))
            raise UsageError(f"Trace.from_arrays: columns of different lengths ({said})")
        name, names = _cptsim.layer_names(str(model), seq_len)
        index = {n: i for i, n in enumerate(names)}
        layers = []
        for value in layer:
            if isinstance(value, str):
                if value not in index:
                    raise UsageError(
                        f"Trace.from_arrays: layer '{value}' is not in model '{name}' "
                        f"(layers: {', '.join(names)})"
                    )
                layers.append(index[value])
            else:
                layers.append(value)
        rows = [
            tuple(_whole(COLUMNS[i], v) for i, v in enumerate(r))
            for r in zip(iter_start, iter_end, layers, b_w, b_a, b_g, samples)
        ]
        iterations, batch = _cptsim.check_trace(str(model), rows, "Trace.from_arrays", seq_len)
        return cls(str(model), rows, iterations, batch, list(names), name)

    def write(self, path: str) -> int:
        """Writes the trace to ``path`` (``.csv`` or ``.pb`` by its extension) atomically; returns
        the number of rows. The trace remembers the path (``cost`` names it ``trace:PATH``)."""
        n = _cptsim.write_trace(
            str(path), self.model_name, self.layer_names, self.batch, self.iterations, self.rows
        )
        self.path = str(path)
        return n

    def columns(self) -> Dict[str, List]:
        """One list per column, with ``layer_name`` after ``layer``."""
        out: Dict[str, List] = {c: [r[i] for r in self.rows] for i, c in enumerate(COLUMNS)}
        out["layer_name"] = [self.layer_names[r[2]] for r in self.rows]
        return out

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` with the CSV file's columns (imports pandas)."""
        import pandas

        cols = self.columns()
        order = ["iter_start", "iter_end", "layer", "layer_name", "b_w", "b_a", "b_g", "samples"]
        return pandas.DataFrame({c: cols[c] for c in order})

    def plot(
        self,
        operand: str = "a",
        max_columns: int = 400,
        bits: Union[str, int, None] = None,
        title: str = "",
        width: int = 800,
        height: int = 500,
    ) -> Figure:
        """The heat map ``cptsim plot trace`` draws: one row per layer, one column per bin of
        iterations (at most ``max_columns``), coloured by the ``operand``'s bits (``"w"``
        weights, ``"a"`` activations, ``"g"`` errors) on the range ``bits`` (``"MIN:MAX"``;
        default the trace's range), under ``title``."""
        svg = _cptsim.trace_svg(
            self.model_name,
            self.layer_names,
            self.batch,
            self.iterations,
            self.rows,
            operand=operand,
            max_columns=max_columns,
            bits=None if bits is None else str(bits),
            title=title,
            width=width,
            height=height,
        )
        return Figure(svg)

    def _cost_arg(self):
        label = self.path if self.path is not None else "<memory>"
        return (self.rows, self.iterations, self.batch, self.layer_names, label)

    def __len__(self) -> int:
        return len(self.rows)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (self.rows, self.iterations, self.batch, self.layer_names) == (
            other.rows,
            other.iterations,
            other.batch,
            other.layer_names,
        )

    def __repr__(self) -> str:
        return (
            f"Trace({self.model_name!r}: {len(self.rows)} rows, {self.iterations} iterations "
            f"x batch {self.batch})"
        )


def _whole(column: str, v) -> int:
    """``v`` as a non-negative int (numpy integers too); a clear error otherwise."""
    try:
        i = int(v)
    except (TypeError, ValueError):
        raise UsageError(f"Trace.from_arrays: {column} {v!r} is not a whole number") from None
    if i != v or i < 0:
        raise UsageError(f"Trace.from_arrays: {column} {v!r} is not a whole number >= 0")
    if i > _LIMITS.get(column, 2**64 - 1):
        raise UsageError(f"Trace.from_arrays: {column} {i} out of range")
    return i


# The widest value each column holds (bits are checked against 0..32 with the rows).
_LIMITS = {"layer": 2**32 - 1, "b_w": 255, "b_a": 255, "b_g": 255}
