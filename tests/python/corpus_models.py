"""The models of the users' corpus, built with random init and no downloads.

Each entry is a `Case`: a name, a family, a builder returning an `nn.Module` in eval mode, the
example inputs it is exported with, and what the checker needs to know about its input (shape,
token vocabulary, which axis is the batch). `make_corpus.py` exports every case with both of
PyTorch's exporters; `check_corpus.py` reads the manifest it writes.

Families:
- `torchvision`: every classification model `torchvision.models.list_models` lists, at its
  builder's defaults (weights=None), on the smallest image of IMAGE_LADDER it accepts (ViT's
  builders fix 224), plus `vit_b_16` built for 64×64 images (`image_size=64`);
- `transformers`: Hugging Face BERT, DistilBERT and RoBERTa sequence classifiers, GPT-2 with its LM
  head and a ViT image classifier, 2 layers of hidden size 128;
- `wlm`: PyTorch's word-language-model RNNModel (LSTM, GRU) and TransformerModel, sequence first
  `[35, 4]`, exported as that example exports them (ids and the initial hidden state as inputs,
  static shapes);
- `seqcls`: bidirectional LSTM and GRU sentence classifiers, batch first.
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGE_LADDER = (64, 96, 128, 160, 224)
BATCH = 2
VOCAB = 1000
# HF sequence length and the word-language-model's bptt × batch.
HF_SEQ = 16
WLM_SEQ, WLM_BATCH = 35, 4


@dataclass
class Case:
    name: str
    family: str
    build: object  # () -> nn.Module (eval mode)
    inputs: object  # (module) -> tuple of example tensors
    # What the checker feeds: "image" (float NCHW), "tokens" (int64 ids in [0, vocab)).
    kind: str
    shape: list
    vocab: int = 0
    batch_axis: int = 0
    # Legacy exporter: dynamic axes of the first input ({} = static, as the example exports).
    dynamic: dict = field(default_factory=lambda: {0: "batch"})
    out_dynamic: dict = field(default_factory=lambda: {0: "batch"})
    note: str = ""


# ---------------------------------------------------------------- torchvision


def torchvision_cases():
    import torchvision

    cases = []
    for name in torchvision.models.list_models(module=torchvision.models):
        cases.append(_tv_case(name, name, {}))
    cases.append(_tv_case("vit_b_16_img64", "vit_b_16", {"image_size": 64},
                          note="vit_b_16 built for 64x64 images (image_size=64)"))
    return cases


def _tv_case(label, builder, kwargs, note=""):
    import torchvision

    def build():
        torch.manual_seed(0)
        model = torchvision.models.get_model(builder, weights=None, **kwargs).eval()
        return draw_zero_weights(model)

    def inputs(model, above=0):
        size = _smallest_image(model, above)
        return (torch.randn(BATCH, 3, size, size),)

    return Case(label, "torchvision", build, inputs, "image", [], note=note)


def draw_zero_weights(model):
    """`model` with every Linear or convolution weight that its init left all zero (torchvision's
    ViT head) drawn from N(0, 0.02²): with a zero head every output is 0 whatever the network
    before it computes, and comparing outputs would check nothing. A trained model has no such
    weight either."""
    gen = torch.Generator().manual_seed(1)
    kinds = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, kinds) and not m.weight.any():
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.02)
    return model


def _smallest_image(model, above=0):
    """The first size of IMAGE_LADDER above `above` that the model's forward pass accepts."""
    last = None
    for size in [s for s in IMAGE_LADDER if s > above]:
        try:
            with torch.no_grad():
                model(torch.randn(BATCH, 3, size, size))
            return size
        except Exception as e:  # too small for the architecture: try the next size
            last = e
    raise RuntimeError(f"no image size of {IMAGE_LADDER} runs: {last}")


# ---------------------------------------------------------------- Hugging Face


class LogitsOnly(nn.Module):
    """A Transformers model called with one input, returning only `.logits`."""

    def __init__(self, model, arg):
        super().__init__()
        self.model, self.arg = model, arg

    def forward(self, x):
        return self.model(**{self.arg: x}).logits


