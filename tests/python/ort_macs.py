"""MACs of an ONNX file counted from the shapes onnxruntime computes, independently of cptsim.

`probe_run` runs the file once in onnxruntime with the inputs and outputs of every GEMM node
(Conv, ConvTranspose, Gemm, MatMul, LSTM, GRU, RNN) exposed as extra graph outputs, so every
shape is the one of this very input; `count_macs` turns those shapes and the node attributes
into multiply-accumulates over the whole input, by the rules cptsim documents (README, "GEMM
kinds"; models/src/ir/shape.rs): one MAC per product of a weight (or second activation) element
with an input element, bias additions and elementwise work not counted:

- Conv: output elements × (input channels / groups) × kernel elements (grouped and depthwise
  convolutions included); ConvTranspose: input elements × (output channels / groups) × kernel;
- Gemm: M × N × K; MatMul (linear layer or a product of two activations, batched or broadcast):
  output elements × K — attention's QKᵀ and AV per head are such batched MatMuls;
- LSTM / GRU / RNN: directions × steps × batch × gates·H × (I + H), the input and recurrent
  products of every gate at every step (gates 4, 3, 1);
- Einsum of two operands: the product of the sizes of every letter of its equation (each output
  element costs the product of the contracted sizes).

A GEMM node whose inputs are all constants (initializers, `Constant` nodes and what is computed
from them alone, as Swin V2's MLP over its fixed relative-coordinates table) costs nothing per
input: onnxruntime's constant folding computes it once at load, as cptsim does at import, so it
is not counted.
"""

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

GEMM_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU", "RNN", "Einsum")
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# Ops doing products this module cannot count: their presence makes the count incomplete.
UNCOUNTED = ("MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv")


def node_names(graph):
    """Each node's name as cptsim resolves it: the file's name, else `OpType_index`."""
    return [n.name or f"{n.op_type}_{i}" for i, n in enumerate(graph.node)]


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def probe_run(path, feeds, threads=2):
    """Runs `path` on `feeds` with every GEMM node's inputs and output exposed.

    Returns (outputs of the original graph in order, {value name: shape})."""
    path = Path(path)
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    known = {t.name: list(t.dims) for t in graph.initializer}
    outputs = [o.name for o in graph.output]
    wanted = []
    for node in graph.node:
        if node.op_type in GEMM_OPS:
            for v in [*node.input, node.output[0]]:
                if v and v not in known and v not in feeds and v not in outputs + wanted:
                    wanted.append(v)
    graph.output.extend(onnx.ValueInfoProto(name=v) for v in wanted)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer)
    probe = None
    try:
        if external:  # the probe must sit beside the data file its initializers name
            probe = path.with_name(f".probe-{os.getpid()}-{path.name}")
            onnx.save(model, str(probe))
            sess = ort.InferenceSession(str(probe), options, providers=["CPUExecutionProvider"])
        else:
            sess = ort.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        values = dict(zip(names, sess.run(None, feeds)))
    finally:
        if probe is not None:
            probe.unlink(missing_ok=True)
    shapes = {**known, **{k: list(np.shape(v)) for k, v in feeds.items()},
              **{k: list(v.shape) for k, v in values.items()}}
    return [values[o] for o in outputs], shapes


def count_macs(path, shapes):
    """[(node name, op type, MACs over the whole input)] for every GEMM node, in graph order.

    Raises ValueError naming the node when the file holds a product this count does not cover."""
    graph = onnx.load(str(path), load_external_data=False).graph
    constant = constant_values(graph)
    rows = []
    for name, node in zip(node_names(graph), graph.node):
        if all(v in constant for v in node.input if v):
            continue
        if node.op_type in UNCOUNTED:
            raise ValueError(f"node {name}: {node.op_type} is not counted here")
        if node.op_type not in GEMM_OPS:
            continue
        s = [shapes[v] if v else None for v in node.input]
        out = shapes[node.output[0]]
        rows.append((name, node.op_type, node_macs(node, s, out)))
    return rows


def constant_values(graph):
    """Names of the values computed from initializers and `Constant` nodes alone (no graph
    input, no `Shape` of one), in one pass over the topologically sorted nodes."""
    constant = {t.name for t in graph.initializer}
    constant -= {i.name for i in graph.input}  # an initializer that is also an input is fed
    for node in graph.node:
        ins = [v for v in node.input if v]
        if node.op_type == "Constant" or (ins and all(v in constant for v in ins)):
            constant.update(node.output)
    return constant


def node_macs(node, ins, out):
    op, a = node.op_type, attrs(node)
    prod = lambda dims: int(np.prod(dims, dtype=np.int64)) if dims else 1
    if op == "Conv":
        return prod(out) * prod(ins[1][1:])
    if op == "ConvTranspose":
        return prod(ins[0]) * prod(ins[1][1:])
    if op == "Gemm":
        k = ins[0][0] if a.get("transA", 0) else ins[0][1]
        return prod(out) * k
    if op == "MatMul":
        return prod(out) * ins[0][-1]
    if op == "Einsum":
        eq = a["equation"]
        eq = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "")
        terms = eq.split("->")[0].split(",")
        if len(terms) != 2 or "." in eq:
            raise ValueError(f"Einsum '{eq}' is not a product of two operands")
        sizes = {c: d for t, shape in zip(terms, ins) for c, d in zip(t, shape)}
        return prod(list(sizes.values()))
    # LSTM / GRU / RNN: X [T, B, I] (layout 0) or [B, T, I]; W [D, G·H, I]; R [D, G·H, H].
    steps, batch = (ins[0][0], ins[0][1]) if a.get("layout", 0) == 0 else (ins[0][1], ins[0][0])
    d, gh, i = ins[1]
    return d * steps * batch * gh * (i + ins[2][2])
