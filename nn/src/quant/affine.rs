//! The SBM primitive (spec §1.1): affine min/max quantize–dequantize on an unsigned grid.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use cptsim_kernels::simd::clamp;

/// Elements per independently seeded noise stream in [`fake_quant_stochastic`]. Fixed, so the
/// noise an element receives does not depend on the thread count.
pub const NOISE_CHUNK: usize = 1 << 16;

/// Floor of the quantization step (spec §1.1), which makes constant tensors map to `lo`.
pub const MIN_SCALE: f32 = 1e-8;

/// `2^bits − 1` as f32 (`bits` in 1..=32).
pub fn levels(bits: u32) -> f32 {
    ((1u64 << bits.min(32)) - 1) as f32
}

/// Independent running extrema of [`min_max`] (four AVX2 registers each, so its loop is not
/// bound by the latency of one chain).
const LANES: usize = 32;
/// Elements per task of [`min_max`] (a multiple of [`LANES`]).
const EXTREMA_CHUNK: usize = 1 << 16;

/// Minimum and maximum of `x`, ignoring NaNs; `(0, 0)` for an empty slice (or all NaN).
///
/// Lane `i` holds the extrema of the elements `i`, `i + 32`, … (`if v < lo` skips NaNs like
/// `f32::min`, and keeps the first of equal values); the lanes are merged at the end. The lanes'
/// chunks run in parallel and are merged in order with the same comparison, so every lane ends
/// where one pass would leave it: the result does not depend on the thread count, not even in the
/// sign of a zero extremum.
pub fn min_max(x: &[f32]) -> (f32, f32) {
    let (whole, rest) = x.split_at(x.len() - x.len() % LANES);
    let parts: Vec<_> = whole.par_chunks(EXTREMA_CHUNK).map(lane_extrema).collect();
    let (mut lo, mut hi) = ([f32::INFINITY; LANES], [f32::NEG_INFINITY; LANES]);
    for (plo, phi) in &parts {
        keep_extrema(&mut lo, &mut hi, plo, phi);
    }
    let init = (f32::INFINITY, f32::NEG_INFINITY);
    let (lo, hi) = lo
        .iter()
        .zip(&hi)
        .map(|(&l, &h)| (l, h))
        .chain(rest.iter().map(|&v| (v, v)))
        .fold(init, |(lo, hi), (l, h)| (lo.min(l), hi.max(h)));
    if lo > hi {
        (0.0, 0.0)
    } else {
        (lo, hi)
    }
}

type Lanes = [f32; LANES];

/// Lane by lane, `lo ← l` where `l < lo` and `hi ← h` where `h > hi` (NaN never replaces, and
/// the first of equal values stays).
#[inline(always)]
fn keep_extrema(lo: &mut Lanes, hi: &mut Lanes, l: &Lanes, h: &Lanes) {
    for i in 0..LANES {
        lo[i] = if l[i] < lo[i] { l[i] } else { lo[i] };
        hi[i] = if h[i] > hi[i] { h[i] } else { hi[i] };
    }
}

cptsim_kernels::simd::multiversion! {
    /// The lanes of [`min_max`] over `x` (a multiple of [`LANES`] long).
    fn lane_extrema(x: &[f32]) -> (Lanes, Lanes) {
        let (mut lo, mut hi) = ([f32::INFINITY; LANES], [f32::NEG_INFINITY; LANES]);
        for ch in x.chunks_exact(LANES) {
            if let Ok(ch) = <&Lanes>::try_from(ch) {
                keep_extrema(&mut lo, &mut hi, ch, ch);
            }
        }
        (lo, hi)
    }
}

/// Round half to even for `u ≥ 0` without a libm call: below 2^23, adding and subtracting 2^23
/// leaves the nearest integer (ties to even) under IEEE default rounding; from 2^23 on every f32
/// is already an integer.
#[inline]
fn rne_nonneg(u: f32) -> f32 {
    const TWO23: f32 = 8_388_608.0;
    let r = (u + TWO23) - TWO23;
    if u < TWO23 {
        r
    } else {
        u
    }
}

