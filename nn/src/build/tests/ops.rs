//! Networks built from single IR ops that only the engine layers of [`super::ops`] run: each
//! evaluates to a direct NCHW computation and trains a step.

use crate::build::{build_network, BuildOptions, Network};
use crate::layers::gradcheck::rand_tensor;
use crate::layers::{Mode, Tensor};
use cptsim_models::ir::{self, Op};

/// The evaluation output of `g` on `x` (NCHW flattened), after checking a training step gives
/// finite input gradients.
fn trained_and_evaluated(g: &ir::Graph, x: &Tensor) -> Tensor {
    let mut net = build_network(g, &BuildOptions::default()).unwrap();
    let out = net
        .forward(net.input_from_ir(x).unwrap(), Mode::Train)
        .unwrap();
    let grad = net.backward(Tensor::ones(out.raw_dim())).unwrap();
    assert!(grad.iter().all(|v| v.is_finite()));
    net.forward(net.input_from_ir(x).unwrap(), Mode::Eval)
        .unwrap()
}

/// `built` (a network built at another batch) computes what `own`, built at `x`'s batch, does:
/// training and evaluation outputs on `x`, and the input gradient of `g`.
fn runs_as_built_at_its_batch(built: &mut Network, own: &mut Network, x: &Tensor, g: Tensor) {
    let n = x.shape()[0];
    for mode in [Mode::Train, Mode::Eval] {
        let want = own.forward(own.input_from_ir(x).unwrap(), mode).unwrap();
        let got = built.forward(built.input_from_ir(x).unwrap(), mode);
        assert_eq!(got.unwrap(), want, "batch {n}, {mode:?}");
    }
    own.forward(own.input_from_ir(x).unwrap(), Mode::Train)
        .unwrap();
    built
        .forward(built.input_from_ir(x).unwrap(), Mode::Train)
        .unwrap();
    let want = own.backward(g.clone()).unwrap();
    assert_eq!(built.backward(g).unwrap(), want, "batch {n}");
}

/// `x → op → flatten`.
fn run_op(op: Op, x: &Tensor) -> Tensor {
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let y = g.push("op", op, vec![g.input], "y").unwrap();
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![y], "z")
        .unwrap();
    trained_and_evaluated(&g, x)
}

#[test]
fn unary_ops_build_and_equal_their_function() {
    let x = rand_tensor(&[2, 3, 4, 4], 4.0, 3);
    for u in [
        ir::Unary::HardSwish,
        ir::Unary::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        ir::Unary::Mish,
        ir::Unary::Pow { exponent: 3.0 },
    ] {
        let y = run_op(Op::Unary(u), &x);
        for (got, &v) in y.iter().zip(x.iter()) {
            let want = crate::layers::unary::value(u, v);
            assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{u:?}");
        }
    }
}

#[test]
fn prelu_and_group_norm_build_and_equal_a_direct_computation() {
    let x = rand_tensor(&[2, 3, 4, 4], 2.0, 5);
    let slope = rand_tensor(&[3, 1, 1], 0.5, 6);
    let y = run_op(
        Op::PRelu {
            slope: slope.clone(),
        },
        &x,
    );
    for ((i, &v), got) in x.indexed_iter().zip(y.iter()) {
        let want = if v >= 0.0 { v } else { slope[[i[1], 0, 0]] * v };
        assert!((got - want).abs() < 1e-6);
    }
    // Instance norm (one group per channel) with a scale and shift.
    let (scale, bias) = (rand_tensor(&[3], 1.0, 7), rand_tensor(&[3], 1.0, 8));
    let op = Op::GroupNorm(ir::GroupNorm {
        groups: 3,
        scale: scale.clone(),
        bias: bias.clone(),
        epsilon: 1e-5,
    });
    let y = run_op(op, &x);
    for n in 0..2 {
        for ch in 0..3 {
            let vals: Vec<f32> = (0..16).map(|k| x[[n, ch, k / 4, k % 4]]).collect();
            let mean = vals.iter().sum::<f32>() / 16.0;
            let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 16.0;
            for (k, v) in vals.iter().enumerate() {
                let want = (v - mean) / (var + 1e-5).sqrt() * scale[ch] + bias[ch];
                let got = y[[n, ch * 16 + k]];
                assert!((got - want).abs() < 1e-4, "{got} vs {want}");
            }
        }
    }
}

