//! The network's tests: learning (synthetic data, real MNIST), parameter-only backward, fusion and
//! evaluation epilogues giving the layer-by-layer values, thread-count independence, errors.

use super::*;
use crate::data::{eval_batches, synthetic, Loader};
use crate::init::{conv_weight, linear_weight_bias};
use crate::layers::*;
use crate::optim::Sgd;
use crate::quant::QuantMethod;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

impl Graph {
    /// The evaluation epilogue the fusion pass finds at node `i`, with the last node it covers.
    fn epilogue_after(
        &mut self,
        i: usize,
        end: usize,
        last_use: &[usize],
        start: usize,
        values: &mut [Option<Tensor>],
    ) -> Result<(Epilogue, usize)> {
        let scope = Scope {
            start,
            end,
            last_use,
        };
        match Fusion::find(&mut self.nodes, i, &scope, Mode::Eval, values)? {
            (Fusion::Epilogue(e), last) => Ok((e, last)),
            // A conv's own epilogue ends before the next conv of the block run with it.
            (
                Fusion::DepthwiseBlock {
                    expand: Some(e),
                    dw_at,
                    ..
                },
                _,
            ) => Ok((e, i + dw_at - 1)),
            (
                Fusion::DepthwiseBlock {
                    expand: None,
                    first,
                    pointwise: Some((at, _)),
                    ..
                },
                _,
            ) => Ok((first, i + at - 1)),
            _ => panic!("evaluation finds an epilogue"),
        }
    }
}

/// conv-bn-relu → conv-bn → +skip → relu → gap → flatten → fc.
fn tiny_resnet(classes: usize, method: QuantMethod, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut g = Graph::new();
    let q = |i: u64| LayerQuant::new(method, seed ^ i);
    let c1 = Conv2dSpec::square(1, 8, 3, 1, 1);
    let c2 = Conv2dSpec::square(8, 8, 3, 1, 1);
    g.then(Conv2d::new("c1", c1, conv_weight(&mut rng, 8, [3, 3], 1, 1), None, q(1)).unwrap())
        .unwrap();
    g.then(BatchNorm::new("b1", 8)).unwrap();
    let a = g.then(Activation::new("r1", ActivationKind::Relu)).unwrap();
    g.then(Conv2d::new("c2", c2, conv_weight(&mut rng, 8, [3, 3], 8, 1), None, q(2)).unwrap())
        .unwrap();
    let b = g.then(BatchNorm::new("b2", 8)).unwrap();
    g.push(Add::new("add"), &[b, a]).unwrap();
    g.then(Activation::new("r2", ActivationKind::Relu)).unwrap();
    g.then(GlobalAvgPool::new("gap")).unwrap();
    g.then(Flatten::new("flat")).unwrap();
    let (w, bias) = linear_weight_bias(&mut rng, classes, 8);
    g.then(Linear::new("fc", w, Some(bias), q(3)).unwrap())
        .unwrap();
    g
}

/// [`tiny_resnet`] with SBM 6/6 in every quantized layer.
fn tiny_resnet_at_6_bits(seed: u64) -> Graph {
    let mut g = tiny_resnet(4, QuantMethod::Sbm, seed);
    for (_, q) in g.quant_layers_mut() {
        q.set_bits(6, 6).unwrap();
    }
    g
}

fn train(g: &mut Graph, bits: (u32, u32), steps: usize) -> (f32, f32) {
    for (_, q) in g.quant_layers_mut() {
        q.set_bits(bits.0, bits.1).unwrap();
    }
    let data = synthetic(1200, [1, 8, 8], 4, 40.0, 11).unwrap();
    let (tr, te) = data.split_validation(0.25, 1).unwrap();
    let mut loader = Loader::new(&tr, 32, [1, 8, 8], false, 5).unwrap();
    let mut loss = SoftmaxCrossEntropy::new();
    let mut opt = Sgd::new(0.9, 1e-4);
    let mut last = 0.0;
    for _ in 0..steps {
        let b = loader.next_batch().unwrap();
        let out = g.forward(b.images, Mode::Train).unwrap();
        last = loss.forward(&out, &b.labels).unwrap().0;
        g.backward(loss.backward().unwrap()).unwrap();
        opt.step(&mut g.params_mut(), 0.05).unwrap();
    }
    let mut correct = 0;
    for b in eval_batches(&te, 100, [1, 8, 8]).unwrap() {
        let out = g.forward(b.images, Mode::Eval).unwrap();
        correct += loss.forward(&out, &b.labels).unwrap().1;
    }
    (last, correct as f32 / te.len() as f32)
}

