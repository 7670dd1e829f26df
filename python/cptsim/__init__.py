"""cptsim from Python: inspect models, cost dynamic-precision training runs on accelerator
models, train with simulated low precision, read and write precision traces, draw figures (SVG,
shown inline in notebooks), and record the precision of a PyTorch training loop.

The compiled core (``cptsim._cptsim``) needs neither torch nor pandas; ``cptsim.torch`` imports
torch when used and ``Report.to_pandas`` imports pandas when called.
"""

from . import _cptsim
from ._cptsim import (
    BadInputError,
    CollapsedError,
    DivergedError,
    Error,
    RuntimeFailure,
    UsageError,
)
from . import accel
from ._inspect import Layer, Model, inspect
from ._report import AcceleratorCost, Report, cost
from ._figure import Figure
from ._trace import Trace
from ._train import Eval, Metrics, Step, TrainResult, train

__version__ = _cptsim.__version__

__all__ = [
    "AcceleratorCost",
    "BadInputError",
    "CollapsedError",
    "DivergedError",
    "Error",
    "Eval",
    "Figure",
    "Layer",
    "Metrics",
    "Model",
    "Report",
    "RuntimeFailure",
    "Step",
    "Trace",
    "TrainResult",
    "UsageError",
    "accel",
    "cost",
    "inspect",
    "train",
]