/// A `ceil_mode` pool over `[1, 2, 6, 6]` keeps a last, overhanging window (3×3, not 2×2).
#[test]
fn ceil_mode_pools_keep_the_overhanging_window() {
    let x = rand_tensor(&[1, 2, 6, 6], 2.0, 9);
    let pool = ir::Pool {
        kernel: [3, 3],
        strides: [2, 2],
        pads: [0; 4],
        dilations: [1, 1],
        ceil_mode: true,
    };
    let window = |oy: usize, ox: usize, ch: usize| -> Vec<f32> {
        (oy * 2..(oy * 2 + 3).min(6))
            .flat_map(|i| (ox * 2..(ox * 2 + 3).min(6)).map(move |j| (i, j)))
            .map(|(i, j)| x[[0, ch, i, j]])
            .collect()
    };
    let max = run_op(Op::MaxPool(pool.clone()), &x);
    let avg = ir::AvgPool {
        pool: pool.clone(),
        count_include_pad: false,
    };
    let mean = run_op(Op::AveragePool(avg), &x);
    assert_eq!(max.shape(), [1, 18]);
    for ch in 0..2 {
        for k in 0..9 {
            let w = window(k / 3, k % 3, ch);
            let m = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(max[[0, ch * 9 + k]], m);
            let a = w.iter().sum::<f32>() / w.len() as f32;
            assert!((mean[[0, ch * 9 + k]] - a).abs() < 1e-6);
        }
    }
}

/// DenseNet's pattern: a batch norm reading a channel concat, in training.
#[test]
fn a_batch_norm_reads_a_concat_in_training() {
    let x = rand_tensor(&[2, 2, 3, 3], 1.0, 10);
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let cat = Op::Concat { axis: 1 };
    let c = g.push("cat", cat, vec![g.input, g.input], "c").unwrap();
    let ones = ndarray::ArrayD::ones(vec![4]);
    let bn = Op::BatchNorm(ir::BatchNorm {
        scale: ones.clone(),
        bias: ones.clone() * 0.0,
        mean: ones.clone() * 0.0,
        var: ones,
        epsilon: 1e-5,
        momentum: 0.9,
        training_mode: false,
    });
    let b = g.push("bn", bn, vec![c], "b").unwrap();
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![b], "z")
        .unwrap();
    let mut net = build_network(&g, &BuildOptions::default()).unwrap();
    let out = net
        .forward(net.input_from_ir(&x).unwrap(), Mode::Train)
        .unwrap();
    // Per channel over the batch: the normalised values have mean 0.
    for ch in 0..4 {
        let s: f32 = (0..2)
            .flat_map(|n| (0..9).map(move |k| (n, ch * 9 + k)))
            .map(|(n, j)| out[[n, j]])
            .sum();
        assert!(s.abs() < 1e-4, "channel {ch}: {s}");
    }
    let grad = net.backward(Tensor::ones(out.raw_dim())).unwrap();
    assert!(grad.iter().all(|v| v.is_finite()));
}

/// `x → ops… → global average pool → flatten`.
fn run_chain(x: &Tensor, ops: Vec<(&str, Op)>) -> Tensor {
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let mut v = g.input;
    for (name, op) in ops {
        v = g.push(name, op, vec![v], name).unwrap();
    }
    let p = g.push("gap", Op::GlobalAveragePool, vec![v], "p").unwrap();
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![p], "z")
        .unwrap();
    trained_and_evaluated(&g, x)
}

