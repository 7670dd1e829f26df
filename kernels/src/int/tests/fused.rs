//! The fused product against the scalar reference and the dequantization written out by hand;
//! the byte im2col against the `f32` one.

use super::*;
use crate::conv::Im2col;

/// `scale[j]·c + row[j]·r + off[i mod P, j]` in f64, rounded once: the values of `c`.
fn dequantized(c: &Array2<i64>, r: &[i64], dq: Dequant<'_>) -> Vec<f32> {
    let n = c.ncols();
    let pixels = dq.offset.len() / n;
    c.indexed_iter()
        .map(|((i, j), &v)| {
            let off = dq.offset[(i % pixels) * n + j];
            (dq.scale[j] * v as f64 + dq.row[j] * r[i] as f64 + off) as f32
        })
        .collect()
}

/// Random dequantization constants for `n` outputs over `pixels`.
fn constants(n: usize, pixels: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = |len: usize| -> Vec<f64> {
        (0..len)
            .map(|_| rng.random_range(-1.0..1.0) * 1e-3)
            .collect()
    };
    (v(n), v(n), v(pixels * n))
}

/// The fused product of `a` (`m × k` byte codes) and `w` (`n × k` codes) on `path`, and what
/// the reference sums give.
fn both(
    path: IntPath,
    a: &Array2<i32>,
    w: &Array2<i32>,
    acc: Accumulator,
    pixels: usize,
) -> (Vec<f32>, Vec<f32>) {
    let (m, n) = (a.nrows(), w.nrows());
    let (scale, row, offset) = constants(n, pixels, (m * 31 + n) as u64);
    let dq = Dequant {
        scale: &scale,
        row: &row,
        offset: &offset,
    };
    let bytes = a.mapv(|v| v as u8);
    let rows = PackedRows::new(bytes.view()).unwrap();
    let b = PackedB::from_rows(path, w.view()).unwrap();
    let mut got = vec![f32::NAN; m * n];
    matmul_dequant(rows.rows(), &b, acc, dq, &mut got).unwrap();
    let sums = reference(a.view(), w.t(), acc).unwrap();
    let r: Vec<i64> = a
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|&v| i64::from(v)).sum())
        .collect();
    (got, dequantized(&sums, &r, dq))
}

#[test]
fn the_fused_product_equals_dequantizing_the_reference_sums() {
    for path in paths() {
        for (t, &(m, n, k)) in SHAPES.iter().enumerate() {
            for (abits, wbits) in [(8, 8), (2, 5), (5, 12), (8, 16), (1, 1)] {
                let seed = t as u64 * 10 + u64::from(abits);
                let a = codes(m, k, abits, false, seed);
                // Weight codes signed every other shape (the byte form's zero point then 0).
                let w = codes(n, k, wbits, t % 2 == 1 && wbits > 1, seed + 3);
                let (got, want) = both(path, &a, &w, Accumulator::Exact, 1 + t % 3);
                let what = format!("{} {abits}/{wbits} bits {m}×{k}·{k}×{n}", path.name());
                assert_eq!(got.len(), want.len(), "{what}");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.to_bits(), w.to_bits(), "{what}");
                }
            }
        }
    }
}

#[test]
fn long_reductions_and_narrow_registers_give_the_reference() {
    for path in paths() {
        // 16-bit weights: a word run holds 128 steps, so 1 000 terms take several.
        for (m, n, k, wbits) in [(9, 20, 1000, 16), (17, 33, 70_000, 8), (3, 5, 300, 8)] {
            let a = codes(m, k, 8, false, k as u64);
            let w = codes(n, k, wbits, false, k as u64 + 1);
            for acc in [
                "exact",
                "16:wrap",
                "20",
                "40:wrap",
                "48:saturate",
                "16:saturate",
                "24:saturate",
            ] {
                let acc: Accumulator = acc.parse().unwrap();
                let (got, want) = both(path, &a, &w, acc, 2);
                assert_eq!(got, want, "{} {acc} {m}×{k}·{k}×{n}", path.name());
            }
        }
    }
}

