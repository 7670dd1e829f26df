"""Training rows beyond the CIFAR ResNets: the same PyTorch module trained by PyTorch and, from
its ONNX export, by cptsim.

Each model is built with random init (seed 0) and exported by the legacy exporter in training
mode (BatchNorm with batch statistics, Dropout kept), at a fixed batch, so both sides train the
same network on the same input shapes. PyTorch's 8/8 fake-quant wraps every `Conv2d` and `Linear`
module but the first and the last in peers.py's min-max quantizers (weights and inputs, straight
through; the output gradient with stochastic rounding); cptsim runs SBM 8/8 with its first and
last layer in fp32 too (`--quantize-first false --quantize-last false`).
"""

import os
import types
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

# Sequence length and vocabulary of the BERT row.
BERT_T, BERT_VOCAB = 64, 1000


def _torchvision(name, size, **kw):
    import torchvision

    def build():
        return torchvision.models.get_model(name, weights=None, num_classes=10, **kw)

    return build, lambda b: torch.rand(b, 3, size, size), 10


def _vit():
    from torchvision.models.vision_transformer import VisionTransformer

    def build():
        return VisionTransformer(image_size=32, patch_size=4, num_layers=2, num_heads=4,
                                 hidden_dim=128, mlp_dim=512, num_classes=10)

    return build, lambda b: torch.rand(b, 3, 32, 32), 10


class _Logits(nn.Module):
    """A Hugging Face classifier returning its logits tensor (what the exporter traces)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, ids):
        return self.inner(input_ids=ids).logits


def _bert():
    from transformers import BertConfig, BertForSequenceClassification

    def build():
        cfg = BertConfig(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                         intermediate_size=512, vocab_size=BERT_VOCAB,
                         max_position_embeddings=BERT_T, num_labels=2)
        return _Logits(BertForSequenceClassification(cfg))

    return build, lambda b: torch.randint(0, BERT_VOCAB, (b, BERT_T)), 2


# name → (label, maker of (build, input of batch b, classes)).
MODELS = {
    "mobilenet_v2": ("MobileNetV2, 32×32 images, 10 classes",
                     lambda: _torchvision("mobilenet_v2", 32)),
    # Stochastic depth off: cptsim imports a training-mode export's as the identity.
    "efficientnet_b0": ("EfficientNet-B0 (no stochastic depth), 32×32 images, 10 classes",
                        lambda: _torchvision("efficientnet_b0", 32, stochastic_depth_prob=0.0)),
    "vit": ("ViT (2 layers, hidden 128, patch 4), 32×32 images", _vit),
    "bert": (f"BERT (2 layers, hidden 128), {BERT_T}-token sequences, 2 classes", _bert),
}


def fake_quant(net, bits, quant_ste, grad_sr):
    """Wraps every Conv2d and Linear of `net` but the first and the last in min-max fake-quant
    (activations out of place: an in-place one would write into the gradient quantizer's view)."""
    for m in net.modules():
        if getattr(m, "inplace", False) is True:
            m.inplace = False
    layers = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    for m in layers[1:-1]:
        if isinstance(m, nn.Conv2d):
            def fwd(self, x):
                y = F.conv2d(quant_ste(x, bits), quant_ste(self.weight, bits), self.bias,
                             self.stride, self.padding, self.dilation, self.groups)
                return grad_sr(y, bits)
        else:
            def fwd(self, x):
                return grad_sr(F.linear(quant_ste(x, bits), quant_ste(self.weight, bits),
                                        self.bias), bits)
        m.forward = types.MethodType(fwd, m)
    return net


def export_eval(name, batch, tmp):
    """`name` in eval mode exported at `batch` (the file onnxruntime and `cptsim bench eval`
    both run): its label, the file's path and an input of that batch as a NumPy array."""
    label, make = MODELS[name]
    build, make_input, _ = make()
    path = os.path.join(tmp, f"eval-{name}.onnx")
    torch.manual_seed(0)
    net = build().eval()
    x = make_input(batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), path, input_names=["x"], dynamo=False)
    return label, path, x.numpy()


class Row:
    """One model of the table: its export for cptsim and its PyTorch training rate."""

    def __init__(self, name, batch, tmp):
        self.name, self.batch = name, batch
        self.label, make = MODELS[name]
        self.build, self.input, self.classes = make()
        self.path = os.path.join(tmp, f"train-{name}.onnx")
        torch.manual_seed(0)
        net = self.build().train()
        x = self.input(batch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (x,), self.path, input_names=["x"], dynamo=False,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)

    def torch_rate(self, steps, bits, quant_ste, grad_sr, sgd_rate):
        """PyTorch's samples per CPU-second of `steps` SGD steps on one batch (peers.py's
        `sgd_rate`), at fp32 or with `bits`-bit fake-quant."""
        torch.manual_seed(0)
        net = self.build().train()
        if bits:
            fake_quant(net, bits, quant_ste, grad_sr)
        x = self.input(self.batch)
        y = torch.arange(self.batch) % self.classes
        return sgd_rate(net, x, y, self.batch, steps)
