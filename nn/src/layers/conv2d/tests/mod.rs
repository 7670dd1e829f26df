//! The conv layer's tests: direct sums and finite differences on every path, Winograd on any
//! thread count, the GEMMs it reports, kept prepared weights, quantized operands and errors.

use super::super::gradcheck::{check_layer, rand_tensor};
use super::*;
use crate::quant::QuantMethod;

fn conv(spec: Conv2dSpec, bias: bool, seed: u64) -> Conv2d {
    let w = rand_tensor(
        &[
            spec.out_channels,
            spec.kernel[0],
            spec.kernel[1],
            spec.in_channels / spec.groups,
        ],
        0.5,
        seed,
    );
    let b = bias.then(|| rand_tensor(&[spec.out_channels], 0.5, seed + 1));
    Conv2d::new("c", spec, w, b, LayerQuant::new(QuantMethod::Sbm, 0)).unwrap()
}

#[test]
fn evaluation_keeps_prepared_weights_only_while_weights_and_bits_stand() {
    // A Winograd conv and a strided one (packed weights), through the ways weights change.
    for spec in [
        Conv2dSpec::square(32, 32, 3, 1, 1),
        Conv2dSpec::square(8, 16, 3, 2, 1),
    ] {
        let mut c = conv(spec.clone(), false, 61);
        let x = rand_tensor(&[2, 8, 8, spec.in_channels], 1.0, 62);
        let fresh = |c: &Conv2d| {
            let mut f = conv(spec.clone(), false, 0);
            f.weight.value = c.weight.value.clone();
            f.quant = c.quant.clone();
            f.forward(&[&x], Mode::Eval).unwrap()
        };
        let y0 = c.forward(&[&x], Mode::Eval).unwrap();
        assert!(c.prepared.is_some());
        assert_eq!(c.forward(&[&x], Mode::Eval).unwrap(), y0);
        c.params_mut()[0].value.mapv_inplace(|v| v * 0.5);
        let y1 = c.forward(&[&x], Mode::Eval).unwrap();
        assert_ne!(y1, y0);
        assert_eq!(y1, fresh(&c));
        c.quant_mut().unwrap().set_bits(4, 0).unwrap();
        let y2 = c.forward(&[&x], Mode::Eval).unwrap();
        assert_ne!(y2, y1);
        assert_eq!(y2, fresh(&c));
        c.forward(&[&x], Mode::Train).unwrap();
        assert!(c.prepared.is_none(), "a training pass drops them");
    }
}

#[test]
fn summed_forward_gives_batch_norms_own_sums_bit_for_bit() {
    use crate::layers::batchnorm::train_sum_rows;
    use cptsim_kernels::reduce::{chunk_sums_by, sums_and_squares};
    // Three blocks of one 32×32 sample; three of 4, 4 and 1 16×16 samples; F(4×4) Winograd
    // convs, whose blocks of work (16 samples of 16×16) hold several of the sums' blocks
    // (4 samples): one block of work of 5 samples, and blocks of 16 and 4 samples.
    for (spec, shape) in [
        (Conv2dSpec::square(3, 8, 3, 1, 1), [3, 32, 32, 3]),
        (Conv2dSpec::square(4, 8, 3, 1, 1), [9, 16, 16, 4]),
        (Conv2dSpec::square(32, 32, 3, 1, 1), [5, 16, 16, 32]),
        (Conv2dSpec::square(32, 16, 3, 1, 1), [20, 16, 16, 32]),
    ] {
        let x = rand_tensor(&shape, 1.0, 71);
        let (mut a, mut b) = (conv(spec.clone(), true, 72), conv(spec.clone(), true, 72));
        let (y, sums) = a.forward_summed(ndarray::CowArray::from(x.view())).unwrap();
        assert_eq!(y, b.forward(&[&x], Mode::Train).unwrap());
        let rows = train_sum_rows(y.shape()).unwrap();
        assert!(rows * spec.out_channels < y.len(), "several blocks");
        let o = spec.out_channels;
        let want = chunk_sums_by(y.as_slice().unwrap(), o, 2, rows, |_, r, acc| {
            sums_and_squares(r, acc)
        });
        assert_eq!(sums, want, "{shape:?}");
    }
}

