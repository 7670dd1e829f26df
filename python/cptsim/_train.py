"""``cptsim.train``: a training run from a plan, as ``cptsim train`` runs it, with its progress
handed to a Python callback; the run's metrics, trace and summary as Python objects."""

import json
import os
import warnings
from typing import Callable, Dict, List, NamedTuple, Optional, Union

from . import _cptsim
from ._cptsim import UsageError
from ._figure import Figure
from ._trace import Trace


class Eval(NamedTuple):
    """One evaluation: the losses and accuracies (fractions) after ``iteration`` iterations."""

    iteration: int
    train_loss: float
    train_acc: float
    test_loss: float
    test_acc: float
    val_acc: Optional[float]


class Step(NamedTuple):
    """What the ``progress`` callback gets after each iteration: iterations done, the
    minibatch's loss and accuracy, the precision it ran at, the throughput, the estimated
    seconds left, and the evaluation run after it (``None`` when none was due)."""

    iteration: int
    loss: float
    iterations: int
    train_acc: float
    fw_bits: int
    bw_bits: int
    images_per_s: float
    eta_seconds: float
    eval: Optional[Eval]


# The columns of ``metrics.csv`` (the language models' perplexities after them).
METRIC_COLUMNS = (
    "iteration",
    "train_loss",
    "train_acc",
    "test_loss",
    "test_acc",
    "val_acc",
    "fw_bits",
    "bw_bits",
    "lr",
)


