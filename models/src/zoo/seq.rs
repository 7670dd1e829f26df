//! The zoo's sequence models and vision transformer, built straight into the layer IR: their
//! shapes, GEMMs and parameter counts are the papers' models, their weights are zeros (allocated
//! lazily, so the 0.2-billion-parameter WikiText-103 Transformer costs no memory) and the trainer
//! draws fresh ones (`--init seed`). They have no ONNX export (`zoo export` says so).
//!
//! The papers' models are for costing (`cptsim inspect`, `cptsim run`); `lstm-lm` and
//! `transformer-lm` are the same two architectures at a size the CPU trainer runs in minutes, for
//! `cptsim train --data text:FILE` (their vocabulary follows the corpus, see [`graph_with_vocab`]).
//!
//! Each entry carries the paper's training defaults (iterations, batch, sequence length), which
//! `cptsim run` uses when the flags are not given.

use ndarray::ArrayD;

use crate::ir::{Binary, ConstOperand, SliceAxis, ValueId};
use crate::ir::{BinaryKind, CellKind, Embedding, Graph, LayerNorm, Linear, Op, Recurrent};

/// A cost-only zoo model and its training defaults.
pub struct SeqEntry {
    /// Zoo name.
    pub name: &'static str,
    /// One line: what it is and where it comes from.
    pub about: &'static str,
    /// Training iterations of the paper's run.
    pub iters: u64,
    /// Samples per iteration (sequences of `seq_len` tokens, or images).
    pub batch: u64,
    /// Tokens per sample (`None` for the image model).
    pub seq_len: Option<usize>,
}

/// The entries, in listing order.
pub const ENTRIES: [SeqEntry; 5] = [
    // Baevski & Auli, "Adaptive Input Representations for Neural Language Modeling" (ICLR 2019),
    // fairseq `transformer_lm_wiki103`: 16 pre-norm decoder layers, d 1024, FFN 4096 (ReLU),
    // 16 heads, 3072-token blocks, 286 000 updates of 8 GPUs × 3 accumulated blocks (batch 24).
    // CPT (§4.1: "we follow (Baevski & Auli, 2018) for Transformer on WikiText-103"), FracTrain
    // and LDP train this setting. Modelled: every GEMM of the decoder and the adaptive softmax's
    // head (the 20 000 most frequent words + 2 cluster logits, which every token pays); not
    // modelled: the adaptive input/softmax tail bands (their cost depends on word frequencies)
    // and the sinusoidal positions (no MACs). The embedding is the head band's [20 000, 1024].
    SeqEntry {
        name: "transformer-wt103",
        about: "WikiText-103 Transformer LM of Baevski & Auli (CPT/FracTrain/LDP): 16 layers, d 1024, 16 heads, 3072 tokens (cost only)",
        iters: 286_000,
        batch: 24,
        seq_len: Some(3072),
    },
    // PyTorch examples/word_language_model, `--model LSTM --emsize 650 --nhid 650 --nlayers 2`
    // (Zaremba et al.'s "medium" PTB model): bptt 35, batch 20, 40 epochs of PTB's 929 589
    // training tokens = 40 × 1 328 iterations. CPT's Table 5 "2-LSTM PTB" reaches perplexity 96.95
    // at 8/8: between this model's fp32 ≈ 82 and the 200-unit default's ≈ 115, the medium one
    // degraded by quantization; its input is sequence-first token ids [T, B] as in the example.
    SeqEntry {
        name: "ptb-lstm",
        about: "PTB 2-layer LSTM LM (PyTorch word_language_model, 650 units), ids [T, B], bptt 35 (cost only)",
        iters: 53_120,
        batch: 20,
        seq_len: Some(35),
    },
    // Touvron et al., "Training data-efficient image transformers" (DeiT-Tiny): ViT 16×16 patches
    // of 224×224, d 192, 3 heads, 12 layers, MLP 768 (GELU), class token, learned positions;
    // 300 epochs of ImageNet (1 251 iterations of 1 024) as LDP's Table 4 trains it.
    SeqEntry {
        name: "deit-tiny",
        about: "DeiT-Tiny ViT: 16x16 patches of 224x224, d 192, 3 heads, 12 layers (cost only)",
        iters: 375_300,
        batch: 1024,
        seq_len: None,
    },
    // The PTB LSTM's architecture at CPU size: PyTorch word_language_model `RNNModel` (embedding,
    // dropout, 2 LSTMs with dropout between, dropout, decoder) with 128 units and dropout 0.2;
    // bptt 35 and batch 20 as the example.
    SeqEntry {
        name: "lstm-lm",
        about: "small 2-layer LSTM LM (word_language_model form, 128 units, dropout 0.2), ids [T, B], bptt 35; vocabulary from --data (trainable)",
        iters: 2_000,
        batch: 20,
        seq_len: Some(35),
    },
    // The WikiText-103 Transformer's form at CPU size: token embedding, learned positions, 2
    // pre-norm causal layers (d 128, 4 heads, FFN 512, GELU), final norm, linear head.
    SeqEntry {
        name: "transformer-lm",
        about: "small decoder-only Transformer LM: 2 pre-norm layers, d 128, 4 heads, GELU, learned positions, ids [B, T], 64 tokens; vocabulary from --data (trainable)",
        iters: 2_000,
        batch: 16,
        seq_len: Some(64),
    },
];

