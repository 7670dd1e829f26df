"""A PyTorch training loop recorded with ``cptsim.torch.PrecisionRecorder``: its trace costs as
``cptsim run --trace`` costs it and as cptsim's own synthesis of the same schedule."""

import math
import os
import sys

import cptsim
import pytest

try:
    import torch
except ImportError:
    if os.environ.get("CPTSIM_REQUIRE_TORCH") == "1":
        raise
    print("SKIPPED: test_torch: torch is not installed", file=sys.stderr)
    pytest.skip("torch is not installed", allow_module_level=True)

from cptsim.torch import PrecisionRecorder  # noqa: E402

ITERS, CYCLES, BATCH = 50, 2, 16
LO, HI, GRAD = 3, 8, 8


def cpt_cosine(t: int) -> int:
    """CPT's cosine cycle: N whole cycles over T, each rising from LO to HI."""
    k = ((t + 1) * CYCLES - 1) // ITERS
    start, end = k * ITERS // CYCLES, (k + 1) * ITERS // CYCLES
    z = (t - start) / (end - start)
    value = LO + 0.5 * (HI - LO) * (1 + math.cos(math.pi * z + math.pi))
    return min(max(round(value), LO), HI)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.head = torch.nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def fake_quant(w: torch.Tensor, bits: int) -> torch.Tensor:
    """Symmetric uniform quantization with a straight-through gradient."""
    scale = w.detach().abs().max().clamp(min=1e-8) / (2 ** (bits - 1) - 1)
    return w + ((w / scale).round() * scale - w).detach()


def train(net, recorder):
    torch.manual_seed(0)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    x, y = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    convs = [m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    for t in range(ITERS):
        b = cpt_cosine(t)
        originals = [m.weight.data.clone() for m in convs]
        for m in convs:
            m.weight.data = fake_quant(m.weight.data, b)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        for m, w in zip(convs, originals):
            m.weight.data = w
        opt.step()
        recorder.step(b)
    return loss.item()


def test_a_recorded_cosine_run_costs_as_the_program_and_the_synthesis(cli, tmp_path):
    torch.manual_seed(0)
    net = Net()
    recorder = PrecisionRecorder(net, grad_bits=GRAD, batch=BATCH)
    onnx = recorder.export(tmp_path / "net.onnx", torch.zeros(1, 1, 28, 28))
    loss = train(net, recorder)
    assert math.isfinite(loss)
    trace = recorder.save(tmp_path / "trace.csv")
    assert len(trace.layer_names) == 3
    assert (trace.iterations, trace.batch) == (ITERS, BATCH)
    accel = ["zc706", "bitfusion"]
    ours = cptsim.cost(onnx, trace=trace, accel=accel)
    from_file = cli.json("run", "--model", onnx, "--trace", tmp_path / "trace.csv", "--accel", ",".join(accel))
    assert ours.to_dict(breakdowns=False) == from_file
    synthesised = cptsim.cost(
        onnx, schedule="cosine", bits=f"{LO}:{HI}", grad_bits=GRAD, iters=ITERS,
        cycles=CYCLES, batch=BATCH, accel=accel,
    )
    cli_synth = cli.json(
        "run", "--model", onnx, "--schedule", "cosine", "--bits", f"{LO}:{HI}",
        "--grad-bits", GRAD, "--iters", ITERS, "--cycles", CYCLES, "--batch", BATCH,
        "--accel", ",".join(accel),
    )
    assert synthesised.to_dict(breakdowns=False) == cli_synth
    # the same run: everything but what names it
    a, b = ours.to_dict(), synthesised.to_dict()
    for d in (a, b):
        d.pop("schedule"), d.pop("trace_rows", None)
    assert a == b
    assert ours.reduction > 0


def test_bits_by_name_callable_and_attribute_give_one_trace(tmp_path):
    net = Net()
    rec = PrecisionRecorder(net, batch=4)
    onnx = rec.export(tmp_path / "net.onnx", torch.zeros(1, 1, 28, 28))
    names = [n for n, _ in rec.modules]
    by_dict = PrecisionRecorder(net, onnx=onnx, batch=4)
    by_call = PrecisionRecorder(net, onnx=onnx, batch=4)
    by_attr = PrecisionRecorder(net, onnx=onnx, batch=4)
    for t in range(6):
        bits = {n: (4 + t % 2, 5, 8) for n in names[:2]}
        by_dict.step(bits)
        by_call.step(lambda name, m: bits.get(name))
        for n, m in rec.modules:
            m.bits = bits.get(n)
        by_attr.step()
    t = by_dict.trace()
    assert t == by_call.trace() == by_attr.trace()
    assert {r[2] for r in t.rows} == {0, 1}  # the head ran fp32 throughout: no rows
    with pytest.raises(cptsim.UsageError, match="no conv/linear module named nosuch"):
        by_dict.step({"nosuch": 4})


def test_a_model_and_an_export_that_differ_list_the_unmatched_names(tmp_path):
    net = Net()
    rec = PrecisionRecorder(net, batch=4)
    # the TorchScript exporter: module paths in the node names
    rec.export(tmp_path / "net.onnx", torch.zeros(1, 1, 28, 28), dynamo=False)
    rec.step(8)
    assert rec.trace().layer_names == [
        "/features/features.0/Conv", "/features/features.4/Conv", "/head/Gemm",
    ]
    other = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    rec2 = PrecisionRecorder(other, onnx=rec.onnx, batch=4)
    rec2.step(8)
    with pytest.raises(cptsim.BadInputError) as e:
        rec2.save(tmp_path / "t.csv")
    message = str(e.value)
    assert "/head/Gemm (head)" in message and "modules without an ONNX layer: 1" in message
    assert not (tmp_path / "t.csv").exists()
