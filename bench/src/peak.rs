//! The core's fp32 FMA peak, measured independently of any GEMM: a loop of independent fused
//! multiply-adds at the widest vector width this CPU runs (AVX-512, AVX2+FMA, or portable code
//! for the build target), chosen at run time. `cptsim bench` reports GEMM rates against it.

use std::hint::black_box;

use cptsim_kernels::cputime::thread_cpu_seconds;
use cptsim_kernels::VectorPath;

/// Independent accumulators per kernel: more than FMA latency × units (4 × 2), and with the two
/// constants still within the 16 vector registers of SSE2/AVX2.
const ACCS: usize = 12;

/// One measured peak.
#[derive(Clone, Copy, Debug)]
pub struct FmaPeak {
    pub path: VectorPath,
    /// fp32 GFLOP per thread-CPU-second (2 FLOPs per lane of a multiply-add).
    pub gflops: f64,
}

/// Measures the calling thread's fp32 peak on `path` for at least `min_secs` of thread CPU time
/// (at least 0.01 s). A path this CPU does not run falls back to [`VectorPath::detect`]'s.
pub fn fma_peak(path: VectorPath, min_secs: f64) -> FmaPeak {
    let path = if path.runs_here() {
        path
    } else {
        VectorPath::detect()
    };
    let iters: u64 = 1 << 16;
    let flops_per_call = (iters * (ACCS * path.lanes()) as u64 * 2) as f64;
    run_kernel(path, 256); // warm up (and bring the vector unit to full width)
    let (t0, mut calls, mut sink) = (thread_cpu_seconds(), 0u64, 0.0f32);
    let min_secs = min_secs.max(0.01);
    while thread_cpu_seconds() - t0 < min_secs {
        sink += run_kernel(path, iters);
        calls += 1;
    }
    let secs = (thread_cpu_seconds() - t0).max(1e-9);
    black_box(sink);
    FmaPeak {
        path,
        gflops: calls as f64 * flops_per_call / secs / 1e9,
    }
}

/// `iters` rounds of [`ACCS`] independent multiply-adds on `path`; returns a value depending on
/// all of them (so nothing is optimised away).
fn run_kernel(path: VectorPath, iters: u64) -> f32 {
    let (m, a) = (black_box(0.999_999f32), black_box(1e-7f32));
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `fma_peak` only passes a path `runs_here` confirmed on this CPU.
        VectorPath::Avx512 => unsafe { x86::avx512(iters, m, a) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        VectorPath::Avx2 => unsafe { x86::avx2(iters, m, a) },
        _ => portable(iters, m, a),
    }
}

/// Separate multiply and add on arrays of 4 (LLVM keeps each accumulator in one SSE register).
fn portable(iters: u64, m: f32, a: f32) -> f32 {
    let mut acc = [[0.0f32; 4]; ACCS];
    for (i, v) in acc.iter_mut().enumerate() {
        *v = [i as f32; 4];
    }
    for _ in 0..iters {
        for v in acc.iter_mut() {
            for x in v.iter_mut() {
                *x = *x * m + a;
            }
        }
    }
    acc.iter().flatten().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::ACCS;

    /// `fn NAME(iters, m, a) -> f32`: [`ACCS`] vector accumulators `v ← v·m + a` with one fused
    /// multiply-add each per round, compiled for `FEATURES`; returns the sum of every lane.
    macro_rules! fma_kernel {
        ($name:ident, $features:literal, $lanes:literal, $set1:ident, $fmadd:ident, $store:ident) => {
            #[target_feature(enable = $features)]
            pub(super) fn $name(iters: u64, m: f32, a: f32) -> f32 {
                let (vm, va) = ($set1(m), $set1(a));
                let mut acc: [_; ACCS] = std::array::from_fn(|i| $set1(i as f32));
                for _ in 0..iters {
                    for v in acc.iter_mut() {
                        *v = $fmadd(*v, vm, va);
                    }
                }
                let mut out = [0.0f32; $lanes];
                let mut s = 0.0;
                for v in acc {
                    // SAFETY: `out` holds exactly one vector's lanes.
                    unsafe { $store(out.as_mut_ptr(), v) };
                    s += out.iter().sum::<f32>();
                }
                s
            }
        };
    }

    fma_kernel!(
        avx512,
        "avx512f",
        16,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_storeu_ps
    );
    fma_kernel!(
        avx2,
        "avx2,fma",
        8,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_storeu_ps
    );
}

/// The CPU's model name from `/proc/cpuinfo` (`None` where there is none).
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_this_cpu_runs_gives_the_same_sum() {
        // The kernels differ only in vector width, so per lane they do the same arithmetic
        // (FMA rounds once, the portable multiply + add twice: compare loosely).
        let p = portable(100, 0.5, 1.0);
        for path in [VectorPath::Avx2, VectorPath::Avx512] {
            if path.runs_here() {
                let v = run_kernel(path, 100) / (path.lanes() / 4) as f32;
                let want = run_kernel(VectorPath::Portable, 100);
                assert!(
                    (v - want).abs() <= 1e-3 * want.abs(),
                    "{path:?}: {v} vs {want}"
                );
            }
        }
        // x ← x/2 + 1 converges to 2 in every accumulator.
        assert!((p - 2.0 * 4.0 * ACCS as f32).abs() < 1e-3, "{p}");
    }

    #[test]
    fn peak_is_positive_and_an_unsupported_path_falls_back() {
        let det = VectorPath::detect();
        let peak = fma_peak(det, 0.02);
        assert_eq!(peak.path, det);
        assert!(peak.gflops.is_finite() && peak.gflops > 0.1, "{peak:?}");
        // An unsupported request falls back to the detected path.
        assert!(fma_peak(VectorPath::Avx512, 0.01).path.runs_here());
    }

    #[test]
    fn cpu_model_is_read_on_linux() {
        if cfg!(target_os = "linux") && std::path::Path::new("/proc/cpuinfo").exists() {
            let m = cpu_model();
            // Some architectures (e.g. arm64) have no "model name" line.
            if cfg!(target_arch = "x86_64") {
                assert!(m.is_some_and(|s| !s.is_empty()));
            }
        }
    }
}
