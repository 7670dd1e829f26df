//! f32 matrix multiplication for the conv / linear layers.
//!
//! The kernels are the `gemm` crate's (AVX-512 / AVX2 / FMA microkernels chosen at run time), always
//! called single-threaded. Parallelism is added here at one level only, over a *fixed* tiling of
//! the problem, so results never depend on the number of threads:
//! * [`matmul_rows_par`] splits the rows of the output into tiles of [`ROW_TILE`] rows;
//! * [`matmul_tn_reduce_par`] splits a long reduction into chunks of [`REDUCE_CHUNK`] and adds the
//!   partial products in chunk order.
//!
//! The same holds across machines: the `gemm` crate blocks the reduction by a `kc` it derives from
//! the L1 cache it finds (512 on a 32 KiB 8-way L1, 1024 on a 48 KiB 12-way one), and a different
//! blocking adds the products in a different order. [`matmul_into`] therefore hands it reductions
//! of at most [`K_BLOCK`] terms, which it never splits, and adds the blocks in order itself.

use std::cell::Cell;

use gemm::Parallelism;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use crate::cputime::thread_cpu_seconds;
use crate::error::{Result, SimError};

/// Rows of the output handled by one task in [`matmul_rows_par`].
pub const ROW_TILE: usize = 1024;

/// Length of one reduction chunk in [`matmul_tn_reduce_par`].
pub const REDUCE_CHUNK: usize = 4096;

/// Longest reduction passed to the `gemm` crate in one call. It never splits a reduction of 512
/// or fewer terms on any cache geometry, so the summation order is fixed by the shapes alone.
pub const K_BLOCK: usize = 512;

/// Samples per conv work block: about [`ROW_TILE`] GEMM rows, at least one sample. Fixed by the
/// geometry (`rows_per_sample` output pixels per sample), so the blocking (and every sum) is the
/// same for any thread count.
pub fn block_samples(rows_per_sample: usize) -> usize {
    (ROW_TILE / rows_per_sample.max(1)).max(1)
}

fn check(c: &ArrayViewMut2<f32>, a: &ArrayView2<f32>, b: &ArrayView2<f32>) -> Result<()> {
    let (m, k) = a.dim();
    let (k2, n) = b.dim();
    if k != k2 || c.dim() != (m, n) {
        return Err(SimError::shape(
            "gemm",
            format!(
                "C{:?} = A{:?} · B{:?} does not conform",
                c.dim(),
                a.dim(),
                b.dim()
            ),
        ));
    }
    Ok(())
}

thread_local! {
    /// Per-thread GEMM profile `(CPU seconds, FLOPs)`; `None` while profiling is off.
    static PROFILE: Cell<Option<(f64, u64)>> = const { Cell::new(None) };
}

/// GEMM work done while profiling was on: FLOPs and the CPU time spent inside GEMM calls,
/// summed over threads (so comparable with one core's peak).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmProfile {
    /// Floating-point operations (2 per multiply-add).
    pub flops: u64,
    /// Thread CPU seconds inside [`matmul_into`], summed over all threads.
    pub seconds: f64,
}

/// Turns GEMM profiling on or off on the calling thread and every thread of the current rayon
/// pool, and returns what they counted since the last call (two thread-CPU-clock reads per GEMM
/// call while on).
pub fn profile(on: bool) -> GemmProfile {
    let take = || PROFILE.with(|p| p.replace(on.then_some((0.0, 0))));
    let mut parts = rayon::broadcast(|_| take());
    parts.push(take());
    let (seconds, flops) = parts
        .into_iter()
        .flatten()
        .fold((0.0, 0), |(a, b), (s, f)| (a + s, b + f));
    GemmProfile { flops, seconds }
}

