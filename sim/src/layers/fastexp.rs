//! `eˣ` in f32 without a library call, so that element loops using it vectorise (glibc's `expf`
//! is a call per element: a quarter of a Transformer LM step inside GELU). Range reduction
//! `x = k·ln 2 + r`, `|r| ≤ ln 2 / 2`, with `ln 2` split in two (Cody–Waite), and a degree-6
//! polynomial for `eʳ` (Cephes' `expf` coefficients); `k` is rounded by the 1.5·2²³ trick, which
//! needs no SSE4.1. Relative error below 2.5·10⁻⁷ on the normal range (unit test against f64);
//! `x < −87.3` gives 0 (the result would be denormal), `x > 88.37` saturates at `e^88.37` (2ᵏ
//! stays normal).

/// `eˣ` (module doc).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer
    let xc = crate::simd::clamp(x, -87.3, 88.37);
    let k = (xc * LOG2E + ROUND) - ROUND;
    let r = (xc - k * LN2_HI) - k * LN2_LO;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let er = p * r * r + r + 1.0;
    // 2ᵏ from its exponent bits; k ∈ [−126, 127] after the clamp.
    let two_k = f32::from_bits(((k as i32 + 127) as u32) << 23);
    if x < -87.3 {
        0.0
    } else {
        er * two_k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_f64_exp_to_a_few_ulps_and_handles_the_ends() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.37 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.001_37;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst:e}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(100.0).is_finite() && exp(100.0) > 1e38);
        assert!(exp(f32::NAN).is_nan());
    }
}
