//! Every integer path against the scalar reference: random shapes and strides, every code
//! width 2..=16 signed and unsigned, extreme codes, narrow accumulators, thread counts.

use super::*;
use ndarray::{s, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The paths this CPU runs; each other one is a printed skip.
fn paths() -> Vec<IntPath> {
    IntPath::ALL
        .into_iter()
        .filter(|p| {
            if !p.runs_here() {
                cptsim_testdata::skip(&format!(
                    "integer path {}: this CPU does not run it",
                    p.name()
                ));
            }
            p.runs_here()
        })
        .collect()
}

/// Codes of `bits` bits, unsigned (`0..2^bits`) or signed (`−2^(bits−1)..2^(bits−1)`).
fn codes(r: usize, c: usize, bits: u32, signed: bool, seed: u64) -> Array2<i32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (lo, hi) = if signed {
        (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1)
    } else {
        (0, ((1i64 << bits) - 1) as i32)
    };
    Array2::from_shape_fn((r, c), |_| rng.random_range(lo..=hi))
}

const SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (1, 37, 5),
    (9, 13, 1),
    (17, 1, 33),
    (3, 300, 7),
    (70, 41, 29),
    (5, 3, 1030),
    (2, 260, 6),
    (11, 33, 67),
];

#[test]
fn every_path_equals_the_reference_for_every_width() {
    for path in paths() {
        for bits in 2..=16u32 {
            for (t, &(m, n, k)) in SHAPES.iter().enumerate() {
                // Mixed sides: A signed at `bits`, B unsigned at a width that cycles with t.
                let bb = 2 + (bits + t as u32) % 15;
                for (sa, sb) in [(false, false), (true, false), (false, true), (true, true)] {
                    let seed = u64::from(bits) * 100 + t as u64;
                    let a = codes(m, k, bits, sa, seed);
                    let b = codes(k, n, bb, sb, seed + 7);
                    let want = reference(a.view(), b.view(), Accumulator::Exact).unwrap();
                    let got = matmul_on(path, a.view(), b.view(), Accumulator::Exact).unwrap();
                    assert_eq!(
                        got.sums,
                        want,
                        "{} bits {bits}/{bb} signed {sa}/{sb} shape {m}×{k}·{k}×{n}",
                        path.name()
                    );
                }
            }
        }
    }
}

#[test]
fn sums_of_operands_are_returned_exactly() {
    let a = codes(6, 10, 8, true, 1);
    let b = codes(10, 3, 5, false, 2);
    let p = matmul(a.view(), b.view(), Accumulator::Exact).unwrap();
    let ra: Vec<i64> = (0..6)
        .map(|i| a.row(i).iter().map(|&x| x as i64).sum())
        .collect();
    let cb: Vec<i64> = (0..3)
        .map(|j| b.column(j).iter().map(|&x| x as i64).sum())
        .collect();
    assert_eq!((p.row_sums, p.col_sums), (ra, cb));
}

#[test]
fn extreme_codes_over_long_reductions_do_not_overflow() {
    // Every product at its largest: a 32-bit lane would overflow after two 16-bit products
    // (−2¹⁵·−2¹⁵·2 = 2³¹) or after 66 000 byte products; the sums must still be exact.
    for path in paths() {
        for (lo, k) in [
            (-32768i32, 3000usize),
            (65535, 3000),
            (255, 70_000),
            (-128, 70_000),
        ] {
            let (m, n) = (3, 2);
            let a = Array2::from_elem((m, k), lo);
            let b = Array2::from_elem((k, n), lo);
            let got = matmul_on(path, a.view(), b.view(), Accumulator::Exact).unwrap();
            let want = k as i64 * i64::from(lo) * i64::from(lo);
            assert!(
                got.sums.iter().all(|&v| v == want),
                "{} {lo}×{lo}·{k}: {:?} vs {want}",
                path.name(),
                got.sums
            );
        }
    }
}

