"""Writes the sequence-model ONNX fixtures in tests/fixtures/seq/ with real PyTorch exporters.

Run from the repository root with a venv holding torch, onnx, onnxscript:
    /path/to/venv/bin/python tests/python/make_seq_fixtures.py
The models are tiny (a few KB to ~100 KB); tests/tests/seq_import.rs imports every one, and
check_forward.py compares cptsim's forward pass with onnxruntime's on each (token-id inputs at
batch B and T tokens).
"""

import os
import warnings

import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "seq")
torch.manual_seed(0)
warnings.filterwarnings("ignore")

VOCAB, EMB, HID, T, B = 50, 16, 24, 7, 3


class RnnLM(nn.Module):
    """PyTorch's examples/word_language_model RNNModel: ids [T, B] → embedding → RNN → decoder
    (logits only; the example's log_softmax is left out)."""

    def __init__(self, cell, layers):
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, EMB)
        self.rnn = getattr(nn, cell)(EMB, HID, layers)
        self.decoder = nn.Linear(HID, VOCAB)

    def forward(self, ids):
        out, _ = self.rnn(self.encoder(ids))
        return self.decoder(out)


class TransformerLM(nn.Module):
    """A causal Transformer LM on ids [B, T]: embedding, learned positions, pre-norm
    TransformerEncoder with GELU, a precomputed causal mask sliced to the sequence."""

    def __init__(self, d=32, heads=4, layers=2, max_len=16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.randn(1, max_len, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB)
        mask = torch.triu(torch.full((max_len, max_len), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, ids):
        t = ids.size(1)
        x = self.embed(ids) + self.pos[:, :t]
        x = self.encoder(x, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(x))


class TinyViT(nn.Module):
    """torchvision's VisionTransformer layout at toy size: conv patch embedding, class token
    expanded over the batch, learned positions, pre-norm blocks with GELU, x[:, 0] head."""

    def __init__(self, image=16, patch=8, d=32, heads=2, layers=2, classes=10):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, d, patch, stride=patch)
        n = (image // patch) ** 2
        self.class_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos_embedding = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.heads = nn.Linear(d, classes)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        x = self.ln(self.encoder(x))
        return self.heads(x[:, 0])


class BiGruClassifier(nn.Module):
    """A sentence classifier on ids [B, T]: embedding → one bidirectional GRU (batch first) →
    the two directions' final states concatenated → linear over 3 classes."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.GRU(EMB, HID, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * HID, 3)

    def forward(self, ids):
        _, h = self.rnn(self.embed(ids))
        return self.head(torch.cat([h[-2], h[-1]], dim=1))


def export_classifier():
    """The sentence classifier, legacy exporter, batch and sequence symbolic, one output row
    per sequence."""
    path = os.path.join(OUT, "bigru_classifier_legacy_opset14.onnx")
    torch.manual_seed(3)
    torch.onnx.export(BiGruClassifier().eval(), (ids((B, T)),), path, opset_version=14,
                      dynamo=False, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch"}})
    return path


def ids(shape):
    return torch.randint(0, VOCAB, shape)


def export_legacy(model, x, name, opset, axes):
    path = os.path.join(OUT, name)
    torch.onnx.export(model, (x,), path, opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": axes, "y": axes})
    return path


def export_dynamo(model, x, name, opset, dims):
    path = os.path.join(OUT, name)
    shapes = ({i: torch.export.Dim(n, min=2, max=16) for i, n in dims.items()},)
    torch.onnx.export(model, (x,), path, dynamo=True, opset_version=opset,
                      input_names=["x"], output_names=["y"], dynamic_shapes=shapes,
                      external_data=False)
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    written = [
        export_legacy(RnnLM("LSTM", 2).eval(), ids((T, B)), "lstm_lm_legacy_opset14.onnx", 14,
                      {0: "seq", 1: "batch"}),
        export_legacy(RnnLM("GRU", 1).eval(), ids((T, B)), "gru_lm_legacy_opset14.onnx", 14,
                      {0: "seq", 1: "batch"}),
        export_legacy(TransformerLM().eval(), ids((B, T)), "transformer_lm_legacy_opset14.onnx", 14,
                      {0: "batch", 1: "seq"}),
        export_legacy(TinyViT().eval(), torch.randn(B, 3, 16, 16), "vit_legacy_opset14.onnx", 14,
                      {0: "batch"}),
    ]
    for model, x, name, dims in [
        (TransformerLM().eval(), ids((B, T)), "transformer_lm_dynamo_opset18.onnx",
         {0: "batch", 1: "seq"}),
        (TinyViT().eval(), torch.randn(B, 3, 16, 16), "vit_dynamo_opset18.onnx", {0: "batch"}),
    ]:
        try:
            written.append(export_dynamo(model, x, name, 18, dims))
        except Exception as e:  # the dynamo exporter is optional tooling
            print(f"dynamo export of {name} failed: {e}")
    written.append(export_classifier())
    for p in written:
        print(p, os.path.getsize(p))


if __name__ == "__main__":
    main()
