//! Convs read in place against the scalar reference of their gathered patches, on every path.

use super::*;
use crate::conv::{Conv2dSpec, Im2col};
use std::mem::MaybeUninit;

/// The patches of `x` (`samples` channels-last images of `geo`'s input) as `i32` codes, one
/// row per output pixel, code 0 in the padding: the plain definition.
fn patches(geo: &Im2col<'_>, x: &[u8]) -> Array2<i32> {
    let sp = geo.spec;
    let c = sp.in_channels;
    let (oh, ow) = geo.out_hw;
    let (kh, kw) = (sp.kernel[0], sp.kernel[1]);
    let samples = x.len() / geo.in_per_sample();
    let mut out = Array2::zeros((samples * oh * ow, kh * kw * c));
    for s in 0..samples {
        for oy in 0..oh {
            for ox in 0..ow {
                let row = (s * oh + oy) * ow + ox;
                for ky in 0..kh {
                    for kx in 0..kw {
                        if let Some((iy, ix)) = geo.source(oy, ox, ky, kx) {
                            for ch in 0..c {
                                let v =
                                    x[s * geo.in_per_sample() + (iy * geo.in_hw.1 + ix) * c + ch];
                                out[[row, (ky * kw + kx) * c + ch]] = i32::from(v);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Dequantization constants that leave each output its integer sum (exact in f32 below 2²⁴)
/// plus `r[i]·2⁻¹⁰` for the row sums.
fn identity(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    (vec![1.0; n], vec![1.0 / 1024.0; n], vec![0.0; n])
}

#[test]
fn convs_read_in_place_equal_the_reference_sums_on_every_path() {
    // (kernel, stride, pad, dilation, h, w, c, n)
    let mut shapes = vec![
        (3, 1, 1, 1, 7, 6, 4, 5),
        (3, 2, 1, 1, 9, 9, 16, 33),
        (1, 1, 0, 1, 4, 5, 8, 17),
        (1, 2, 0, 1, 6, 6, 12, 16),
        (3, 1, 2, 2, 6, 7, 4, 40),
        (5, 3, 2, 1, 11, 8, 8, 3),
        (3, 1, 1, 1, 3, 3, 64, 64),
    ];
    // And random ones (the input at least as large as the dilated kernel).
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    for _ in 0..8 {
        let (k, s, p, d) = (
            rng.random_range(1..=4usize),
            rng.random_range(1..=3usize),
            rng.random_range(0..=2usize),
            rng.random_range(1..=2usize),
        );
        let span = d * (k - 1) + 1;
        let (h, w) = (
            rng.random_range(span..span + 9),
            rng.random_range(span..span + 9),
        );
        let (c, n) = (
            4 * rng.random_range(1..=10usize),
            rng.random_range(1..=70usize),
        );
        shapes.push((k, s, p, d, h, w, c, n));
    }
    for path in paths() {
        for (t, &(k, s, p, d, h, w, c, n)) in shapes.iter().enumerate() {
            for bits in 2..=8u32 {
                let (spec, out_hw) = dilated_conv((c, n), (k, s, p, d), (h, w));
                let geo = Im2col {
                    spec: &spec,
                    in_hw: (h, w),
                    out_hw,
                };
                let samples = 1 + t % 3;
                let seed = (t * 10) as u64 + u64::from(bits);
                let x = codes(samples, h * w * c, bits, false, seed).mapv(|v| v as u8);
                let x = x.as_slice().unwrap();
                let kk = spec.k_per_group();
                // Weight codes signed every other shape (the byte form's zero point then 0).
                let wc = codes(n, kk, bits, t % 2 == 1, seed + 1);
                let b = PackedB::from_rows(path, wc.view()).unwrap();
                let a = patches(&geo, x);
                // AVX2 has no byte form: its convs gather their patches.
                assert_eq!(
                    reads_codes_in_place(&geo, &b),
                    path != IntPath::Avx2,
                    "{}",
                    path.name()
                );
                if path == IntPath::Avx2 {
                    let mut out = vec![MaybeUninit::new(0.0); a.nrows() * n];
                    let (scale, row, offset) = identity(n);
                    let dq = Dequant {
                        scale: &scale,
                        row: &row,
                        offset: &offset,
                    };
                    assert!(
                        conv_dequant_uninit(&geo, x, &b, Accumulator::Exact, dq, &mut out).is_err()
                    );
                    continue;
                }
                let want = reference(a.view(), wc.t(), Accumulator::Exact).unwrap();
                let (scale, row, offset) = identity(n);
                let dq = Dequant {
                    scale: &scale,
                    row: &row,
                    offset: &offset,
                };
                let mut out = vec![MaybeUninit::new(f32::NAN); a.nrows() * n];
                let got =
                    conv_dequant_uninit(&geo, x, &b, Accumulator::Exact, dq, &mut out).unwrap();
                let what = format!("{} {bits} bits shape {t}", path.name());
                for ((i, j), &v) in want.indexed_iter() {
                    let r: i64 = a.row(i).iter().map(|&q| i64::from(q)).sum();
                    let expect = (v as f64 + r as f64 / 1024.0) as f32;
                    assert_eq!(
                        got[i * n + j].to_bits(),
                        expect.to_bits(),
                        "{what} ({i},{j})"
                    );
                }
                // A block of another size is an error, not a panic.
                let mut out = vec![MaybeUninit::new(0.0); a.nrows() * n];
                assert!(
                    conv_dequant_uninit(&geo, &x[1..], &b, Accumulator::Exact, dq, &mut out)
                        .is_err()
                );
            }
        }
    }
}

#[test]
fn convs_read_in_place_need_whole_steps_per_pixel_and_the_byte_form() {
    let spec = Conv2dSpec::square(3, 8, 3, 1, 1);
    let geo = Im2col {
        spec: &spec,
        in_hw: (5, 5),
        out_hw: (5, 5),
    };
    let wc = codes(8, 27, 8, false, 3);
    let b = PackedB::from_rows(IntPath::Portable, wc.view()).unwrap();
    assert!(!reads_codes_in_place(&geo, &b));
    // Codes spanning more than a byte take the word form.
    let spec = Conv2dSpec::square(4, 8, 3, 1, 1);
    let geo = Im2col {
        spec: &spec,
        in_hw: (5, 5),
        out_hw: (5, 5),
    };
    let wc = codes(8, 36, 12, true, 4);
    let b = PackedB::from_rows(IntPath::Portable, wc.view()).unwrap();
    assert!(!reads_codes_in_place(&geo, &b));
}

#[test]
fn convs_read_in_place_do_not_depend_on_the_thread_count() {
    let spec = Conv2dSpec::square(16, 48, 3, 1, 1);
    let geo = Im2col {
        spec: &spec,
        in_hw: (16, 16),
        out_hw: (16, 16),
    };
    let x = codes(2, 16 * 16 * 16, 8, false, 8).mapv(|v| v as u8);
    let wc = codes(48, 144, 8, false, 9);
    let b = PackedB::from_rows(IntPath::within(crate::gemm::vector_path()), wc.view()).unwrap();
    let (scale, row, offset) = identity(48);
    let run = |threads| {
        cptsim_testdata::with_threads(threads, || {
            let dq = Dequant {
                scale: &scale,
                row: &row,
                offset: &offset,
            };
            let mut out = vec![MaybeUninit::new(0.0); 2 * 256 * 48];
            let y = conv_dequant_uninit(
                &geo,
                x.as_slice().unwrap(),
                &b,
                Accumulator::Exact,
                dq,
                &mut out,
            )
            .unwrap();
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}