/// Direct (loop) convolution in f64 on NHWC input, OHWI weights.
fn reference(x: &Tensor, layer: &Conv2d) -> Vec<f64> {
    let sp = layer.spec();
    let x4 = as4("ref", x).unwrap();
    let (n, h, w, _) = x4.dim();
    let (oh, ow) = output_hw(sp, "ref", h, w).unwrap();
    let wt = layer
        .weight
        .value
        .view()
        .into_dimensionality::<Ix4>()
        .unwrap();
    let (cpg, opg) = (sp.in_channels / sp.groups, sp.out_channels / sp.groups);
    let mut out = Vec::new();
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for o in 0..sp.out_channels {
                    let g = o / opg;
                    let mut acc = layer.bias.as_ref().map_or(0.0, |p| p.value[[o]] as f64);
                    for ky in 0..sp.kernel[0] {
                        for kx in 0..sp.kernel[1] {
                            let iy = (oy * sp.stride[0] + ky * sp.dilation[0]) as isize
                                - sp.pads[0] as isize;
                            let ix = (ox * sp.stride[1] + kx * sp.dilation[1]) as isize
                                - sp.pads[1] as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            for ci in 0..cpg {
                                acc += x4[[b, iy as usize, ix as usize, g * cpg + ci]] as f64
                                    * wt[[o, ky, kx, ci]] as f64;
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    out
}

fn specs() -> Vec<Conv2dSpec> {
    let mut strided = Conv2dSpec::square(3, 4, 3, 2, 1);
    strided.pads = [1, 0, 2, 1];
    let mut dilated = Conv2dSpec::square(2, 2, 3, 1, 2);
    dilated.dilation = [2, 1];
    let mut grouped = Conv2dSpec::square(4, 6, 3, 1, 1);
    grouped.groups = 2;
    let mut depthwise = Conv2dSpec::square(3, 3, 3, 2, 1);
    depthwise.groups = 3;
    // Same-size outputs: the input gradient is the transposed conv's forward pass.
    let mut lopsided = Conv2dSpec::square(2, 3, 3, 1, 0);
    lopsided.kernel = [3, 2];
    lopsided.pads = [0, 1, 2, 0];
    vec![
        Conv2dSpec::square(3, 4, 3, 1, 1),
        lopsided,
        Conv2dSpec::square(3, 5, 1, 1, 0),
        strided,
        dilated,
        grouped,
        depthwise,
    ]
}

#[test]
fn forward_matches_direct_convolution() {
    for (i, sp) in specs().into_iter().enumerate() {
        let mut c = conv(sp.clone(), i % 2 == 0, i as u64);
        let x = rand_tensor(&[2, 7, 6, sp.in_channels], 1.0, 50 + i as u64);
        let y = c.forward(&[&x], Mode::Eval).unwrap();
        let r = reference(&x, &c);
        assert_eq!(y.len(), r.len(), "{sp:?}");
        for (a, b) in y.iter().zip(&r) {
            assert!((*a as f64 - b).abs() < 1e-4, "{sp:?}: {a} vs {b}");
        }
    }
}

#[test]
fn winograd_convs_match_the_direct_conv_and_its_gradients_on_any_thread_count() {
    // 32 channels: F(2×2, 3×3) forward, input and weight gradients; 20 samples of 8×8 span
    // two blocks.
    let sp = Conv2dSpec::square(32, 24, 3, 1, 1);
    let x = rand_tensor(&[20, 8, 8, 32], 1.0, 8);
    let g = rand_tensor(&[20, 8, 8, 24], 1.0, 9);
    let run = |threads: usize, mode: Mode| {
        cptsim_testdata::with_threads(threads, || {
            let mut c = conv(sp.clone(), true, 2);
            let y = c.forward(&[&x], mode).unwrap();
            let dx = (mode == Mode::Train).then(|| c.backward(g.clone()).unwrap());
            (y, dx, c.weight.grad.clone())
        })
        .unwrap()
    };
    let (y, r) = (
        run(1, Mode::Eval).0,
        reference(&x, &conv(sp.clone(), true, 2)),
    );
    for (a, b) in y.iter().zip(&r) {
        assert!((*a as f64 - b).abs() < 1e-4, "{a} vs {b}");
    }
    let train = run(1, Mode::Train);
    assert_eq!(train, run(2, Mode::Train));
    // Training and evaluation run the same product.
    assert_eq!(train.0, y);
    // The input and weight gradients against finite differences, on a smaller batch.
    let mut c = conv(sp.clone(), true, 3);
    check_layer(
        &mut c,
        &[rand_tensor(&[2, 4, 6, 32], 1.0, 10)],
        1e-2,
        1e-2,
        25,
    )
    .unwrap();
    // Unpadded: the output is smaller than the input, so the input gradient is the column
    // gradient scattered while the weight gradient runs by Winograd on the plain input.
    let valid = Conv2dSpec::square(32, 24, 3, 1, 0);
    let g = block_gemms(&valid, "c", (6, 8), 2, true).unwrap().unwrap();
    assert_eq!(g.winograd, [true, false, true]);
    let mut c = conv(valid, false, 4);
    check_layer(
        &mut c,
        &[rand_tensor(&[2, 6, 8, 32], 1.0, 11)],
        1e-2,
        1e-2,
        25,
    )
    .unwrap();
}

#[test]
fn gradients_match_finite_differences() {
    for (i, sp) in specs().into_iter().enumerate() {
        let mut c = conv(sp.clone(), true, 10 + i as u64);
        let x = rand_tensor(&[2, 6, 5, sp.in_channels], 1.0, 70 + i as u64);
        check_layer(&mut c, &[x], 1e-2, 1e-2, 25).unwrap();
    }
}

#[test]
fn parameter_only_backward_leaves_the_same_gradients_and_state() {
    for (i, sp) in specs().into_iter().enumerate() {
        let x = rand_tensor(&[3, 6, 5, sp.in_channels], 1.0, 90 + i as u64);
        let run = |full: bool| {
            let mut c = conv(sp.clone(), true, 30 + i as u64);
            c.quant.set_bits(6, 6).unwrap();
            let y = c.forward(&[&x], Mode::Train).unwrap();
            let g = rand_tensor(y.shape(), 1.0, 7);
            if full {
                assert_eq!(c.backward(g).unwrap().len(), 1);
            } else {
                c.backward_params(g).unwrap();
            }
            let b = c.bias.as_ref().map(|b| b.grad.clone());
            (c.weight.grad.clone(), b, c.quant.clone())
        };
        let (full, params) = (run(true), run(false));
        assert_eq!((&full.0, &full.1), (&params.0, &params.1), "{sp:?}");
        // The error quantizer's state (its stochastic-rounding stream) advanced the same way.
        assert_eq!(format!("{:?}", full.2), format!("{:?}", params.2), "{sp:?}");
    }
}

#[test]
fn batch_gemms_go_by_each_passs_blocks() {
    // 32 → 16 channels on 32 × 32 inputs: one sample per usual block (1 024 rows). F(4×4)'s
    // forward takes 4 samples a block (256 tiles, in 2 chunks of 128: one holds at most
    // 2¹⁸ / (36 · 32) = 227), the F(2×2) weight gradient and the patch-product error one
    // sample each.
    let spec = Conv2dSpec::square(32, 16, 3, 1, 1);
    let g = batch_gemms(&spec, "c", (32, 32), 10, true)
        .unwrap()
        .unwrap();
    // 2 blocks of 4 samples, then one of 2 (128 tiles, one chunk).
    let block = ([128, 32, 16], 36);
    assert_eq!(g.forward, vec![([128, 32, 16], 36 * 2 * 2), block]);
    assert_eq!(g.error, vec![([1024, 144, 32], 10)]);
    assert_eq!(g.weight, vec![([16, 256, 32], 16 * 10)]);
}

#[test]
fn block_gemms_follow_the_backward_paths() {
    let same = Conv2dSpec::square(16, 32, 3, 1, 1);
    let g = block_gemms(&same, "c", (8, 8), 2, true).unwrap().unwrap();
    // Stride 1, 16 input channels: the forward product reads patches; the input gradient is
    // the transposed conv (32 → 16 channels) by F(4×4) Winograd: 2 samples of 2 × 2 tiles,
    // one chunk, 36 products; the weight gradient reads the patches in place (Pᵀ·g).
    assert_eq!(g.forward, vec![([128, 144, 32], 1)]);
    assert_eq!(g.error, vec![([8, 32, 16], 36)]);
    assert_eq!(g.weight, vec![([144, 128, 32], 1)]);
    assert_eq!(g.winograd, [false, true, false]);
    let no_dx = block_gemms(&same, "c", (8, 8), 2, false).unwrap().unwrap();
    assert_eq!(no_dx.error, vec![]);
    // 16 output channels: the transposed conv has 16 inputs, a patch product; the weight
    // gradient is F(2×2) Winograd's, output channels × tiles × input channels.
    let narrow = Conv2dSpec::square(32, 16, 3, 1, 1);
    let g = block_gemms(&narrow, "c", (8, 8), 2, true).unwrap().unwrap();
    assert_eq!(g.forward, vec![([8, 32, 16], 36)]);
    assert_eq!(g.error, vec![([128, 144, 32], 1)]);
    assert_eq!(g.weight, vec![([16, 32, 32], 16)]);
    assert_eq!(g.winograd, [true, false, true]);
    // An odd output: the kept padded input is not laid out as the tiles read it, so the
    // weight gradient reads the patches.
    let g = block_gemms(&narrow, "c", (7, 7), 1, true).unwrap().unwrap();
    assert_eq!(g.forward, vec![([4, 32, 16], 36)]);
    assert_eq!(g.weight, vec![([288, 49, 16], 1)]);
    // Stride 2: the column gradient is scattered.
    let strided = Conv2dSpec::square(16, 32, 3, 2, 1);
    let g = block_gemms(&strided, "c", (8, 8), 2, true)
        .unwrap()
        .unwrap();
    assert_eq!(
        (g.forward, g.error),
        (vec![([32, 144, 32], 1)], vec![([32, 32, 144], 1)])
    );
    // Groups: gathered columns, gᵀ·col per group.
    let mut grouped = Conv2dSpec::square(4, 6, 3, 1, 1);
    grouped.groups = 2;
    let g = block_gemms(&grouped, "c", (5, 5), 1, true)
        .unwrap()
        .unwrap();
    assert_eq!(
        (g.error, g.weight),
        (vec![([25, 3, 18], 1)], vec![([3, 25, 18], 1)])
    );
    let mut depthwise = Conv2dSpec::square(3, 3, 3, 1, 1);
    depthwise.groups = 3;
    assert_eq!(block_gemms(&depthwise, "c", (5, 5), 1, true).unwrap(), None);
    let e = block_gemms(&same, "stem", (1, 0), 1, true).unwrap_err();
    assert!(e.to_string().contains("stem"), "{e}");
}

#[test]
fn a_padding_conv_keeps_its_padded_input_for_the_weight_gradient() {
    let x = rand_tensor(&[3, 5, 5, 2], 1.0, 5);
    for (sp, padded) in [
        (Conv2dSpec::square(2, 3, 3, 1, 1), true),
        (Conv2dSpec::square(2, 3, 3, 2, 1), true),
        (Conv2dSpec::square(2, 3, 3, 1, 0), false),
        (Conv2dSpec::square(2, 3, 1, 1, 0), false),
    ] {
        let mut c = conv(sp.clone(), false, 1);
        c.forward(&[&x], Mode::Train).unwrap();
        let cache = c.cache.as_ref().unwrap();
        assert_eq!(cache.padded.is_some(), padded, "{sp:?}");
        // The input is kept once: padded, or as it came.
        assert_eq!(cache.ops.x.is_empty(), padded, "{sp:?}");
        if let Some(p) = &cache.padded {
            let geo = c.geometry_of(5, 5, 2).unwrap();
            let mut want = vec![f32::NAN; p.len()];
            geo.patches("t", x.as_slice().unwrap(), &mut want).unwrap();
            assert_eq!(p, &want, "{sp:?}");
            // A buffer of the wrong size is an error naming the layer, not a panic.
            let mut short = vec![MaybeUninit::uninit(); p.len() - 1];
            let e = geo
                .pad_into("c1", x.as_slice().unwrap(), &mut short)
                .unwrap_err();
            assert!(e.to_string().contains("c1"), "{e}");
        }
    }
}

#[test]
fn large_batch_spans_several_gemm_tiles_and_is_thread_independent() {
    let sp = Conv2dSpec::square(8, 16, 3, 1, 1);
    let x = rand_tensor(&[40, 8, 8, 8], 1.0, 3);
    let g = rand_tensor(&[40, 8, 8, 16], 1.0, 4);
    let run = |threads: usize| {
        cptsim_testdata::with_threads(threads, || {
            let mut c = conv(sp.clone(), false, 1);
            c.quant.set_bits(4, 4).unwrap();
            let y = c.forward(&[&x], Mode::Train).unwrap();
            let dx = c.backward(g.clone()).unwrap();
            (y, dx, c.weight.grad.clone())
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn quantized_layer_uses_quantized_operands_in_all_three_gemms() {
    // With bits_bw = 0 the error stays fp32: forward and both backward GEMMs must equal an
    // fp32 layer fed with the SBM-quantized input and weights.
    let sp = Conv2dSpec::square(2, 3, 3, 1, 1);
    let x = rand_tensor(&[2, 5, 5, 2], 1.0, 8);
    let g = rand_tensor(&[2, 5, 5, 3], 1.0, 9);
    let mut q = conv(sp.clone(), false, 2);
    q.quant.set_bits(3, 0).unwrap();
    let yq = q.forward(&[&x], Mode::Train).unwrap();
    let dxq = q.backward(g.clone()).unwrap().remove(0);

    let mut f = conv(sp.clone(), false, 2);
    let w2 = f
        .weight
        .value
        .clone()
        .into_shape_with_order((3, 18))
        .unwrap();
    let wq = crate::quant::sbm::weights(w2.view(), 3);
    f.weight.value = wq.into_shape_with_order(vec![3, 3, 3, 2]).unwrap();
    let mut xq = x.clone();
    let mut ema = crate::quant::RangeEma::default();
    crate::quant::sbm::activations(xq.as_slice_mut().unwrap(), 3, &mut ema, true);
    let yf = f.forward(&[&xq], Mode::Train).unwrap();
    let dxf = f.backward(g.clone()).unwrap().remove(0);
    assert_eq!(yq, yf);
    assert_eq!(dxq, dxf);
    assert_eq!(q.weight.grad, f.weight.grad);
    assert_ne!(yq, conv(sp, false, 2).forward(&[&x], Mode::Eval).unwrap());
}

#[test]
fn bad_inputs_are_errors_naming_the_layer() {
    let mut c = conv(Conv2dSpec::square(3, 4, 3, 1, 0), false, 1);
    let e = c
        .forward(&[&rand_tensor(&[1, 5, 5, 2], 1.0, 1)], Mode::Eval)
        .unwrap_err();
    assert!(
        e.to_string().contains("`c`") && e.to_string().contains("channels"),
        "{e}"
    );
    let e = c
        .forward(&[&rand_tensor(&[1, 2, 2, 3], 1.0, 1)], Mode::Eval)
        .unwrap_err();
    assert!(e.to_string().contains("smaller"), "{e}");
    let e = c.backward(rand_tensor(&[1, 3, 3, 4], 1.0, 1)).unwrap_err();
    assert!(e.to_string().contains("without a forward"), "{e}");
    let w = rand_tensor(&[4, 3, 3, 2], 1.0, 1);
    assert!(Conv2d::new(
        "c",
        Conv2dSpec::square(3, 4, 3, 1, 0),
        w,
        None,
        LayerQuant::new(QuantMethod::Sbm, 0)
    )
    .is_err());
}

#[test]
fn oihw_weights_are_permuted() {
    let w = Tensor::from_shape_fn(vec![2, 3, 1, 2], |d| (d[0] * 100 + d[1] * 10 + d[3]) as f32);
    let c = Conv2d::weight_from_oihw(&w).unwrap();
    assert_eq!(c.shape(), &[2, 1, 2, 3]);
    assert_eq!(c[[1, 0, 1, 2]], 121.0);
}