/// Vocabulary of the small LMs when no corpus sets it (bytes).
pub const SMALL_LM_VOCAB: usize = 256;

/// Whether zoo model `name` is a language model (token ids in, next-token logits out).
pub fn is_lm(name: &str) -> bool {
    matches!(
        name,
        "transformer-wt103" | "ptb-lstm" | "lstm-lm" | "transformer-lm"
    )
}

/// Whether zoo model `name` takes sequence-first token ids `[T, B]` (PyTorch's
/// word_language_model RNNs; the other LMs take `[B, T]`).
pub fn is_seq_first(name: &str) -> bool {
    matches!(name, "ptb-lstm" | "lstm-lm")
}

/// The entry called `name`.
pub fn entry(name: &str) -> Option<&'static SeqEntry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// Builds `name` at `batch` and `seq_len` (the entry's default when `None`). `spec` names the
/// model in errors.
pub fn graph(
    name: &str,
    spec: &str,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<Graph, String> {
    graph_with_vocab(name, spec, batch, seq_len, None)
}

/// [`graph`] of a language model with a vocabulary of `vocab` tokens (the model's own when
/// `None`: 10 000 for PTB, the 20 000-word head band for WikiText-103, [`SMALL_LM_VOCAB`] for the
/// small LMs). An image model with a vocabulary is an error.
pub fn graph_with_vocab(
    name: &str,
    spec: &str,
    batch: usize,
    seq_len: Option<usize>,
    vocab: Option<usize>,
) -> Result<Graph, String> {
    let e = entry(name).ok_or_else(|| format!("unknown sequence zoo model `{name}`"))?;
    if batch == 0 {
        return Err("batch must be at least 1".into());
    }
    let t = match (e.seq_len, seq_len) {
        (Some(d), s) => s.unwrap_or(d),
        (None, None) => 0,
        (None, Some(s)) => {
            return Err(format!(
                "--seq-len {s}: zoo:{name} is an image model with no sequence axis"
            ))
        }
    };
    if e.seq_len.is_some() && t == 0 {
        return Err("the sequence length must be at least 1".into());
    }
    if vocab == Some(0) || (vocab.is_some() && !is_lm(name)) {
        return Err(format!(
            "zoo:{name} takes no vocabulary of {vocab:?} tokens (language models: ptb-lstm, \
             transformer-wt103, lstm-lm, transformer-lm)"
        ));
    }
    let input = match name {
        _ if is_seq_first(name) => vec![t, batch],
        "transformer-wt103" | "transformer-lm" => vec![batch, t],
        _ => vec![batch, 3, 224, 224],
    };
    let mut b = Builder {
        g: Graph::new(name, spec, batch, "input", input),
        batch,
    };
    let small = vocab.unwrap_or(SMALL_LM_VOCAB);
    match name {
        "transformer-wt103" => b.transformer_lm(vocab.unwrap_or(20_000), 1024, 16, 16, 4096, 2)?,
        "transformer-lm" => b.small_transformer_lm(small, 128, 2, 4, 512)?,
        "ptb-lstm" => b.lstm_lm(vocab.unwrap_or(10_000), 650, 2, 0.0)?,
        "lstm-lm" => b.lstm_lm(small, 128, 2, 0.2)?,
        _ => b.vit(224, 16, 192, 3, 12, 768, 1000)?,
    }
    b.g.seq_len = e.seq_len.map(|_| t);
    Ok(b.g)
}

/// Appends IR nodes with zero parameters; the output of the last one is the graph output.
struct Builder {
    g: Graph,
    batch: usize,
}

fn zeros(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::zeros(shape.to_vec())
}

impl Builder {
    fn push(&mut self, name: &str, op: Op, inputs: Vec<ValueId>) -> Result<ValueId, String> {
        let out = self
            .g
            .push(name, op, inputs, name)
            .map_err(|m| format!("node {name}: {m}"))?;
        self.g.output = out;
        Ok(out)
    }

    fn linear(&mut self, name: &str, x: ValueId, out: usize) -> Result<ValueId, String> {
        let n = self.g.shape(x).last().copied().unwrap_or(0);
        let op = Op::Linear(Linear {
            weight: zeros(&[out, n]),
            bias: Some(zeros(&[out])),
        });
        self.push(name, op, vec![x])
    }

    fn layer_norm(&mut self, name: &str, x: ValueId) -> Result<ValueId, String> {
        let d = self.g.shape(x).last().copied().unwrap_or(0);
        let op = Op::LayerNorm(LayerNorm {
            scale: zeros(&[d]),
            bias: zeros(&[d]),
            epsilon: 1e-5,
        });
        self.push(name, op, vec![x])
    }

    fn add(&mut self, name: &str, a: ValueId, b: ValueId) -> Result<ValueId, String> {
        let op = Op::Binary(Binary {
            kind: BinaryKind::Add,
            constant: None,
        });
        self.push(name, op, vec![a, b])
    }

    /// Multi-head self-attention on `[B, T, D]` (pre-normed input `x`), causal when asked:
    /// one QKV projection, per-head scores `QKᵀ/√d_h` (`[B, h, T, T]`), softmax, `·V`, output
    /// projection.
    fn attention(
        &mut self,
        p: &str,
        x: ValueId,
        heads: usize,
        causal: bool,
    ) -> Result<ValueId, String> {
        let [b, t, d] = self.g.shape(x)[..] else {
            return Err(format!("{p}: attention input is not [B, T, D]"));
        };
        let dh = d / heads;
        let qkv = self.linear(&format!("{p}.in_proj"), x, 3 * d)?;
        let mut parts = Vec::new();
        for (i, what) in ["q", "k", "v"].iter().enumerate() {
            let sel = SliceAxis {
                axis: 2,
                start: i * d,
                len: d,
                step: 1,
            };
            let s = self.push(
                &format!("{p}.{what}"),
                Op::Slice { axes: vec![sel] },
                vec![qkv],
            )?;
            let shape = vec![b, t, heads, dh];
            let r = self.push(&format!("{p}.{what}.heads"), Op::Reshape { shape }, vec![s])?;
            // q, v: [B, h, T, dh]; k: [B, h, dh, T].
            let perm = if *what == "k" {
                vec![0, 2, 3, 1]
            } else {
                vec![0, 2, 1, 3]
            };
            parts.push(self.push(&format!("{p}.{what}.t"), Op::Transpose { perm }, vec![r])?);
        }
        let scores = self.push(&format!("{p}.qk"), Op::MatMul, vec![parts[0], parts[1]])?;
        let scale = Op::Binary(Binary {
            kind: BinaryKind::Mul,
            constant: Some(ConstOperand {
                value: ArrayD::from_elem(vec![1], 1.0 / (dh as f32).sqrt()),
                on_left: false,
            }),
        });
        let mut s = self.push(&format!("{p}.scale"), scale, vec![scores])?;
        if causal {
            s = self.push(&format!("{p}.mask"), Op::CausalMask, vec![s])?;
        }
        let a = self.push(
            &format!("{p}.softmax"),
            Op::Softmax {
                axis: 3,
                log: false,
            },
            vec![s],
        )?;
        let c = self.push(&format!("{p}.av"), Op::MatMul, vec![a, parts[2]])?;
        let perm = vec![0, 2, 1, 3];
        let c = self.push(&format!("{p}.av.t"), Op::Transpose { perm }, vec![c])?;
        let shape = vec![b, t, d];
        let c = self.push(&format!("{p}.av.merge"), Op::Reshape { shape }, vec![c])?;
        self.linear(&format!("{p}.out_proj"), c, d)
    }

    /// One pre-norm Transformer layer: `x + attn(LN(x))`, then `x + FFN(LN(x))`.
    fn block(
        &mut self,
        p: &str,
        x: ValueId,
        heads: usize,
        ffn: usize,
        causal: bool,
        gelu: bool,
    ) -> Result<ValueId, String> {
        let d = self.g.shape(x).last().copied().unwrap_or(0);
        let n = self.layer_norm(&format!("{p}.norm1"), x)?;
        let a = self.attention(&format!("{p}.attn"), n, heads, causal)?;
        let x = self.add(&format!("{p}.add1"), x, a)?;
        let n = self.layer_norm(&format!("{p}.norm2"), x)?;
        let h = self.linear(&format!("{p}.fc1"), n, ffn)?;
        let act = if gelu {
            Op::Gelu { tanh_approx: false }
        } else {
            Op::Relu
        };
        let h = self.push(&format!("{p}.act"), act, vec![h])?;
        let h = self.linear(&format!("{p}.fc2"), h, d)?;
        self.add(&format!("{p}.add2"), x, h)
    }

    /// Decoder-only LM on ids `[B, T]`: embedding of the `head_vocab` band, `layers` causal
    /// blocks, final norm, the head (`head_vocab` words + `clusters` adaptive-softmax cluster
    /// logits).
    #[allow(clippy::too_many_arguments)]
    fn transformer_lm(
        &mut self,
        head_vocab: usize,
        d: usize,
        layers: usize,
        heads: usize,
        ffn: usize,
        clusters: usize,
    ) -> Result<(), String> {
        let ids = self.g.input;
        let table = zeros(&[head_vocab, d]);
        let mut x = self.push(
            "embed_tokens",
            Op::Embedding(Embedding { table }),
            vec![ids],
        )?;
        for l in 0..layers {
            x = self.block(&format!("layers.{l}"), x, heads, ffn, true, false)?;
        }
        let x = self.layer_norm("layer_norm", x)?;
        self.linear("adaptive_softmax.head", x, head_vocab + clusters)?;
        Ok(())
    }

    /// The small decoder-only LM on ids `[B, T]`: embedding, learned positions (GPT's form),
    /// `layers` causal pre-norm blocks with GELU, final norm, a linear head over the vocabulary.
    fn small_transformer_lm(
        &mut self,
        vocab: usize,
        d: usize,
        layers: usize,
        heads: usize,
        ffn: usize,
    ) -> Result<(), String> {
        let ids = self.g.input;
        let t = self.g.shape(ids).get(1).copied().unwrap_or(1);
        let table = zeros(&[vocab, d]);
        let x = self.push("embed", Op::Embedding(Embedding { table }), vec![ids])?;
        let x = self.encoder(x, t, "layers", layers, heads, ffn, true)?;
        self.linear("head", x, vocab)?;
        Ok(())
    }

    /// Learned positions (`[positions, D]`, axis 1), `layers` pre-norm GELU blocks named
    /// `prefix.{l}`, final norm: the part the small LM and the ViT share.
    #[allow(clippy::too_many_arguments)]
    fn encoder(
        &mut self,
        x: ValueId,
        positions: usize,
        prefix: &str,
        layers: usize,
        heads: usize,
        ffn: usize,
        causal: bool,
    ) -> Result<ValueId, String> {
        let d = self.g.shape(x).last().copied().unwrap_or(0);
        let table = zeros(&[positions, d]);
        let mut x = self.push(
            "pos_embed",
            Op::PositionEmbedding { table, axis: 1 },
            vec![x],
        )?;
        for l in 0..layers {
            x = self.block(&format!("{prefix}.{l}"), x, heads, ffn, causal, true)?;
        }
        self.layer_norm("norm", x)
    }

    /// PyTorch's `RNNModel`: ids `[T, B]` → embedding → `layers` LSTMs → linear decoder, with
    /// dropout `dropout` (when above 0) after the embedding and after every LSTM.
    fn lstm_lm(
        &mut self,
        vocab: usize,
        d: usize,
        layers: usize,
        dropout: f32,
    ) -> Result<(), String> {
        let ids = self.g.input;
        let table = zeros(&[vocab, d]);
        let mut x = self.push("encoder", Op::Embedding(Embedding { table }), vec![ids])?;
        let drop = |b: &mut Self, name: String, x: ValueId| {
            if dropout > 0.0 {
                b.push(&name, Op::Dropout { ratio: dropout }, vec![x])
            } else {
                Ok(x)
            }
        };
        x = drop(self, "drop.encoder".into(), x)?;
        for l in 0..layers {
            let rec = Recurrent {
                kind: CellKind::Lstm,
                hidden: d,
                w: zeros(&[4 * d, d]),
                r: zeros(&[4 * d, d]),
                bias_w: zeros(&[4 * d]),
                bias_r: zeros(&[4 * d]),
            };
            x = self.push(&format!("rnn.{l}"), Op::Recurrent(rec), vec![x])?;
            x = drop(self, format!("drop.rnn.{l}"), x)?;
        }
        self.linear("decoder", x, vocab)?;
        Ok(())
    }

    /// A ViT on `[B, 3, hw, hw]`: patch-embedding conv, class token, learned positions,
    /// `layers` pre-norm blocks with GELU, final norm, the class token's head.
    #[allow(clippy::too_many_arguments)]
    fn vit(
        &mut self,
        hw: usize,
        patch: usize,
        d: usize,
        heads: usize,
        layers: usize,
        mlp: usize,
        classes: usize,
    ) -> Result<(), String> {
        let b = self.batch;
        let img = self.g.input;
        let conv = Op::Conv(crate::ir::Conv {
            weight: zeros(&[d, 3, patch, patch]),
            bias: Some(zeros(&[d])),
            strides: [patch, patch],
            pads: [0; 4],
            dilations: [1, 1],
            groups: 1,
        });
        let p = self.push("patch_embed.proj", conv, vec![img])?;
        let n = (hw / patch) * (hw / patch);
        let shape = vec![b, d, n];
        let p = self.push("patch_embed.flatten", Op::Reshape { shape }, vec![p])?;
        let perm = vec![0, 2, 1];
        let p = self.push("patch_embed.t", Op::Transpose { perm }, vec![p])?;
        let token = zeros(&[d]);
        let x = self.push("cls_token", Op::ClassToken { token }, vec![p])?;
        let x = self.encoder(x, n + 1, "blocks", layers, heads, mlp, false)?;
        let first = SliceAxis {
            axis: 1,
            start: 0,
            len: 1,
            step: 1,
        };
        let x = self.push("cls_select", Op::Slice { axes: vec![first] }, vec![x])?;
        let shape = vec![b, d];
        let x = self.push("cls_flatten", Op::Reshape { shape }, vec![x])?;
        self.linear("head", x, classes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::LayerKind;

    fn summary(name: &str, seq: Option<usize>) -> crate::summary::ModelSummary {
        match graph(name, name, 2, seq) {
            Ok(g) => {
                assert_eq!(g.validate(), Ok(()), "{name}");
                g.summary()
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }

    #[test]
    fn ptb_lstm_is_the_medium_word_language_model() {
        let s = summary("ptb-lstm", None);
        // Per sample (one stream of 35 tokens): two LSTMs 4·650·1300 and the decoder 650·10 000.
        let step = 2 * 4 * 650 * 1300 + 650 * 10_000;
        assert_eq!(s.total_macs(), 35 * step);
        // PyTorch's count: 6.5 M embedding + 2 × 3 385 200 LSTM (4·650·1300 + 2·4·650) + 6.51 M decoder.
        assert_eq!(s.params, 6_500_000 + 2 * 3_385_200 + 6_510_000);
        let kinds: Vec<_> = s.layers.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            [
                LayerKind::Recurrent,
                LayerKind::Recurrent,
                LayerKind::Linear
            ]
        );
    }

    #[test]
    fn transformer_lm_macs_follow_the_sequence_length() {
        let per_token_body = 16 * (12 * 1024 * 1024) as u64;
        let head = 1024 * 20_002;
        for t in [64usize, 128] {
            let s = summary("transformer-wt103", Some(t));
            let t64 = t as u64;
            // QKᵀ and AV: 2 · T² · d per layer (the causal mask does not skip work).
            let attn = 16 * 2 * t64 * t64 * 1024;
            assert_eq!(
                s.total_macs(),
                t64 * (per_token_body + head) + attn,
                "T = {t}"
            );
            assert_eq!(
                s.layers
                    .iter()
                    .filter(|l| l.kind == LayerKind::Matmul)
                    .count(),
                32
            );
        }
    }

    #[test]
    fn small_lms_follow_the_vocabulary_and_keep_the_architectures() {
        let g = graph_with_vocab("lstm-lm", "zoo:lstm-lm", 4, None, Some(77)).unwrap();
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(g.shape(g.input), [35, 4]);
        assert_eq!(g.shape(g.output), [35, 4, 77]);
        let drops = g
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Dropout { .. }))
            .count();
        assert_eq!(drops, 3, "after the embedding and each LSTM");
        let s = g.summary();
        // 2 LSTMs 4·128·256 and the decoder 128·77, per token of 35.
        assert_eq!(s.total_macs(), 35 * (2 * 4 * 128 * 256 + 128 * 77));
        let g = graph_with_vocab(
            "transformer-lm",
            "zoo:transformer-lm",
            2,
            Some(16),
            Some(50),
        )
        .unwrap();
        assert_eq!(g.shape(g.output), [2, 16, 50]);
        let s = g.summary();
        let matmuls = s
            .layers
            .iter()
            .filter(|l| l.kind == LayerKind::Matmul)
            .count();
        assert_eq!(matmuls, 4, "QKᵀ and AV in each of 2 layers");
        assert_eq!(s.layers.last().map(|l| l.name.as_str()), Some("head"));
        let e = graph_with_vocab("deit-tiny", "zoo:deit-tiny", 2, None, Some(5)).unwrap_err();
        assert!(e.contains("takes no vocabulary"), "{e}");
        let e = graph_with_vocab("lstm-lm", "zoo:lstm-lm", 2, None, Some(0)).unwrap_err();
        assert!(e.contains("no vocabulary"), "{e}");
    }

    #[test]
    fn deit_tiny_matches_its_published_size() {
        let s = summary("deit-tiny", None);
        // DeiT-Tiny: 5.7 M parameters, 1.3 GFLOPs (≈ 1.26 G MACs).
        assert!((5_700_000..5_730_000).contains(&s.params), "{}", s.params);
        assert!(
            (1_200_000_000..1_300_000_000).contains(&s.total_macs()),
            "{}",
            s.total_macs()
        );
        let e = graph("deit-tiny", "zoo:deit-tiny", 2, Some(10)).unwrap_err();
        assert!(e.contains("no sequence axis"), "{e}");
    }
}
