"""Peer comparison: cptsim against PyTorch (fp32 and fake-quant 8/8) and onnxruntime,
one thread each, interleaved round by round, in images per CPU-second, with each round's
/proc/loadavg; and, with --lstm-batch / --transformer-batch / --gru-batch, the training of
cptsim's small LSTM LM and Transformer LM and of a GRU LM's ONNX export against the same models
in PyTorch (nn.LSTM, nn.TransformerEncoder, nn.GRU), in sequences per CPU-second. A benchmark,
not a test: run through run.sh."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

import train_families

BATCH = 128
CLASSES = 100  # the head of the zoo's CIFAR ResNets


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


# ---- fake quantization (per-tensor min-max, 8 bits; stochastic rounding of the output gradient)


def minmax_quant(x, bits, stochastic):
    lo, hi = x.min(), x.max()
    scale = (hi - lo).clamp(min=1e-12) / (2**bits - 1)
    v = (x - lo) / scale
    v = torch.floor(v + torch.rand_like(v)) if stochastic else torch.round(v)
    return v.clamp(0, 2**bits - 1) * scale + lo


class QuantSTE(torch.autograd.Function):
    """Forward: min-max quantization; backward: straight-through."""

    @staticmethod
    def forward(ctx, x, bits):
        return minmax_quant(x, bits, stochastic=False)

    @staticmethod
    def backward(ctx, g):
        return g, None


class GradSR(torch.autograd.Function):
    """Forward: identity; backward: the output gradient quantized with stochastic rounding."""

    @staticmethod
    def forward(ctx, x, bits):
        ctx.bits = bits
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return minmax_quant(g, ctx.bits, stochastic=True), None


class QConv(nn.Conv2d):
    bits = 0

    def forward(self, x):
        if not self.bits:
            return super().forward(x)
        y = F.conv2d(QuantSTE.apply(x, self.bits), QuantSTE.apply(self.weight, self.bits), None,
                     self.stride, self.padding)
        return GradSR.apply(y, self.bits)


class QLinear(nn.Linear):
    bits = 0

    def forward(self, x):
        if not self.bits:
            return super().forward(x)
        y = F.linear(QuantSTE.apply(x, self.bits), QuantSTE.apply(self.weight, self.bits), self.bias)
        return GradSR.apply(y, self.bits)


# ---- CIFAR ResNet-(6n+2) as zoo:resnetD builds it (16/32/64 channels, 1×1 projection shortcuts)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = QConv(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = QConv(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(QConv(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    def __init__(self, depth):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = QConv(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                layers.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = QLinear(64, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def set_bits(self, bits):
        # Like cptsim's default CIFAR scope: every conv/linear quantized except the first and last.
        for m in self.modules():
            if isinstance(m, (QConv, QLinear)):
                m.bits = bits
        self.conv1.bits = 0
        self.fc.bits = 0


def sgd_rate(net, x, y, samples, steps):
    """Samples per CPU-second of `steps` SGD steps (the paper's momentum and weight decay) of
    `net` on one batch, after one warm-up step."""
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    step()
    t0 = time.process_time()
    for _ in range(steps):
        step()
    return samples * steps / (time.process_time() - t0)


def torch_train(depth, bits, steps):
    torch.manual_seed(0)
    net = ResNet(depth)
    net.set_bits(bits)
    x = torch.rand(BATCH, 3, 32, 32) * 4 - 2
    y = torch.arange(BATCH) % CLASSES
    return sgd_rate(net, x, y, BATCH, steps)


# The zoo's `lstm-lm` (word_language_model form): without --data its vocabulary is 256.
LM_VOCAB, LM_UNITS, LM_BPTT, LM_DROPOUT = 256, 128, 35, 0.2


class LstmLM(nn.Module):
    """Embedding, dropout, 2 LSTM layers with dropout between, dropout, decoder: cptsim's
    `zoo:lstm-lm` layer for layer."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(LM_VOCAB, LM_UNITS)
        self.rnn = nn.LSTM(LM_UNITS, LM_UNITS, 2, dropout=LM_DROPOUT)
        self.drop = nn.Dropout(LM_DROPOUT)
        self.dec = nn.Linear(LM_UNITS, LM_VOCAB)

    def forward(self, ids):
        out, _ = self.rnn(self.drop(self.enc(ids)))
        return self.dec(self.drop(out)).view(-1, LM_VOCAB)


def lm_rate(model, ids_shape, batch, steps):
    """Sequences per CPU-second of `model()` (a language model class) trained on random ids of
    `ids_shape` with a label per token (seeded before the ids, labels and weights are drawn)."""
    torch.manual_seed(0)
    ids = torch.randint(0, LM_VOCAB, ids_shape)
    y = torch.randint(0, LM_VOCAB, (ids.numel(),))
    return sgd_rate(model(), ids, y, batch, steps)


# The zoo's `transformer-lm`: 2 pre-norm causal layers (d 128, 4 heads, FFN 512, GELU, no
# dropout), learned positions, final norm, a linear head; ids [B, 64].
TLM_D, TLM_LAYERS, TLM_HEADS, TLM_FFN, TLM_T = 128, 2, 4, 512, 64


class TransformerLM(nn.Module):
    """cptsim's `zoo:transformer-lm` in PyTorch's own modules."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(LM_VOCAB, TLM_D)
        self.pos = nn.Parameter(torch.zeros(TLM_T, TLM_D))
        layer = nn.TransformerEncoderLayer(TLM_D, TLM_HEADS, TLM_FFN, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, TLM_LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(TLM_D)
        self.head = nn.Linear(TLM_D, LM_VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(TLM_T))

    def forward(self, ids):
        h = self.layers(self.enc(ids) + self.pos, mask=self.mask, is_causal=True)
        return self.head(self.norm(h)).view(-1, LM_VOCAB)


class GruLM(nn.Module):
    """A 2-layer GRU LM (128 units, no dropout) over ids [T, B]: cptsim trains its ONNX export,
    which has no dropout nodes to keep (an export is in eval mode), so neither side drops."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(LM_VOCAB, LM_UNITS)
        self.rnn = nn.GRU(LM_UNITS, LM_UNITS, 2)
        self.dec = nn.Linear(LM_UNITS, LM_VOCAB)

    def forward(self, ids):
        out, _ = self.rnn(self.enc(ids))
        return self.dec(out).view(-1, LM_VOCAB)


def export_gru_lm(path, batch):
    torch.manual_seed(0)
    ids = torch.randint(0, LM_VOCAB, (LM_BPTT, batch))
    with warnings.catch_warnings():  # the exporter's advice on batch sizes: ours is fixed
        warnings.simplefilter("ignore")
        torch.onnx.export(GruLM().eval(), ids, path, input_names=["ids"], opset_version=14,
                          dynamo=False)


# Timed passes per ImageNet eval, after one warm-up each. With 2, a first pass that ran slow
# (cptsim's ResNet-50: 31.4 img/CPU-s for 1 pass, 33.8 for 3) weighed half the figure.
IMAGENET_PASSES = 4


def ort_forward(path, x, reps):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    sess.run(None, {name: x})
    t0 = time.process_time()
    for _ in range(reps):
        sess.run(None, {name: x})
    return len(x) * reps / (time.process_time() - t0)


# torchvision families beyond the ResNets, exported (legacy exporter, random init) at batch 16 on
# --family-size images; the ones cptsim cannot import or run yet are reported, not timed.
FAMILIES = ("squeezenet1_1", "regnet_y_400mf", "resnext50_32x4d", "mobilenet_v2",
            "mobilenet_v3_small", "shufflenet_v2_x1_0", "densenet121", "convnext_tiny",
            "efficientnet_b0")


def export_family(exe, name, path, batch, size):
    """Export torchvision's `name` (random init, eval mode) to `path` with a fixed batch; the
    error's first line when the export fails or `cptsim bench eval` cannot run the file."""
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.get_model(name, weights=None).eval()
    x = torch.rand(batch, 3, size, size)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, x, path, input_names=["x"], dynamo=False)
    except Exception as e:  # an exporter failure is a row without figures, not a crash
        return f"export: {str(e).splitlines()[0]}"
    cmd = [exe, "bench", "eval", "--model", path, "--batch", str(batch), "--passes", "1",
           "--threads", "1", "--format", "json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        why = (run.stderr.strip().splitlines() or ["exit status " + str(run.returncode)])[-1]
        return why.split("; supported ops:")[0]
    return None


def cptsim_train(exe, model, batch, quantizer, steps, extra=()):
    """`cptsim bench train` of `model` (samples per CPU-second: images, or an LM's sequences)."""
    cmd = [exe, "bench", "train", "--model", model, "--batch", str(batch), "--steps",
           str(steps), "--threads", "1", "--quantizer", quantizer, "--peak-secs", "0.01",
           "--shape-secs", "0", "--format", "json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_cpu_s"]


def cptsim_eval(exe, onnx_path, reps, batch=BATCH):
    """`cptsim bench eval` on the very ONNX file onnxruntime runs: the model is built before the
    timed passes, as an onnxruntime session is created before its timed runs."""
    cmd = [exe, "bench", "eval", "--model", onnx_path, "--batch", str(batch), "--passes",
           str(reps), "--threads", "1", "--format", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_cpu_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--depth", type=int, default=20,
                    help="CIFAR ResNet depth, 6n+2 (20, 38, 56, 74, 110, 152 are in cptsim's zoo)")
    ap.add_argument("--resnet50-batch", type=int, default=16,
                    help="batch of the ResNet-50 eval comparison (0: skip it)")
    ap.add_argument("--resnet18-batch", type=int, default=0,
                    help="batch of a ResNet-18 eval comparison (0, the default: skip it)")
    ap.add_argument("--lstm-batch", type=int, default=0,
                    help="streams of the LSTM LM training comparison (0, the default: skip it)")
    ap.add_argument("--transformer-batch", type=int, default=0,
                    help="sequences of the Transformer LM training comparison (0: skip it)")
    ap.add_argument("--gru-batch", type=int, default=0,
                    help="streams of the GRU LM training comparison (0: skip it)")
    ap.add_argument("--families", default="",
                    help="comma-separated torchvision models (or `all`: " + ",".join(FAMILIES)
                    + ") for eval comparisons at --family-batch (default: none)")
    ap.add_argument("--family-batch", type=int, default=16)
    ap.add_argument("--imagenet-passes", type=int, default=IMAGENET_PASSES,
                    help="timed passes of each ImageNet eval per round")
    ap.add_argument("--family-size", type=int, default=224, help="their image side")
    ap.add_argument("--train-families", default="",
                    help="comma-separated training rows (or `all`: "
                    + ",".join(train_families.MODELS) + "), fp32 and 8/8 against PyTorch")
    ap.add_argument("--train-batch", type=int, default=32, help="their batch")
    ap.add_argument("--eval-families", default="",
                    help="comma-separated training rows (or `all`) also compared in evaluation "
                    "against onnxruntime, exported in eval mode at --family-batch")
    ap.add_argument("--only-families", action="store_true",
                    help="skip the CIFAR ResNet rows (the families' and --*-batch rows only)")
    a = ap.parse_args()
    if a.depth < 8 or (a.depth - 2) % 6:
        ap.error(f"--depth {a.depth} is not 6n+2 with n >= 1")
    d = a.depth
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    tmp = tempfile.mkdtemp(prefix="cptsim-peers-")
    x = (np.random.default_rng(0).random((BATCH, 3, 32, 32), dtype=np.float32) * 4 - 2)
    onnx_path = os.path.join(tmp, f"resnet{d}.onnx")
    net = ResNet(d).eval()
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the TorchScript exporter
    torch.onnx.export(net, torch.from_numpy(x), onnx_path, input_names=["x"], dynamo=False)
    # ImageNet ResNets (torchvision's architecture) as cptsim's zoo writes them, BatchNorm nodes
    # included: onnxruntime folds them into the convs itself, cptsim runs them as layers.
    imagenet = []
    for name, batch in (("resnet50", a.resnet50_batch), ("resnet18", a.resnet18_batch)):
        if batch:
            path = os.path.join(tmp, f"{name}.onnx")
            subprocess.run([a.cptsim, "zoo", "export", name, "--output", path], check=True,
                           capture_output=True)
            xi = np.random.default_rng(1).random((batch, 3, 224, 224), dtype=np.float32)
            imagenet.append((name, batch, path, xi))
    families, broken = [], []
    names = FAMILIES if a.families == "all" else [f for f in a.families.split(",") if f]
    for name in names:
        path = os.path.join(tmp, f"{name}.onnx")
        why = export_family(a.cptsim, name, path, a.family_batch, a.family_size)
        if why:
            broken.append((name, why))
        else:
            xf = np.random.default_rng(2).random((a.family_batch, 3, a.family_size,
                                                  a.family_size), dtype=np.float32)
            imagenet.append((name, a.family_batch, path, xf))
    evals = {}  # name → label of the training rows also compared in evaluation
    for name in (train_families.MODELS if a.eval_families == "all"
                 else [f for f in a.eval_families.split(",") if f]):
        label, path, xe = train_families.export_eval(name, a.family_batch, tmp)
        evals[name] = label
        imagenet.append((name, a.family_batch, path, xe))
    # Language models: (key, batch, PyTorch class, its ids' shape, cptsim's model, table label).
    lms = []
    if a.lstm_batch:
        lms.append(("lstm_lm", a.lstm_batch, LstmLM, (LM_BPTT, a.lstm_batch), "zoo:lstm-lm",
                    f"LSTM LM training ({a.lstm_batch} streams × {LM_BPTT} tokens, sequences per "
                    "CPU-second) vs PyTorch nn.LSTM"))
    if a.transformer_batch:
        lms.append(("transformer_lm", a.transformer_batch, TransformerLM,
                    (a.transformer_batch, TLM_T), "zoo:transformer-lm",
                    f"Transformer LM training ({a.transformer_batch} × {TLM_T} tokens, sequences "
                    "per CPU-second) vs PyTorch nn.TransformerEncoder"))
    if a.gru_batch:
        gru_path = os.path.join(tmp, "gru_lm.onnx")
        export_gru_lm(gru_path, a.gru_batch)
        lms.append(("gru_lm", a.gru_batch, GruLM, (LM_BPTT, a.gru_batch), gru_path,
                    f"GRU LM training, its ONNX export ({a.gru_batch} streams × {LM_BPTT} "
                    "tokens, sequences per CPU-second) vs PyTorch nn.GRU"))
    trained = [train_families.Row(n, a.train_batch, tmp) for n in
               (train_families.MODELS if a.train_families == "all"
                else [f for f in a.train_families.split(",") if f])]
    first_last_fp32 = ("--quantize-first", "false", "--quantize-last", "false")
    rows = []
    print(f"torch {torch.__version__}, onnxruntime {ort.__version__}; batch {BATCH}, "
          f"{a.steps} timed steps per run, 1 thread each; images per CPU-second")
    for r in range(a.rounds):
        load = loadavg()
        row = {}
        if not a.only_families:
            row = {
                "torch_fp32": torch_train(d, 0, a.steps),
                "cptsim_fp32": cptsim_train(a.cptsim, f"zoo:resnet{d}", BATCH, "none", a.steps),
                "torch_fq8": torch_train(d, 8, a.steps),
                "cptsim_sbm8": cptsim_train(a.cptsim, f"zoo:resnet{d}", BATCH, "sbm", a.steps),
                "ort_eval": ort_forward(onnx_path, x, a.steps * 3),
                "cptsim_eval": cptsim_eval(a.cptsim, onnx_path, a.steps * 3),
            }
        for name, batch, path, xi in imagenet:
            row[f"ort_eval_{name}"] = ort_forward(path, xi, a.imagenet_passes)
            row[f"cptsim_eval_{name}"] = cptsim_eval(a.cptsim, path, a.imagenet_passes, batch)
        # An LM step is ~10 ms against ~150 for ResNet-20's: ten times the steps.
        for key, batch, model, ids_shape, spec, _ in lms:
            row[f"torch_{key}"] = lm_rate(model, ids_shape, batch, 10 * a.steps)
            row[f"cptsim_{key}"] = cptsim_train(a.cptsim, spec, batch, "none", 10 * a.steps)
        for t in trained:
            for bits, q in ((0, "none"), (8, "sbm")):
                row[f"torch_{t.name}_{bits}"] = t.torch_rate(a.steps, bits, QuantSTE.apply,
                                                             GradSR.apply, sgd_rate)
                row[f"cptsim_{t.name}_{bits}"] = cptsim_train(a.cptsim, t.path, t.batch, q,
                                                              a.steps, first_last_fp32)
        rows.append(row)
        print(f"round {r + 1} (loadavg {load} → {loadavg()}): " +
              ", ".join(f"{k} {v:.1f}" for k, v in row.items()))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    work = "1 thread" if a.only_families else f"ResNet-{d}, batch {BATCH}, 1 thread"
    print(f"\n| work ({work}) | cptsim | peer | cptsim / peer |")
    print("|---|---|---|---|")
    for label, c, p in () if a.only_families else (("training fp32 vs PyTorch fp32", "cptsim_fp32", "torch_fp32"),
                        ("training 8/8: SBM vs PyTorch fake-quant", "cptsim_sbm8", "torch_fq8"),
                        ("eval forward vs onnxruntime (same ONNX file)", "cptsim_eval",
                         "ort_eval")):
        print(f"| {label} | {med[c]:.1f} | {med[p]:.1f} | {med[c] / med[p]:.2f} |")
    for name, batch, _, _ in imagenet:
        c, p = med[f"cptsim_eval_{name}"], med[f"ort_eval_{name}"]
        size = a.family_size if name in names else 224
        label = (f"{evals[name]} eval (batch {batch})" if name in evals
                 else f"ImageNet {name} eval (batch {batch}, {size}×{size})")
        print(f"| {label} vs onnxruntime (same ONNX file) | {c:.1f} | {p:.1f} | {c / p:.2f} |")
    for name, why in broken:
        print(f"| ImageNet {name} eval | — | — | does not run: {why} |")
    for key, _, _, _, _, label in lms:
        c, p = med[f"cptsim_{key}"], med[f"torch_{key}"]
        print(f"| {label} | {c:.1f} | {p:.1f} | {c / p:.2f} |")
    for t in trained:
        for bits, what in ((0, "fp32 vs PyTorch fp32"), (8, "8/8: SBM vs PyTorch fake-quant")):
            c, p = med[f"cptsim_{t.name}_{bits}"], med[f"torch_{t.name}_{bits}"]
            print(f"| {t.label} training {what} (batch {t.batch}, samples per CPU-second) | "
                  f"{c:.1f} | {p:.1f} | {c / p:.2f} |")
    print(f"(medians over {a.rounds} rounds)")


if __name__ == "__main__":
    sys.exit(main())
