//! The fused depthwise and 1×1 convs give the two convs' own passes bit for bit.

use super::super::super::gradcheck::rand_tensor;
use super::*;
use crate::layers::Conv2dSpec;
use crate::layers::{EpilogueStep, Layer};
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

#[test]
fn fused_depthwise_then_pointwise_equals_the_two_passes_bit_for_bit() {
    // (samples, side, channels, 1×1 outputs, stride, kernel): widths off the vector lengths,
    // parts of one row and of many samples, a residual add after the 1×1 conv.
    let cases = [
        (3, 9, 13, 7, 1, 3),
        (2, 17, 96, 24, 2, 3),
        (1, 30, 144, 32, 1, 5),
        (4, 7, 2200, 40, 1, 3),
        (5, 12, 40, 80, 2, 5),
    ];
    for (seed, &(n, side, c, o, stride, k)) in cases.iter().enumerate() {
        let seed = 10 * seed as u64;
        let dw_spec = Conv2dSpec {
            groups: c,
            ..Conv2dSpec::square(c, c, k, stride, k / 2)
        };
        let mut dw = conv(dw_spec, seed);
        let mut pw = conv(Conv2dSpec::square(c, o, 1, 1, 0), seed + 2);
        assert!(dw.fuses_with_pointwise(&pw));
        let x = rand_tensor(&[n, side, side, c], 1.0, seed + 4);
        let oh = (side + 2 * (k / 2) - k) / stride + 1;
        let other = rand_tensor(&[n, oh, oh, o], 1.0, seed + 5);
        let first = Epilogue(vec![EpilogueStep::Clamp { hi: 6.0 }]);
        let second = Epilogue(vec![
            EpilogueStep::Add {
                layer: "add".into(),
                other,
            },
            EpilogueStep::Clamp { hi: f32::INFINITY },
        ]);
        let mid = dw.forward_then(CowArray::from(x.view()), &first).unwrap();
        let want = pw
            .forward_then(CowArray::from(mid.view()), &second)
            .unwrap();
        for _ in 0..2 {
            let got = dw
                .forward_depthwise_then_pointwise(
                    CowArray::from(x.view()),
                    &first,
                    &mut pw,
                    &second,
                )
                .unwrap();
            assert_eq!(got.shape(), want.shape());
            let same = got
                .iter()
                .zip(want.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "case {seed}: fused differs");
        }
    }
}

#[test]
fn only_fp32_depthwise_then_pointwise_convs_fuse() {
    let dw = conv(
        Conv2dSpec {
            groups: 8,
            ..Conv2dSpec::square(8, 8, 3, 1, 1)
        },
        1,
    );
    let pw = conv(Conv2dSpec::square(8, 4, 1, 1, 0), 2);
    assert!(dw.fuses_with_pointwise(&pw));
    assert!(!pw.fuses_with_pointwise(&pw), "not after a 1×1 conv");
    let strided = conv(Conv2dSpec::square(8, 4, 1, 2, 0), 3);
    assert!(!dw.fuses_with_pointwise(&strided));
    let mut quantized = conv(Conv2dSpec::square(8, 4, 1, 1, 0), 4);
    quantized.quant_mut().unwrap().set_bits(8, 0).unwrap();
    assert!(!dw.fuses_with_pointwise(&quantized));
    let x = rand_tensor(&[1, 4, 4, 8], 1.0, 5);
    let mut dw = dw;
    let e = Epilogue::default();
    let err = dw.forward_depthwise_then_pointwise(CowArray::from(x.view()), &e, &mut quantized, &e);
    assert!(err.is_err());
}