fn channel_means(x: &Tensor) -> Vec<Vec<f32>> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let hw = (x.len() / (n * c)) as f32;
    (0..n)
        .map(|i| {
            (0..c)
                .map(|ch| {
                    x.index_axis(ndarray::Axis(0), i)
                        .index_axis(ndarray::Axis(0), ch)
                        .sum()
                        / hw
                })
                .collect()
        })
        .collect()
}

/// ShuffleNetV2's channel shuffle, `[N, 2, C/2, H, W] → transpose(1, 2) → [N, C, H, W]`, feeds
/// an op that reads an image.
#[test]
fn a_channel_shuffle_feeds_an_image_op() {
    let x = rand_tensor(&[2, 4, 3, 3], 1.0, 12);
    let y = run_chain(
        &x,
        vec![
            (
                "split",
                Op::Reshape {
                    shape: vec![2, 2, 2, 3, 3],
                },
            ),
            (
                "swap",
                Op::Transpose {
                    perm: vec![0, 2, 1, 3, 4],
                },
            ),
            (
                "join",
                Op::Reshape {
                    shape: vec![2, 4, 3, 3],
                },
            ),
        ],
    );
    let m = channel_means(&x);
    for n in 0..2 {
        for (out, src) in [0, 2, 1, 3].into_iter().enumerate() {
            assert!((y[[n, out]] - m[n][src]).abs() < 1e-5);
        }
    }
}

/// ConvNeXt's channels-last block: `permute(0, 2, 3, 1)`, a layer norm and a linear layer on
/// the channels, `permute(0, 3, 1, 2)` back to an image.
#[test]
fn channels_last_layers_between_permutes_read_the_image() {
    let x = rand_tensor(&[2, 3, 2, 2], 1.0, 13);
    let w = rand_tensor(&[3, 3], 1.0, 14);
    let ln = Op::LayerNorm(ir::LayerNorm {
        scale: ndarray::ArrayD::ones(vec![3]),
        bias: ndarray::ArrayD::zeros(vec![3]),
        epsilon: 1e-5,
    });
    let lin = Op::Linear(ir::Linear {
        weight: w.clone(),
        bias: None,
    });
    let y = run_chain(
        &x,
        vec![
            (
                "to_last",
                Op::Transpose {
                    perm: vec![0, 2, 3, 1],
                },
            ),
            ("ln", ln),
            ("fc", lin),
            (
                "to_first",
                Op::Transpose {
                    perm: vec![0, 3, 1, 2],
                },
            ),
        ],
    );
    for n in 0..2 {
        let mut want = [0.0f32; 3];
        for k in 0..4 {
            let v: Vec<f32> = (0..3).map(|c| x[[n, c, k / 2, k % 2]]).collect();
            let mu = v.iter().sum::<f32>() / 3.0;
            let var = v.iter().map(|a| (a - mu).powi(2)).sum::<f32>() / 3.0;
            let z: Vec<f32> = v.iter().map(|a| (a - mu) / (var + 1e-5).sqrt()).collect();
            for (o, acc) in want.iter_mut().enumerate() {
                *acc += (0..3).map(|i| w[[o, i]] * z[i]).sum::<f32>() / 4.0;
            }
        }
        for o in 0..3 {
            assert!(
                (y[[n, o]] - want[o]).abs() < 1e-4,
                "{} vs {}",
                y[[n, o]],
                want[o]
            );
        }
    }
}

