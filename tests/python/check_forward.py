#!/usr/bin/env python3
"""Cross-check `cptsim forward` against onnxruntime.

For the small zoo models and every PyTorch-exported fixture in tests/fixtures (files not named
bad_*), run one fp32 forward pass on a seeded random input with both and require
max|diff| <= 1e-4 * max|ref| + 1e-5. A model cptsim cannot run is listed with cptsim's reason
(and counts as a failure unless it is in EXPECTED_UNSUPPORTED, which says why).

Usage: check_forward.py --cptsim target/release/cptsim --out DIR
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

# Zoo models small enough for a few seconds each: (name, batch).
ZOO = [("resnet20", 2), ("resnet56", 2), ("mobilenetv2", 2), ("lenet5", 4), ("mlp", 4),
       ("resnet18", 1)]

# Fixtures the trainer engine cannot run, with the reason (printed, never silently skipped).
EXPECTED_UNSUPPORTED = {}


def input_shape(model, batch):
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return [batch] + [d.dim_value for d in dims[1:]]


def compare(cptsim, path, batch, out_dir, rng):
    """Returns (ok, message)."""
    model = onnx.load(str(path))
    x = rng.standard_normal(input_shape(model, batch)).astype(np.float32)
    xin, yout = out_dir / "x.npy", out_dir / "y.npy"
    np.save(xin, x)
    proc = subprocess.run([cptsim, "forward", "--model", str(path), "--input", str(xin),
                           "--output", str(yout)], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    ours = np.load(yout)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    if ours.shape != ref.shape:
        return False, f"shape {ours.shape} vs onnxruntime {ref.shape}"
    diff = float(np.max(np.abs(ours - ref)))
    tol = 1e-4 * float(np.max(np.abs(ref))) + 1e-5
    return diff <= tol, f"max|diff| {diff:.3g} (tolerance {tol:.3g})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    failures = []
    cases = []
    for name, batch in ZOO:
        path = args.out / f"{name}.onnx"
        subprocess.run([args.cptsim, "zoo", "export", name, "-o", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        cases.append((f"zoo:{name}", path, batch))
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    for path in sorted(fixtures.glob("*.onnx")):
        if not path.name.startswith("bad_"):
            cases.append((path.name, path, 2))
    for label, path, batch in cases:
        t0 = time.time()
        ok, msg = compare(args.cptsim, path, batch, args.out, rng)
        took = f"{time.time() - t0:.1f} s"
        if ok is None:
            reason = EXPECTED_UNSUPPORTED.get(path.name)
            if reason is None:
                failures.append(f"{label}: cptsim cannot run it: {msg}")
                print(f"FAIL {label}: cptsim cannot run it: {msg}")
            else:
                print(f"UNSUPPORTED {label}: {reason} (cptsim: {msg})")
        elif ok:
            if path.name in EXPECTED_UNSUPPORTED:
                print(f"note {label}: now runs; remove it from EXPECTED_UNSUPPORTED")
            print(f"ok   {label}: {msg} [{took}]")
        else:
            failures.append(f"{label}: {msg}")
            print(f"FAIL {label}: {msg} [{took}]")
    if failures:
        print(f"{len(failures)} forward cross-check failure(s)", file=sys.stderr)
        sys.exit(1)
    print(f"forward cross-check: {len(cases)} models, all runnable ones match onnxruntime")


if __name__ == "__main__":
    main()
