//! Dense ops: the GEMM layers `Linear`, `MatMul` (two activations) and `Recurrent`, and the
//! `Embedding` lookup (no GEMM).

use super::LayerIo;
use crate::ir::op::{Embedding, Linear, Recurrent, MAX_VOCAB};
use crate::ir::shape::{broadcast, linear_macs, matmul_macs, recurrent_macs};
use crate::summary::{LayerInfo, LayerKind, LayerRole};

impl Linear {
    /// The input with its last axis (`in` features) replaced by `out`.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let n = x.last().copied().unwrap_or(0);
        if self.weight.ndim() != 2 || n != self.in_features() {
            return Err(format!(
                "weight {:?} does not fit input {x:?} (needs [out, {n}])",
                self.weight.shape()
            ));
        }
        if let Some(b) = &self.bias {
            if b.shape() != [self.out_features()] {
                return Err(format!(
                    "bias has shape {:?}, expected [{}]",
                    b.shape(),
                    self.out_features()
                ));
            }
        }
        let mut s = x.to_vec();
        if let Some(last) = s.last_mut() {
            *last = self.out_features();
        }
        Ok(s)
    }

    /// The layer: leading axes other than the batch are rows (the tokens of a sequence).
    pub fn layer(&self, io: &LayerIo) -> LayerInfo {
        let (i, o) = (self.in_features(), self.out_features());
        let rows = (io.per_sample(io.input) / i.max(1)).max(1);
        let macs = linear_macs(rows, i, o);
        gemm_layer(io, LayerKind::Linear, [i, rows, 1], [o, rows, 1], 1, macs)
    }
}

/// `MatMul` of two activations (numpy `matmul`: rank ≥ 2, the leading axes broadcast).
pub(crate) fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.len() < 2 || b.len() < 2 {
        return Err(format!("MatMul operands {a:?} and {b:?} need rank ≥ 2"));
    }
    let (m, k1) = (a[a.len() - 2], a[a.len() - 1]);
    let (k2, n) = (b[b.len() - 2], b[b.len() - 1]);
    if k1 != k2 {
        return Err(format!("MatMul inner dimensions differ: {a:?} × {b:?}"));
    }
    let mut s = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
    s.extend([m, n]);
    Ok(s)
}

/// `MatMul` as a layer: the per-sample leading axes of the output (heads) are the groups of
/// `[M, K] × [K, N]` products.
pub fn matmul_layer(io: &LayerIo) -> LayerInfo {
    let (m, n) = match io.output {
        [.., m, n] => (*m, *n),
        _ => (1, 1),
    };
    let k = io.input.last().copied().unwrap_or(1);
    let groups = (io.per_sample(io.output) / (m * n).max(1)).max(1);
    let macs = matmul_macs(groups, m, n, k);
    let (i, o) = ([groups * k, m, 1], [groups * n, m, 1]);
    gemm_layer(io, LayerKind::Matmul, i, o, groups, macs)
}

impl Recurrent {
    /// `[T, B, H]` of a sequence-first `[T, B, I]` input, after checking the weights and biases.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let name = self.kind.name();
        let [t, b, i] = x else {
            return Err(format!(
                "{name} input {x:?} must be [T, B, I] (sequence-first)"
            ));
        };
        let g = self.gate_rows();
        let h = self.hidden;
        let fits = |t: &ndarray::ArrayD<f32>, want: &[usize]| t.shape() == want;
        if h == 0 || !fits(&self.w, &[g, *i]) || !fits(&self.r, &[g, h]) {
            return Err(format!(
                "{name} weights W {:?} and R {:?} do not fit input {x:?} with hidden size {h} (need [{g}, {i}] and [{g}, {h}])",
                self.w.shape(),
                self.r.shape()
            ));
        }
        if !fits(&self.bias_w, &[g]) || !fits(&self.bias_r, &[g]) {
            return Err(format!(
                "{name} biases {:?} and {:?} must both be [{g}]",
                self.bias_w.shape(),
                self.bias_r.shape()
            ));
        }
        Ok(vec![*t, *b, h])
    }

    /// The layer unrolled over its steps (axis 0 of the input).
    pub fn layer(&self, io: &LayerIo) -> LayerInfo {
        let steps = io.input.first().copied().unwrap_or(1);
        let (i, o) = (
            [self.input_size() + self.hidden, steps, 1],
            [self.gate_rows(), steps, 1],
        );
        let macs = recurrent_macs(steps, self);
        let mut layer = gemm_layer(io, LayerKind::Recurrent, i, o, 1, macs);
        layer.hidden = Some(self.hidden);
        layer
    }
}

impl Embedding {
    /// The ids' shape with the row width appended.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        if self.table.ndim() != 2 || self.vocab() > MAX_VOCAB {
            return Err(format!(
                "embedding table {:?} must be [vocab, dim] with vocab ≤ 2^24",
                self.table.shape()
            ));
        }
        let mut s = x.to_vec();
        s.push(self.dim());
        Ok(s)
    }
}

/// A GEMM layer other than a conv: no window, no stride, no padding.
fn gemm_layer(
    io: &LayerIo,
    kind: LayerKind,
    in_shape: [usize; 3],
    out_shape: [usize; 3],
    groups: usize,
    macs: u64,
) -> LayerInfo {
    LayerInfo {
        name: io.name.to_string(),
        kind,
        role: LayerRole::Body,
        in_shape,
        out_shape,
        kernel: [1, 1],
        stride: [1, 1],
        pads: [0; 4],
        dilation: [1, 1],
        groups,
        params: io.params,
        macs,
        hidden: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_broadcasts_batch_axes() {
        assert_eq!(matmul(&[2, 1, 3, 4], &[5, 4, 6]), Ok(vec![2, 5, 3, 6]));
        assert!(matmul(&[3, 4], &[5, 6]).is_err());
    }
}
