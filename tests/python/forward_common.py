"""Helpers shared by check_forward.py and check_corpus.py: a file's data input and vocabulary,
one `cptsim forward` pass on an `.npy` input, and the comparison with a reference output."""

import subprocess

import numpy as np

DEFAULT_VOCAB = 50


def data_input(model):
    """The graph input that is not an initializer."""
    inits = {t.name for t in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in inits)


def vocabulary(model, default=DEFAULT_VOCAB):
    """Rows of the table of the Gather that embeds the graph input (`default` if none)."""
    inits = {t.name: t for t in model.graph.initializer}
    x = data_input(model).name
    for n in model.graph.node:
        if n.op_type == "Gather" and n.input[1] == x and n.input[0] in inits:
            return int(inits[n.input[0]].dims[0])
    return default


def cptsim_forward(cptsim, path, x, out_dir, timeout=None):
    """Runs `cptsim forward` on `x`; returns (output array, None) or (None, cptsim's stderr)."""
    xin, yout = out_dir / "x.npy", out_dir / "y.npy"
    yout.unlink(missing_ok=True)
    np.save(xin, x)
    proc = subprocess.run([cptsim, "forward", "--model", str(path), "--input", str(xin),
                           "--output", str(yout)], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return np.load(yout), None


def matches(ours, ref):
    """(ok, message): max|diff| <= 1e-4 * max|ref| + 1e-5 on equal shapes."""
    if ours.shape != ref.shape:
        return False, f"shape {ours.shape} vs onnxruntime {ref.shape}"
    if not np.all(np.isfinite(ours)):
        return False, "non-finite output"
    diff = float(np.max(np.abs(ours.astype(np.float64) - ref)))
    tol = 1e-4 * float(np.max(np.abs(ref))) + 1e-5
    return diff <= tol, f"max|diff| {diff:.3g} (tolerance {tol:.3g})"
