//! Run-time selection of AVX2 code for the element-wise kernels (the release build targets plain
//! x86-64, so LLVM would otherwise vectorise them for SSE2 only).
//!
//! [`multiversion!`](crate::simd::multiversion) compiles one function body twice: once for the
//! build target and once with `avx2` and `fma` enabled, and picks the second at run time when the
//! CPU has both. Only the instruction selection differs: Rust never contracts `a * b + c` into a
//! fused multiply-add and never reorders floating-point operations, so both versions give
//! bit-identical results.

/// Defines `fn NAME(args) -> R` whose body is compiled for the build target and for AVX2+FMA,
/// dispatched at run time. Arguments must be plain (non-generic) types.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn portable($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    portable($($arg),*)
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

pub(crate) use multiversion;

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
}
