//! DoReFa-Net quantizers (Zhou, Wu, Ni, Zhou, He, Zou, "DoReFa-Net: Training Low Bitwidth
//! Convolutional Neural Networks with Low Bitwidth Gradients", arXiv:1606.06160, 2016), as a
//! baseline. With `quantize_k(r) = rne((2^k − 1)·r) / (2^k − 1)` for `r ∈ [0, 1]`:
//! * weights (§2.3, Eq. 9): `k = 1`: `sign(w)·mean|w|` (per layer); `k > 1`:
//!   `w_q = 2·quantize_k(tanh(w) / (2·max|tanh(w)|) + ½) − 1` with the max over the whole layer.
//!   Backward: straight-through over `quantize_k`, chained through the transform, treating the max
//!   as a constant: `∂w_q/∂w = (1 − tanh²w) / max|tanh w|` (identity for `k = 1`).
//! * activations (Eq. 10): `quantize_k(clip(x, 0, 1))`; the gradient is passed where `0 ≤ x ≤ 1`
//!   and zero elsewhere (the clip is part of the graph). No state: eval equals training.
//! * errors (Eq. 12): `dr_q = 2·m·[quantize_k(dr/(2m) + ½ + N(k)) − ½]` with `m` the max of `|dr|`
//!   over each sample (all axes but the batch axis) and `N(k) = σ/(2^k − 1)`, `σ ~ U(−½, ½)`.
//!   cptsim clamps the noisy value to `[0, 1]` before rounding so the result stays on the grid.

use ndarray::{Array2, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::affine::levels;

fn quantize_k(r: f32, l: f32) -> f32 {
    (r.clamp(0.0, 1.0) * l).round_ties_even() / l
}

/// Quantized weights and the factor `∂w_q/∂w` to apply to their gradient.
pub fn weights(w: ArrayView2<f32>, bits: u32) -> (Array2<f32>, Array2<f32>) {
    if bits == 1 {
        let n = w.len().max(1) as f32;
        let mean_abs = w.iter().map(|v| v.abs()).sum::<f32>() / n;
        let q = w.mapv(|v| if v >= 0.0 { mean_abs } else { -mean_abs });
        return (q, Array2::ones(w.raw_dim()));
    }
    let t = w.mapv(f32::tanh);
    let m = t.iter().fold(0.0f32, |a, v| a.max(v.abs())).max(1e-8);
    let l = levels(bits);
    let q = t.mapv(|v| 2.0 * quantize_k(v / (2.0 * m) + 0.5, l) - 1.0);
    let d = t.mapv(|v| (1.0 - v * v) / m);
    (q, d)
}

/// Quantizes activations in place; returns the gradient mask (1 inside `[0, 1]`, 0 outside).
pub fn activations(x: &mut [f32], bits: u32) -> Vec<f32> {
    let l = levels(bits);
    x.iter_mut()
        .map(|v| {
            let inside = (0.0..=1.0).contains(v);
            *v = quantize_k(*v, l);
            if inside {
                1.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Quantizes errors in place, `samples` equal slices (the batch axis first).
pub fn errors(g: &mut [f32], samples: usize, bits: u32, seed: u64) {
    let l = levels(bits);
    let per = g.len() / samples.max(1);
    if per == 0 {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for s in g.chunks_mut(per) {
        let m = s.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        if m == 0.0 {
            continue;
        }
        for v in s.iter_mut() {
            let noise = (rng.random::<f32>() - 0.5) / l;
            *v = 2.0 * m * (quantize_k(*v / (2.0 * m) + 0.5 + noise, l) - 0.5);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn weights_hand_computed() {
        let w = array![[0.0f32, 10.0], [-10.0, 0.2]];
        let (q, d) = weights(w.view(), 2);
        // tanh(±10) ≈ ±1 = max; 0 → ½ → rne(1.5) = 2 → ⅔ → 2·⅔ − 1 = ⅓
        assert!((q[[0, 0]] - 1.0 / 3.0).abs() < 1e-6);
        assert!((q[[0, 1]] - 1.0).abs() < 1e-6 && (q[[1, 0]] + 1.0).abs() < 1e-6);
        // tanh(0.2)=0.1974 → 0.5987·3 = 1.796 → 2 → ⅓
        assert!((q[[1, 1]] - 1.0 / 3.0).abs() < 1e-6);
        assert!((d[[0, 0]] - 1.0).abs() < 1e-5);
        let (q1, _) = weights(w.view(), 1);
        assert_eq!(q1, array![[5.05, 5.05], [-5.05, 5.05]]);
    }

    #[test]
    fn activations_clip_and_mask() {
        let mut x = [-0.5f32, 0.4, 0.9, 1.7];
        let mask = activations(&mut x, 2);
        assert_eq!(mask, vec![0.0, 1.0, 1.0, 0.0]);
        assert!((x[1] - 1.0 / 3.0).abs() < 1e-6 && (x[2] - 1.0).abs() < 1e-6);
        assert_eq!([x[0], x[3]], [0.0, 1.0]);
    }

    #[test]
    fn errors_are_unbiased_per_sample() {
        // One sample holding ±1 (m = 1) and many copies of 0.1; bits 2: grid of dr is
        // {−1, −⅓, ⅓, 1}; 0.1/2 + ½ = 0.55, ·3 = 1.65 → level 1 or 2, mean should be 0.1.
        let n = 100_000;
        let mut g = vec![0.1f32; n + 2];
        g[0] = 1.0;
        g[1] = -1.0;
        errors(&mut g, 1, 2, 9);
        let mean = g[2..].iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        // p = 0.65 of level 2: var = p(1−p)·(2/3)² ≈ 0.101; sd of mean ≈ 0.318/√n
        let sd = (0.65f64 * 0.35).sqrt() * 2.0 / 3.0 / (n as f64).sqrt();
        assert!((mean - 0.1).abs() < 5.0 * sd, "mean {mean}");
    }
}
