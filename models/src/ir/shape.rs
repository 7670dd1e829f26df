//! Static shape inference for every IR op. Shapes include the batch dimension.
//!
//! Errors are plain messages; the caller adds the file and node name.

use super::op::{Op, Pool, Recurrent, MAX_VOCAB};

/// Most elements one tensor may hold (2^40 ≈ 1.1·10^12): beyond any real model at any sensible
/// batch, and small enough that element, parameter and MAC counts cannot overflow.
pub const MAX_ELEMENTS: usize = 1 << 40;

/// Elements of a tensor of shape `dims`, if at most [`MAX_ELEMENTS`] (computed without overflow).
pub fn element_count(dims: &[usize]) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&c| c <= MAX_ELEMENTS)
}

/// Output shape of `op` applied to inputs of the given shapes.
pub fn infer(op: &Op, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
    let want = match op {
        Op::Binary(b) if b.constant.is_none() => 2,
        Op::MatMul => 2,
        Op::Concat { .. } => inputs.len().max(1),
        _ => 1,
    };
    if inputs.len() != want {
        return Err(format!(
            "expected {want} tensor input(s), got {}",
            inputs.len()
        ));
    }
    let x = inputs[0];
    let out = match op {
        Op::Conv(c) => conv(c, x)?,
        Op::BatchNorm(b) => {
            let ch = channels(x, "BatchNorm")?;
            for (what, t) in [
                ("scale", &b.scale),
                ("bias", &b.bias),
                ("mean", &b.mean),
                ("var", &b.var),
            ] {
                if t.shape() != [ch] {
                    return Err(format!(
                        "{what} has shape {:?}, expected [{ch}] for input {x:?}",
                        t.shape()
                    ));
                }
            }
            x.to_vec()
        }
        Op::Relu | Op::Clip { .. } | Op::Sigmoid => x.to_vec(),
        Op::Binary(b) => match &b.constant {
            None => broadcast(x, inputs[1])?,
            Some(c) => broadcast(x, c.value.shape())?,
        },
        Op::MaxPool(p) => pool(p, x)?,
        Op::AveragePool(a) => pool(&a.pool, x)?,
        Op::GlobalAveragePool => {
            if x.len() < 3 {
                return Err(format!("input {x:?} needs rank ≥ 3"));
            }
            let mut s = x.to_vec();
            s[2..].iter_mut().for_each(|d| *d = 1);
            s
        }
        Op::ReduceMean { axes, keepdims } => {
            check_axes(axes, x.len())?;
            let mut s = Vec::with_capacity(x.len());
            for (i, &d) in x.iter().enumerate() {
                if !axes.contains(&i) {
                    s.push(d);
                } else if *keepdims {
                    s.push(1);
                }
            }
            s
        }
        Op::Flatten { axis } => {
            if *axis > x.len() {
                return Err(format!("axis {axis} out of range for input {x:?}"));
            }
            vec![x[..*axis].iter().product(), x[*axis..].iter().product()]
        }
        Op::Reshape { shape } => {
            let a = x.iter().product::<usize>();
            let b = element_count(shape)
                .ok_or_else(|| format!("reshape target {shape:?} is too large"))?;
            if a != b {
                return Err(format!(
                    "cannot reshape {x:?} ({a} elements) to {shape:?} ({b} elements)"
                ));
            }
            shape.clone()
        }
        Op::Linear(l) => {
            let n = x.last().copied().unwrap_or(0);
            if l.weight.ndim() != 2 || n != l.in_features() {
                return Err(format!(
                    "weight {:?} does not fit input {x:?} (needs [out, {n}])",
                    l.weight.shape()
                ));
            }
            if let Some(b) = &l.bias {
                if b.shape() != [l.out_features()] {
                    return Err(format!(
                        "bias has shape {:?}, expected [{}]",
                        b.shape(),
                        l.out_features()
                    ));
                }
            }
            let mut s = x.to_vec();
            if let Some(last) = s.last_mut() {
                *last = l.out_features();
            }
            s
        }
        Op::MatMul => matmul(x, inputs[1])?,
        Op::Concat { axis } => concat(inputs, *axis)?,
        Op::Slice { axes } => {
            let mut s = x.to_vec();
            for a in axes {
                let d = *s
                    .get(a.axis)
                    .ok_or_else(|| format!("slice axis {} out of range for {x:?}", a.axis))?;
                let last = a.start as i64 + (a.len as i64 - 1) * a.step;
                if a.len > 0 && (a.start >= d || last < 0 || last >= d as i64) {
                    return Err(format!("slice on axis {} leaves the input {x:?}", a.axis));
                }
                s[a.axis] = a.len;
            }
            s
        }
        Op::Pad { pads, .. } => {
            if pads.len() != x.len() {
                return Err(format!("{} pad pairs for input {x:?}", pads.len()));
            }
            x.iter().zip(pads).map(|(d, (b, a))| d + b + a).collect()
        }
        Op::Transpose { perm } => {
            let mut seen = vec![false; x.len()];
            if perm.len() != x.len()
                || perm
                    .iter()
                    .any(|&p| p >= x.len() || std::mem::replace(&mut seen[p], true))
            {
                return Err(format!(
                    "perm {perm:?} is not a permutation of the axes of {x:?}"
                ));
            }
            perm.iter().map(|&p| x[p]).collect()
        }
        Op::Embedding(e) => {
            if e.table.ndim() != 2 || e.vocab() > MAX_VOCAB {
                return Err(format!(
                    "embedding table {:?} must be [vocab, dim] with vocab ≤ 2^24",
                    e.table.shape()
                ));
            }
            let mut s = x.to_vec();
            s.push(e.dim());
            s
        }
        Op::LayerNorm(l) => {
            let d = x.last().copied().unwrap_or(0);
            for (what, t) in [("scale", &l.scale), ("bias", &l.bias)] {
                if t.shape() != [d] {
                    return Err(format!(
                        "{what} has shape {:?}, expected [{d}] for input {x:?}",
                        t.shape()
                    ));
                }
            }
            x.to_vec()
        }
        Op::Softmax { axis, .. } => {
            check_axes(&[*axis], x.len())?;
            x.to_vec()
        }
        Op::Dropout { ratio } => {
            if !(0.0..1.0).contains(ratio) {
                return Err(format!("dropout ratio {ratio} is not in [0, 1)"));
            }
            x.to_vec()
        }
        Op::Gelu { .. } | Op::Tanh => x.to_vec(),
        Op::CausalMask => match x {
            [.., tq, tk] if tq <= tk => x.to_vec(),
            _ => {
                return Err(format!(
                    "causal mask needs scores [.., Tq, Tk] with Tq ≤ Tk, got {x:?}"
                ))
            }
        },
        Op::ClassToken { token } => match x {
            [b, n, d] if token.shape() == [*d] => vec![*b, n + 1, *d],
            _ => {
                return Err(format!(
                    "class token {:?} does not fit input {x:?} (needs [B, N, D] and token [D])",
                    token.shape()
                ))
            }
        },
        Op::PositionEmbedding { table, axis } => {
            let (t, d) = match table.shape() {
                [t, d] => (*t, *d),
                s => return Err(format!("position table {s:?} must be [T_max, D]")),
            };
            let len = x.get(*axis).copied();
            if x.last() != Some(&d) || *axis + 1 >= x.len() {
                return Err(format!(
                    "position table [{t}, {d}] on axis {axis} does not fit input {x:?}"
                ));
            }
            if let Some(len) = len.filter(|&l| l > t) {
                return Err(format!(
                    "a sequence of {len} positions is longer than the model's {t} learned positions (a fixed-length export)"
                ));
            }
            x.to_vec()
        }
        Op::Recurrent(r) => recurrent(r, x)?,
    };
    if out.contains(&0) {
        return Err(format!("output shape {out:?} has a zero-size dimension"));
    }
    if element_count(&out).is_none() {
        return Err(format!(
            "output shape {out:?} has more than 2^40 elements (too large a batch?)"
        ));
    }
    Ok(out)
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

fn channels(x: &[usize], what: &str) -> Result<usize, String> {
    match x {
        [_, c, ..] => Ok(*c),
        _ => Err(format!("{what} input {x:?} needs rank ≥ 2")),
    }
}

fn check_axes(axes: &[usize], rank: usize) -> Result<(), String> {
    match axes.iter().find(|&&a| a >= rank) {
        Some(a) => Err(format!("axis {a} out of range for rank {rank}")),
        None => Ok(()),
    }
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

fn conv(c: &super::op::Conv, x: &[usize]) -> Result<Vec<usize>, String> {
    let w = c.weight.shape();
    let [n, cin, h, wd] = x else {
        return Err(format!("input {x:?} must be NCHW (rank 4)"));
    };
    let [cout, cpg, kh, kw] = w else {
        return Err(format!(
            "weight has rank {}, expected 4 ([C_out, C_in/groups, kh, kw])",
            w.len()
        ));
    };
    if c.groups == 0 || cin % c.groups != 0 || cout % c.groups != 0 || cin / c.groups != *cpg {
        return Err(format!(
            "weight {w:?} with group {} does not fit input {x:?} ({cin} channels)",
            c.groups
        ));
    }
    if let Some(b) = &c.bias {
        if b.shape() != [*cout] {
            return Err(format!("bias has shape {:?}, expected [{cout}]", b.shape()));
        }
    }
    let [pt, pl, pb, pr] = c.pads;
    let oh = window_out(*h, pt + pb, *kh, c.strides[0], c.dilations[0], false)?;
    let ow = window_out(*wd, pl + pr, *kw, c.strides[1], c.dilations[1], false)?;
    Ok(vec![*n, *cout, oh, ow])
}

fn pool(p: &Pool, x: &[usize]) -> Result<Vec<usize>, String> {
    let [n, c, h, w] = x else {
        return Err(format!("input {x:?} must be NCHW (rank 4)"));
    };
    let [pt, pl, pb, pr] = p.pads;
    let mut oh = window_out(
        *h,
        pt + pb,
        p.kernel[0],
        p.strides[0],
        p.dilations[0],
        p.ceil_mode,
    )?;
    let mut ow = window_out(
        *w,
        pl + pr,
        p.kernel[1],
        p.strides[1],
        p.dilations[1],
        p.ceil_mode,
    )?;
    // With ceil_mode the last window must start inside the input or its left/top padding.
    if p.ceil_mode {
        if (oh - 1) * p.strides[0] >= h + pt {
            oh -= 1;
        }
        if (ow - 1) * p.strides[1] >= w + pl {
            ow -= 1;
        }
    }
    Ok(vec![*n, *c, oh, ow])
}

fn recurrent(r: &Recurrent, x: &[usize]) -> Result<Vec<usize>, String> {
    let [t, b, i] = x else {
        return Err(format!(
            "{} input {x:?} must be [T, B, I] (sequence-first)",
            r.kind.name()
        ));
    };
    let g = r.gate_rows();
    let h = r.hidden;
    let fits = |t: &ndarray::ArrayD<f32>, want: &[usize]| t.shape() == want;
    if h == 0 || !fits(&r.w, &[g, *i]) || !fits(&r.r, &[g, h]) {
        return Err(format!(
            "{} weights W {:?} and R {:?} do not fit input {x:?} with hidden size {h} (need [{g}, {i}] and [{g}, {h}])",
            r.kind.name(),
            r.w.shape(),
            r.r.shape()
        ));
    }
    if !fits(&r.bias_w, &[g]) || !fits(&r.bias_r, &[g]) {
        return Err(format!(
            "{} biases {:?} and {:?} must both be [{g}]",
            r.kind.name(),
            r.bias_w.shape(),
            r.bias_r.shape()
        ));
    }
    Ok(vec![*t, *b, h])
}

fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
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

fn concat(inputs: &[&[usize]], axis: usize) -> Result<Vec<usize>, String> {
    let first = inputs[0];
    if axis >= first.len() {
        return Err(format!("axis {axis} out of range for {first:?}"));
    }
    let mut out = first.to_vec();
    for s in &inputs[1..] {
        let same_rest = s.len() == first.len()
            && s.iter()
                .zip(first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !same_rest {
            return Err(format!(
                "cannot concatenate {first:?} and {s:?} along axis {axis}"
            ));
        }
        out[axis] += s[axis];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn ceil_mode_drops_a_window_starting_in_the_padding() {
        let p = Pool {
            kernel: [2, 2],
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            dilations: [1, 1],
            ceil_mode: true,
        };
        // 4 + 2 padding: ceil((6-2)/2)+1 = 3 windows, the third starts at 4 = h + pt - 1 → kept.
        assert_eq!(pool(&p, &[1, 1, 4, 4]), Ok(vec![1, 1, 3, 3]));
        let p = Pool {
            pads: [0, 0, 1, 1],
            ..p
        };
        // 5 rows padded to 6? no: 4 + 1 = 5 → ceil(3/2)+1 = 3, third starts at 4 ≥ 4 → dropped.
        assert_eq!(pool(&p, &[1, 1, 4, 4]), Ok(vec![1, 1, 2, 2]));
    }

    #[test]
    fn matmul_broadcasts_batch_axes() {
        assert_eq!(matmul(&[2, 1, 3, 4], &[5, 4, 6]), Ok(vec![2, 5, 3, 6]));
        assert!(matmul(&[3, 4], &[5, 6]).is_err());
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
