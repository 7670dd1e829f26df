//! Static shape inference for every IR op (each op's rule is in [`super::rules`]), and the
//! shape arithmetic the rules share: broadcasting, element counts, window lengths, MAC counts.
//! Shapes include the batch dimension.
//!
//! Errors are plain messages; the caller adds the file and node name.

use super::op::{Op, Recurrent};

/// Most elements one tensor may hold (2^40 ≈ 1.1·10^12): beyond any real model at any sensible
/// batch, and small enough that element, parameter and MAC counts cannot overflow.
pub const MAX_ELEMENTS: usize = 1 << 40;

/// Elements of a tensor of shape `dims`, if at most [`MAX_ELEMENTS`] (computed without overflow).
pub fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&c| c <= MAX_ELEMENTS)
}

/// Output shape of `op` applied to inputs of the given shapes ([`Op::output_shape`]: each op
/// family's rule in [`super::rules`]).
pub fn infer(op: &Op, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
    op.output_shape(inputs)
}

/// Numpy broadcasting of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let n = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() < n {
            1
        } else {
            s[i + s.len() - n]
        }
    };
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            _ => Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        })
        .collect()
}

/// Multiply-accumulates of a convolution per sample: every output element `out` = `[C_out, H, W]`
/// sums `in_channels / groups · kh · kw` products (the one MAC count of the project: IR summary
/// and export builder alike).
pub fn conv_macs(out: [usize; 3], in_channels: usize, groups: usize, kernel: [usize; 2]) -> u64 {
    let outputs = out.iter().map(|&d| d as u64).product::<u64>();
    let per_output = (in_channels / groups.max(1)) as u64 * kernel[0] as u64 * kernel[1] as u64;
    outputs.saturating_mul(per_output)
}

/// Multiply-accumulates of a linear layer per sample: `rows` input rows of `in_features`, each
/// producing `out_features` outputs.
pub fn linear_macs(rows: usize, in_features: usize, out_features: usize) -> u64 {
    (rows as u64)
        .saturating_mul(in_features as u64)
        .saturating_mul(out_features as u64)
}

