//! WAGEUBN-style power-of-two fixed-point quantizers, as a baseline (Yang, Wu, Chen, Li, Deng,
//! Xie, Li, "Training high-performance and large-scale deep neural networks with full 8-bit
//! integers", Neural Networks 125, 2020; building on WAGE, Wu, Li, Chen, Shi, ICLR 2018).
//! Definitions used (from those papers), for `k ≥ 2` bits, `d = 2^(1−k)`:
//! * direct quantization `Q(x, k) = rne(x·2^(k−1)) / 2^(k−1)`;
//! * shift quantization `SQ(x, k) = S·clip(Q(x/S, k), −1 + d, 1 − d)` with the power-of-two scale
//!   `S = 2^rne(log2 max|x|)` of the whole tensor.
//!
//! cptsim applies `SQ` per tensor to weights, activations and errors (deterministic rounding for
//! weights and activations, stochastic rounding for errors as in WAGE's gradient quantizer).
//! Deviation, stated: WAGEUBN clips weights to `(−1, 1)` without a scale because its
//! initialisation is scaled to fit; imported models are not, so the weights get the shift scale
//! too. Backward: straight-through (identity).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn shift_scale(x: &[f32]) -> f32 {
    let m = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    if m > 0.0 {
        m.log2().round_ties_even().exp2()
    } else {
        1.0
    }
}

/// `SQ(x, bits)` in place; with `seed`, stochastic rounding (`U(−½, ½)` added before rounding).
pub fn shift_quantize(x: &mut [f32], bits: u32, seed: Option<u64>) {
    let s = shift_scale(x);
    let g = ((bits.clamp(2, 32) - 1) as f32).exp2();
    let lim = 1.0 - 1.0 / g;
    let mut rng = seed.map(ChaCha8Rng::seed_from_u64);
    for v in x.iter_mut() {
        let noise = rng.as_mut().map_or(0.0, |r| r.random::<f32>() - 0.5);
        let q = ((*v / s) * g + noise).round_ties_even() / g;
        *v = s * q.clamp(-lim, lim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_grid() {
        // max|x| = 3 → S = 2^rne(1.585) = 4; 3 bits: grid step ¼, clip ±¾.
        let mut x = [3.0f32, 0.5, -0.5, 0.25, -3.0];
        shift_quantize(&mut x, 3, None);
        // x/S = 0.75, 0.125, −0.125, 0.0625, −0.75 → ·4 = 3, 0.5, −0.5, 0.25, −3
        // rne → 3, 0, −0, 0, −3 → /4·S
        assert_eq!(x, [3.0, 0.0, 0.0, 0.0, -3.0]);
    }

    #[test]
    fn stochastic_mode_is_unbiased() {
        let n = 100_000;
        let mut x = vec![0.3f32; n + 1];
        x[0] = 1.0; // S = 1; 2 bits: step ½, clip ±½; 0.3 between 0 and ½ (p = 0.6)
        shift_quantize(&mut x, 2, Some(5));
        let mean = x[1..].iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let sd = (0.6f64 * 0.4).sqrt() * 0.5 / (n as f64).sqrt();
        assert!((mean - 0.3).abs() < 5.0 * sd, "mean {mean}");
    }
}
