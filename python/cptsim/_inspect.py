"""``cptsim.inspect``: a model's conv/linear layers, their GEMMs, MACs and parameters."""

import json
from dataclasses import dataclass
from typing import List, Optional, Tuple

from . import _cptsim


@dataclass(frozen=True)
class Layer:
    """One conv or linear layer (a GEMM of the training step) of a model."""

    index: int
    name: str
    op: str
    role: str
    in_shape: Tuple[int, int, int]
    out_shape: Tuple[int, int, int]
    kernel: Tuple[int, int]
    stride: Tuple[int, int]
    groups: int
    params: int
    macs: int
    """MACs per sample."""
    operands: str
    """``weight_activation`` or ``activation_activation``."""
    gemm_groups: int
    m: int
    n: int
    k: int
    """The forward GEMM ``gemm_groups × [m, k] × [k, n]`` at the model's batch."""
    batch_macs: int


@dataclass(frozen=True)
class Model:
    """What ``inspect`` returns: the layers in trace order and the model's totals."""

    name: str
    input: Tuple[int, ...]
    batch: int
    layers: List[Layer]
    totals: dict
    """``layers``, ``macs`` (per sample), ``batch_macs``, ``bn_elements``, ``ops_per_image``,
    ``params``."""

    def to_dicts(self) -> List[dict]:
        """One dict per layer."""
        return [dict(vars(layer)) for layer in self.layers]

    def to_pandas(self):
        """The layers as a ``pandas.DataFrame`` (imports pandas)."""
        import pandas

        return pandas.DataFrame(self.to_dicts())


def inspect(model: str, batch: int = 1, seq_len: Optional[int] = None) -> Model:
    """The layers and totals of ``model`` (``"zoo:NAME"`` or an ONNX file) at ``batch``."""
    doc = json.loads(_cptsim.inspect_json(str(model), batch, seq_len))
    tuples = ("in_shape", "out_shape", "kernel", "stride")
    layers = [
        Layer(**{k: tuple(v) if k in tuples else v for k, v in layer.items()})
        for layer in doc["layers"]
    ]
    return Model(
        name=doc["model"],
        input=tuple(doc["input"]),
        batch=doc["batch"],
        layers=layers,
        totals=doc["totals"],
    )
