"""``cptsim.cost``: a run's report — BitOPs against the static baseline and, per accelerator,
latency, energy and DRAM traffic with per-layer × GEMM and per-epoch rows."""

import copy
import json
from typing import List, Optional, Sequence, Union

from . import _cptsim
from ._cptsim import UsageError
from .accel import AccelConfig, load as _load_accel
from ._figure import Figure
from ._trace import Trace


class AcceleratorCost:
    """One accelerator's costs of the run and of its static baseline."""

    def __init__(self, doc: dict):
        self._doc = doc
        self.name: str = doc["name"]
        self.latency_s: float = doc["latency_s"]
        self.energy_j: float = doc["energy_j"]
        self.dram_bytes: float = doc["dram_bytes"]
        self.static_latency_s: float = doc["static_latency_s"]
        self.static_energy_j: float = doc["static_energy_j"]
        self.static_dram_bytes: float = doc["static_dram_bytes"]
        self.breakdown: dict = doc["breakdown"]
        self.per_layer_gemm: List[dict] = doc.get("per_layer_gemm", [])
        self.per_epoch: List[dict] = doc.get("per_epoch", [])

    @property
    def latency_reduction(self) -> float:
        """``1 − latency / static latency``."""
        return 1.0 - self.latency_s / self.static_latency_s

    @property
    def energy_reduction(self) -> float:
        """``1 − energy / static energy``."""
        return 1.0 - self.energy_j / self.static_energy_j

    def plot(self, split: str = "components", width: int = 800, height: int = 500) -> Figure:
        """The per-layer latency and energy breakdown ``cptsim plot breakdown`` draws, stacked by
        cost component (``split="components"``: compute, SRAM, DRAM, DRAM stalls) or by
        training GEMM (``"gemm"``: fw, eb, wg)."""
        if not self.per_layer_gemm:
            raise UsageError(
                f"plot of {self.name}: the report has no per-layer rows "
                "(cost(..., epoch_iters=None) leaves them out)"
            )
        doc = json.dumps({"name": self.name, "per_layer_gemm": self.per_layer_gemm})
        return Figure(_cptsim.breakdown_svg(doc, split, width, height))

    def __repr__(self) -> str:
        return (
            f"AcceleratorCost({self.name!r}: {self.latency_s:.4g} s, {self.energy_j:.4g} J, "
            f"latency -{100 * self.latency_reduction:.2f} %)"
        )


class Report:
    """What ``cost`` returns: the fields of ``cptsim run --format json`` as attributes, the
    accelerators as ``AcceleratorCost`` objects."""

    def __init__(self, doc: dict):
        self._doc = doc
        for key in (
            "model",
            "schedule",
            "bits",
            "grad_bits",
            "iterations",
            "batch",
            "accounting",
            "gbitops",
            "static_gbitops",
            "reduction",
        ):
            setattr(self, key, doc[key])
        self.bn_gops: Optional[float] = doc.get("bn_gops")
        self.trace_rows: Optional[int] = doc.get("trace_rows")
        self.accelerators = [AcceleratorCost(a) for a in doc.get("accelerators", [])]

    def to_dict(self, breakdowns: bool = True) -> dict:
        """The report as a dict; without ``breakdowns`` it is the document ``cptsim run
        --format json`` prints (no per-layer × GEMM and per-epoch rows)."""
        doc = copy.deepcopy(self._doc)
        if not breakdowns:
            for a in doc.get("accelerators", []):
                a.pop("per_layer_gemm", None)
                a.pop("per_epoch", None)
        return doc

    def to_json(self, breakdowns: bool = True) -> str:
        """``to_dict`` as JSON text."""
        return json.dumps(self.to_dict(breakdowns), indent=2)

    def to_dicts(self) -> List[dict]:
        """One flat dict per accelerator, layer and training GEMM: ``accelerator``, ``layer``,
        ``name``, ``gemm`` and the cost totals (cycles, latency, energy by component, DRAM)."""
        rows = []
        for a in self.accelerators:
            for r in a.per_layer_gemm:
                row = {"accelerator": a.name, "layer": r["layer"], "name": r["name"], "gemm": r["gemm"]}
                row.update(_flat(r["totals"]))
                rows.append(row)
        return rows

    def to_pandas(self):
        """``to_dicts`` as a ``pandas.DataFrame`` (imports pandas)."""
        import pandas

        return pandas.DataFrame(self.to_dicts())

    def plot(
        self,
        accelerator: Optional[str] = None,
        split: str = "components",
        width: int = 800,
        height: int = 500,
    ) -> Figure:
        """The per-layer breakdown of ``accelerator`` (its name; may be left out when the report
        costs one): ``AcceleratorCost.plot``."""
        names = [a.name for a in self.accelerators]
        if not names:
            raise UsageError("plot: the report costs no accelerator (cost(..., accel=[...]))")
        if accelerator is None:
            if len(names) > 1:
                raise UsageError(f"plot: name the accelerator, one of {', '.join(names)}")
            accelerator = names[0]
        if accelerator not in names:
            raise UsageError(f"plot: accelerator {accelerator!r} is not in the report ({', '.join(names)})")
        return self.accelerators[names.index(accelerator)].plot(split, width, height)

    def __repr__(self) -> str:
        head = (
            f"Report({self.model}, {self.schedule}: {self.gbitops:.4e} GBitOPs, "
            f"-{100 * self.reduction:.2f} % vs static"
        )
        return head + "".join(f"; {a!r}" for a in self.accelerators) + ")"


def _flat(totals: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in totals.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}_"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def cost(
    model: str,
    schedule: str = "cosine",
    bits: Union[str, int, None] = None,
    grad_bits: Union[str, int, None] = None,
    iters: Optional[int] = None,
    batch: Optional[int] = None,
    accel: Sequence[Union[str, AccelConfig]] = (),
    trace: Union[str, Trace, None] = None,
    cycles: int = 32,
    policy: str = "all",
    accounting: str = "paper",
    convention: str = "cpt",
    epoch_iters: Optional[int] = 391,
    seq_len: Optional[int] = None,
) -> Report:
    """Costs a training run of ``model`` as ``cptsim run`` does: the ``schedule`` synthesised
    (forward ``bits`` ``"MIN:MAX"``, default ``"3:8"``; backward ``grad_bits``, default ``"8"``)
    over ``iters`` iterations of ``batch`` samples, or a ``trace`` (a ``Trace`` or a ``.csv`` /
    ``.pb`` path) whose bits give the baseline unless ``bits`` / ``grad_bits`` are given. Each
    ``accel`` entry is a built-in name, a TOML path or an ``AccelConfig``; their per-epoch rows
    have ``epoch_iters`` iterations each (``None``: no per-layer × GEMM and per-epoch rows, as
    ``cptsim run`` without ``--report``)."""
    accels = [
        (a if isinstance(a, AccelConfig) else _load_accel(a))._cost_arg() for a in accel
    ]
    trace_path = trace_rows = None
    if isinstance(trace, Trace):
        trace_rows = trace._cost_arg()
    elif trace is not None:
        trace_path = str(trace)
    doc = _cptsim.cost_json(
        str(model),
        schedule=schedule,
        bits=None if bits is None else str(bits),
        grad_bits=None if grad_bits is None else str(grad_bits),
        cycles=cycles,
        iters=iters,
        batch=batch,
        accel=accels,
        trace_path=trace_path,
        trace=trace_rows,
        policy=policy,
        accounting=accounting,
        convention=convention,
        epoch_iters=epoch_iters,
        seq_len=seq_len,
    )
    return Report(json.loads(doc))
