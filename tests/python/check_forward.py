#!/usr/bin/env python3
"""Cross-check `cptsim forward` against onnxruntime.

For the small zoo models, every PyTorch-exported fixture in tests/fixtures (files not named
bad_*) and every sequence-model fixture in tests/fixtures/seq, run one fp32 forward pass on a
seeded random input with both and require max|diff| <= 1e-4 * max|ref| + 1e-5. Image inputs are
standard normal at batch 2 (seq fixtures: 3); token-id inputs are int64 (or the declared int32)
ids in [0, vocab), vocab from the embedding's Gather table (else 50), with the file's symbolic
dims bound as SEQ_DIMS says. A model cptsim cannot run is listed with cptsim's reason (and counts
as a failure unless it is in EXPECTED_UNSUPPORTED, which says why).

Usage: check_forward.py --cptsim target/release/cptsim --out DIR [--only SUBSTRING]
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forward_common import cptsim_forward, data_input, matches, vocabulary  # noqa: E402

# Zoo models small enough for a few seconds each: (name, batch).
ZOO = [("resnet20", 2), ("resnet56", 2), ("mobilenetv2", 2), ("lenet5", 4), ("mlp", 4),
       ("resnet18", 1)]

# Fixtures the trainer engine cannot run, with the reason (printed, never silently skipped).
EXPECTED_UNSUPPORTED = {}

# Sizes of the symbolic input dims of tests/fixtures/seq (make_seq_fixtures.py: B 3, T 7; the
# legacy Transformer LM runs only at its traced T = 7).
SEQ_DIMS = {"batch": 3, "seq": 7}


def input_shape(model, batch):
    dims = data_input(model).type.tensor_type.shape.dim
    return [batch] + [d.dim_value for d in dims[1:]]


def seq_input(model, rng):
    """A seeded input of the shape the file declares (symbolic dims from SEQ_DIMS): token ids
    for an integer input, standard normal floats otherwise."""
    t = data_input(model).type.tensor_type
    shape = []
    for d in t.shape.dim:
        if d.dim_param:
            if d.dim_param not in SEQ_DIMS:
                raise ValueError(f"symbolic input dim '{d.dim_param}' not in SEQ_DIMS")
            shape.append(SEQ_DIMS[d.dim_param])
        else:
            shape.append(d.dim_value)
    if t.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        dtype = np.int64 if t.elem_type == onnx.TensorProto.INT64 else np.int32
        return rng.integers(0, vocabulary(model), shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32)


def compare(cptsim, path, x, out_dir):
    """Returns (ok, message); ok is None when cptsim cannot run the model."""
    ours, err = cptsim_forward(cptsim, path, x, out_dir)
    if ours is None:
        return None, err
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    return matches(ours, ref)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", default="", help="check only the models whose label contains this")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    failures = []
    cases = []
    for name, batch in [z for z in ZOO if args.only in f"zoo:{z[0]}"]:
        path = args.out / f"{name}.onnx"
        subprocess.run([args.cptsim, "zoo", "export", name, "-o", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        cases.append((f"zoo:{name}", path, batch))
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    for path in sorted(fixtures.glob("*.onnx")):
        if not path.name.startswith("bad_"):
            cases.append((path.name, path, 2))
    for path in sorted((fixtures / "seq").glob("*.onnx")):
        cases.append((f"seq/{path.name}", path, None))
    cases = [c for c in cases if args.only in c[0]]
    for label, path, batch in cases:
        t0 = time.time()
        model = onnx.load(str(path))
        if batch is None:
            x = seq_input(model, rng)
        else:
            x = rng.standard_normal(input_shape(model, batch)).astype(np.float32)
        ok, msg = compare(args.cptsim, path, x, args.out)
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
