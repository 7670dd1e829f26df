#!/usr/bin/env python3
"""An independent PyTorch implementation of the study's arms, to check cptsim against.

LeNet-5 on Fashion-MNIST from the weights of `cptsim zoo export lenet5 --seed S` (so both
implementations start from the same network), trained as `cptsim train` does: batch 128, SGD
momentum 0.9, weight decay 1e-4 on every parameter, lr 0.05 annealed by a cosine over the run,
pixels (p/255 − 0.2860)/0.3530, the last batch of an epoch short, a fresh shuffle per epoch. SBM
as the CPT code implements it: weights per output channel and input activations per tensor on an
affine min/max grid of 2^b − 1 levels with round-half-even (eval: running ranges, 0.9·run +
0.1·batch from 0), the error entering each layer per tensor with stochastic rounding, the
straight-through rule; conv1, conv2, fc1 and fc2 quantized, fc3 fp32. CPT: forward bits
rne(3 + 2.5·(1 − cos(π·r))) over 32 whole cycles (r the phase within cycle k, which spans
iterations ⌊kT/32⌋ … ⌊(k+1)T/32⌋ − 1), backward 8. The data order and rounding noise are
PyTorch's own (seeded by S), the same for both arms of a seed.

Usage: reference.py --cptsim target/release/cptsim --data ../shared/data/fashion-mnist
           --iters 384 --seeds 0-9 [--arms static,cpt] [--out results.csv]
Prints one line per run (iters, arm, seed, final test accuracy %) and appends it to --out.
"""

import argparse
import gzip
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(d, stem):
    for name in (stem, stem + ".gz"):
        if (d / name).exists():
            return d / name
    raise SystemExit(f"{d}: no {stem}[.gz]")


def load(d, prefix):
    x = read_idx(find(d, f"{prefix}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = read_idx(find(d, f"{prefix}-labels-idx1-ubyte")).astype(np.int64)
    x = (x - MEAN) / STD
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def fake_quant(x, lo, rng, bits, stochastic=False):
    levels = 2.0**bits - 1.0
    scale = torch.clamp(rng / levels, min=1e-8)
    u = (x - lo) / scale
    if stochastic:
        u = u + torch.rand_like(u) - 0.5
    return torch.round(torch.clamp(u, 0.0, levels)) * scale + lo


class ErrorQuant(torch.autograd.Function):
    """Identity forward; backward quantizes dL/dY per tensor with stochastic rounding."""

    @staticmethod
    def forward(ctx, y, bits):
        ctx.bits = bits
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        lo, hi = g.min(), g.max()
        return fake_quant(g, lo, hi - lo, ctx.bits, stochastic=True), None


def ste(x, q):
    return x + (q - x).detach()


class QLayer(torch.nn.Module):
    def __init__(self, weight, bias, conv):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.from_numpy(weight.copy()))
        self.bias = torch.nn.Parameter(torch.from_numpy(bias.copy()))
        self.conv = conv
        self.bits_fw, self.bits_bw = 0, 0
        self.run_lo, self.run_range = torch.tensor(0.0), torch.tensor(0.0)

    def forward(self, x):
        w = self.weight
        if self.bits_fw:
            if self.training:
                lo, rng = x.min().detach(), (x.max() - x.min()).detach()
                self.run_lo = 0.9 * self.run_lo + 0.1 * lo
                self.run_range = 0.9 * self.run_range + 0.1 * rng
            else:
                lo, rng = self.run_lo, self.run_range
            x = ste(x, fake_quant(x.detach(), lo, rng, self.bits_fw))
            flat = w.detach().reshape(w.shape[0], -1)
            wlo = flat.min(1).values.reshape(-1, *([1] * (w.dim() - 1)))
            whi = flat.max(1).values.reshape(-1, *([1] * (w.dim() - 1)))
            w = ste(w, fake_quant(w.detach(), wlo, whi - wlo, self.bits_fw))
        y = F.conv2d(x, w, self.bias, padding=self.conv) if self.conv is not None else F.linear(x, w, self.bias)
        if self.bits_fw and self.bits_bw and self.training:
            y = ErrorQuant.apply(y, self.bits_bw)
        return y


class LeNet5(torch.nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.conv1 = QLayer(weights["conv1.weight"], weights["conv1.bias"], 2)
        self.conv2 = QLayer(weights["conv2.weight"], weights["conv2.bias"], 0)
        self.fc1 = QLayer(weights["fc1.weight"], weights["fc1.bias"], None)
        self.fc2 = QLayer(weights["fc2.weight"], weights["fc2.bias"], None)
        self.fc3 = QLayer(weights["fc3.weight"], weights["fc3.bias"], None)
        self.quantized = [self.conv1, self.conv2, self.fc1, self.fc2]

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)

    def set_bits(self, fw, bw):
        for layer in self.quantized:
            layer.bits_fw, layer.bits_bw = fw, bw


def exported_weights(cptsim, seed, tmp):
    path = Path(tmp) / f"lenet5-{seed}.onnx"
    subprocess.run([cptsim, "zoo", "export", "lenet5", "--seed", str(seed), "-o", str(path)],
                   check=True, capture_output=True)
    model = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def cpt_bits(t, total, cycles=32, lo=3, hi=8):
    k = t * cycles // total
    while (k + 1) * total // cycles <= t:
        k += 1
    while k * total // cycles > t:
        k -= 1
    start, end = k * total // cycles, (k + 1) * total // cycles
    r = (t - start) / (end - start)
    return int(np.rint(lo + 0.5 * (hi - lo) * (1.0 + math.cos(math.pi * r + math.pi))))


def run(weights, train, test, iters, arm, seed):
    torch.manual_seed(seed)
    net = LeNet5(weights)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    xs, ys = train
    n = len(ys)
    order, pos = torch.randperm(n), 0
    for t in range(iters):
        if pos >= n:
            order, pos = torch.randperm(n), 0
        idx = order[pos : pos + 128]
        pos += 128
        fw = 8 if arm == "static" else cpt_bits(t, iters)
        net.set_bits(fw, 8)
        for g in opt.param_groups:
            g["lr"] = 0.05 * 0.5 * (1.0 + math.cos(math.pi * t / iters))
        net.train()
        loss = F.cross_entropy(net(xs[idx]), ys[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(test[1]), 500):
            correct += (net(test[0][i : i + 500]).argmax(1) == test[1][i : i + 500]).sum().item()
    return 100.0 * correct / len(test[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--arms", default="static,cpt")
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(1)
    a, b = args.seeds.split("-") if "-" in args.seeds else (args.seeds, args.seeds)
    d = Path(args.data)
    train, test = load(d, "train"), load(d, "t10k")
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(int(a), int(b) + 1):
            weights = exported_weights(args.cptsim, seed, tmp)
            for arm in args.arms.split(","):
                acc = run(weights, train, test, args.iters, arm, seed)
                line = f"{args.iters},{arm},{seed},{acc:.2f}"
                print(line, flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(line + "\n")


if __name__ == "__main__":
    main()
