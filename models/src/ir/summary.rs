//! [`Graph::summary`]: the per-layer view (geometry, MACs, roles) other crates work from.

use super::rules::LayerIo;
use super::{BinaryKind, Graph, Op, ValueId};
use crate::summary::{LayerInfo, LayerKind, LayerRole, ModelSummary};

impl Graph {
    /// Per-sample geometry, MACs and roles of the GEMM layers (conv, linear, act × act matmul,
    /// recurrent; see [`LayerKind`]), BN and residual-add output elements and parameters.
    /// Embedding lookups, LayerNorm, softmax and the other elementwise ops are not GEMMs and add
    /// nothing.
    ///
    /// Roles: the first GEMM layer in topological order is `First` unless a trainable op
    /// (embedding, class token, position embedding) comes before it — then the error of its input
    /// is needed and it is an ordinary `Body` layer —, the last is `Last` (the
    /// classifier; a one-layer model's only layer is `Last`), a depthwise conv is `Depthwise`, a
    /// 1×1 conv is `Shortcut` when its input also feeds another node and its output reaches an
    /// `Add` through nothing but BatchNorm (a projection on a residual branch); the rest `Body`.
    pub fn summary(&self) -> ModelSummary {
        let users = self.consumer_index();
        let mut layers: Vec<LayerInfo> = Vec::new();
        let mut bn_elements = 0u64;
        let mut residual_elements = 0u64;
        let mut trainable_before_first = false;
        for (i, node) in self.nodes.iter().enumerate() {
            let io = LayerIo {
                name: &node.name,
                params: node.op.params(),
                input: self.shape(node.inputs.first().copied().unwrap_or(self.input)),
                output: self.shape(node.output),
                batch: self.batch,
            };
            if let Some(mut layer) = node.op.layer(&io) {
                let one_by_one = layer.kind == LayerKind::Conv && layer.kernel == [1, 1];
                if layer.role == LayerRole::Body && one_by_one && self.is_shortcut(i, &users) {
                    layer.role = LayerRole::Shortcut;
                }
                layers.push(layer);
                continue;
            }
            match &node.op {
                Op::Embedding(_) | Op::ClassToken { .. } | Op::PositionEmbedding { .. }
                    if layers.is_empty() =>
                {
                    trainable_before_first = true
                }
                Op::BatchNorm(_) => bn_elements += self.elements_per_sample(node.output) as u64,
                Op::Binary(b) if b.kind == BinaryKind::Add && b.constant.is_none() => {
                    residual_elements += self.elements_per_sample(node.output) as u64
                }
                _ => {}
            }
        }
        if let Some(first) = layers.first_mut().filter(|_| !trainable_before_first) {
            first.role = LayerRole::First;
        }
        if let Some(last) = layers.last_mut() {
            last.role = LayerRole::Last;
        }
        ModelSummary {
            name: self.name.clone(),
            input: self.shape(self.input).to_vec(),
            layers,
            bn_elements,
            residual_elements,
            params: self.params(),
        }
    }

    /// Whether node `i` (a 1×1 conv) is a projection on a residual shortcut; `users` is the
    /// graph's [`Graph::consumer_index`].
    fn is_shortcut(&self, i: usize, users: &super::Consumers) -> bool {
        let node = &self.nodes[i];
        let Some(&input) = node.inputs.first() else {
            return false;
        };
        if users.of(input).len() < 2 {
            return false;
        }
        let mut cur: ValueId = node.output;
        loop {
            let [u] = users.of(cur) else {
                return false;
            };
            match &self.nodes[*u].op {
                Op::BatchNorm(_) => cur = self.nodes[*u].output,
                Op::Binary(b) => return b.kind == super::BinaryKind::Add && b.constant.is_none(),
                _ => return false,
            }
        }
    }

    /// Elements per sample of tensor `id`: its elements over the batch, wherever the batch axis
    /// sits (axis 1 of a sequence-first tensor).
    pub fn elements_per_sample(&self, id: ValueId) -> usize {
        self.shape(id).iter().product::<usize>() / self.batch.max(1)
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::{CellKind, Embedding, Graph, Linear, Op, Recurrent};
    use crate::summary::{GemmOperands, LayerKind, LayerRole};
    use ndarray::ArrayD;

    fn zeros(s: &[usize]) -> ArrayD<f32> {
        ArrayD::zeros(s.to_vec())
    }

    /// Token ids `[T, B]` → embedding → LSTM → linear decoder, and a self-attention score
    /// product on the LSTM output.
    #[test]
    fn sequence_layers_are_gemms_per_sample() {
        let (t, b, v, d, h) = (35, 4, 100, 16, 8);
        let mut g = Graph::new("lm", "test", b, "ids", vec![t, b]);
        let table = zeros(&[v, d]);
        let e = g
            .push(
                "emb",
                Op::Embedding(Embedding { table }),
                vec![g.input],
                "e",
            )
            .unwrap();
        let rec = Recurrent {
            kind: CellKind::Lstm,
            hidden: h,
            w: zeros(&[4 * h, d]),
            r: zeros(&[4 * h, h]),
            bias_w: zeros(&[4 * h]),
            bias_r: zeros(&[4 * h]),
        };
        let y = g.push("lstm", Op::Recurrent(rec), vec![e], "y").unwrap();
        // [T, B, H] → [B, T, H] and the scores [B, T, T] = Y · Yᵀ.
        let yb = g
            .push(
                "tr",
                Op::Transpose {
                    perm: vec![1, 0, 2],
                },
                vec![y],
                "yb",
            )
            .unwrap();
        let yt = g
            .push(
                "trk",
                Op::Transpose {
                    perm: vec![0, 2, 1],
                },
                vec![yb],
                "yt",
            )
            .unwrap();
        g.push("qk", Op::MatMul, vec![yb, yt], "s").unwrap();
        let lin = Linear {
            weight: zeros(&[v, h]),
            bias: None,
        };
        g.output = g.push("dec", Op::Linear(lin), vec![y], "logits").unwrap();
        let s = g.summary();
        let kinds: Vec<_> = s.layers.iter().map(|l| (l.kind, l.role)).collect();
        assert_eq!(
            kinds,
            [
                // The embedding before it needs its input error: not `First`.
                (LayerKind::Recurrent, LayerRole::Body),
                (LayerKind::Matmul, LayerRole::Body),
                (LayerKind::Linear, LayerRole::Last),
            ]
        );
        let [lstm, qk, dec] = &s.layers[..] else {
            unreachable!()
        };
        assert_eq!(lstm.macs, (t * 4 * h * (d + h)) as u64);
        assert_eq!(
            lstm.gemm_dims(b as u64),
            (1, (b * t) as u64, 4 * h as u64, (d + h) as u64)
        );
        assert_eq!(qk.macs, (t * t * h) as u64);
        assert_eq!(qk.kind.operands(), GemmOperands::ActivationActivation);
        assert_eq!(
            qk.gemm_dims(b as u64),
            (b as u64, t as u64, t as u64, h as u64)
        );
        // The decoder runs on every step of the sequence-first [T, B, H] output.
        assert_eq!(dec.macs, (t * h * v) as u64);
        assert_eq!(dec.out_pixels(), t);
        assert_eq!(dec.kind.operands(), GemmOperands::WeightActivation);
        assert_eq!(s.total_macs(), lstm.macs + qk.macs + dec.macs);
        assert_eq!(s.params, (v * d + 4 * h * (d + h) + 8 * h + v * h) as u64);
    }
}
