//! Row loops over the last axis of a tensor, as sequence models use them: softmax and layer
//! normalisation, forward and backward, on contiguous rows of `d` values.
//!
//! Every sum over a row is kept in f64 in [`LANES`] interleaved partial sums (element `i` goes
//! into partial `i % LANES`, the tail past the last full group into one more), which are then
//! added in a fixed order. That order is written in the source, so the vector loops LLVM makes of
//! it on each vector path ([`multiversion!`](crate::simd::multiversion)) add the same numbers in
//! the same order: results are bit-identical on AVX-512, AVX2 and portable machines, and do not
//! depend on the thread count (a row is never split). The exponential is [`fastexp::exp`]
//! (relative error below 2.5·10⁻⁷), so softmax has no library call per element.

use crate::fastexp;

/// Interleaved partial sums of a row reduction.
pub const LANES: usize = 8;

/// `Σ f(x_i)` over `x` in f64, in the fixed order of the module doc.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut groups = x.chunks_exact(LANES);
    for g in &mut groups {
        for (a, &v) in acc.iter_mut().zip(g) {
            *a += f(v);
        }
    }
    let tail: f64 = groups.remainder().iter().fold(0.0, |t, &v| t + f(v));
    combine(acc) + tail
}

/// `Σ f(x_i, y_i)` over two rows of equal length, in the order of [`lane_sum`].
#[inline(always)]
fn lane_sum2(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let (mut gx, mut gy) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    for (a8, b8) in (&mut gx).zip(&mut gy) {
        for ((a, &u), &v) in acc.iter_mut().zip(a8).zip(b8) {
            *a += f(u, v);
        }
    }
    let tail = gx
        .remainder()
        .iter()
        .zip(gy.remainder())
        .fold(0.0, |t, (&u, &v)| t + f(u, v));
    combine(acc) + tail
}

/// The partial sums added pairwise, in one fixed order.
#[inline(always)]
fn combine(a: [f64; LANES]) -> f64 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// The largest value of a row (−∞ when it has none): `f32::max` is exact, so any order of
/// comparisons gives the same value.
#[inline(always)]
fn row_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut groups = x.chunks_exact(LANES);
    for g in &mut groups {
        for (a, &v) in acc.iter_mut().zip(g) {
            *a = if v > *a { v } else { *a };
        }
    }
    let m = groups
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    acc.iter().fold(m, |m, &v| m.max(v))
}

crate::simd::multiversion! {
    /// Softmax of each row of `d` values of `x` into `y` (same length):
    /// `y = exp(x − max) / Σ exp(x − max)`, the sum in f64, −∞ entries giving 0. Returns false
    /// (leaving later rows unwritten) at the first row without a finite entry.
    pub fn softmax_rows(x: &[f32], y: &mut [f32], d: usize) -> bool {
        if d == 0 {
            return true;
        }
        for (row, yr) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)) {
            let max = row_max(row);
            if !max.is_finite() {
                return false;
            }
            for (o, &v) in yr.iter_mut().zip(row) {
                *o = fastexp::exp(v - max);
            }
            let inv = 1.0 / lane_sum(yr, f64::from);
            for o in yr.iter_mut() {
                *o = (f64::from(*o) * inv) as f32;
            }
        }
        true
    }
}

crate::simd::multiversion! {
    /// Softmax's backward on rows of `d` values: `dx = y ⊙ (g − Σ g·y)`, the sum in f64.
    pub fn softmax_backward_rows(g: &[f32], y: &[f32], dx: &mut [f32], d: usize) {
        if d == 0 {
            return;
        }
        for ((gr, yr), dxr) in g.chunks_exact(d).zip(y.chunks_exact(d)).zip(dx.chunks_exact_mut(d)) {
            let dot = lane_sum2(gr, yr, |g, y| f64::from(g * y)) as f32;
            for ((o, &gv), &yv) in dxr.iter_mut().zip(gr).zip(yr) {
                *o = yv * (gv - dot);
            }
        }
    }
}