/// `C = A·B` (or `C += A·B` when `accumulate`), single-threaded. Any strides are accepted.
pub fn matmul_into(
    mut c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    check(&c, &a, &b)?;
    let (m, k) = a.dim();
    let n = b.ncols();
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return Ok(());
    }
    let started = PROFILE.with(|p| p.get().is_some()).then(thread_cpu_seconds);
    for k0 in (0..k).step_by(K_BLOCK) {
        let k1 = (k0 + K_BLOCK).min(k);
        let (ab, bb) = (
            a.slice(ndarray::s![.., k0..k1]),
            b.slice(ndarray::s![k0..k1, ..]),
        );
        gemm_block(c.view_mut(), ab, bb, accumulate || k0 > 0);
    }
    if let Some(t0) = started {
        let (dt, flops) = (thread_cpu_seconds() - t0, 2 * (m * n * k) as u64);
        PROFILE.with(|p| p.set(p.get().map(|(a, b)| (a + dt, b + flops))));
    }
    Ok(())
}

/// One call of the `gemm` crate on conforming, non-empty views with at most [`K_BLOCK`] terms per
/// reduction.
fn gemm_block(mut c: ArrayViewMut2<f32>, a: ArrayView2<f32>, b: ArrayView2<f32>, accumulate: bool) {
    let (m, k) = a.dim();
    let n = b.ncols();
    debug_assert!(k <= K_BLOCK && b.nrows() == k && c.dim() == (m, n));
    let (cs, as_, bs) = (c.strides(), a.strides(), b.strides());
    let (cs, as_, bs) = ([cs[0], cs[1]], [as_[0], as_[1]], [bs[0], bs[1]]);
    // SAFETY: the three views are valid ndarray views (every index they describe is in bounds),
    // their shapes conform (checked by `matmul_into`, the only caller), and `c` is a unique (&mut) borrow so it cannot
    // alias `a` or `b`. The gemm crate reads/writes exactly the described elements.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            cs[1],
            cs[0],
            accumulate,
            a.as_ptr(),
            as_[1],
            as_[0],
            b.as_ptr(),
            bs[1],
            bs[0],
            1.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
}

/// `C = A·B` (or `C += A·B`), with the rows of `C` split into fixed tiles of [`ROW_TILE`] rows
/// computed in parallel on the rayon pool. Deterministic for any thread count.
pub fn matmul_rows_par(
    mut c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    check(&c, &a, &b)?;
    if a.nrows() <= ROW_TILE {
        return matmul_into(c, a, b, accumulate);
    }
    let tiles: Vec<_> = c
        .axis_chunks_iter_mut(Axis(0), ROW_TILE)
        .zip(a.axis_chunks_iter(Axis(0), ROW_TILE))
        .collect();
    tiles
        .into_par_iter()
        .try_for_each(|(ct, at)| matmul_into(ct, at, b, accumulate))
}

/// `C = Aᵀ·B` (or `C += Aᵀ·B`) where `A` is `[k, m]` and `B` is `[k, n]` with a long `k`
/// (the weight-gradient GEMM: `k` = batch × output pixels). The reduction is split into chunks of
/// [`REDUCE_CHUNK`] rows computed in parallel; partial sums are added in chunk order, so the result
/// is independent of the thread count.
pub fn matmul_tn_reduce_par(
    mut c: ArrayViewMut2<f32>,
    a: ArrayView2<f32>,
    b: ArrayView2<f32>,
    accumulate: bool,
) -> Result<()> {
    if a.nrows() != b.nrows() {
        return Err(SimError::shape(
            "gemm",
            format!(
                "Aᵀ·B with A{:?}, B{:?}: row counts differ",
                a.dim(),
                b.dim()
            ),
        ));
    }
    if a.nrows() <= REDUCE_CHUNK {
        return matmul_into(c, a.t(), b, accumulate);
    }
    let (m, n) = (a.ncols(), b.ncols());
    let chunks: Vec<_> = a
        .axis_chunks_iter(Axis(0), REDUCE_CHUNK)
        .zip(b.axis_chunks_iter(Axis(0), REDUCE_CHUNK))
        .collect();
    let partials: Vec<Array2<f32>> = chunks
        .into_par_iter()
        .map(|(ac, bc)| {
            let mut p = Array2::<f32>::zeros((m, n));
            matmul_into(p.view_mut(), ac.t(), bc, false).map(|()| p)
        })
        .collect::<Result<_>>()?;
    if c.dim() != (m, n) {
        return Err(SimError::shape(
            "gemm",
            format!("C{:?} for Aᵀ·B of shape {:?}", c.dim(), (m, n)),
        ));
    }
    if !accumulate {
        c.fill(0.0);
    }
    for p in &partials {
        c += p;
    }
    Ok(())
}

