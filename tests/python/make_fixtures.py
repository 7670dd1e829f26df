"""Writes the small ONNX fixtures in tests/fixtures/ with real PyTorch exporters.

Run from the repository root with a venv holding torch, onnx, onnxscript:
    /path/to/venv/bin/python tests/python/make_fixtures.py
Each fixture is a few KB; the Rust import tests read all of them.
"""

import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures")
torch.manual_seed(0)
warnings.filterwarnings("ignore")


class Mixed(nn.Module):
    """Conv/BN/ReLU, ReLU6 (Clip), residual Add, MaxPool/AvgPool, F.pad, Concat, Slice,
    Sigmoid, MatMul and a view(x.size(0), -1) flatten."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.proj = nn.Conv2d(8, 16, 1, stride=2, bias=False)
        self.bnp = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.fc = nn.Linear(16 * 4 * 4 + 4, 10)
        self.w = nn.Parameter(torch.randn(10, 10) * 0.1)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu6(self.bn2(self.conv2(x)) + x)
        y = self.bn3(self.conv3(x)) + self.bnp(self.proj(x))
        y = F.relu(y)
        y = self.dw(F.pad(y, (1, 0, 0, 1))[:, :, 1:, :-1])
        y = F.max_pool2d(y, 2)
        z = F.avg_pool2d(y, 2, stride=1, padding=1, count_include_pad=False)
        z = z[:, :4, 1:2, 1:2].reshape(z.size(0), -1)
        y = torch.cat([y.view(y.size(0), -1), z], dim=1)
        y = self.fc(y)
        return torch.sigmoid(y) @ self.w


class TinyEval(nn.Module):
    """Conv + BN in eval mode: the exporter folds BN into the conv."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = x.mean(dim=(2, 3))
        return self.fc(x)


class NormCNN(nn.Module):
    """Input normalisation inside the model (`(x - mean) / std` with constant buffers: Sub and
    Div), conv + BN (folded into the conv's bias by an eval-mode export), and the Clip variants:
    ReLU6, Hardtanh(-1, 1), clamp with a min only and with a max only."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.25, 0.2, 0.3]).view(1, 3, 1, 1))
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = (x - self.mean) / self.std
        x = F.relu6(self.bn1(self.conv1(x)))
        x = F.hardtanh(self.conv2(x), -1.0, 1.0)
        x = F.max_pool2d(torch.clamp(x, min=-0.5), 2)
        x = self.conv3(x).clamp(max=3.0)
        return self.fc(F.relu(x).flatten(1))


class SELayer(nn.Module):
    """Squeeze-and-excitation in its common form (Hu et al.): global pool, Linear, ReLU, Linear,
    Sigmoid, `view(b, c, 1, 1)`, a broadcasting Mul."""

    def __init__(self, c, r=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(c, c // r, bias=False), nn.ReLU(inplace=True),
                                nn.Linear(c // r, c, bias=False), nn.Sigmoid())

    def forward(self, x):
        b, c, _, _ = x.size()
        y = F.adaptive_avg_pool2d(x, 1).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y.expand_as(x)


class SEConv(nn.Module):
    """Squeeze-and-excitation as torchvision's `SqueezeExcitation` writes it: 1×1 convs on the
    pooled `[N, C, 1, 1]`, then `x * scale`."""

    def __init__(self, c, r=4):
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        scale = F.adaptive_avg_pool2d(x, 1)
        scale = torch.sigmoid(self.fc2(F.relu(self.fc1(scale))))
        return x * scale


class SECNN(nn.Module):
    """A small CNN with both SE forms."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.se1 = SELayer(16)
        self.conv2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.se2 = SEConv(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.se1(F.relu(self.bn1(self.conv1(x))))
        x = self.se2(F.relu(self.bn2(self.conv2(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ShuffleAttn(nn.Module):
    """Reshapes whose targets hold the batch: ShuffleNetV2's channel shuffle
    (`view(n, 2, c // 2, h, w)`, transpose, `view(n, c, h, w)`), a ViT's patches
    (`reshape(n, c, h * w)`) and `nn.MultiheadAttention`, whose legacy export merges the batch
    with the heads (`[T, n * heads, d]`)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.attn = nn.MultiheadAttention(8, 4)
        self.fc = nn.Linear(16 * 8, 5)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        n, c, h, w = x.size()
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        x = F.relu(self.conv2(x))
        t = x.reshape(n, c, h * w).permute(2, 0, 1)
        t, _ = self.attn(t, t, t, need_weights=False)
        return self.fc(t.permute(1, 0, 2).reshape(n, -1))


def export_fixed_batch(model, shape, name, opset):
    """A legacy export with the batch of `shape` fixed (no dynamic axis): the batch is a
    number in every reshape target."""
    path = os.path.join(OUT, name)
    torch.onnx.export(model, torch.randn(*shape), path, opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"], training=torch.onnx.TrainingMode.EVAL)
    return path


def export_legacy(model, shape, name, opset, training=False):
    path = os.path.join(OUT, name)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, torch.randn(*shape), path, opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=mode, do_constant_folding=not training)
    return path


def export_dynamo(model, shape, name, opset):
    path = os.path.join(OUT, name)
    batch = torch.export.Dim("N", min=2)
    torch.onnx.export(model, (torch.randn(*shape),), path, dynamo=True, opset_version=opset,
                      input_names=["x"], output_names=["y"], dynamic_shapes=({0: batch},),
                      external_data=False)
    return path


def bad_models(fresh=lambda name: True):
    """Small hand-built models, each broken in one way, for the bad-input tests (those `fresh`
    accepts)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inits, x_dims=("N", 3, 4, 4), y_dims=("N", 2, 4, 4)):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_dims))
        g = helper.make_graph(nodes, "bad", [x], [y], [numpy_helper.from_array(a, n) for n, a in inits])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    w = np.ones((2, 3, 1, 1), np.float32)
    cases = {
        "bad_unsupported_op.onnx": model([helper.make_node("LRN", ["x"], ["y"], name="norm1", size=3)], []),
        "bad_missing_initializer.onnx": model([helper.make_node("Conv", ["x", "conv1.weight"], ["y"], name="conv1")], []),
        "bad_inconsistent_shapes.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], [("w", np.ones((2, 5, 1, 1), np.float32))]),
        "bad_conv_weight_rank.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], [("w", np.ones((2, 3, 1), np.float32))]),
        "bad_zero_size_dim.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], [("w", w)], x_dims=("N", 3, 0, 4)),
        "bad_cycle.onnx": model(
            [helper.make_node("Add", ["x", "r"], ["a"], name="add1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu1"),
             helper.make_node("Conv", ["r", "w"], ["y"], name="conv1")], [("w", w)]),
        "bad_duplicate_output.onnx": model(
            [helper.make_node("Relu", ["x"], ["h"], name="relu1"),
             helper.make_node("Sigmoid", ["x"], ["h"], name="sigmoid1"),
             helper.make_node("Conv", ["h", "w"], ["y"], name="conv1")], [("w", w)]),
        "bad_negative_bn_variance.onnx": model(
            [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["h"], name="bn1"),
             helper.make_node("Conv", ["h", "w"], ["y"], name="conv1")],
            [("s", np.ones(3, np.float32)), ("b", np.zeros(3, np.float32)),
             ("m", np.zeros(3, np.float32)), ("v", np.array([1.0, -0.5, 1.0], np.float32)),
             ("w", w)]),
        "bad_symbolic_image_size.onnx": model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], [("w", w)],
            x_dims=("N", 3, "H", "W"), y_dims=("N", 2, "H", "W")),
    }
    written = []
    for name, m in cases.items():
        if not fresh(name):
            continue
        path = os.path.join(OUT, name)
        onnx.save(m, path)
        written.append(path)
    return written


