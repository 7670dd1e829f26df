"""Per-shape peer comparison of the GEMM: the rate of cptsim's GEMM on ResNet-20's
short training shapes (the rows of `cptsim bench train --model zoo:resnet20 --batch 128` that
stay below 85 % of the FMA peak) and on one long shape, against the libraries a user would
otherwise run them on, one thread each, CPU time, interleaved round by round:

* onnxruntime's MatMul / Gemm (MLAS), on the same product as one call, `A` contiguous;
* torch.mm (MKL, as PyTorch's CPU wheel links it), on the same product as one call;
* the whole layer at batch 128 in oneDNN, as PyTorch runs a convolution on channels-last tensors
  (forward, weight gradient or input gradient), counted as the same GEMM FLOPs.

Every rate is printed as GFLOP per CPU-second and as a share of the FMA peak that `cptsim bench`
measured in the same round. A benchmark, not a test: run through `run.sh shapes`."""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from peers import loadavg

BATCH = 128


# (cptsim's layer and pass, m, k, n, the conv layer for oneDNN or None, B transposed). The conv:
# (input channels, input size, output channels, kernel, stride, pad, oneDNN's pass); its FLOPs
# are the product's times the calls per step in cptsim's table.
SHAPES = [
    ("conv1", "forward", 1024, 27, 16, (3, 32, 16, 3, 1, 1, "forward"), False),
    ("conv1", "weight", 27, 1024, 16, (3, 32, 16, 3, 1, 1, "weight"), False),
    ("layer2.0.shortcut.conv", "error", 1024, 32, 16, (16, 32, 32, 1, 2, 0, "input"), False),
    ("fc", "forward", 128, 64, 100, None, True),
    ("layer3.0.conv1", "forward", 1024, 288, 64, (32, 16, 64, 3, 2, 1, "forward"), False),
]


def rate(fn, flop, secs):
    """GFLOP per CPU-second of `fn` (one warm-up call, then calls for `secs` of CPU time)."""
    fn()
    n, t0 = 0, time.process_time()
    while True:
        fn()
        n += 1
        t = time.process_time() - t0
        if t >= secs:
            return flop * n / t / 1e9


def ort_gemm(m, k, n, bt):
    """An onnxruntime session computing A[m,k]·B (B a constant, [n,k] transposed when `bt`)."""
    a = np.random.default_rng(0).random((m, k), dtype=np.float32)
    shape = (n, k) if bt else (k, n)
    b = np.random.default_rng(1).random(shape, dtype=np.float32)
    node = (helper.make_node("Gemm", ["a", "b"], ["c"], transB=1) if bt
            else helper.make_node("MatMul", ["a", "b"], ["c"]))
    graph = helper.make_graph(
        [node], "gemm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])],
        [helper.make_tensor("b", TensorProto.FLOAT, shape, b.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"a": a})


def torch_mm(m, k, n, bt):
    a = torch.rand(m, k)
    b = torch.rand(n, k).t() if bt else torch.rand(k, n)
    c = torch.empty(m, n)
    return lambda: torch.mm(a, b, out=c)


def onednn_conv(cin, size, cout, kernel, stride, pad, what):
    """One pass of the layer at batch 128 on channels-last tensors (oneDNN in PyTorch)."""
    cl = torch.channels_last
    x = torch.rand(BATCH, cin, size, size).to(memory_format=cl)
    w = torch.rand(cout, cin, kernel, kernel).to(memory_format=cl)
    if what == "forward":
        return lambda: F.conv2d(x, w, stride=stride, padding=pad)
    gy = torch.rand_like(F.conv2d(x, w, stride=stride, padding=pad)).to(memory_format=cl)
    mask = [what == "input", what == "weight", False]
    return lambda: torch.ops.aten.convolution_backward(
        gy, x, w, None, [stride] * 2, [pad] * 2, [1] * 2, False, [0] * 2, 1, mask)


def cptsim_table(exe, secs):
    """The peak and the shape table of one `cptsim bench train` run, 1 thread."""
    cmd = [exe, "bench", "train", "--model", "zoo:resnet20", "--batch", str(BATCH), "--steps",
           "1", "--threads", "1", "--shape-secs", str(secs), "--format", "json"]
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    rows = {(s["layer"], s["pass"], s["m"], s["k"], s["n"]): s for s in d["gemm_shapes"]}
    return d["peak_gflops"], rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=0.3,
                    help="CPU seconds per shape and library in each round")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    # (library, the work, whether it is one call of the product or the whole layer)
    peers = {}
    for layer, pas, m, k, n, conv, bt in SHAPES:
        peers[(layer, pas)] = [("MLAS", ort_gemm(m, k, n, bt), True),
                               ("MKL", torch_mm(m, k, n, bt), True)]
        if conv:
            peers[(layer, pas)].append(("oneDNN", onednn_conv(*conv), False))
    libs = ["cptsim", "MLAS", "MKL", "oneDNN"]
    share = {(layer, pas): {lib: [] for lib in libs} for layer, pas, *_ in SHAPES}
    print(f"torch {torch.__version__} (MKL, oneDNN), onnxruntime {ort.__version__} (MLAS); "
          f"1 thread each, {a.secs} CPU-s per shape; % of the FMA peak cptsim measured in the "
          "same round")
    for r in range(a.rounds):
        load = loadavg()
        peak, table = cptsim_table(a.cptsim, a.secs)
        line = []
        for layer, pas, m, k, n, _, _ in SHAPES:
            row = table.get((layer, pas, m, k, n))
            if row is None:
                sys.exit(f"cptsim's shape table has no row {layer} {pas} {m}×{k}×{n}")
            got = {"cptsim": row["gflops"]}
            for lib, fn, one_call in peers[(layer, pas)]:
                calls = 1 if one_call else row["calls_per_step"]
                got[lib] = rate(fn, 2 * m * k * n * calls, a.secs)
            for lib, g in got.items():
                share[(layer, pas)][lib].append(g / peak)
            line.append(f"{layer} {pas}: " + ", ".join(f"{lib} {g:.0f}" for lib, g in got.items()))
        print(f"round {r + 1} (loadavg {load} → {loadavg()}), peak {peak:.1f} GFLOP/s; "
              + "; ".join(line))
    print("\n| shape (m × k × n) | " + " | ".join(libs) + " |")
    print("|---" * (len(libs) + 1) + "|")
    for layer, pas, m, k, n, _, _ in SHAPES:
        cells = []
        for lib in libs:
            v = share[(layer, pas)][lib]
            cells.append(f"{100 * statistics.median(v):.0f} % ({100 * min(v):.0f}–"
                         f"{100 * max(v):.0f})" if v else "—")
        print(f"| {layer} {pas} ({m} × {k} × {n}) | " + " | ".join(cells) + " |")
    print(f"(medians over {a.rounds} rounds, range in brackets)")


if __name__ == "__main__":
    sys.exit(main())