/// `A·B` into a new matrix, parallel over row tiles.
pub fn matmul(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Result<Array2<f32>> {
    let mut c = Array2::<f32>::zeros((a.nrows(), b.ncols()));
    matmul_rows_par(c.view_mut(), a, b, false)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random(r: usize, c: usize, seed: u64) -> Array2<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
    }

    fn naive(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f64> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| {
            (0..a.ncols())
                .map(|k| a[[i, k]] as f64 * b[[k, j]] as f64)
                .sum()
        })
    }

    fn assert_close(c: &Array2<f32>, r: &Array2<f64>, k: usize) {
        let tol = 1e-5 * k as f64;
        for (x, y) in c.iter().zip(r.iter()) {
            assert!((*x as f64 - y).abs() <= tol, "{x} vs {y}");
        }
    }

    #[test]
    fn matches_naive_on_odd_shapes_and_strides() {
        for &(m, n, k) in &[(1, 1, 1), (7, 5, 3), (33, 17, 65), (2100, 9, 27)] {
            let a = random(m, k, 1);
            let bt = random(n, k, 2); // use a transposed view for B
            let c = matmul(a.view(), bt.t()).unwrap();
            assert_close(&c, &naive(a.view(), bt.t()), k);
        }
    }

    #[test]
    fn long_reductions_add_fixed_blocks_in_order() {
        // 1100 terms: blocks of 512, 512 and 76, whatever cache the machine reports.
        let (m, n, k) = (70, 90, 1100);
        let a = random(m, k, 9);
        let b = random(k, n, 10);
        let mut c = Array2::<f32>::zeros((m, n));
        matmul_into(c.view_mut(), a.view(), b.view(), false).unwrap();
        let mut r = Array2::<f32>::zeros((m, n));
        for (i, k0) in [0, 512, 1024].into_iter().enumerate() {
            let k1 = (k0 + K_BLOCK).min(k);
            let (ab, bb) = (
                a.slice(ndarray::s![.., k0..k1]),
                b.slice(ndarray::s![k0..k1, ..]),
            );
            gemm_block(r.view_mut(), ab, bb, i > 0);
        }
        assert_eq!(c, r);
        assert_close(&c, &naive(a.view(), b.view()), k);
    }

    #[test]
    fn accumulate_adds_to_existing() {
        let a = random(40, 30, 3);
        let b = random(30, 20, 4);
        let mut c = Array2::<f32>::ones((40, 20));
        matmul_into(c.view_mut(), a.view(), b.view(), true).unwrap();
        let r = naive(a.view(), b.view()).mapv(|v| v + 1.0);
        assert_close(&c, &r, 30);
    }

    #[test]
    fn reduce_matches_naive_and_is_thread_count_independent() {
        let a = random(10_000, 16, 5);
        let b = random(10_000, 24, 6);
        let run = |threads: usize| {
            crate::tests::with_threads(threads, || {
                let mut c = Array2::<f32>::zeros((16, 24));
                matmul_tn_reduce_par(c.view_mut(), a.view(), b.view(), false).unwrap();
                c
            })
        };
        let c1 = run(1);
        let c2 = run(2);
        assert_eq!(c1, c2);
        assert_close(&c1, &naive(a.t(), b.view()), 10_000);
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let a = random(4, 3, 7);
        let b = random(4, 3, 8);
        let e = matmul(a.view(), b.view()).unwrap_err();
        assert!(e.to_string().contains("does not conform"), "{e}");
    }
}