def op_types(path):
    import onnx
    return [n.op_type for n in onnx.load(path).graph.node]


def main():
    """Writes the fixtures that do not exist yet (`--force`: all of them). Re-exporting an
    existing one with another torch version would change bytes the tests were written against."""
    os.makedirs(OUT, exist_ok=True)
    force = "--force" in sys.argv[1:]
    fresh = lambda name: force or not os.path.exists(os.path.join(OUT, name))
    mixed = Mixed().eval()
    tiny = TinyEval().eval()
    torch.manual_seed(1)
    norm = NormCNN().eval()
    se = SECNN().eval()
    # BN statistics that are not the identity, so folding them changes the conv's weights
    for m in (norm, se):
        for bn in m.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.uniform_(-0.2, 0.2)
                bn.running_var.uniform_(0.5, 2.0)
    written = []
    legacy = [
        (mixed, (2, 3, 16, 16), "mixed_legacy_opset11.onnx", 11, False),
        (Mixed().train(), (2, 3, 16, 16), "mixed_legacy_opset14_train.onnx", 14, True),
        (tiny, (2, 1, 6, 6), "tiny_legacy_folded_bn.onnx", 13, False),
        (norm, (2, 3, 16, 16), "norm_clip_legacy_opset13.onnx", 13, False),
        (se, (2, 3, 16, 16), "se_legacy_opset13.onnx", 13, False),
    ]
    for model, shape, name, opset, training in legacy:
        if fresh(name):
            written.append(export_legacy(model, shape, name, opset, training=training))
    # The dynamo exporter's file is kept only where its graph differs from the legacy one.
    dynamo = [
        (mixed, (2, 3, 16, 16), "mixed_dynamo_opset18.onnx", None),
        (tiny, (2, 1, 6, 6), "tiny_dynamo_opset20.onnx", None),
        (norm, (2, 3, 16, 16), "norm_clip_dynamo_opset18.onnx", "norm_clip_legacy_opset13.onnx"),
        (se, (2, 3, 16, 16), "se_dynamo_opset18.onnx", "se_legacy_opset13.onnx"),
    ]
    for model, shape, name, twin in dynamo:
        if not fresh(name):
            continue
        try:
            path = export_dynamo(model, shape, name, int(name.split("opset")[1][:2]))
        except Exception as e:  # the dynamo exporter is optional tooling
            print(f"dynamo export of {name} failed: {e}")
            continue
        if twin and op_types(path) == op_types(os.path.join(OUT, twin)):
            print(f"{name}: same graph as {twin}, not kept")
            os.remove(path)
            continue
        written.append(path)
    if fresh("shuffle_attn_fixed_batch2.onnx"):
        written.append(export_fixed_batch(ShuffleAttn().eval(), (2, 3, 8, 8),
                                          "shuffle_attn_fixed_batch2.onnx", 14))
    written += bad_models(fresh)
    for p in written:
        print(p, os.path.getsize(p))


if __name__ == "__main__":
    main()
