#!/usr/bin/env python3
"""Cross-check cptsim's ONNX export against the reference `onnx` and `onnxruntime` packages.

For every zoo model: export it with `cptsim zoo export`, run the full ONNX checker, run one
onnxruntime inference on a random batch of 2 and check the output shape, and count conv+Gemm
MACs and BatchNormalization output elements from `onnx.shape_inference` (independently of
cptsim's own bookkeeping), comparing them with spec §2.3 (methods.md).

Usage: check_zoo.py --cptsim target/release/cptsim --out DIR
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper, shape_inference

# model: (conv+FC MACs per image, BN output elements per image, output classes).
# Spec §2.3 table; resnet56 lies on the basic-block line between resnet38 and resnet74;
# resnet164-bottleneck, lenet5, lenet5-bn and mlp are hand counts of their definitions.
EXPECTED = {
    "resnet20": (40_818_944, 200_704, 100),
    "resnet38": (83_286_272, 372_736, 100),
    "resnet56": (125_753_600, 544_768, 100),
    "resnet74": (168_220_928, 716_800, 100),
    "resnet110": (253_155_584, 1_060_864, 100),
    "resnet152": (352_246_016, 1_462_272, 100),
    "resnet164": (380_557_568, 1_576_960, 100),
    "resnet164-bottleneck": (247_669_760, 3_264_512, 100),
    "mobilenetv2": (91_270_144, 1_724_928, 100),
    "resnet18": (1_814_073_344, 2_483_712, 1000),
    "resnet34": (3_663_761_408, 3_738_112, 1000),
    "resnet50": (4_089_184_256, 11_113_984, 1000),
    "lenet5": (416_520, 0, 10),
    # lenet5's MACs; BN over 6·28² + 16·10² + 120 + 84 outputs
    "lenet5-bn": (416_520, 6_508, 10),
    "mlp": (266_200, 0, 10),
    # The Bit Fusion benchmarks: the MAC totals of its authors' Eyeriss results (bf-resnet18 plus
    # the classifier head cptsim adds).
    "bf-alexnet": (724_406_816, 0, 1000),
    "bf-svhn": (158_017_536, 0, 10),
    "bf-cifar10": (616_966_144, 0, 10),
    "bf-lenet5": (16_028_672, 0, 10),
    "bf-vgg7": (317_456_384, 0, 1024),
    "bf-resnet18": (1_126_862_848, 0, 1000),
    "bf-rnn": (16_777_216, 0, 4096),
    "bf-lstm": (12_960_000, 0, 3600),
}


def static_dims(value_info):
    """Dims of a value as a list; symbolic dims become None."""
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else None for d in dims]


def count_costs(model):
    """(conv+Gemm MACs, BN output elements) per sample from ONNX shape inference."""
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    graph = inferred.graph
    shapes = {vi.name: static_dims(vi) for vi in [*graph.input, *graph.value_info, *graph.output]}
    weights = {t.name: list(t.dims) for t in graph.initializer}
    macs = bn = 0
    for node in graph.node:
        if node.op_type == "Conv":
            co, ci_per_group, kh, kw = weights[node.input[1]]
            _, out_c, oh, ow = shapes[node.output[0]]
            assert out_c == co, node.name
            macs += co * oh * ow * ci_per_group * kh * kw
        elif node.op_type == "Gemm":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            b = weights[node.input[1]]
            m = b[0] if attrs.get("transB", 0) else b[1]
            k = shapes[node.input[0]][1]
            macs += k * m
        elif node.op_type == "BatchNormalization":
            bn += int(np.prod(shapes[node.output[0]][1:]))
    return macs, bn


def check_model(cptsim, out_dir, name, classes=None):
    """Exports and checks one model; returns a list of failure messages."""
    path = out_dir / f"{name}.onnx"
    cmd = [cptsim, "zoo", "export", name, "-o", str(path)]
    if classes is not None:
        cmd += ["--classes", str(classes)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    want_macs, want_bn, want_classes = EXPECTED[name]
    if classes is not None:
        want_macs += (classes - want_classes) * fc_inputs(name)
        want_classes = classes
    failures = []

    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    inp = model.graph.input[0]
    dims = static_dims(inp)
    if inp.type.tensor_type.shape.dim[0].dim_param != "N":
        failures.append("batch dimension of the input is not symbolic `N`")

    macs, bn = count_costs(model)
    if (macs, bn) != (want_macs, want_bn):
        failures.append(f"MACs/BN {macs}/{bn}, expected {want_macs}/{want_bn}")

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal([2, *dims[1:]]).astype(np.float32)
    (y,) = session.run(None, {inp.name: x})
    if y.shape != (2, want_classes):
        failures.append(f"output shape {y.shape}, expected (2, {want_classes})")
    if not np.all(np.isfinite(y)):
        failures.append("non-finite output")
    params = sum(numpy_helper.to_array(t).size for t in model.graph.initializer)
    label = name if classes is None else f"{name} --classes {classes}"
    print(f"{label:<30} MACs {macs:>14,}  BN {bn:>11,}  initializer values {params:>11,}  "
          f"{'ok' if not failures else 'FAIL'}")
    return failures


def fc_inputs(name):
    """Input features of the classifier (to adjust the MACs for a --classes override)."""
    return {"lenet5": 84, "mlp": 100}[name]


def listed_models(cptsim):
    out = subprocess.run([cptsim, "zoo", "list"], check=True, capture_output=True, text=True)
    # The sequence models and DeiT ("(cost only)", and the small LMs "(trainable)") are built
    # straight into the IR and have no ONNX export.
    return [
        line.split()[0]
        for line in out.stdout.splitlines()[1:]
        if line.strip() and "(cost only)" not in line and "(trainable)" not in line
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cptsim", required=True, help="path of the cptsim binary")
    parser.add_argument("--out", required=True, type=Path, help="directory for the exported models")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    start = time.monotonic()
    names = listed_models(args.cptsim)
    passed, failed = 0, 0
    if sorted(names) != sorted(EXPECTED):
        print(f"FAIL: zoo list {names} differs from the expected models {sorted(EXPECTED)}")
        failed += 1
    runs = [(n, None) for n in names if n in EXPECTED] + [("lenet5", 7)]
    for name, classes in runs:
        try:
            failures = check_model(args.cptsim, args.out, name, classes)
        except Exception as e:  # report every model, not just the first broken one
            failures = [f"{type(e).__name__}: {e}"]
            print(f"{name:<30} FAIL")
        for f in failures:
            print(f"  {name}: {f}")
        passed, failed = passed + (not failures), failed + bool(failures)
    print(f"zoo cross-check took {time.monotonic() - start:.0f} s")
    print(f"zoo-check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