fn step(range: f32, bits: u32) -> f32 {
    (range / levels(bits)).max(MIN_SCALE)
}

/// Deterministic quantize–dequantize in place: `x ← rne(clamp((x − lo)/s, 0, L))·s + lo` with
/// `L = 2^bits − 1` and `s = max(range/L, 1e-8)`; element-wise, in parallel chunks.
pub fn fake_quant(x: &mut [f32], lo: f32, range: f32, bits: u32) {
    x.par_chunks_mut(NOISE_CHUNK)
        .for_each(|x| fake_quant_chunk(x, lo, range, bits));
}

cptsim_kernels::simd::multiversion! {
    /// [`fake_quant`] on one chunk.
    fn fake_quant_chunk(x: &mut [f32], lo: f32, range: f32, bits: u32) {
        let (s, l) = (step(range, bits), levels(bits));
        for v in x.iter_mut() {
            let u = clamp((*v - lo) / s, 0.0, l);
            *v = rne_nonneg(u) * s + lo;
        }
    }
}

/// The grid of an affine quantizer: values `lo + q·step` for integer codes `q` in
/// `0..=levels`, `step = max(range/levels, 1e-8)` (what [`fake_quant`] rounds to).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// The value of code 0.
    pub lo: f32,
    /// Distance between codes.
    pub step: f32,
    /// The largest code, `2^bits − 1`.
    pub levels: f32,
}

impl Grid {
    /// The grid of `bits` bits from `lo` over `range`.
    pub fn new(lo: f32, range: f32, bits: u32) -> Self {
        Grid {
            lo,
            step: step(range, bits),
            levels: levels(bits),
        }
    }

    /// The code [`fake_quant`] gives `v`: `rne(clamp((v − lo)/step, 0, levels))`.
    #[inline(always)]
    pub fn code(&self, v: f32) -> f32 {
        rne_nonneg(clamp((v - self.lo) / self.step, 0.0, self.levels))
    }
}

/// The codes of `x` on `grid` (as `f32`, exact integers), in parallel chunks.
pub fn codes(x: &[f32], grid: Grid) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    out.par_chunks_mut(NOISE_CHUNK)
        .zip(x.par_chunks(NOISE_CHUNK))
        .for_each(|(o, x)| codes_chunk(x, grid.lo, grid.step, grid.levels, o));
    out
}

cptsim_kernels::simd::multiversion! {
    /// [`codes`] on one chunk.
    fn codes_chunk(x: &[f32], lo: f32, s: f32, l: f32, out: &mut [f32]) {
        let grid = Grid { lo, step: s, levels: l };
        for (o, &v) in out.iter_mut().zip(x) {
            *o = grid.code(v);
        }
    }
}

/// The codes of `x` on `grid` as bytes (a grid of at most 256 levels), in parallel chunks;
/// `None` if a value has no code (NaN).
pub fn byte_codes(x: &[f32], grid: Grid) -> Option<Vec<u8>> {
    if grid.levels > 255.0 {
        return None;
    }
    let mut out = vec![0u8; x.len()];
    let ok = out
        .par_chunks_mut(NOISE_CHUNK)
        .zip(x.par_chunks(NOISE_CHUNK))
        .all(|(o, x)| byte_codes_chunk(x, grid.lo, grid.step, grid.levels, o));
    ok.then_some(out)
}

cptsim_kernels::simd::multiversion! {
    /// [`byte_codes`] on one chunk: whether every value had a code.
    fn byte_codes_chunk(x: &[f32], lo: f32, s: f32, l: f32, out: &mut [u8]) -> bool {
        // 1.5·2²³: adding it to a code in 0..=255 leaves the code in the low mantissa byte.
        const MAGIC: f32 = 12_582_912.0;
        let grid = Grid { lo, step: s, levels: l };
        let mut nan = false;
        for (o, &v) in out.iter_mut().zip(x) {
            let q = grid.code(v);
            nan |= q.is_nan();
            *o = (q + MAGIC).to_bits() as u8;
        }
        !nan
    }
}

/// Elements quantized per batch of random words in [`fake_quant_stochastic`].
const NOISE_BATCH: usize = 256;