/// A layer normalisation's per-row outputs: `x̂`, `y` (each as long as the input) and `1/σ`
/// (one per row).
pub struct LayerNormOut<'a> {
    /// `(x − mean)/σ`.
    pub xhat: &'a mut [f32],
    /// `γ·x̂ + β`.
    pub y: &'a mut [f32],
    /// `1/σ` per row.
    pub inv: &'a mut [f32],
}

crate::simd::multiversion! {
    /// Layer normalisation of each row of `x` (rows of `γ.len()` values):
    /// `x̂ = (x − mean)·s`, `s = 1/√(var + ε)` (biased variance, both sums in f64),
    /// `y = γ·x̂ + β`.
    pub fn layer_norm_rows(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: LayerNormOut<'_>) {
        let d = gamma.len();
        if d == 0 || beta.len() != d {
            return;
        }
        let rows = x
            .chunks_exact(d)
            .zip(out.xhat.chunks_exact_mut(d))
            .zip(out.y.chunks_exact_mut(d))
            .zip(out.inv.iter_mut());
        for (((row, xh), yr), inv) in rows {
            let mean = lane_sum(row, f64::from) / d as f64;
            let var = lane_sum(row, |v| (f64::from(v) - mean) * (f64::from(v) - mean)) / d as f64;
            let s = (1.0 / (var + f64::from(eps)).sqrt()) as f32;
            let m = mean as f32;
            for ((((h, o), &v), &g), &b) in xh.iter_mut().zip(yr.iter_mut()).zip(row).zip(gamma).zip(beta) {
                *h = (v - m) * s;
                *o = g * *h + b;
            }
            *inv = s;
        }
    }
}

/// The gradients a layer normalisation's backward writes: the input's (as long as the
/// incoming gradient), γ's and β's (one per feature, added to).
pub struct LayerNormGrads<'a> {
    /// `dL/dx`.
    pub dx: &'a mut [f32],
    /// `dL/dγ += Σ_rows g·x̂`.
    pub dgamma: &'a mut [f32],
    /// `dL/dβ += Σ_rows g`.
    pub dbeta: &'a mut [f32],
}