def hf_cases():
    import transformers as tf

    small = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                 intermediate_size=512, vocab_size=VOCAB)
    token_specs = [
        ("hf_bert", tf.BertForSequenceClassification, tf.BertConfig,
         dict(small, max_position_embeddings=64, num_labels=4)),
        ("hf_distilbert", tf.DistilBertForSequenceClassification, tf.DistilBertConfig,
         dict(vocab_size=VOCAB, max_position_embeddings=64, n_layers=2, dim=128, n_heads=2,
              hidden_dim=512, num_labels=4)),
        ("hf_roberta", tf.RobertaForSequenceClassification, tf.RobertaConfig,
         dict(small, max_position_embeddings=66, num_labels=4)),
        ("hf_gpt2", tf.GPT2LMHeadModel, tf.GPT2Config,
         dict(vocab_size=VOCAB, n_positions=64, n_embd=128, n_layer=2, n_head=2)),
    ]
    cases = [_hf_case(n, m, c, kw, "input_ids", "tokens", [BATCH, HF_SEQ])
             for n, m, c, kw in token_specs]
    vit = dict(small, image_size=32, patch_size=8, num_labels=10)
    del vit["vocab_size"]
    cases.append(_hf_case("hf_vit", tf.ViTForImageClassification, tf.ViTConfig, vit,
                          "pixel_values", "image", [BATCH, 3, 32, 32]))
    return cases


def _hf_case(name, model_cls, config_cls, config, arg, kind, shape):
    # `attn` is chosen by make_corpus: the default (SDPA) first, "eager" if that does not export.
    def build(attn=None):
        torch.manual_seed(0)
        kw = dict(config) if attn is None else dict(config, attn_implementation=attn)
        return LogitsOnly(model_cls(config_cls(**kw)).eval(), arg).eval()

    def inputs(_model):
        torch.manual_seed(1)
        if kind == "tokens":
            return (torch.randint(0, VOCAB, shape),)
        return (torch.randn(*shape),)

    dynamic = {0: "batch", 1: "seq"} if kind == "tokens" else {0: "batch"}
    case = Case(name, "transformers", build, inputs, kind, shape,
                vocab=VOCAB if kind == "tokens" else 0, dynamic=dynamic)
    if name == "hf_gpt2":  # logits per token
        case.out_dynamic = dynamic
    case.attn_choice = True
    return case


# ---------------------------------------------------------------- word language model
# The architecture of PyTorch's examples/word_language_model/model.py, defaults emsize = nhid =
# 200, 2 layers, 2 heads, dropout 0.2, with a vocabulary of VOCAB words; inputs [T, B].


class RecurrentLM(nn.Module):
    """Embedding → dropout → LSTM/GRU → dropout → linear decoder → log-softmax over the words of
    every (step, sequence), flattened to [T·B, vocab]; returns the final hidden state too."""

    def __init__(self, cell, vocab=VOCAB, width=200, layers=2, dropout=0.2):
        super().__init__()
        self.cell, self.vocab = cell, vocab
        self.embed = nn.Embedding(vocab, width)
        self.drop = nn.Dropout(dropout)
        self.rnn = getattr(nn, cell)(width, width, layers, dropout=dropout)
        self.decoder = nn.Linear(width, vocab)
        self.layers, self.width = layers, width
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, ids, hidden):
        out, hidden = self.rnn(self.drop(self.embed(ids)), hidden)
        logits = self.decoder(self.drop(out)).view(-1, self.vocab)
        return F.log_softmax(logits, dim=1), hidden

    def zero_state(self, batch):
        h = torch.zeros(self.layers, batch, self.width)
        return (h, h.clone()) if self.cell == "LSTM" else h


class SinusoidalPositions(nn.Module):
    """Adds sin/cos position codes of a `[max_len, 1, d]` buffer to a `[T, B, d]` input."""

    def __init__(self, d, dropout, max_len=5000):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        table = torch.zeros(max_len, 1, d)
        table[:, 0, 0::2] = torch.sin(pos * freq)
        table[:, 0, 1::2] = torch.cos(pos * freq)
        self.register_buffer("table", table)

    def forward(self, x):
        return self.drop(x + self.table[: x.size(0)])


class TransformerLM(nn.Module):
    """Embedding scaled by √d → sinusoidal positions → post-norm TransformerEncoder (sequence
    first, ReLU FFN) under a causal mask built from the input's length (log of a lower
    triangle of ones: 0 / −inf) → linear decoder → log-softmax."""

    def __init__(self, vocab=VOCAB, d=200, heads=2, ffn=200, layers=2, dropout=0.2):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d)
        self.pos = SinusoidalPositions(d, dropout)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(d, vocab)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, ids):
        t = ids.size(0)
        mask = torch.log(torch.tril(torch.ones(t, t, device=ids.device)))
        x = self.pos(self.embed(ids) * math.sqrt(self.d))
        return F.log_softmax(self.decoder(self.encoder(x, mask)), dim=-1)