/// A concat and an add of a channel-shuffled tensor (held as in the IR) and an image: both
/// read their operands in one layout (ShuffleNetV2's next unit).
#[test]
fn a_shuffled_tensor_joins_an_image() {
    let x = rand_tensor(&[2, 4, 3, 3], 1.0, 15);
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let split = Op::Reshape {
        shape: vec![2, 2, 2, 3, 3],
    };
    let a = g.push("split", split, vec![g.input], "a").unwrap();
    let swap = Op::Transpose {
        perm: vec![0, 2, 1, 3, 4],
    };
    let b = g.push("swap", swap, vec![a], "b").unwrap();
    let join = Op::Reshape {
        shape: vec![2, 4, 3, 3],
    };
    let s = g.push("join", join, vec![b], "s").unwrap();
    let add = Op::Binary(ir::Binary {
        kind: ir::BinaryKind::Add,
        constant: None,
    });
    let sum = g.push("add", add, vec![s, g.input], "sum").unwrap();
    let c = g
        .push("cat", Op::Concat { axis: 1 }, vec![s, sum], "c")
        .unwrap();
    let p = g.push("gap", Op::GlobalAveragePool, vec![c], "p").unwrap();
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![p], "z")
        .unwrap();
    let y = trained_and_evaluated(&g, &x);
    let m = channel_means(&x);
    for n in 0..2 {
        for (out, src) in [0, 2, 1, 3].into_iter().enumerate() {
            assert!((y[[n, out]] - m[n][src]).abs() < 1e-5);
            assert!((y[[n, 4 + out]] - m[n][src] - m[n][out]).abs() < 1e-5);
        }
    }
}

/// Swin's window partition and merge at batch `n`, 2×2 windows of 2×2 over a 4×4 map of 3
/// channels: `[n, 4, 4, 3]` → `[n, 2, 2, 2, 2, 3]` → permute → `[n·4, 4, 3]` → ReLU →
/// `[n, 2, 2, 2, 2, 3]` → `[n, 48]`. Built at batch 2, the merge's target has two axes of 2.
fn windows(n: usize) -> ir::Graph {
    let mut g = ir::Graph::new("w", "test", n, "x", vec![n, 4, 4, 3]);
    let mut v = g.input;
    for (name, op) in [
        (
            "part",
            Op::Reshape {
                shape: vec![n, 2, 2, 2, 2, 3],
            },
        ),
        (
            "perm",
            Op::Transpose {
                perm: vec![0, 1, 3, 2, 4, 5],
            },
        ),
        (
            "merge",
            Op::Reshape {
                shape: vec![n * 4, 4, 3],
            },
        ),
        ("relu", Op::Relu),
        (
            "unpart",
            Op::Reshape {
                shape: vec![n, 2, 2, 2, 2, 3],
            },
        ),
        ("flat", Op::Reshape { shape: vec![n, 48] }),
    ] {
        v = g.push(name, op, vec![v], name).unwrap();
    }
    g.output = v;
    g
}

#[test]
fn a_window_partition_built_at_one_batch_runs_at_others() {
    let mut built = build_network(&windows(2), &BuildOptions::default()).unwrap();
    for n in [1, 3, 5] {
        let x = rand_tensor(&[n, 4, 4, 3], 1.0, 20 + n as u64);
        let mut own = build_network(&windows(n), &BuildOptions::default()).unwrap();
        let g = rand_tensor(&[n, 48], 1.0, 30 + n as u64);
        runs_as_built_at_its_batch(&mut built, &mut own, &x, g);
    }
}

/// The dynamo exporter's scaled-dot-product attention at batch `n` with 2 heads of 4 over 3
/// tokens, the input standing for q, k and v: `[n, 3, 8]` → heads `[n, 2, 3, 4]`; k flattened to
/// `[n·2, 3, 4]`, transposed and split back to `[n, 2, 4, 3]` (at batch 2 the batch and the heads
/// are both 2); scores plus a constant `mask` (`[1, 1, 3, 3]`, or per sample `[2, 1, 1, 1]`),
/// softmax, times v, heads merged to `[n, 24]`.
fn attention(n: usize, mask: ndarray::ArrayD<f32>) -> ir::Graph {
    let mut g = ir::Graph::new("a", "test", n, "x", vec![n, 3, 8]);
    let reshape = |shape: Vec<usize>| Op::Reshape { shape };
    let transpose = |perm: Vec<usize>| Op::Transpose { perm };
    let heads = g
        .push("heads", reshape(vec![n, 3, 2, 4]), vec![g.input], "h")
        .unwrap();
    let q = g
        .push("q", transpose(vec![0, 2, 1, 3]), vec![heads], "q")
        .unwrap();
    let mut k = q;
    for (name, op) in [
        ("flat", reshape(vec![n * 2, 3, 4])),
        ("kt", transpose(vec![0, 2, 1])),
        ("split", reshape(vec![n, 2, 4, 3])),
    ] {
        k = g.push(name, op, vec![k], name).unwrap();
    }
    let s = g.push("scores", Op::MatMul, vec![q, k], "s").unwrap();
    let masked = Op::Binary(ir::Binary {
        kind: ir::BinaryKind::Add,
        constant: Some(ir::ConstOperand {
            value: mask,
            on_left: false,
        }),
    });
    let s = g.push("mask", masked, vec![s], "m").unwrap();
    let soft = Op::Softmax {
        axis: 3,
        log: false,
    };
    let p = g.push("softmax", soft, vec![s], "p").unwrap();
    let mut v = g.push("mix", Op::MatMul, vec![p, q], "o").unwrap();
    for (name, op) in [
        ("merge", transpose(vec![0, 2, 1, 3])),
        ("out", reshape(vec![n, 24])),
    ] {
        v = g.push(name, op, vec![v], name).unwrap();
    }
    g.output = v;
    g
}

