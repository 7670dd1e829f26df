//! Per-sample bit-widths for DFQ (spec §6.3, cheap execution): one range per tensor, as SBM, but
//! each sample's slice is quantized at its own bit-width, so batch norm still sees the whole
//! batch while every sample runs at the candidate its gate chose.

use super::affine::{fake_quant, fake_quant_stochastic, min_max};
use super::{mix64, RangeEma};

/// Quantizes the activation tensor `x` (samples stored contiguously, `bits.len()` of them) with
/// one range: the batch min/max in training (also folded into the EMA), the EMA in eval. Sample
/// `s` uses `bits[s]`; 0 leaves it fp32.
pub fn activations(x: &mut [f32], bits: &[u32], ema: &mut RangeEma, batch_range: bool) {
    let (lo, range) = if batch_range {
        let (lo, hi) = min_max(x);
        ema.update(lo, hi - lo);
        (lo, hi - lo)
    } else {
        (ema.lo, ema.range)
    };
    for (chunk, &b) in x.chunks_mut(per_sample(x.len(), bits.len())).zip(bits) {
        if b > 0 {
            fake_quant(chunk, lo, range, b);
        }
    }
}

/// Quantizes the error tensor `g` with its own min/max and stochastic rounding; sample `s` at
/// `bits[s]` (0 = fp32) with its own noise stream derived from `seed`.
pub fn errors(g: &mut [f32], bits: &[u32], seed: u64) {
    let (lo, hi) = min_max(g);
    let len = per_sample(g.len(), bits.len());
    for (s, (chunk, &b)) in g.chunks_mut(len).zip(bits).enumerate() {
        if b > 0 {
            fake_quant_stochastic(chunk, lo, hi - lo, b, mix64(seed ^ s as u64));
        }
    }
}

/// Elements per sample (at least 1, so an empty tensor is no error).
fn per_sample(len: usize, samples: usize) -> usize {
    (len / samples.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sample_uses_its_bits_on_the_shared_range() {
        // Two samples of 4; range [0, 3] from the whole tensor.
        let mut x = vec![0.0f32, 0.4, 1.2, 3.0, 0.9, 1.6, 2.2, 2.9];
        let mut ema = RangeEma::default();
        activations(&mut x, &[1, 2], &mut ema, true);
        // sample 0, 1 bit: step 3 → 0, 0, 0, 3; sample 1, 2 bits: step 1 → 1, 2, 2, 3
        assert_eq!(x, vec![0.0, 0.0, 0.0, 3.0, 1.0, 2.0, 2.0, 3.0]);
        assert!((ema.range - 0.3).abs() < 1e-6);
        let mut y = vec![0.4f32, 0.6];
        activations(&mut y, &[0, 0], &mut ema, false);
        assert_eq!(y, vec![0.4, 0.6], "bits 0 stay fp32");
    }

    #[test]
    fn errors_land_on_each_samples_grid() {
        let mut g: Vec<f32> = (0..200).map(|i| (i as f32 * 0.3).sin()).collect();
        let (lo, hi) = min_max(&g);
        errors(&mut g, &[2, 4], 9);
        for (s, bits) in [(0usize, 2u32), (1, 4)] {
            let step = (hi - lo) / ((1u32 << bits) - 1) as f32;
            for v in &g[s * 100..(s + 1) * 100] {
                let u = (v - lo) / step;
                assert!((u - u.round()).abs() < 1e-3, "sample {s}: {u}");
            }
        }
    }
}