crate::simd::multiversion! {
    /// Layer normalisation's backward on rows of `γ.len()` values, from the forward pass's `x̂`
    /// and `1/σ`: with `ĝ = γ·g`, `dx = s/d · (d·ĝ − Σĝ − x̂·Σ(ĝ·x̂))` (the sums in f64); `dγ` and
    /// `dβ` are added row after row in f32.
    pub fn layer_norm_backward_rows(
        g: &[f32],
        xhat: &[f32],
        inv: &[f32],
        gamma: &[f32],
        out: LayerNormGrads<'_>,
    ) {
        let d = gamma.len();
        if d == 0 || out.dgamma.len() != d || out.dbeta.len() != d {
            return;
        }
        let (dg, db) = (out.dgamma, out.dbeta);
        let rows = g.chunks_exact(d).zip(xhat.chunks_exact(d)).zip(out.dx.chunks_exact_mut(d)).zip(inv);
        let df = d as f64;
        for (((gr, xh), dxr), &s) in rows {
            let sum = lane_sum2(gr, gamma, |g, w| f64::from(w * g));
            let mut acc = [0.0f64; LANES];
            let mut groups = gr.chunks_exact(LANES).zip(xh.chunks_exact(LANES)).zip(gamma.chunks_exact(LANES));
            for ((g8, x8), w8) in &mut groups {
                for (((a, &gv), &xv), &w) in acc.iter_mut().zip(g8).zip(x8).zip(w8) {
                    *a += f64::from(w * gv) * f64::from(xv);
                }
            }
            let full = d / LANES * LANES;
            let tail = (full..d).fold(0.0, |t, k| t + f64::from(gamma[k] * gr[k]) * f64::from(xh[k]));
            let dot = combine(acc) + tail;
            let scale = f64::from(s) / df;
            for (((((o, &gv), &xv), &w), dgk), dbk) in dxr
                .iter_mut()
                .zip(gr)
                .zip(xh)
                .zip(gamma)
                .zip(dg.iter_mut())
                .zip(db.iter_mut())
            {
                let gh = f64::from(w * gv);
                *o = (scale * (df * gh - sum - f64::from(xv) * dot)) as f32;
                *dgk += gv * xv;
                *dbk += gv;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 * 0.618 + seed as f32) * 12.9898).sin() * 4.0)
            .collect()
    }

    #[test]
    fn softmax_is_within_4e_7_of_f64_and_masks() {
        for d in [1, 5, 8, 13, 64, 197] {
            let x = data(3 * d, d as u32);
            let mut y = vec![0.0; x.len()];
            assert!(softmax_rows(&x, &mut y, d));
            for (row, yr) in x.chunks(d).zip(y.chunks(d)) {
                let max = row
                    .iter()
                    .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
                let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - max).exp()).collect();
                let s: f64 = e.iter().sum();
                for (&got, &e) in yr.iter().zip(&e) {
                    let rel = ((f64::from(got) - e / s) / (e / s)).abs();
                    assert!(rel < 4e-7, "d {d}: relative error {rel:e}");
                }
            }
        }
        let x = [0.0, f32::NEG_INFINITY, 0.0];
        let mut y = [9.0; 3];
        assert!(softmax_rows(&x, &mut y, 3));
        assert_eq!(y, [0.5, 0.0, 0.5]);
        assert!(!softmax_rows(&[f32::NEG_INFINITY; 2], &mut [0.0; 2], 2));
    }

    #[test]
    fn sums_follow_the_documented_order() {
        let x = data(21, 3);
        let mut acc = [0.0f64; LANES];
        for (i, &v) in x[..16].iter().enumerate() {
            acc[i % LANES] += f64::from(v);
        }
        let tail = x[16..].iter().fold(0.0, |t, &v| t + f64::from(v));
        let want = ((acc[0] + acc[4]) + (acc[2] + acc[6]))
            + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
            + tail;
        assert_eq!(lane_sum(&x, f64::from).to_bits(), want.to_bits());
    }

    #[test]
    fn layer_norm_matches_f64_and_its_backward_the_formula() {
        let d = 13;
        let x = data(4 * d, 1);
        let gamma = data(d, 2);
        let beta = data(d, 3);
        let (mut xh, mut y, mut inv) = (vec![0.0; x.len()], vec![0.0; x.len()], vec![0.0; 4]);
        let out = LayerNormOut {
            xhat: &mut xh,
            y: &mut y,
            inv: &mut inv,
        };
        layer_norm_rows(&x, &gamma, &beta, 1e-5, out);
        for (r, row) in x.chunks(d).enumerate() {
            let m: f64 = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
            let v: f64 = row.iter().map(|&v| (f64::from(v) - m).powi(2)).sum::<f64>() / d as f64;
            for k in 0..d {
                let want = (f64::from(row[k]) - m) / (v + 1e-5).sqrt();
                assert!((f64::from(xh[r * d + k]) - want).abs() < 1e-5);
            }
        }
        let g = data(4 * d, 4);
        let (mut dx, mut dg, mut db) = (vec![0.0; x.len()], vec![0.0; d], vec![0.0; d]);
        let grads = LayerNormGrads {
            dx: &mut dx,
            dgamma: &mut dg,
            dbeta: &mut db,
        };
        layer_norm_backward_rows(&g, &xh, &inv, &gamma, grads);
        for r in 0..4 {
            let gh: Vec<f64> = (0..d).map(|k| f64::from(gamma[k] * g[r * d + k])).collect();
            let sum: f64 = gh.iter().sum();
            let dot: f64 = (0..d).map(|k| gh[k] * f64::from(xh[r * d + k])).sum();
            for k in 0..d {
                let want = f64::from(inv[r]) / d as f64
                    * (d as f64 * gh[k] - sum - f64::from(xh[r * d + k]) * dot);
                assert!((f64::from(dx[r * d + k]) - want).abs() < 1e-5 * want.abs().max(1.0));
            }
        }
        let want_db: f32 = (0..4).map(|r| g[r * d]).sum();
        assert!((db[0] - want_db).abs() < 1e-5);
    }
}