#[test]
fn attention_with_flattened_heads_built_at_one_batch_runs_at_others() {
    let mask = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[1, 1, 3, 3]), |i| {
        0.1 * (i[2] + 2 * i[3]) as f32
    });
    let mut built = build_network(&attention(2, mask.clone()), &BuildOptions::default()).unwrap();
    for n in [1, 3] {
        let x = rand_tensor(&[n, 3, 8], 1.0, 40 + n as u64);
        let opts = BuildOptions::default();
        let mut own = build_network(&attention(n, mask.clone()), &opts).unwrap();
        let g = rand_tensor(&[n, 24], 1.0, 50 + n as u64);
        runs_as_built_at_its_batch(&mut built, &mut own, &x, g);
    }
    // a constant that differs per sample holds the batch it was built at
    let per_sample =
        ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2, 1, 1, 1]), vec![0.0, 1.0]).unwrap();
    let mut pinned = build_network(&attention(2, per_sample), &BuildOptions::default()).unwrap();
    let x = rand_tensor(&[2, 3, 8], 1.0, 60);
    assert!(pinned
        .forward(pinned.input_from_ir(&x).unwrap(), Mode::Eval)
        .is_ok());
    for n in [1, 3] {
        let x = rand_tensor(&[n, 3, 8], 1.0, 60 + n as u64);
        let e = pinned
            .forward(pinned.input_from_ir(&x).unwrap(), Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mask")
                && e.contains(&format!("holds a batch of {n} in axis 0"))
                && e.contains("[2, 1, 1, 1] holds 2 different values"),
            "batch {n}: {e}"
        );
    }
}

/// The dynamo exporter's `AdaptiveAvgPool2d((2, 2))` of a 4×4 map: transposed to
/// `[H, W, N, C]`, gathered at constant window positions, transposed back and averaged over
/// the window axes. It equals a 2×2 average pool at the built batch and at another, and each
/// input element gets a quarter of its window's gradient.
#[test]
fn a_gathered_window_grid_averages_like_a_pool_at_any_batch() {
    let x = rand_tensor(&[2, 2, 4, 4], 1.0, 16);
    let mut positions = Vec::new();
    for i in 0..2 {
        for j in 0..2 {
            for a in 0..2 {
                for b in 0..2 {
                    positions.push((2 * i + a) * 4 + 2 * j + b);
                }
            }
        }
    }
    let gather = Op::Gather(ir::Gather {
        axis: 0,
        block: vec![4, 4],
        grid: vec![2, 2, 2, 2],
        positions,
    });
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let mut v = g.input;
    for (name, op) in [
        (
            "hwnc",
            Op::Transpose {
                perm: vec![2, 3, 0, 1],
            },
        ),
        ("windows", gather),
        (
            "back",
            Op::Transpose {
                perm: vec![4, 5, 0, 1, 2, 3],
            },
        ),
        (
            "mean",
            Op::ReduceMean {
                axes: vec![4, 5],
                keepdims: false,
            },
        ),
        ("flat", Op::Flatten { axis: 1 }),
    ] {
        v = g.push(name, op, vec![v], name).unwrap();
    }
    g.output = v;
    let mut net = build_network(&g, &BuildOptions::default()).unwrap();
    let out = net
        .forward(net.input_from_ir(&x).unwrap(), Mode::Train)
        .unwrap();
    let grad = net.backward(Tensor::ones(out.raw_dim())).unwrap();
    assert!(grad.iter().all(|&d| d == 0.25), "{grad:?}");
    for batch in [2, 1] {
        let xb = x.slice_axis(ndarray::Axis(0), (0..batch).into()).to_owned();
        let y = net
            .forward(net.input_from_ir(&xb).unwrap(), Mode::Eval)
            .unwrap();
        assert_eq!(y.shape(), [batch, 8]);
        for n in 0..batch {
            for c in 0..2 {
                for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let mut want = 0.0;
                    for (a, b) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                        want += x[[n, c, 2 * i + a, 2 * j + b]] / 4.0;
                    }
                    let got = y[[n, c * 4 + i * 2 + j]];
                    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
                }
            }
        }
    }
}