def wlm_cases():
    def ids(_model):
        torch.manual_seed(1)
        return torch.randint(0, VOCAB, (WLM_SEQ, WLM_BATCH))

    def rnn(cell):
        def build():
            torch.manual_seed(0)
            return RecurrentLM(cell).eval()

        return Case(f"wlm_{cell.lower()}", "wlm", build,
                    lambda m: (ids(m), m.zero_state(WLM_BATCH)), "tokens",
                    [WLM_SEQ, WLM_BATCH], vocab=VOCAB, batch_axis=1, dynamic={},
                    note="inputs ids [35, 4] and the zero initial state, static (as the example "
                         "exports)")

    def transformer():
        torch.manual_seed(0)
        return TransformerLM().eval()

    return [rnn("LSTM"), rnn("GRU"),
            Case("wlm_transformer", "wlm", transformer, lambda m: (ids(m),), "tokens",
                 [WLM_SEQ, WLM_BATCH], vocab=VOCAB, batch_axis=1, dynamic={},
                 note="ids [35, 4], static (as the example exports)")]


# ---------------------------------------------------------------- sequence classifiers


class BiRnnClassifier(nn.Module):
    """Embedding → one bidirectional LSTM/GRU layer (batch first) → the two directions' final
    hidden states concatenated → linear over 4 classes."""

    def __init__(self, cell, vocab=VOCAB, width=64, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = getattr(nn, cell)(width, width, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, ids):
        _, h = self.rnn(self.embed(ids))
        if isinstance(h, tuple):
            h = h[0]
        return self.head(torch.cat([h[-2], h[-1]], dim=1))


def seqcls_cases():
    def case(cell):
        def build():
            torch.manual_seed(0)
            return BiRnnClassifier(cell).eval()

        def inputs(_m):
            torch.manual_seed(1)
            return (torch.randint(0, VOCAB, (BATCH, HF_SEQ)),)

        return Case(f"bi{cell.lower()}_classifier", "seqcls", build, inputs, "tokens",
                    [BATCH, HF_SEQ], vocab=VOCAB, dynamic={0: "batch", 1: "seq"})

    return [case("LSTM"), case("GRU")]


# Over 80 M parameters: exported and checked last (minutes each on 2 cores).
LARGE = {"vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
         "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14", "regnet_y_128gf",
         "regnet_y_32gf", "regnet_x_32gf", "convnext_large", "convnext_base",
         "efficientnet_v2_l", "swin_b", "swin_v2_b", "wide_resnet101_2", "resnext101_64x4d"}


# One model of each torchvision architecture family the CI subset lacks: exported right after
# the CI subset and the other families, so that a partial run covers every architecture.
FIRST_OF_FAMILY = {"inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2",
                   "mobilenet_v3_large", "regnet_x_400mf", "regnet_y_400mf", "resnext50_32x4d",
                   "swin_t", "swin_v2_t", "efficientnet_v2_s", "wide_resnet50_2", "resnet50",
                   "squeezenet1_0", "shufflenet_v2_x1_0", "vgg11", "vit_b_16"}


def all_cases():
    """Every case: those with a file in CI_SUBSET first, then the other families, then one
    torchvision model per architecture (FIRST_OF_FAMILY), then the rest, the LARGE ones last."""
    cases = torchvision_cases() + hf_cases() + wlm_cases() + seqcls_cases()
    ci = {stem.rsplit("_", 1)[0] for stem in CI_SUBSET}
    return sorted(cases, key=lambda c: (c.name not in ci, c.family == "torchvision",
                                        c.name not in FIRST_OF_FAMILY, c.name in LARGE))


def stems(subset="all"):
    """Every file name (without .onnx) of the corpus or of its CI subset, in export order."""
    every = [f"{c.name}_{e}" for c in all_cases() for e in ("legacy", "dynamo")]
    return [s for s in every if subset == "all" or s in CI_SUBSET]


# ≈ 15 files covering every family and both exporters, cheap enough for CI.
CI_SUBSET = [
    "resnet18_legacy", "resnet18_dynamo", "mobilenet_v3_small_legacy",
    "shufflenet_v2_x0_5_dynamo", "squeezenet1_1_legacy", "googlenet_legacy",
    "densenet121_legacy", "efficientnet_b0_dynamo", "convnext_tiny_legacy",
    "vit_b_16_img64_dynamo", "hf_bert_legacy", "hf_gpt2_dynamo", "wlm_lstm_legacy",
    "wlm_transformer_legacy", "bilstm_classifier_legacy",
]