class Metrics:
    """The run's evaluations, one row each with the columns of its ``metrics.csv``."""

    def __init__(self, rows: List[dict], name: str):
        self.rows = rows
        self.name = name

    def to_dicts(self) -> List[dict]:
        """One dict per evaluation."""
        return [dict(r) for r in self.rows]

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (imports pandas)."""
        import pandas

        columns = list(METRIC_COLUMNS)
        if any(r.get("test_ppl") is not None for r in self.rows):
            columns += ["test_ppl", "val_ppl"]
        return pandas.DataFrame(self.rows, columns=columns)

    def plot(self, width: int = 800, height: int = 500) -> Figure:
        """The training curves: train and test loss, train and test accuracy, forward and
        backward bits at each evaluation."""
        names = ("iteration", "train_loss", "test_loss", "train_acc", "test_acc", "fw_bits", "bw_bits")
        columns = [[float(r[n]) for r in self.rows] for n in names]
        return Figure(_cptsim.curves_svg(self.name, columns, width, height))

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"Metrics({self.name!r}: {len(self.rows)} evaluations)"


class TrainResult:
    """What ``train`` returns. ``summary`` is the run's ``summary.json`` as a dict (``None``
    when the run was stopped before its end), ``metrics`` its evaluations, ``trace`` its precision
    trace as a ``Trace`` (``None`` when it was stopped without an ``out`` to keep it in),
    ``stopped`` why it stopped early (``None`` when it ran to its end), ``plan`` the plan it ran
    with every key, ``notices`` the notes and warnings ``cptsim train`` prints."""

    def __init__(self, doc: dict, rows):
        self.plan: dict = doc["plan"]
        self.summary: Optional[dict] = doc["summary"]
        self.iteration: int = doc["iteration"]
        self.iterations: Optional[int] = doc["iterations"]
        self.out: Optional[str] = doc["out"]
        self.stopped: Optional[str] = doc["stopped"]
        self.notices: List[str] = doc["notices"]
        self.metrics = Metrics([_metric_row(e) for e in doc["evals"]], doc["model_name"])
        self.trace: Optional[Trace] = None
        if rows is not None:
            self.trace = Trace(
                self.plan["model"],
                list(rows),
                self.iteration,
                doc["batch"],
                doc["layer_names"],
                doc["model_name"],
            )

    @property
    def final_test_acc(self) -> Optional[float]:
        """The test accuracy of the last evaluation (a fraction)."""
        return self.metrics.rows[-1]["test_acc"] if self.metrics.rows else None

    @property
    def final_test_loss(self) -> Optional[float]:
        """The test loss of the last evaluation."""
        return self.metrics.rows[-1]["test_loss"] if self.metrics.rows else None

    def plot(self, width: int = 800, height: int = 500) -> Figure:
        """The training curves (``metrics.plot``)."""
        return self.metrics.plot(width, height)

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "done"
        acc = self.final_test_acc
        shown = "no evaluation" if acc is None else f"test acc {100 * acc:.2f} %"
        return (
            f"TrainResult({self.plan['model']}, {state} at {self.iteration}/{self.iterations}: "
            f"{shown})"
        )


def _metric_row(e: dict) -> dict:
    row = {
        "iteration": e["iteration"],
        "train_loss": e["train_loss"],
        "train_acc": e["train_acc"],
        "test_loss": e["test_loss"],
        "test_acc": e["test_acc"],
        "val_acc": e.get("val_acc"),
        "fw_bits": e["fw"],
        "bw_bits": e["bw"],
        "lr": e["lr"],
    }
    if e.get("test_ppl") is not None:
        row["test_ppl"] = e["test_ppl"]
        row["val_ppl"] = e.get("val_ppl")
    return row


def _plan_text(plan):
    """``(text, format, source)`` of a plan given as a dict, TOML text or a TOML file."""
    if isinstance(plan, dict):
        try:
            return json.dumps(plan, default=_json_value), "json", "plan"
        except (TypeError, ValueError) as e:
            raise UsageError(f"plan: {e}") from None
    if isinstance(plan, os.PathLike) or (
        isinstance(plan, str) and "\n" not in plan and "=" not in plan
    ):
        path = os.fspath(plan)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), "toml", path
        except FileNotFoundError:
            raise UsageError(f"plan {path}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"plan {path}: {e}") from None
    if isinstance(plan, str):
        return plan, "toml", "plan"
    raise UsageError(f"plan: a dict, TOML text or a TOML file's path, not {type(plan).__name__}")


def _json_value(v):
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    raise TypeError(f"{v!r} ({type(v).__name__}) is not a plan value")


def train(
    plan: Union[Dict, str, "os.PathLike[str]", None] = None,
    progress: Optional[Callable[[Step], Optional[bool]]] = None,
    resume: Union[str, "os.PathLike[str]", None] = None,
) -> TrainResult:
    """Trains as ``cptsim train`` does. ``plan`` is a dict, TOML text or a TOML file with the
    keys of a sweep cell (each a ``cptsim train`` flag with ``_`` for ``-``: ``model``, ``data``,
    ``schedule``, ``bits``, ``iters``, ``out``, …); with ``out`` the run writes its outputs
    there as the program does. ``progress`` is called with a ``Step`` after every iteration;
    returning ``False`` stops the run (``TrainResult.stopped`` says where) and an exception it
    raises stops the run and is raised. Ctrl-C (``KeyboardInterrupt``) stops the run, keeping a
    checkpoint of the iteration reached in ``out`` to resume from, and raises
    ``KeyboardInterrupt``. ``resume`` continues the run checkpointed in that directory, as
    ``cptsim train --resume DIR`` does; ``plan`` then holds only ``out``, ``stop_at``,
    ``checkpoint_minutes`` or ``threads``. The interpreter is free for other threads while the
    run trains."""
    if plan is None and resume is None:
        raise UsageError("plan: a plan (dict, TOML text or file), or resume=DIR")
    text, fmt, source = _plan_text({} if plan is None else plan)
    hook = None
    if progress is not None:
        if not callable(progress):
            raise UsageError("progress: a callable taking a Step")

        def hook(done, total, loss, acc, fw, bw, rate, eta, ev):
            e = None if ev is None else Eval(*ev)
            return progress(Step(done, loss, total, acc, fw, bw, rate, eta, e))

    where = None if resume is None else os.fspath(resume)
    doc, rows = _cptsim.train_json(text, fmt, source, hook, where)
    result = TrainResult(json.loads(doc), rows)
    for n in result.notices:
        if n.startswith("warning: "):
            warnings.warn(n[len("warning: "):], RuntimeWarning, stacklevel=2)
    return result
