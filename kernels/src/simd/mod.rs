//! Vector instruction sets: [`VectorPath`], the one the GEMM microkernels run with, and run-time
//! selection of AVX2 code for the element-wise kernels (the release build targets plain x86-64,
//! so LLVM would otherwise vectorise them for SSE2 only).
//!
//! [`multiversion!`](crate::simd::multiversion) compiles one function body three times: for the
//! build target, with `avx2` and `fma` enabled, and with `avx512f` as well, and picks at run time
//! the AVX-512 one when the GEMMs' [`VectorPath`] is AVX-512 (`CPTSIM_VECTOR_PATH=avx2` keeps
//! these loops on AVX2 too), else the AVX2 one when the CPU has it. Only the instruction selection
//! differs: Rust never contracts `a * b + c` into a fused multiply-add and never reorders
//! floating-point operations, so every version gives bit-identical results.

/// Defines `fn NAME(args) -> R` whose body is compiled for the build target, for AVX2+FMA and
/// for AVX-512F, dispatched at run time. Arguments must be plain (non-generic) types.
#[macro_export]
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn portable($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                // The body itself (not a call to `portable`), so that closures in it inherit the
                // target features even where LLVM does not inline them.
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? $body
                if $crate::gemm::vector_path() == $crate::VectorPath::Avx512 {
                    // SAFETY: that path is only chosen on a CPU with AVX-512F (and AVX2, FMA).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: `avx2` only needs the CPU features detected just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            portable($($arg),*)
        }
    };
}

mod path;

pub use path::VectorPath;

pub use crate::multiversion;

/// `v.clamp(lo, hi)` without `f32::clamp`'s `lo ≤ hi` assertion (callers guarantee it), which
/// keeps the panic path out of vectorised loops. Same semantics: `lo` if `v < lo`, else `hi` if
/// `v > hi`, else `v` (NaN stays NaN).
#[inline(always)]
pub fn clamp(v: f32, lo: f32, hi: f32) -> f32 {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    multiversion! {
        /// A reduction whose result depends on the order of additions.
        fn ordered_sum(x: &[f32]) -> f32 {
            x.iter().fold(0.0, |a, &v| a + v * 1.5)
        }
    }

    #[test]
    fn dispatched_body_keeps_the_arithmetic_order() {
        let x: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let plain = x.iter().fold(0.0f32, |a, &v| a + v * 1.5);
        assert_eq!(ordered_sum(&x).to_bits(), plain.to_bits());
    }

    #[test]
    fn clamp_matches_the_standard_clamp() {
        let hi = 6.0f32;
        for v in [
            -7.0f32,
            -0.0,
            0.0,
            0.5,
            6.0,
            6.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(
                super::clamp(v, 0.0, hi).to_bits(),
                v.clamp(0.0, hi).to_bits(),
                "{v}"
            );
        }
        assert!(super::clamp(f32::NAN, 0.0, hi).is_nan());
    }
}
