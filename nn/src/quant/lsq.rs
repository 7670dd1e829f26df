//! The LSQ-style step-size derivative LDP needs (spec §8): how the task loss changes with the
//! forward quantization step of a layer.
//!
//! For the affine quantizer `Q = s·rne(u) + z`, `u = (I − z)/s`, the LSQ derivative is
//! `∂Q/∂s = rne(u) − u = (Q − I)/s` (inside the range, which in training is everything). With
//! `s = R/(2^b − 1)` and `b = β·N`, `∂s/∂β = −R·ln2·N·2^b/(2^b − 1)²`, so per element
//! `∂Q/∂β = −(Q − I)·ln2·N·2^b/(2^b − 1)`: the range `R` cancels, which makes the per-channel
//! weight ranges and the per-tensor activation range one formula. A layer therefore only reports
//! `Σ dL/dQ·(Q − I)` over its forward operands (to its hook,
//! [`super::hook::QuantHook::step_residual`]); the caller multiplies by [`dq_dbeta_per_residual`].

use ndarray::ArrayView2;

/// `∂Q/∂β` per unit of the quantization residual `Q − I` at `bits` (integer, evaluated at the
/// rounded precision), for `∂b/∂β = n`: `−ln2·n·2^b/(2^b − 1)`.
pub fn dq_dbeta_per_residual(bits: u32, n: f64) -> f64 {
    let p = f64::from(bits.min(62)).exp2();
    -std::f64::consts::LN_2 * n * p / (p - 1.0)
}

/// `Σ g·r` over two equally long slices (a gradient and a stored residual `Q − I`), in f64.
pub fn dot(g: &[f32], r: &[f32]) -> f64 {
    g.iter()
        .zip(r)
        .map(|(&g, &r)| f64::from(g) * f64::from(r))
        .sum()
}

/// `Σ g·(q − w)` over matrices of one shape (any layout).
pub fn residual_dot_2d(g: ArrayView2<f32>, q: ArrayView2<f32>, w: ArrayView2<f32>) -> f64 {
    ndarray::Zip::from(g)
        .and(q)
        .and(w)
        .fold(0.0, |acc, &g, &q, &w| {
            acc + f64::from(g) * (f64::from(q) - f64::from(w))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn per_residual_factor_matches_the_chain_rule() {
        // (∂Q/∂s)·(∂s/∂β) with ∂Q/∂s = (Q − I)/s, s = R/(2^b − 1), for R = 3, b = 4, N = 8.
        let (r, b, n) = (3.0f64, 4u32, 8.0);
        let p = 2f64.powi(4);
        let s = r / (p - 1.0);
        let ds_dbeta = -r * std::f64::consts::LN_2 * n * p / ((p - 1.0) * (p - 1.0));
        let want = ds_dbeta / s;
        assert!((dq_dbeta_per_residual(b, n) - want).abs() < 1e-12);
    }

    #[test]
    fn residual_dots() {
        assert_eq!(dot(&[2.0, -1.0], &[0.5, -0.5]), 1.5);
        let g = array![[1.0f32, 2.0], [3.0, 4.0]];
        let q = array![[1.0f32, 1.0], [0.0, 0.0]];
        let w = array![[0.0f32, 1.0], [1.0, 0.0]];
        assert_eq!(
            residual_dot_2d(g.view(), q.view(), w.t()),
            1.0 + 2.0 * 0.0 - 3.0 * 1.0
        );
    }
}
