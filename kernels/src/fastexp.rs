//! `eˣ` in f32 without a library call (and the logistic function and `tanh` built on it), so
//! that element loops using it vectorise (glibc's `expf` is a call per element: a quarter of a
//! Transformer LM step inside GELU). Range reduction
//! `x = k·ln 2 + r`, `|r| ≤ ln 2 / 2`, with `ln 2` split in two (Cody–Waite), and a degree-6
//! polynomial for `eʳ` (Cephes' `expf` coefficients); `k` is rounded by the 1.5·2²³ trick, which
//! needs no SSE4.1. Relative error below 2.5·10⁻⁷ on the normal range (unit test against f64);
//! `x < −87.3` gives 0 (the result would be denormal), `x > 88.37` saturates at `e^88.37` (2ᵏ
//! stays normal).

/// `eˣ` (module doc).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer
    let xc = crate::simd::clamp(x, -87.3, 88.37);
    // `kr`'s low mantissa bits hold `k` (it stays in [2²³, 2²⁴)).
    let kr = xc * LOG2E + ROUND;
    let k = kr - ROUND;
    let r = (xc - k * LN2_HI) - k * LN2_LO;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let er = p * r * r + r + 1.0;
    // 2ᵏ from its exponent bits, k ∈ [−126, 127] after the clamp, read from `kr`'s bits: a
    // float-to-integer conversion (`as i32`, which saturates) would not vectorise.
    let two_k = f32::from_bits(kr.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    if x < -87.3 {
        0.0
    } else {
        er * two_k
    }
}

/// The logistic function `1 / (1 + e⁻ˣ)` on [`exp`]: relative error below 5·10⁻⁷ (unit test).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

crate::simd::multiversion! {
    /// [`sigmoid`] of every element of `x`, in place (vectorised: no call per element).
    pub fn sigmoid_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = sigmoid(*v);
        }
    }
}

crate::simd::multiversion! {
    /// `x·sigmoid(x)` (SiLU) of every element of `x`, in place: the product a `Mul` of `x` and
    /// its [`sigmoid_in_place`] gives, in one pass.
    pub fn silu_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v *= sigmoid(*v);
        }
    }
}

/// `tanh x` without a library call: Cephes' `tanhf` odd polynomial below `|x| = 0.625` (where
/// `1 − 2/(e²ˣ + 1)` would cancel), that form with [`exp`] and `x`'s sign above. Relative error
/// below 5·10⁻⁷ (unit test); `±∞` gives `±1`, NaN stays NaN.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328e-1)
            * z
            * x
            + x;
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else {
        large
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest relative error of `f` against `want` on `[-lo, hi]` in steps of `step`.
    fn worst(f: fn(f32) -> f32, want: fn(f64) -> f64, lo: f32, hi: f32, step: f32) -> f64 {
        let mut worst = 0.0f64;
        let mut x = lo;
        while x < hi {
            let w = want(f64::from(x));
            if w != 0.0 {
                worst = worst.max(((f64::from(f(x)) - w) / w).abs());
            }
            x += step;
        }
        worst
    }

    #[test]
    fn sigmoid_and_tanh_match_f64_to_a_few_ulps_and_handle_the_ends() {
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let e = worst(sigmoid, sig, -80.0, 80.0, 0.000_97);
        assert!(e < 5e-7, "sigmoid: worst relative error {e:e}");
        let e = worst(tanh, f64::tanh, -12.0, 12.0, 0.000_31);
        assert!(e < 5e-7, "tanh: worst relative error {e:e}");
        let e = worst(tanh, f64::tanh, -1e-3, 1e-3, 1.3e-7);
        assert!(e < 5e-7, "tanh near 0: worst relative error {e:e}");
        assert_eq!(tanh(0.0), 0.0);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(30.0), 1.0);
        assert!(tanh(f32::NAN).is_nan() && sigmoid(f32::NAN).is_nan());
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        // `exp` saturates at e^88.37, so the far left tail ends at ~4·10⁻³⁹ rather than 0.
        assert!((0.0..1e-38).contains(&sigmoid(f32::NEG_INFINITY)));
    }

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