/// `Where` at a constant condition on an image tensor `[N, C, H, W]` (held channels-last by
/// the layer before it): a fill where the condition fails, at the built batch and another, and
/// a choice between two tensors whose gradient reaches each where it was chosen.
#[test]
fn a_where_at_a_constant_condition_chooses_per_element_at_any_batch() {
    let x = rand_tensor(&[2, 2, 3, 3], 1.0, 17);
    // keep [C, 1, W]: channel 0 keeps column 0 and 2, channel 1 keeps column 1.
    let keep =
        ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[2, 1, 3]), |i| (i[0] + i[2]) % 2 == 0);
    let fill = ndarray::ArrayD::from_elem(ndarray::IxDyn(&[]), -5.0f32);
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let r = g.push("relu", Op::Relu, vec![g.input], "r").unwrap();
    let op = Op::Where(ir::Where {
        keep: keep.clone(),
        fill: Some(fill),
    });
    let w = g.push("where", op, vec![r], "w").unwrap();
    let both = Op::Where(ir::Where {
        keep: keep.clone(),
        fill: None,
    });
    let b = g.push("both", both, vec![w, g.input], "b").unwrap();
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![b], "f")
        .unwrap();
    assert_eq!(g.summary().total_macs(), 0);
    let mut net = build_network(&g, &BuildOptions::default()).unwrap();
    let out = net
        .forward(net.input_from_ir(&x).unwrap(), Mode::Train)
        .unwrap();
    let grad = net.backward(Tensor::ones(out.raw_dim())).unwrap();
    // held channels-last, as the network holds its image input
    assert_eq!(grad.shape(), [2, 3, 3, 2]);
    let grad = grad.permuted_axes(vec![0, 3, 1, 2]);
    for batch in [2, 1] {
        let xb = x.slice_axis(ndarray::Axis(0), (0..batch).into()).to_owned();
        let y = net
            .forward(net.input_from_ir(&xb).unwrap(), Mode::Eval)
            .unwrap();
        assert_eq!(y.shape(), [batch, 18]);
        for n in 0..batch {
            for c in 0..2 {
                for h in 0..3 {
                    for wi in 0..3 {
                        let v = x[[n, c, h, wi]];
                        // kept twice over: relu(x) (the first where), else x itself
                        let want = if keep[[c, 0, wi]] { v.max(0.0) } else { v };
                        assert_eq!(y[[n, c * 9 + h * 3 + wi]], want);
                    }
                }
            }
        }
    }
    // The gradient of x: through the relu where kept, directly where not.
    for (idx, &d) in grad.indexed_iter() {
        let kept = keep[[idx[1], 0, idx[3]]];
        let want = if !kept || x[&idx] > 0.0 { 1.0 } else { 0.0 };
        assert_eq!(d, want, "{idx:?}");
    }
}