#[test]
fn residual_net_learns_synthetic_data_fp32_and_sbm4() {
    let (loss, acc) = train(&mut tiny_resnet(4, QuantMethod::Sbm, 1), (0, 0), 150);
    assert!(acc > 0.9 && loss < 0.5, "fp32: loss {loss}, acc {acc}");
    let (loss, acc) = train(&mut tiny_resnet(4, QuantMethod::Sbm, 1), (4, 4), 150);
    assert!(acc > 0.85, "sbm 4/4: loss {loss}, acc {acc}");
}

#[test]
fn parameter_only_backward_gives_the_same_parameter_gradients() {
    let x = crate::layers::gradcheck::rand_tensor(&[4, 8, 8, 1], 1.0, 5);
    let grads = |params_only: bool| {
        let mut g = tiny_resnet_at_6_bits(4);
        let out = g.forward(x.clone(), Mode::Train).unwrap();
        let dy = Tensor::ones(out.raw_dim());
        if params_only {
            g.backward_params(dy).unwrap();
        } else {
            assert_eq!(g.backward(dy).unwrap().shape(), x.shape());
        }
        let p: Vec<Tensor> = g.params_mut().iter().map(|p| p.grad.clone()).collect();
        p
    };
    let (full, params) = (grads(false), grads(true));
    assert!(full.iter().all(|t| t.iter().any(|&v| v != 0.0)));
    assert_eq!(full, params);
}

#[test]
fn training_fuses_relu_into_batch_norm_with_the_same_values() {
    let x = crate::layers::gradcheck::rand_tensor(&[4, 8, 8, 1], 1.0, 6);
    let run = |fused: bool| {
        let mut g = tiny_resnet_at_6_bits(5);
        let out = match fused {
            true => g.forward(x.clone(), Mode::Train).unwrap(),
            false => g
                .forward_with(x.clone(), Mode::Train, &mut |_, _, _| Ok(()))
                .unwrap(),
        };
        // b1 → r1 fuses (nothing else reads b1's output); add → r2 does not (not a BN).
        let flags: Vec<bool> = g.nodes.iter().map(|n| n.fused).collect();
        let dx = g.backward(Tensor::ones(out.raw_dim())).unwrap();
        let p: Vec<Tensor> = g.params_mut().iter().map(|p| p.grad.clone()).collect();
        (out, dx, p, flags)
    };
    let (fused, plain) = (run(true), run(false));
    assert_eq!(
        fused.3,
        [false, false, true, false, false, false, false, false, false, false]
    );
    assert!(plain.3.iter().all(|f| !f));
    assert_eq!((fused.0, fused.1, fused.2), (plain.0, plain.1, plain.2));
}