#[test]
fn strided_and_transposed_views_are_read_as_given() {
    let big = codes(40, 30, 7, true, 5);
    let bt = codes(20, 25, 9, false, 6);
    let a = big.slice(s![1..;3, ..;2]);
    let b = bt.t();
    let b = b.slice(s![..15, 2..19]);
    for path in paths() {
        let got = matmul_on(path, a, b, Accumulator::Exact).unwrap();
        assert_eq!(got.sums, reference(a, b, Accumulator::Exact).unwrap());
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let a = codes(300, 200, 8, false, 9);
    let b = codes(200, 70, 8, true, 10);
    let one = cptsim_testdata::with_threads(1, || matmul(a.view(), b.view(), Accumulator::Exact))
        .unwrap()
        .unwrap();
    let two = cptsim_testdata::with_threads(2, || matmul(a.view(), b.view(), Accumulator::Exact))
        .unwrap()
        .unwrap();
    assert_eq!(one, two);
}

#[test]
fn narrow_accumulators_follow_the_sequential_definition() {
    for path in paths() {
        for acc in [
            "12:wrap",
            "16:wrap",
            "20:saturate",
            "14:saturate",
            "24",
            "40:saturate",
        ] {
            let acc: Accumulator = acc.parse().unwrap();
            for (bits, signed) in [(8, false), (8, true), (4, true), (12, false)] {
                let a = codes(7, 300, bits, signed, 11);
                let b = codes(300, 5, bits, !signed, 12);
                let got = matmul_on(path, a.view(), b.view(), acc).unwrap();
                let want = reference(a.view(), b.view(), acc).unwrap();
                assert_eq!(got.sums, want, "{} {acc} {bits} bits", path.name());
            }
        }
    }
    // The sequential definition at work: 100 · 100 overflows an 8-bit register at once.
    let a = Array2::from_elem((1, 3), 100);
    let b = Array2::from_elem((3, 1), 1);
    let sat = reference(a.view(), b.view(), "8:saturate".parse().unwrap()).unwrap();
    let wrap = reference(a.view(), b.view(), "8:wrap".parse().unwrap()).unwrap();
    assert_eq!((sat[[0, 0]], wrap[[0, 0]]), (127, 300 - 256));
    let neg = Array2::from_elem((3, 1), -1);
    let back = reference(a.view(), neg.view(), "8:saturate".parse().unwrap()).unwrap();
    assert_eq!(back[[0, 0]], -128);
}

#[test]
fn a_saturating_register_over_one_signed_products_is_the_clamped_sum() {
    // Rows of A alternately unsigned and mixed, B unsigned: the unsigned rows take the clamp,
    // the mixed ones the term-by-term sum, and both must equal the sequential reference.
    let mut a = codes(6, 500, 8, true, 21);
    let unsigned = codes(6, 500, 8, false, 22);
    for i in (0..6).step_by(2) {
        a.row_mut(i).assign(&unsigned.row(i));
    }
    let b = codes(500, 4, 8, false, 23);
    let negated = b.mapv(|v| -v);
    for path in paths() {
        for acc in ["16:saturate", "20:saturate", "24:saturate"] {
            let acc: Accumulator = acc.parse().unwrap();
            for b in [&b, &negated] {
                let got = matmul_on(path, a.view(), b.view(), acc).unwrap();
                let want = reference(a.view(), b.view(), acc).unwrap();
                assert_eq!(got.sums, want, "{} {acc}", path.name());
            }
        }
    }
}

#[test]
fn a_blocked_wrap_equals_wrapping_each_add() {
    // Long enough to take several runs per element; wraps many times at 10 bits.
    let a = codes(4, 5000, 8, false, 13);
    let b = codes(5000, 3, 8, false, 14);
    let acc: Accumulator = "10:wrap".parse().unwrap();
    let got = matmul(a.view(), b.view(), acc).unwrap();
    assert_eq!(got.sums, reference(a.view(), b.view(), acc).unwrap());
}

#[test]
fn accumulators_are_parsed_and_bad_ones_name_the_value() {
    assert_eq!("exact".parse::<Accumulator>().unwrap(), Accumulator::Exact);
    assert_eq!("64".parse::<Accumulator>().unwrap(), Accumulator::Exact);
    let a: Accumulator = "24:saturate".parse().unwrap();
    assert_eq!(
        a,
        Accumulator::Narrow {
            bits: 24,
            overflow: Overflow::Saturate
        }
    );
    assert_eq!(a.to_string(), "24:saturate");
    assert_eq!("16".parse::<Accumulator>().unwrap().to_string(), "16:wrap");
    for bad in ["1", "65", "24:clip", "x", "", ":wrap", "-3"] {
        let e = bad.parse::<Accumulator>().unwrap_err().to_string();
        assert!(e.contains(&format!("accumulator `{bad}`")), "{bad}: {e}");
    }
}

#[test]
fn bad_operands_are_errors() {
    let wide = Array2::from_shape_vec((1, 2), vec![0, 70_000]).unwrap();
    let b = Array2::from_elem((2, 1), 1);
    let e = matmul(wide.view(), b.view(), Accumulator::Exact).unwrap_err();
    assert!(e.to_string().contains("more than 16 bits"), "{e}");
    let e = matmul(b.view(), b.view(), Accumulator::Exact).unwrap_err();
    assert!(e.to_string().contains("does not conform"), "{e}");
    for p in IntPath::ALL.into_iter().filter(|p| !p.runs_here()) {
        assert!(matmul_on(p, b.t(), b.view(), Accumulator::Exact).is_err());
    }
}

#[test]
fn empty_products_are_zero_or_empty() {
    let a = Array2::<i32>::zeros((3, 0));
    let b = Array2::<i32>::zeros((0, 2));
    let p = matmul(a.view(), b.view(), Accumulator::Exact).unwrap();
    assert_eq!(p.sums, Array2::zeros((3, 2)));
    let p = matmul(b.t(), a.t(), Accumulator::Exact).unwrap();
    assert_eq!(p.sums.dim(), (2, 3));
}

#[test]
fn paths_within_a_vector_path_run_here() {
    for v in VectorPath::runnable() {
        assert!(IntPath::within(v).runs_here());
    }
    assert_eq!(IntPath::within(VectorPath::Portable), IntPath::Portable);
}

#[test]
fn f32_codes_give_the_i32_sums_and_fractions_are_errors() {
    let a = codes(13, 70, 8, false, 21);
    let b = codes(70, 9, 6, true, 22);
    let (af, bf) = (a.mapv(|v| v as f32), b.mapv(|v| v as f32));
    for path in paths() {
        let i = matmul_on(path, a.view(), b.view(), Accumulator::Exact).unwrap();
        let f = matmul_on(path, af.view(), bf.view(), Accumulator::Exact).unwrap();
        assert_eq!(i, f, "{}", path.name());
    }
    let mut half = af.clone();
    half[[2, 3]] = 0.5;
    let e = matmul(half.view(), bf.view(), Accumulator::Exact).unwrap_err();
    assert!(
        e.to_string().contains("operand A") && e.to_string().contains("not an integer"),
        "{e}"
    );
    half[[2, 3]] = f32::NAN;
    assert!(matmul(half.view(), bf.view(), Accumulator::Exact).is_err());
}

mod conv;
mod fused;

/// A square conv of `c` → `n` channels, kernel `k`, stride `s`, padding `p` and dilation `d`, and
/// its output size on an `h` × `w` input.
fn dilated_conv(
    (c, n): (usize, usize),
    (k, s, p, d): (usize, usize, usize, usize),
    (h, w): (usize, usize),
) -> (crate::conv::Conv2dSpec, (usize, usize)) {
    let mut spec = crate::conv::Conv2dSpec::square(c, n, k, s, p);
    spec.dilation = [d, d];
    let span = d * (k - 1) + 1;
    (
        spec,
        ((h + 2 * p - span) / s + 1, (w + 2 * p - span) / s + 1),
    )
}
