//! The fused convs of an inverted-residual block give the convs' own passes bit for bit.

use super::super::super::gradcheck::rand_tensor;
use super::*;
use crate::layers::{Conv2dSpec, EpilogueStep, Layer};
use crate::quant::{LayerQuant, QuantMethod};

fn conv(spec: Conv2dSpec, seed: u64) -> Conv2d {
    let ipg = spec.in_channels / spec.groups;
    let w = rand_tensor(
        &[spec.out_channels, spec.kernel[0], spec.kernel[1], ipg],
        0.5,
        seed,
    );
    let b = rand_tensor(&[spec.out_channels], 0.5, seed + 1);
    Conv2d::new("c", spec, w, Some(b), LayerQuant::new(QuantMethod::Sbm, 0)).unwrap()
}

fn depthwise(c: usize, k: usize, stride: usize, seed: u64) -> Conv2d {
    let spec = Conv2dSpec {
        groups: c,
        ..Conv2dSpec::square(c, c, k, stride, k / 2)
    };
    conv(spec, seed)
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn fused_block_equals_the_convs_own_passes_bit_for_bit() {
    // (samples, side, input channels, depthwise channels, 1×1 outputs, stride, kernel): widths
    // off the vector lengths, parts and bands of one row and of many, windows that keep rows
    // and ones that skip them (stride 2), a residual add after the last conv.
    let cases = [
        (3, 9, 5, 13, 7, 1, 3),
        (2, 17, 16, 96, 24, 2, 3),
        (1, 30, 24, 144, 32, 1, 5),
        (4, 7, 40, 2200, 40, 1, 3),
        (5, 12, 8, 40, 80, 2, 5),
        (2, 64, 8, 48, 8, 2, 3),
    ];
    for (case, &(n, side, cin, c, o, stride, k)) in cases.iter().enumerate() {
        let seed = 20 * case as u64;
        let mut ex = conv(Conv2dSpec::square(cin, c, 1, 1, 0), seed);
        let mut dw = depthwise(c, k, stride, seed + 2);
        let mut pw = conv(Conv2dSpec::square(c, o, 1, 1, 0), seed + 4);
        assert!(ex.expands_into(&dw) && dw.fuses_with_pointwise(&pw));
        let x = rand_tensor(&[n, side, side, cin], 1.0, seed + 6);
        let oh = (side + 2 * (k / 2) - k) / stride + 1;
        let other = rand_tensor(&[n, oh, oh, o], 1.0, seed + 7);
        let e0 = Epilogue(vec![EpilogueStep::Clamp { hi: 6.0 }]);
        let e1 = Epilogue(vec![EpilogueStep::Unary {
            layer: "h".into(),
            f: cptsim_models::ir::Unary::HardSwish,
        }]);
        let e2 = Epilogue(vec![
            EpilogueStep::Add {
                layer: "add".into(),
                other,
            },
            EpilogueStep::Clamp { hi: f32::INFINITY },
        ]);
        let expanded = ex.forward_then(CowArray::from(x.view()), &e0).unwrap();
        let mid = dw
            .forward_then(CowArray::from(expanded.view()), &e1)
            .unwrap();
        let want = pw.forward_then(CowArray::from(mid.view()), &e2).unwrap();
        for _ in 0..2 {
            let x = || CowArray::from(x.view());
            let all = forward_depthwise_block(
                x(),
                Some((&mut ex, &e0)),
                (&mut dw, &e1),
                Some((&mut pw, &e2)),
            )
            .unwrap();
            assert!(
                same_bits(&all, &want),
                "case {case}: expand, depthwise, 1×1"
            );
            let head = forward_depthwise_block(x(), Some((&mut ex, &e0)), (&mut dw, &e1), None);
            assert!(
                same_bits(&head.unwrap(), &mid),
                "case {case}: expand, depthwise"
            );
            let e = CowArray::from(expanded.view());
            let tail = forward_depthwise_block(e, None, (&mut dw, &e1), Some((&mut pw, &e2)));
            assert!(
                same_bits(&tail.unwrap(), &want),
                "case {case}: depthwise, 1×1"
            );
        }
    }
}

#[test]
fn only_fp32_blocks_of_1x1_and_depthwise_convs_fuse() {
    let dw = depthwise(8, 3, 1, 1);
    let pw = conv(Conv2dSpec::square(8, 4, 1, 1, 0), 2);
    assert!(dw.fuses_with_pointwise(&pw));
    assert!(!pw.fuses_with_pointwise(&pw), "not after a 1×1 conv");
    assert!(!dw.expands_into(&dw), "not a depthwise conv into another");
    let strided = conv(Conv2dSpec::square(8, 4, 1, 2, 0), 3);
    assert!(!dw.fuses_with_pointwise(&strided));
    let mut quantized = conv(Conv2dSpec::square(8, 4, 1, 1, 0), 4);
    quantized.quant_mut().unwrap().set_bits(8, 0).unwrap();
    assert!(!dw.fuses_with_pointwise(&quantized));
    let x = rand_tensor(&[1, 4, 4, 8], 1.0, 5);
    let mut dw = dw;
    let e = Epilogue::default();
    let x = CowArray::from(x.view());
    let err = forward_depthwise_block(x, None, (&mut dw, &e), Some((&mut quantized, &e)));
    assert!(err.is_err());
}
