"""``cptsim.torch``: record the precision a PyTorch training loop runs each conv and linear
layer at, and save it as a cptsim trace of the model's ONNX export.

The loop calls ``recorder.step(bits)`` once per iteration; ``recorder.save("trace.csv")`` writes
the trace, its layers matched to the ONNX export's layers through the module paths that
``torch.onnx.export`` records: in the node metadata (the torch.export-based exporter) or the node
names (the TorchScript exporter). torch is imported when a recorder is made.
"""

import ast
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _cptsim
from ._cptsim import BadInputError, UsageError
from ._trace import Trace

__all__ = ["PrecisionRecorder"]

Bits = Tuple[int, int, int]
FP32: Bits = (0, 0, 0)


def _layer_types():
    import torch.nn as nn

    return (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


class PrecisionRecorder:
    """Records, per iteration, the bits of every conv and linear module of ``model``.

    ``onnx`` is the path of the model's ONNX export (or call ``export``); ``grad_bits`` are the
    error bits of a layer given one number; ``batch`` the samples per iteration unless a step
    says otherwise; ``attribute`` the module attribute ``step()`` reads when given no bits.
    """

    def __init__(
        self,
        model,
        onnx: Optional[str] = None,
        grad_bits: int = 8,
        batch: Optional[int] = None,
        attribute: str = "bits",
    ):
        types = _layer_types()
        self.model = model
        self.onnx = onnx
        self.grad_bits = grad_bits
        self.batch = batch
        self.attribute = attribute
        self.modules: List[Tuple[str, Any]] = [
            (name, m) for name, m in model.named_modules() if isinstance(m, types)
        ]
        if not self.modules:
            raise UsageError("PrecisionRecorder: the model has no conv or linear module")
        self._index = {name: i for i, (name, _) in enumerate(self.modules)}
        self.steps: List[Tuple[int, Tuple[Bits, ...]]] = []

    def export(self, path: str, example, **kwargs) -> str:
        """Exports the model to ONNX at ``path`` with ``torch.onnx.export`` and uses it for
        ``save``: the torch.export-based exporter with a symbolic batch axis, the weights inside
        the file and its graph optimisation off (it folds BatchNorm into the conv before it and
        names the conv after the BatchNorm module); ``dynamo=False`` takes the TorchScript
        exporter. ``kwargs`` go to ``torch.onnx.export``."""
        import torch

        args = example if isinstance(example, tuple) else (example,)
        if kwargs.get("dynamo", True):
            options = dict(
                dynamo=True,
                optimize=False,
                verbose=False,
                external_data=False,
                dynamic_shapes=tuple({0: "batch"} for _ in args),
            )
        else:
            options = dict(
                input_names=[f"input{i}" for i in range(len(args))],
                dynamic_axes={f"input{i}": {0: "batch"} for i in range(len(args))},
            )
        options.update(kwargs)
        was_training = self.model.training
        self.model.eval()
        try:
            torch.onnx.export(self.model, args, str(path), **options)
        finally:
            self.model.train(was_training)
        self.onnx = str(path)
        return self.onnx

    def step(self, bits=None, samples: Optional[int] = None) -> None:
        """Records one iteration. ``bits`` is a dict by module name, a callable ``(name,
        module) -> value``, one value for every layer, or ``None`` to read each module's
        ``attribute``. A value is ``b`` (weights and activations at ``b``, errors at
        ``grad_bits``), ``(w, a, g)``, a dict with keys ``w``, ``a``, ``g``, or ``None``/0 for
        fp32; a module a dict or the attributes leave out runs at fp32."""
        samples = self.batch if samples is None else samples
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            raise UsageError(
                f"PrecisionRecorder.step: samples {samples!r}: give batch= or samples= (>= 1)"
            )
        if isinstance(bits, dict):
            unknown = sorted(set(bits) - set(self._index))
            if unknown:
                raise UsageError(
                    f"PrecisionRecorder.step: no conv/linear module named {', '.join(unknown)} "
                    f"(modules: {', '.join(self._index)})"
                )
            values = [bits.get(name) for name, _ in self.modules]
        elif callable(bits):
            values = [bits(name, m) for name, m in self.modules]
        elif bits is None:
            values = [getattr(m, self.attribute, None) for _, m in self.modules]
        else:
            values = [bits] * len(self.modules)
        row = tuple(self._bits(name, v) for (name, _), v in zip(self.modules, values))
        self.steps.append((samples, row))

    def _bits(self, name: str, value) -> Bits:
        if value is None:
            return FP32
        if isinstance(value, dict):
            value = (value.get("w", 0), value.get("a", 0), value.get("g", 0))
        elif not isinstance(value, (tuple, list)):
            value = (value, value, self.grad_bits if value else 0)
        try:
            w, a, g = (int(b) for b in value)
        except (TypeError, ValueError):
            raise UsageError(
                f"PrecisionRecorder.step: module {name}: bits {value!r} are not b, (w, a, g) "
                "or {'w', 'a', 'g'}"
            ) from None
        for b in (w, a, g):
            if not 0 <= b <= 32:
                raise UsageError(f"PrecisionRecorder.step: module {name}: bits {b} outside 0..32")
        return (w, a, g)

    def layer_map(self, onnx: Optional[str] = None) -> List[int]:
        """For each layer of the ONNX model (trace order), the index of its module in
        ``modules``; a layer without a module or a module without a layer raises
        ``BadInputError`` listing them."""
        path = self._onnx(onnx)
        _, names = _cptsim.layer_names(path)
        scopes = _name_scopes(path, names)
        mapping, unmatched = [], []
        for name in names:
            module = _module_path(name, scopes.get(name))
            if module in self._index:
                mapping.append(self._index[module])
            else:
                unmatched.append(name if module is None else f"{name} ({module})")
        unused = sorted(set(self._index) - {self.modules[i][0] for i in mapping})
        if unmatched or unused:
            said = []
            if unmatched:
                said.append(f"ONNX layers without a module: {', '.join(unmatched)}")
            if unused:
                said.append(f"modules without an ONNX layer: {', '.join(unused)}")
            raise BadInputError(f"PrecisionRecorder: {path}: " + "; ".join(said))
        return mapping

    def trace(self, onnx: Optional[str] = None) -> Trace:
        """The recorded iterations as a ``Trace`` of the ONNX model: one row per run of equal
        iterations and layer; a layer at fp32 throughout has no rows."""
        if not self.steps:
            raise UsageError("PrecisionRecorder: no step recorded")
        path = self._onnx(onnx)
        mapping = self.layer_map(path)
        rows = []
        for layer, module in enumerate(mapping):
            spans = _runs([(s, bits[module]) for s, bits in self.steps])
            if all(key[1] == FP32 for _, _, key in spans):
                continue
            for start, end, (samples, (w, a, g)) in spans:
                rows.append((start, end, layer, w, a, g, samples))
        if not rows:
            raise UsageError("PrecisionRecorder: every layer ran at fp32; the trace has no rows")
        rows.sort(key=lambda r: (r[0], r[2]))
        return Trace.from_arrays(path, *zip(*rows))

    def save(self, path: str, onnx: Optional[str] = None) -> Trace:
        """Writes the trace to ``path`` (``.csv`` or ``.pb``) and returns it."""
        t = self.trace(onnx)
        t.write(path)
        return t

    def _onnx(self, onnx: Optional[str]) -> str:
        path = onnx if onnx is not None else self.onnx
        if path is None:
            raise UsageError(
                "PrecisionRecorder: no ONNX export of the model: pass onnx= or call export()"
            )
        return str(path)


def _runs(values: Sequence) -> List[Tuple[int, int, Any]]:
    """Runs of equal consecutive values: ``(start, end, value)``."""
    out = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            out.append((start, i, values[start]))
            start = i
    return out


def _module_path(node: str, scopes: Optional[List[str]]) -> Optional[str]:
    """The module path of an ONNX layer. The TorchScript exporter names a node
    ``/features/features.0/Conv`` (the last scope is the module's path). For a dynamo export
    cptsim names a layer after the module its node's ``pkg.torch.onnx.name_scopes`` records
    (``features.0``, or ``attn/matmul`` for a module's second multiply); a layer that keeps the
    file's node name (``node_Conv_3``) is looked up in those scopes."""
    if node.startswith("/"):
        parts = node.split("/")[1:-1]
        return parts[-1] if parts else ""
    if scopes is not None:
        return scopes[-2] if len(scopes) >= 2 else None
    return node.rsplit("/", 1)[0]


def _name_scopes(path: str, names: Sequence[str]) -> Dict[str, List[str]]:
    """``pkg.torch.onnx.name_scopes`` of the nodes not named by scope, read with ``onnx`` when
    installed (a dynamo export); empty otherwise."""
    if all(n.startswith("/") for n in names):
        return {}
    try:
        import onnx
    except ImportError:
        return {}
    wanted = set(names)
    out = {}
    for node in onnx.load(path, load_external_data=False).graph.node:
        if node.name in wanted:
            for p in node.metadata_props:
                if p.key == "pkg.torch.onnx.name_scopes":
                    try:
                        out[node.name] = list(ast.literal_eval(p.value))
                    except (ValueError, SyntaxError):
                        pass
    return out