#[test]
fn a_saturating_register_clips_unsigned_products_once() {
    // Unsigned codes on both sides: the partial sums only grow, so the register is the exact
    // sum clamped, as the term-by-term reference computes it.
    let a = codes(6, 400, 8, false, 3);
    let w = codes(5, 400, 8, false, 4);
    for path in paths() {
        let b = PackedB::from_rows(path, w.view()).unwrap();
        let acc: Accumulator = "16:saturate".parse().unwrap();
        assert!(b.fuses(acc));
        let (got, want) = both(path, &a, &w, acc, 1);
        assert_eq!(got, want, "{}", path.name());
        let (exact, _) = both(path, &a, &w, Accumulator::Exact, 1);
        assert_ne!(
            got,
            exact,
            "{}: 400 products of bytes clip 16 bits",
            path.name()
        );
    }
}

#[test]
fn a_saturating_register_that_can_clip_mixed_signs_is_refused() {
    let a = codes(4, 300, 8, false, 1);
    let w = codes(3, 300, 8, true, 2);
    let b = PackedB::from_rows(IntPath::Portable, w.view()).unwrap();
    let acc: Accumulator = "16:saturate".parse().unwrap();
    assert!(!b.fuses(acc));
    assert!(b.fuses("32:saturate".parse().unwrap()));
    let rows = PackedRows::new(a.mapv(|v| v as u8).view()).unwrap();
    let rows = rows.rows();
    let (s, r, o) = constants(3, 1, 1);
    let dq = Dequant {
        scale: &s,
        row: &r,
        offset: &o,
    };
    let mut out = vec![0.0; 12];
    let e = matmul_dequant(rows, &b, acc, dq, &mut out).unwrap_err();
    assert!(e.to_string().contains("16:saturate"), "{e}");
    // Sizes that do not agree are errors too.
    assert!(matmul_dequant(rows, &b, Accumulator::Exact, dq, &mut out[..11]).is_err());
    let short = Rows {
        data: &rows.data[..100],
        sums: rows.sums,
    };
    assert!(matmul_dequant(short, &b, Accumulator::Exact, dq, &mut out).is_err());
}

#[test]
fn the_fused_product_does_not_depend_on_the_thread_count() {
    let a = codes(300, 150, 8, false, 5);
    let w = codes(40, 150, 8, false, 6);
    let run = |threads| {
        cptsim_testdata::with_threads(threads, || {
            both(
                IntPath::within(crate::gemm::vector_path()),
                &a,
                &w,
                Accumulator::Exact,
                7,
            )
            .0
        })
        .unwrap()
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn byte_patches_equal_the_f32_patches() {
    for (k, s, p, d, h, w, c) in [
        (3, 1, 1, 1, 7, 6, 5),
        (3, 2, 1, 1, 9, 9, 16),
        (1, 1, 0, 1, 4, 4, 3),
        (3, 1, 2, 2, 6, 7, 2),
        (5, 3, 0, 1, 11, 8, 1),
    ] {
        let (spec, out_hw) = dilated_conv((c, 4), (k, s, p, d), (h, w));
        let geo = Im2col {
            spec: &spec,
            in_hw: (h, w),
            out_hw,
        };
        let samples = 2;
        let x = codes(samples, h * w * c, 8, false, (k * 100 + c) as u64).mapv(|v| v as u8);
        let x = x.as_slice().unwrap();
        let rows = samples * geo.rows_per_sample();
        let kk = spec.k_per_group();
        let mut want = vec![0.0f32; rows * kk];
        let xf: Vec<f32> = x.iter().map(|&v| f32::from(v)).collect();
        geo.gather(&xf, 0, &mut want);
        let mut got = vec![7u8; rows_len(rows, kk).unwrap()];
        let mut sums = vec![-1i64; rows];
        gather_codes(&geo, x, &mut got, &mut sums).unwrap();
        for (i, &s) in sums.iter().enumerate() {
            let want: f32 = want[i * kk..(i + 1) * kk].iter().sum();
            assert_eq!(s as f32, want, "k{k} s{s} p{p} d{d}: sum of row {i}");
        }
        let stride = row_stride(kk);
        for (i, row) in got.chunks(stride).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let want = if i < rows && j < kk {
                    want[i * kk + j]
                } else {
                    0.0
                };
                assert_eq!(f32::from(v), want, "k{k} s{s} p{p} d{d}: row {i} col {j}");
            }
        }
        // A block of another size is an error, not a panic.
        assert!(gather_codes(&geo, &x[1..], &mut got, &mut sums).is_err());
    }
}
