"""cptsim from Python: inspect models, cost dynamic-precision training runs on accelerator
models, read and write precision traces, and record the precision of a PyTorch training loop.

The compiled core (``cptsim._cptsim``) needs neither torch nor pandas; ``cptsim.torch`` imports
torch when used and ``Report.to_pandas`` imports pandas when called.
"""

from . import _cptsim
from ._cptsim import (
    BadInputError,
    DivergedError,
    Error,
    RuntimeFailure,
    UsageError,
)
from . import accel
from ._inspect import Layer, Model, inspect
from ._report import AcceleratorCost, Report, cost
from ._trace import Trace

__version__ = _cptsim.__version__

__all__ = [
    "AcceleratorCost",
    "BadInputError",
    "DivergedError",
    "Error",
    "Layer",
    "Model",
    "Report",
    "RuntimeFailure",
    "Trace",
    "UsageError",
    "accel",
    "cost",
    "inspect",
]