#[test]
fn ranges_compose_to_the_whole_pass_and_closed_regions_are_found() {
    let mut g = tiny_resnet(4, QuantMethod::Sbm, 3);
    for (_, q) in g.quant_layers_mut() {
        q.set_bits(6, 6).unwrap();
    }
    let mut h = tiny_resnet(4, QuantMethod::Sbm, 3);
    for (_, q) in h.quant_layers_mut() {
        q.set_bits(6, 6).unwrap();
    }
    // the residual block c2..r2 (nodes 3..7) is closed; starting inside it is not
    assert!(g.is_closed(3..7) && g.is_closed(0..10) && g.is_closed(5..5));
    assert!(!g.is_closed(4..7) && !g.is_closed(3..5) && !g.is_closed(3..11));
    let x = synthetic(6, [1, 8, 8], 4, 5.0, 2).unwrap();
    let b = eval_batches(&x, 6, [1, 8, 8]).unwrap().remove(0);
    let whole = g.forward(b.images.clone(), Mode::Train).unwrap();
    let mut parts = b.images;
    for r in [0..3, 3..7, 7..10] {
        parts = h.forward_range(r, parts, Mode::Train).unwrap();
    }
    assert_eq!(whole, parts);
    let grad = whole.mapv(|v| v.sin());
    let dx = g.backward(grad.clone()).unwrap();
    let mut d = grad;
    for r in [7..10, 3..7, 0..3] {
        d = h.backward_range(r, d).unwrap();
    }
    assert_eq!(dx, d);
    let grads = |g: &mut Graph| {
        g.params_mut()
            .iter()
            .map(|p| p.grad.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(grads(&mut g), grads(&mut h));
    let e = h
        .forward_range(4..7, whole.clone(), Mode::Train)
        .unwrap_err()
        .to_string();
    assert!(e.contains("add") && e.contains("before"), "{e}");
    assert!(h.forward_range(3..12, whole, Mode::Train).is_err());
}

#[test]
fn evaluation_epilogues_give_the_layer_by_layer_values_bit_for_bit() {
    for (method, bits) in [(QuantMethod::Sbm, (0, 0)), (QuantMethod::Sbm, (6, 6))] {
        let mut g = tiny_resnet(4, method, 4);
        let (images, each, fused) = layer_by_layer_and_fused(&mut g, bits, 20);
        assert_eq!(each, fused, "bits {bits:?}");
        assert_eq!(each, g.forward_range(0..10, images, Mode::Eval).unwrap());
    }
    // b1 after c1 fused (c1 → b1 → r1: both become c1's epilogue) …
    let mut g = tiny_resnet(4, QuantMethod::Sbm, 4);
    let last_use = [0, 1, 2, 5, 4, 5, 6, 7, 8, 9, 0];
    let mut values = vec![None; 11];
    values[3] = Some(Tensor::zeros(vec![1, 8, 8, 8]));
    let (epilogue, last) = g.epilogue_after(0, 10, &last_use, 0, &mut values).unwrap();
    assert_eq!((epilogue.0.len(), last), (2, 2));
    // … c2 takes b2 but not the add, whose other operand c2 reads itself, which takes r2;
    // r1, whose value feeds both c2 and the add, takes nothing.
    assert_eq!(
        g.epilogue_after(3, 10, &last_use, 0, &mut values)
            .unwrap()
            .1,
        4
    );
    assert_eq!(
        g.epilogue_after(5, 10, &last_use, 0, &mut values)
            .unwrap()
            .1,
        6
    );
    assert_eq!(
        g.epilogue_after(2, 10, &last_use, 0, &mut values)
            .unwrap()
            .1,
        2
    );
    assert!(values[3].is_some());
}

/// A residual block of two convs, `x → c2 → b2 → r2 → c3 → b3 → add(x) → r3`, after a stem
/// `c1 → b1 → r1` (its output is `x`), then pooling and a linear head; `c3` has `out`
/// channels (8 matches `x`).
fn two_conv_block(out: usize, seed: u64) -> Graph {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut g = Graph::new();
    let q = |i: u64| LayerQuant::new(QuantMethod::Sbm, seed ^ i);
    let conv = |rng: &mut ChaCha8Rng, name: &str, i: usize, o: usize, k: u64| {
        let w = conv_weight(rng, o, [3, 3], i, 1);
        Conv2d::new(name, Conv2dSpec::square(i, o, 3, 1, 1), w, None, q(k)).unwrap()
    };
    g.then(conv(&mut rng, "c1", 1, 8, 1)).unwrap();
    g.then(BatchNorm::new("b1", 8)).unwrap();
    let x = g.then(Activation::new("r1", ActivationKind::Relu)).unwrap();
    g.then(conv(&mut rng, "c2", 8, 8, 2)).unwrap();
    g.then(BatchNorm::new("b2", 8)).unwrap();
    g.then(Activation::new("r2", ActivationKind::Relu)).unwrap();
    g.then(conv(&mut rng, "c3", 8, out, 3)).unwrap();
    let y = g.then(BatchNorm::new("b3", out)).unwrap();
    g.push(Add::new("add"), &[y, x]).unwrap();
    g.then(Activation::new("r3", ActivationKind::Relu)).unwrap();
    g.then(GlobalAvgPool::new("gap")).unwrap();
    g.then(Flatten::new("flat")).unwrap();
    let (w, bias) = linear_weight_bias(&mut rng, 4, out);
    g.then(Linear::new("fc", w, Some(bias), q(4)).unwrap())
        .unwrap();
    g
}

#[test]
fn a_residual_add_runs_in_the_evaluation_epilogue_bit_for_bit() {
    let mut g = two_conv_block(8, 5);
    // c3 (node 6) takes b3, the add (handing x over) and r3.
    let last_use = [0, 1, 2, 8, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0];
    let mut values = vec![None; 14];
    values[3] = Some(Tensor::zeros(vec![1, 8, 8, 8]));
    let (epilogue, last) = g.epilogue_after(6, 13, &last_use, 0, &mut values).unwrap();
    assert_eq!((epilogue.0.len(), last), (3, 9));
    assert!(values[3].is_none());
    for bits in [(0, 0), (6, 6)] {
        let (_, each, fused) = layer_by_layer_and_fused(&mut g, bits, 40);
        assert_eq!(each, fused, "bits {bits:?}");
    }
    // Operands of different shapes stay an error naming the add, fused or not.
    let mut g = two_conv_block(6, 5);
    assert_eval_errors_name(&mut g, Tensor::zeros(vec![2, 8, 8, 1]), "add");
}

/// Trains `g` a little at `bits` (so that batch norm's running statistics and γ, β are not
/// trivial), then evaluates `n` synthetic images layer by layer (a hook sees every value)
/// and fused: (images, layer by layer, fused).
fn layer_by_layer_and_fused(g: &mut Graph, bits: (u32, u32), n: usize) -> (Tensor, Tensor, Tensor) {
    train(g, bits, 10);
    let x = synthetic(n, [1, 8, 8], 4, 5.0, 3).unwrap();
    let images = eval_batches(&x, n, [1, 8, 8]).unwrap().remove(0).images;
    let each = g
        .forward_with(images.clone(), Mode::Eval, &mut |_, _, _| Ok(()))
        .unwrap();
    let fused = g.forward(images.clone(), Mode::Eval).unwrap();
    assert!(each.iter().all(|v| v.is_finite()));
    (images, each, fused)
}

/// Evaluating `x` fails, fused and layer by layer, with an error naming `layer`.
fn assert_eval_errors_name(g: &mut Graph, x: Tensor, layer: &str) {
    for e in [
        g.forward(x.clone(), Mode::Eval).unwrap_err(),
        g.forward_with(x, Mode::Eval, &mut |_, _, _| Ok(()))
            .unwrap_err(),
    ] {
        assert!(e.to_string().contains(layer), "{e}");
    }
}

#[test]
fn a_fused_batch_norm_of_the_wrong_width_is_an_error_naming_it() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut g = Graph::new();
    let spec = Conv2dSpec::square(1, 8, 3, 1, 1);
    let q = LayerQuant::new(QuantMethod::Sbm, 1);
    g.then(Conv2d::new("c1", spec, conv_weight(&mut rng, 8, [3, 3], 1, 1), None, q).unwrap())
        .unwrap();
    g.then(BatchNorm::new("bn_wide", 6)).unwrap();
    assert_eval_errors_name(&mut g, Tensor::zeros(vec![2, 4, 4, 1]), "bn_wide");
}

#[test]
fn training_is_identical_on_one_and_two_threads() {
    let run = |threads: usize| {
        cptsim_testdata::with_threads(threads, || {
            let mut g = tiny_resnet(4, QuantMethod::Sbm, 2);
            train(&mut g, (6, 6), 20);
            g.params_mut()
                .iter()
                .map(|p| p.value.clone())
                .collect::<Vec<_>>()
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn cnn_learns_real_mnist_adapted_to_3x32x32_with_sbm8() {
    let Some(dir) = crate::data::dataset::tests::shared_data("mnist") else {
        return;
    };
    let mut train = crate::data::load_mnist(&dir, crate::data::Split::Train, false).unwrap();
    let mut test = crate::data::load_mnist(&dir, crate::data::Split::Test, false).unwrap();
    train.truncate(19_200);
    test.truncate(2_000);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut g = Graph::new();
    let q = |i: u64| LayerQuant::new(QuantMethod::Sbm, i);
    let (c1, c2) = (
        Conv2dSpec::square(3, 8, 3, 1, 1),
        Conv2dSpec::square(8, 16, 3, 1, 1),
    );
    g.then(Conv2d::new("c1", c1, conv_weight(&mut rng, 8, [3, 3], 3, 1), None, q(1)).unwrap())
        .unwrap();
    g.then(BatchNorm::new("b1", 8)).unwrap();
    g.then(Activation::new("r1", ActivationKind::Relu)).unwrap();
    g.then(Pool2d::new("p1", PoolKind::Max, PoolSpec::square(2, 2)).unwrap())
        .unwrap();
    g.then(
        Conv2d::new(
            "c2",
            c2,
            conv_weight(&mut rng, 16, [3, 3], 8, 1),
            None,
            q(2),
        )
        .unwrap(),
    )
    .unwrap();
    g.then(BatchNorm::new("b2", 16)).unwrap();
    g.then(Activation::new("r2", ActivationKind::Relu)).unwrap();
    g.then(Pool2d::new("p2", PoolKind::Max, PoolSpec::square(2, 2)).unwrap())
        .unwrap();
    g.then(Flatten::new("flat")).unwrap();
    let (w, b) = linear_weight_bias(&mut rng, 10, 16 * 8 * 8);
    g.then(Linear::new("fc", w, Some(b), q(3)).unwrap())
        .unwrap();
    for (name, q) in g.quant_layers_mut() {
        if name != "fc" {
            q.set_bits(8, 8).unwrap();
        }
    }
    let mut loader = Loader::new(&train, 64, [3, 32, 32], false, 9).unwrap();
    assert!(loader.adaptation().is_needed());
    let mut loss = SoftmaxCrossEntropy::new();
    let mut opt = Sgd::new(0.9, 1e-4);
    for _ in 0..300 {
        let b = loader.next_batch().unwrap();
        let out = g.forward(b.images, Mode::Train).unwrap();
        let l = loss.forward(&out, &b.labels).unwrap().0;
        assert!(l.is_finite());
        g.backward(loss.backward().unwrap()).unwrap();
        opt.step(&mut g.params_mut(), 0.05).unwrap();
    }
    let mut correct = 0;
    for b in eval_batches(&test, 500, [3, 32, 32]).unwrap() {
        let out = g.forward(b.images, Mode::Eval).unwrap();
        correct += loss.forward(&out, &b.labels).unwrap().1;
    }
    let acc = correct as f64 / test.len() as f64;
    eprintln!("MNIST (3×32×32 adapted), SBM 8/8, 300 steps of 64: test accuracy {acc:.4}");
    // Deterministic run (seeded, thread-count independent); measured 0.9515.
    assert!(acc > 0.94, "test accuracy {acc}");
}

#[test]
fn bad_wiring_is_an_error() {
    let mut g = Graph::new();
    assert!(g.push(Add::new("add"), &[0, 3]).is_err());
}

/// A mobile-network chain on `[N, 48, 48, 3]` images whose 1×1 and depthwise convs write more
/// than one part of a block in evaluation: `c1` (1×1, bias) → SiLU (`s1`, `m1`) → `d1`
/// (depthwise 3×3, bias) → `r1` (ReLU6) → `c2` (1×1, bias) → `h` (HardSwish) → `d2`
/// (depthwise 3×3, stride 2, bias) → `g` (sigmoid) → pool → flatten.
/// A seeded fp32 conv `name` of `i` → `o` channels, a `k × k` kernel at stride `s` padded by
/// `k / 2`, in `groups` groups.
fn seeded_conv(
    rng: &mut ChaCha8Rng,
    name: &str,
    (i, o): (usize, usize),
    (k, s, groups): (usize, usize, usize),
) -> Conv2d {
    use crate::init::conv_bias;
    let mut spec = Conv2dSpec::square(i, o, k, s, k / 2);
    spec.groups = groups;
    let w = conv_weight(rng, o, [k, k], i / groups, groups);
    let b = conv_bias(rng, o, [k, k], i / groups);
    Conv2d::new(name, spec, w, Some(b), LayerQuant::new(QuantMethod::Sbm, 0)).unwrap()
}

fn mobile_chain(seed: u64) -> Graph {
    use cptsim_models::ir::Unary;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut g = Graph::new();
    let mut conv = |name: &str, i: usize, o: usize, k: usize, s: usize, groups: usize| {
        seeded_conv(&mut rng, name, (i, o), (k, s, groups))
    };
    let (c1, d1, c2, d2) = (
        conv("c1", 3, 32, 1, 1, 1),
        conv("d1", 32, 32, 3, 1, 32),
        conv("c2", 32, 40, 1, 1, 1),
        conv("d2", 40, 40, 3, 2, 40),
    );
    let x = g.then(c1).unwrap();
    let s = g.then(Sigmoid::new("s1")).unwrap();
    g.push(Elementwise::new("m1", ElementwiseKind::Mul), &[x, s])
        .unwrap();
    g.then(d1).unwrap();
    g.then(Activation::new("r1", ActivationKind::Relu6))
        .unwrap();
    g.then(c2).unwrap();
    g.then(UnaryLayer::new("h", Unary::HardSwish)).unwrap();
    g.then(d2).unwrap();
    g.then(Sigmoid::new("g")).unwrap();
    g.then(GlobalAvgPool::new("gap")).unwrap();
    g.then(Flatten::new("flat")).unwrap();
    g
}

#[test]
fn silu_sigmoid_and_hardswish_run_in_the_evaluation_epilogue_bit_for_bit() {
    let mut g = mobile_chain(7);
    // c1 takes the sigmoid and the product (SiLU), d1 the ReLU6, c2 the HardSwish, d2 the
    // sigmoid.
    let last_use = [0, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0];
    let mut values = vec![None; 12];
    let found = |g: &mut Graph, i: usize, values: &mut [Option<Tensor>]| {
        let (e, last) = g.epilogue_after(i, 11, &last_use, 0, values).unwrap();
        (e.0, last)
    };
    assert_eq!(found(&mut g, 0, &mut values), (vec![EpilogueStep::Silu], 2));
    assert_eq!(found(&mut g, 3, &mut values).1, 4);
    let (steps, last) = found(&mut g, 5, &mut values);
    assert!(matches!(steps[..], [EpilogueStep::Unary { .. }]) && last == 6);
    assert_eq!(
        found(&mut g, 7, &mut values),
        (vec![EpilogueStep::Sigmoid], 8)
    );
    // Not SiLU when a later node also reads the conv's output.
    let mut h = mobile_chain(7);
    let last_use = [0, 5, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0];
    assert_eq!(
        h.epilogue_after(0, 11, &last_use, 0, &mut values)
            .unwrap()
            .1,
        0
    );

    let n = 2;
    let x = Tensor::from_shape_fn(vec![n, 48, 48, 3], |i| {
        ((i[1] * 7 + i[2] * 3 + i[3] + i[0] * 5) % 17) as f32 / 4.0 - 2.0
    });
    let each = g
        .forward_with(x.clone(), Mode::Eval, &mut |_, _, _| Ok(()))
        .unwrap();
    let fused = g.forward(x.clone(), Mode::Eval).unwrap();
    assert!(each.iter().all(|v| v.is_finite()));
    assert_eq!(each, fused);
    // Training writes the blocks whole, layer by layer: the same values.
    assert_eq!(g.forward(x, Mode::Train).unwrap(), fused);
}

#[test]
fn inverted_residual_blocks_run_fused_with_their_residual_bit_for_bit() {
    // A stem, a block (expand, ReLU6, depthwise, ReLU6, project) adding the stem's output, which
    // is also the block's input; a block with a stride-2 depthwise conv and no residual; then a
    // depthwise conv and a 1×1 conv, which the project conv before them expands into.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut g = Graph::new();
    let mut conv = |name: &str, i: usize, o: usize, k: usize, s: usize, groups: usize| {
        seeded_conv(&mut rng, name, (i, o), (k, s, groups))
    };
    let relu6 = |name: &str| Activation::new(name, ActivationKind::Relu6);
    let stem = g.then(conv("stem", 3, 16, 1, 1, 1)).unwrap();
    g.then(conv("e1", 16, 96, 1, 1, 1)).unwrap();
    g.then(relu6("r1")).unwrap();
    g.then(conv("d1", 96, 96, 3, 1, 96)).unwrap();
    g.then(relu6("r2")).unwrap();
    let p1 = g.then(conv("p1", 96, 16, 1, 1, 1)).unwrap();
    g.push(Add::new("add"), &[p1, stem]).unwrap();
    g.then(conv("e2", 16, 64, 1, 1, 1)).unwrap();
    g.then(relu6("r3")).unwrap();
    g.then(conv("d2", 64, 64, 3, 2, 64)).unwrap();
    g.then(relu6("r4")).unwrap();
    g.then(conv("p2", 64, 24, 1, 1, 1)).unwrap();
    g.then(conv("d3", 24, 24, 5, 1, 24)).unwrap();
    g.then(conv("p3", 24, 8, 1, 1, 1)).unwrap();
    let x = Tensor::from_shape_fn(vec![3, 21, 21, 3], |i| {
        ((i[1] * 5 + i[2] * 3 + i[3] + i[0] * 7) % 13) as f32 / 3.0 - 2.0
    });
    let each = g
        .forward_with(x.clone(), Mode::Eval, &mut |_, _, _| Ok(()))
        .unwrap();
    let fused = g.forward(x, Mode::Eval).unwrap();
    assert_eq!(each.shape(), fused.shape());
    assert!(each
        .iter()
        .zip(fused.iter())
        .all(|(a, b)| a.is_finite() && a.to_bits() == b.to_bits()));
}
