"""Writes the small ONNX fixtures in tests/fixtures/ with real PyTorch exporters.

Run from the repository root with a venv holding torch, onnx, onnxscript:
    /path/to/venv/bin/python tests/python/make_fixtures.py
Each fixture is a few KB; the Rust import tests read all of them.
"""

import os
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


def bad_models():
    """Small hand-built models, each broken in one way, for the bad-input tests."""
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
    }
    written = []
    for name, m in cases.items():
        path = os.path.join(OUT, name)
        onnx.save(m, path)
        written.append(path)
    return written


def main():
    os.makedirs(OUT, exist_ok=True)
    mixed = Mixed().eval()
    tiny = TinyEval().eval()
    written = [
        export_legacy(mixed, (2, 3, 16, 16), "mixed_legacy_opset11.onnx", 11),
        export_legacy(Mixed().train(), (2, 3, 16, 16), "mixed_legacy_opset14_train.onnx", 14, training=True),
        export_legacy(tiny, (2, 1, 6, 6), "tiny_legacy_folded_bn.onnx", 13),
    ]
    for model, shape, name in [(mixed, (2, 3, 16, 16), "mixed_dynamo_opset18.onnx"),
                               (tiny, (2, 1, 6, 6), "tiny_dynamo_opset20.onnx")]:
        try:
            written.append(export_dynamo(model, shape, name, int(name.split("opset")[1][:2])))
        except Exception as e:  # the dynamo exporter is optional tooling
            print(f"dynamo export of {name} failed: {e}")
    written += bad_models()
    for p in written:
        print(p, os.path.getsize(p))


if __name__ == "__main__":
    main()
