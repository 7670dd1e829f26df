//! The direct grouped loop against the per-group im2col and GEMM it replaces: bit for bit,
//! across channel runs (16, 8, 4, 2, 1 per group), pixel blocks and their remainders, strides,
//! padding and dilation.

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};

use crate::conv::testing::output_hw;
use crate::conv::{Conv2dSpec, Im2col};
use crate::gemm::matmul_into;
use cptsim_testdata::rand_tensor;

/// The per-group gather and GEMM of `[rows, k]` columns by the group's `[opg, k]` weights.
fn per_group_gemm(geo: &Im2col<'_>, x: &[f32], w: &Array2<f32>) -> Vec<f32> {
    let sp = geo.spec;
    let (o, groups, kg) = (sp.out_channels, sp.groups, sp.k_per_group());
    let opg = o / groups;
    let rows = x.len() / geo.in_per_sample() * geo.rows_per_sample();
    let mut y = vec![0.0; rows * o];
    let mut yv = ArrayViewMut2::from_shape((rows, o), &mut y[..]).unwrap();
    let mut col = vec![0.0; rows * kg];
    for g in 0..groups {
        geo.gather(x, g, &mut col);
        let colv = ArrayView2::from_shape((rows, kg), &col[..]).unwrap();
        let wg = w.slice(s![g * opg..(g + 1) * opg, ..]);
        matmul_into(
            yv.slice_mut(s![.., g * opg..(g + 1) * opg]),
            colv,
            wg.t(),
            false,
        )
        .unwrap();
    }
    y
}

fn direct(geo: &Im2col<'_>, x: &[f32], w: &Array2<f32>) -> Vec<f32> {
    let samples = x.len() / geo.in_per_sample();
    let mut y = vec![f32::NAN; samples * geo.rows_per_sample() * geo.spec.out_channels];
    geo.grouped_forward("t", x, &geo.grouped_weights(w.view()), &mut y)
        .unwrap();
    y
}

#[test]
fn direct_grouped_equals_the_per_group_gemm_bit_for_bit() {
    // (in, out, groups, kernel, stride, pad, dilation, H, W)
    let cases = [
        (128, 128, 32, 3, 1, 1, 1, 9, 11), // ResNeXt: 4 channels a group
        (64, 64, 8, 3, 2, 1, 1, 10, 13),   // RegNet: 8 a group, stride 2
        (96, 96, 3, 3, 1, 1, 1, 5, 19),    // 32 a group: two runs of 16
        (20, 60, 4, 3, 1, 2, 2, 7, 9),     // 5 → 15 a group (8 + 4 + 2 + 1), dilated
        (12, 6, 2, 1, 1, 0, 1, 4, 17),     // pointwise, 3 a group, no padding
        (6, 9, 3, 5, 3, 2, 1, 8, 8),       // 5×5 at stride 3
        (64, 32, 4, 3, 1, 1, 1, 1, 1),     // a 1×1 map
    ];
    for (i, &(cin, cout, g, k, st, p, d, h, wd)) in cases.iter().enumerate() {
        let mut spec = Conv2dSpec::square(cin, cout, k, st, p);
        spec.groups = g;
        spec.dilation = [d, d];
        spec.pads = [p, p, p + (i % 2), p];
        let out_hw = output_hw(&spec, h, wd).unwrap();
        let geo = Im2col {
            spec: &spec,
            in_hw: (h, wd),
            out_hw,
        };
        assert!(geo.grouped_direct());
        let samples = 3;
        let x = rand_tensor(&[samples * h * wd * cin], 1.0, i as u64);
        let w = rand_tensor(&[cout, spec.k_per_group()], 1.0, 100 + i as u64);
        let w = Array2::from_shape_vec((cout, spec.k_per_group()), w.into_raw_vec_and_offset().0)
            .unwrap();
        let x = x.into_raw_vec_and_offset().0;
        let want = per_group_gemm(&geo, &x, &w);
        let got = direct(&geo, &x, &w);
        assert_eq!(want.len(), got.len());
        for (j, (a, b)) in want.iter().zip(&got).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "case {i} output {j}: {a} vs {b}");
        }
    }
}

#[test]
fn depthwise_and_single_group_convs_are_not_grouped_direct() {
    let mut dw = Conv2dSpec::square(8, 8, 3, 1, 1);
    dw.groups = 8;
    let one = Conv2dSpec::square(8, 8, 3, 1, 1);
    for spec in [&dw, &one] {
        let geo = Im2col {
            spec,
            in_hw: (4, 4),
            out_hw: (4, 4),
        };
        assert!(!geo.grouped_direct());
    }
}