/// Stochastic quantize–dequantize in place: as [`fake_quant`] but `U(−½, ½)` noise is added to the
/// level index before the clamp. The noise comes from ChaCha8 seeded with `seed`, one stream per
/// [`NOISE_CHUNK`] elements, so results are reproducible for any thread count.
pub fn fake_quant_stochastic(x: &mut [f32], lo: f32, range: f32, bits: u32, seed: u64) {
    let (s, l) = (step(range, bits), levels(bits));
    x.par_chunks_mut(NOISE_CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(i as u64);
            // The same words, in the same order, as one `next_u32` per element.
            let mut words = [0u32; NOISE_BATCH];
            for part in chunk.chunks_mut(NOISE_BATCH) {
                let w = &mut words[..part.len()];
                rng.fill(w);
                stochastic_batch(part, w, lo, s, l);
            }
        });
}

cptsim_kernels::simd::multiversion! {
    /// One batch of [`fake_quant_stochastic`] (step `s`, top level `l`): the noise of element `j`
    /// is `U(0,1) − ½` drawn from `words[j]` exactly as `rand`'s `random::<f32>()` draws it
    /// (the top 24 bits times 2⁻²⁴).
    fn stochastic_batch(x: &mut [f32], words: &[u32], lo: f32, s: f32, l: f32) {
        const SCALE: f32 = 1.0 / (1u32 << 24) as f32;
        for (v, &w) in x.iter_mut().zip(words) {
            let noise = SCALE * (w >> 8) as f32 - 0.5;
            let u = clamp((*v - lo) / s + noise, 0.0, l);
            *v = rne_nonneg(u) * s + lo;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_rounding_matches_round_ties_even() {
        let mut u = 0.0f32;
        while u < 3.0e7 {
            assert_eq!(rne_nonneg(u), u.round_ties_even(), "{u}");
            u = u * 1.013 + 0.25;
        }
        for v in [0.5f32, 1.5, 2.5, 8_388_607.5, 8_388_608.0, 4.0e9] {
            assert_eq!(rne_nonneg(v), v.round_ties_even(), "{v}");
        }
    }

    /// The original one-element-at-a-time forms, as references for the batched kernels.
    fn min_max_sequential(x: &[f32]) -> (f32, f32) {
        let (lo, hi) = x
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        if lo > hi {
            (0.0, 0.0)
        } else {
            (lo, hi)
        }
    }

    fn stochastic_per_element(x: &mut [f32], lo: f32, range: f32, bits: u32, seed: u64) {
        let (s, l) = (step(range, bits), levels(bits));
        for (i, chunk) in x.chunks_mut(NOISE_CHUNK).enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(i as u64);
            for v in chunk.iter_mut() {
                let noise = rng.random::<f32>() - 0.5;
                let u = ((*v - lo) / s + noise).clamp(0.0, l);
                *v = rne_nonneg(u) * s + lo;
            }
        }
    }

    #[test]
    fn batched_kernels_equal_the_per_element_forms_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for n in [
            0usize,
            1,
            7,
            8,
            255,
            256,
            1000,
            NOISE_CHUNK + 300,
            3 * NOISE_CHUNK - 1,
        ] {
            let base: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..2.0)).collect();
            let (lo, hi) = min_max(&base);
            let (l2, h2) = min_max_sequential(&base);
            assert_eq!(
                (lo.to_bits(), hi.to_bits()),
                (l2.to_bits(), h2.to_bits()),
                "n={n}"
            );
            for bits in [2, 3, 8] {
                let (mut a, mut b) = (base.clone(), base.clone());
                fake_quant_stochastic(&mut a, lo, hi - lo, bits, 11 + n as u64);
                stochastic_per_element(&mut b, lo, hi - lo, bits, 11 + n as u64);
                assert!(
                    a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
                    "n={n}"
                );
            }
        }
        let mut with_nan = vec![
            1.0f32,
            f32::NAN,
            -4.0,
            3.0,
            0.5,
            2.0,
            -1.0,
            0.0,
            9.0,
            f32::NAN,
        ];
        assert_eq!(min_max(&with_nan), min_max_sequential(&with_nan));
        with_nan.truncate(9);
        assert_eq!(min_max(&with_nan), (-4.0, 9.0));
    }

    #[test]
    fn ties_round_half_even() {
        // bits 2: L = 3, range 3 → step 1, u = x.
        let mut x = [0.0, 0.5, 1.5, 2.5, 3.0];
        fake_quant(&mut x, 0.0, 3.0, 2);
        assert_eq!(x, [0.0, 0.0, 2.0, 2.0, 3.0]);
    }

    #[test]
    fn min_max_ignores_nans_and_handles_remainders() {
        let x: Vec<f32> = (0..21).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        assert_eq!(min_max(&x), (-6.0, 6.0));
        assert_eq!(min_max(&[f32::NAN, 2.0, -1.0]), (-1.0, 2.0));
        assert_eq!(min_max(&[]), (0.0, 0.0));
        assert_eq!(min_max(&[f32::NAN]), (0.0, 0.0));
    }

    #[test]
    fn constant_tensor_maps_to_lo() {
        let mut x = [2.5f32; 7];
        let (lo, hi) = min_max(&x);
        fake_quant(&mut x, lo, hi - lo, 4);
        assert_eq!(x, [2.5f32; 7]);
    }

    #[test]
    fn one_bit_maps_to_the_two_ends() {
        let mut x = [-1.0, -0.2, 0.2, 3.0];
        fake_quant(&mut x, -1.0, 4.0, 1);
        // step 4: u = 0, 0.2, 0.3, 1 → 0, 0, 0, 1
        assert_eq!(x, [-1.0, -1.0, -1.0, 3.0]);
    }

    #[test]
    fn thirty_two_bits_is_nearly_lossless() {
        let orig: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut x = orig.clone();
        let (lo, hi) = min_max(&x);
        fake_quant(&mut x, lo, hi - lo, 32);
        for (a, b) in x.iter().zip(&orig) {
            assert!((a - b).abs() <= 2e-7 * (hi - lo), "{a} vs {b}");
        }
    }

    #[test]
    fn eval_values_outside_range_are_clamped() {
        let mut x = [-5.0, 0.5, 9.0];
        fake_quant(&mut x, 0.0, 1.0, 8);
        assert_eq!(x[0], 0.0);
        assert_eq!(x[2], 1.0);
    }

    #[test]
    fn stochastic_rounding_is_unbiased() {
        // Tensor holding its own min 0 and max 1, and n copies of 0.3; bits 2 → step 1/3,
        // u = 0.9: q = 1 w.p. 0.9, 0 w.p. 0.1 (never clamped). E[x̂] = 0.3,
        // Var[x̂] = 0.9·0.1·(1/3)² = 0.01, so the mean of n copies has std 0.1/√n.
        let n = 200_000;
        let mut x = vec![0.3f32; n + 2];
        x[0] = 0.0;
        x[1] = 1.0;
        fake_quant_stochastic(&mut x, 0.0, 1.0, 2, 42);
        let mean = x[2..].iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let sd = 0.1 / (n as f64).sqrt();
        assert!(
            (mean - 0.3).abs() < 5.0 * sd,
            "mean {mean}, 5σ = {}",
            5.0 * sd
        );
        // Only the two neighbouring levels occur.
        assert!(x[2..]
            .iter()
            .all(|&v| (v - 1.0 / 3.0).abs() < 1e-6 || v.abs() < 1e-6));
        // Deterministic rounding is biased here: 0.3 → 1/3.
        let mut d = vec![0.3f32; 4];
        fake_quant(&mut d, 0.0, 1.0, 2);
        assert!((d[0] - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn stochastic_rounding_is_seeded_and_thread_count_independent() {
        let base: Vec<f32> = (0..300_000).map(|i| (i as f32 * 0.01).cos()).collect();
        let run = |threads: usize, seed: u64| {
            let mut x = base.clone();
            cptsim_testdata::with_threads(threads, || {
                fake_quant_stochastic(&mut x, -1.0, 2.0, 3, seed)
            })
            .unwrap();
            x
        };
        assert_eq!(run(1, 7), run(2, 7));
        assert_ne!(run(1, 7), run(1, 8));
    }
}