/// Multiply-accumulates of a product of two activations per sample: `groups` independent
/// `[m, k] × [k, n]` products (heads, say).
pub fn matmul_macs(groups: usize, m: usize, n: usize, k: usize) -> u64 {
    [groups, m, n, k]
        .iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// Multiply-accumulates of a recurrent layer per sample over `steps` time steps: at every step the
/// `gates·H` gate pre-activations each sum `I` input and `H` recurrent products (`W x_t` and
/// `R h_{t−1}`); the elementwise cell arithmetic is not counted, as for BN-free activations.
pub fn recurrent_macs(steps: usize, r: &Recurrent) -> u64 {
    linear_macs(steps, r.input_size() + r.hidden, r.gate_rows())
}

/// Output length of a sliding window along one axis (the one window formula of the project):
/// `len` plus total padding `pad`, a `kernel` dilated by `dilation`, moved by `stride`, the
/// last partial window kept when `ceil`.
pub fn window_out(
    len: usize,
    pad: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    ceil: bool,
) -> Result<usize, String> {
    let (Some(span), Some(padded)) = (
        dilation
            .checked_mul(kernel.max(1) - 1)
            .and_then(|s| s.checked_add(1)),
        len.checked_add(pad),
    ) else {
        return Err(format!(
            "window (kernel {kernel}, dilation {dilation}) or input {len} with padding {pad} is too large"
        ));
    };
    if stride == 0 || span > padded {
        return Err(format!(
            "window of {span} (kernel {kernel}, dilation {dilation}) does not fit input {len} with padding {pad}, stride {stride}"
        ));
    }
    let steps = padded - span;
    Ok(if ceil {
        steps.div_ceil(stride) + 1
    } else {
        steps / stride + 1
    })
}

#[cfg(test)]
mod tests {
    use super::super::op::MAX_VOCAB;
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[2, 3, 4], &[3, 1]), Ok(vec![2, 3, 4]));
        assert_eq!(broadcast(&[1], &[5, 2]), Ok(vec![5, 2]));
        assert!(broadcast(&[2, 3], &[4, 3]).is_err());
    }

    #[test]
    fn windows_floor_and_ceil() {
        assert_eq!(window_out(32, 2, 3, 1, 1, false), Ok(32));
        assert_eq!(window_out(32, 2, 3, 2, 1, false), Ok(16));
        assert_eq!(window_out(112, 2, 3, 2, 1, false), Ok(56));
        assert_eq!(window_out(5, 0, 2, 2, 1, true), Ok(3));
        assert!(window_out(2, 0, 5, 1, 1, false).is_err());
        assert!(window_out(usize::MAX, 1, 3, 1, 1, false).is_err());
        assert!(window_out(8, 0, usize::MAX, 1, 2, false).is_err());
    }

    fn zeros(s: &[usize]) -> ndarray::ArrayD<f32> {
        ndarray::ArrayD::zeros(s.to_vec())
    }

    #[test]
    fn embedding_appends_the_row_width() {
        let op = Op::Embedding(super::super::op::Embedding {
            table: zeros(&[100, 8]),
        });
        assert_eq!(infer(&op, &[&[4, 35]]), Ok(vec![4, 35, 8]));
        let big = Op::Embedding(super::super::op::Embedding {
            table: zeros(&[MAX_VOCAB + 1, 1]),
        });
        assert!(infer(&big, &[&[1, 1]]).unwrap_err().contains("2^24"));
    }

    #[test]
    fn layer_norm_checks_the_last_axis() {
        let ln = |d| {
            Op::LayerNorm(super::super::op::LayerNorm {
                scale: zeros(&[d]),
                bias: zeros(&[d]),
                epsilon: 1e-5,
            })
        };
        assert_eq!(infer(&ln(16), &[&[2, 5, 16]]), Ok(vec![2, 5, 16]));
        assert!(infer(&ln(8), &[&[2, 5, 16]]).unwrap_err().contains("[16]"));
    }

    #[test]
    fn softmax_gelu_tanh_dropout_keep_the_shape() {
        let x: &[usize] = &[2, 4, 7, 7];
        for op in [
            Op::Softmax {
                axis: 3,
                log: false,
            },
            Op::Gelu { tanh_approx: false },
            Op::Tanh,
            Op::Dropout { ratio: 0.1 },
        ] {
            assert_eq!(infer(&op, &[x]), Ok(x.to_vec()), "{op:?}");
        }
        assert!(infer(&Op::Softmax { axis: 4, log: true }, &[x]).is_err());
        assert!(infer(&Op::Dropout { ratio: 1.0 }, &[x]).is_err());
    }

    #[test]
    fn causal_mask_needs_no_more_queries_than_keys() {
        assert_eq!(
            infer(&Op::CausalMask, &[&[2, 4, 7, 7]]),
            Ok(vec![2, 4, 7, 7])
        );
        assert_eq!(infer(&Op::CausalMask, &[&[1, 3, 7]]), Ok(vec![1, 3, 7]));
        assert!(infer(&Op::CausalMask, &[&[1, 8, 7]]).is_err());
    }

    #[test]
    fn class_token_and_positions() {
        let cls = Op::ClassToken {
            token: zeros(&[192]),
        };
        assert_eq!(infer(&cls, &[&[2, 196, 192]]), Ok(vec![2, 197, 192]));
        assert!(infer(&cls, &[&[2, 196, 64]]).is_err());
        let pos = Op::PositionEmbedding {
            table: zeros(&[197, 192]),
            axis: 1,
        };
        assert_eq!(infer(&pos, &[&[2, 197, 192]]), Ok(vec![2, 197, 192]));
        assert_eq!(infer(&pos, &[&[2, 50, 192]]), Ok(vec![2, 50, 192]));
        let e = infer(&pos, &[&[2, 198, 192]]).unwrap_err();
        assert!(e.contains("longer"), "{e}");
    }

    fn lstm(i: usize, h: usize) -> Recurrent {
        Recurrent {
            kind: super::super::op::CellKind::Lstm,
            hidden: h,
            w: zeros(&[4 * h, i]),
            r: zeros(&[4 * h, h]),
            bias_w: zeros(&[4 * h]),
            bias_r: zeros(&[4 * h]),
        }
    }

    #[test]
    fn recurrent_layers_are_sequence_first() {
        let op = Op::Recurrent(lstm(10, 20));
        assert_eq!(infer(&op, &[&[35, 4, 10]]), Ok(vec![35, 4, 20]));
        assert!(infer(&op, &[&[35, 4, 11]])
            .unwrap_err()
            .contains("[80, 11]"));
        assert!(infer(&op, &[&[4, 10]])
            .unwrap_err()
            .contains("sequence-first"));
    }

    #[test]
    fn gemm_mac_counts() {
        // PTB medium LSTM layer: 35 steps, 650 in, 650 hidden: 35 · 4·650 · 1300.
        assert_eq!(recurrent_macs(35, &lstm(650, 650)), 35 * 2600 * 1300);
        // Attention scores of 8 heads over 512 tokens of width 64.
        assert_eq!(matmul_macs(8, 512, 512, 64), 8 * 512 * 512 * 64);
        assert_eq!(matmul_macs(usize::MAX, 2, 2, 2), u64::MAX);
    }

    #[test]
    fn element_counts_never_overflow() {
        assert_eq!(element_count(&[2, 3, 4]), Some(24));
        assert_eq!(element_count(&[1 << 20, 1 << 20]), Some(MAX_ELEMENTS));
        assert_eq!(element_count(&[1 << 20, (1 << 20) + 1]), None);
        assert_eq!(element_count(&[usize::MAX, 3, 224, 224]), None);
        assert_eq!(element_count(&[1 << 32, 1 << 32, 0]), None);
        // A huge output is an error, not a wrapped-around shape.
        let e = infer(&Op::Flatten { axis: 1 }, &[&[1 << 30, 1 << 30]]).unwrap_err();
        assert!(e.contains("2^40"), "{e}");
    }
}
