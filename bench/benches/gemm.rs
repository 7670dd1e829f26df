//! GEMM throughput on the shapes a CIFAR ResNet-20 produces at batch 128 (channels-last im2col),
//! computed in the blocks the conv layer uses, against the core's fp32 FMA peak (measured by
//! `cptsim_bench::peak`, as `cptsim bench` does) and ndarray's `dot`.
//!
//! Run: `cargo bench -p cptsim-bench --bench gemm` (threads: env `CPTSIM_BENCH_THREADS`, default 1).
//! Reports GFLOP/s from wall time and from process CPU time, and the load average seen.

use std::time::Instant;

use cptsim_bench::harness::{random_matrix as random, time_it};
use cptsim_bench::peak::fma_peak;
use cptsim_kernels::cputime::{load_average_1min, process_cpu_seconds};
use cptsim_kernels::gemm::{matmul_into, ROW_TILE};
use cptsim_kernels::VectorPath;
use ndarray::{s, Array2, Axis};

/// Which GEMM of a conv layer a shape belongs to.
#[derive(Clone, Copy)]
enum Pass {
    /// `Y[M,N] = col[M,K] · Wᵀ` (weights stored `[N, K]`).
    Forward,
    /// `dcol[M,K] = dY[M,N] · W[N,K]` — here reported as (M, K, N) of that product.
    BackwardData,
    /// `dW[N,K] = dYᵀ · col`, a long reduction over M.
    BackwardWeight,
}

/// (wall, cpu) GFLOP/s of cptsim's GEMM and ndarray's dot on one conv GEMM, computed as the conv
/// layer does: in blocks of [`ROW_TILE`] rows of the long dimension whose im2col operand is built
/// per block (so it is cache-resident; here one block buffer is reused for every block).
fn bench_shape(pass: Pass, m: usize, n: usize, k: usize) -> [(f64, f64); 2] {
    let flops = 2.0 * (m * n * k) as f64;
    let gf = |(w, c): (f64, f64)| (flops / w / 1e9, flops / c.max(1e-9) / 1e9);
    let long = match pass {
        Pass::BackwardWeight => k,
        _ => m,
    };
    let blocks = long.div_ceil(ROW_TILE);
    let rows = long.min(ROW_TILE);
    match pass {
        Pass::Forward => {
            // y[M, N] = col[M, K] · Wᵀ, W stored [N, K]
            let col = random(rows, k, 1);
            let w = random(n, k, 2);
            let mut y = Array2::<f32>::zeros((m, n));
            let ours = time_it(0.4, || {
                for yb in y.axis_chunks_iter_mut(Axis(0), ROW_TILE) {
                    let r = yb.nrows();
                    let ok = matmul_into(yb, col.slice(s![..r, ..]), w.t(), false).is_ok();
                    std::hint::black_box(ok);
                }
            });
            let nd = time_it(0.4, || {
                for _ in 0..blocks {
                    std::hint::black_box(col.dot(&w.t()));
                }
            });
            [gf(ours), gf(nd)]
        }
        Pass::BackwardData => {
            // dcol[M, K] = dY[M, N] · W[N, K], one dcol block buffer reused
            let dy = random(m, n, 3);
            let w = random(n, k, 4);
            let mut dcol = Array2::<f32>::zeros((rows, k));
            let ours = time_it(0.4, || {
                for gb in dy.axis_chunks_iter(Axis(0), ROW_TILE) {
                    let r = gb.nrows();
                    let ok = matmul_into(dcol.slice_mut(s![..r, ..]), gb, w.view(), false).is_ok();
                    std::hint::black_box(ok);
                }
            });
            let nd = time_it(0.4, || {
                for gb in dy.axis_chunks_iter(Axis(0), ROW_TILE) {
                    std::hint::black_box(gb.dot(&w));
                }
            });
            [gf(ours), gf(nd)]
        }
        Pass::BackwardWeight => {
            // dW[M, N] = Σ_blocks dY_blockᵀ · col_block, reduction length K
            let dy = random(k, m, 5);
            let col = random(rows, n, 6);
            let mut part = Array2::<f32>::zeros((m, n));
            let mut dw = Array2::<f32>::zeros((m, n));
            let ours = time_it(0.4, || {
                dw.fill(0.0);
                for gb in dy.axis_chunks_iter(Axis(0), ROW_TILE) {
                    let r = gb.nrows();
                    let ok =
                        matmul_into(part.view_mut(), gb.t(), col.slice(s![..r, ..]), false).is_ok();
                    std::hint::black_box(ok);
                    dw += &part;
                }
            });
            let nd = time_it(0.4, || {
                for gb in dy.axis_chunks_iter(Axis(0), ROW_TILE) {
                    let r = gb.nrows();
                    dw += &gb.t().dot(&col.slice(s![..r, ..]));
                }
            });
            [gf(ours), gf(nd)]
        }
    }
}

fn main() {
    let threads: usize = std::env::var("CPTSIM_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot build a {threads}-thread pool: {e}");
            std::process::exit(2);
        }
    };
    let cpu0 = process_cpu_seconds();
    let wall0 = Instant::now();
    let load0 = load_average_1min();
    pool.install(|| {
        let peak = fma_peak(VectorPath::detect(), 1.0);
        let peak_c = peak.gflops;
        println!(
            "threads {threads}; peak = fp32 FMA throughput, one thread, {}: {peak_c:.1} GFLOP/s",
            peak.path.describe_as_widest()
        );
        let s = 1536;
        let a = random(s, s, 7);
        let b = random(s, s, 8);
        let mut c = Array2::<f32>::zeros((s, s));
        let ours = time_it(1.0, || {
            let r = cptsim_kernels::gemm::matmul_into(c.view_mut(), a.view(), b.view(), false);
            std::hint::black_box(r.is_ok());
        });
        let nd = time_it(1.0, || {
            std::hint::black_box(a.dot(&b));
        });
        let flops = 2.0 * (s * s * s) as f64;
        let (ours_c, nd_c) = (flops / ours.1 / 1e9, flops / nd.1 / 1e9);
        println!(
            "{s}³: cptsim {ours_c:.1} ({:.0}% of peak), ndarray dot {nd_c:.1} GFLOP/s per CPU-second",
            100.0 * ours_c / peak_c
        );
        println!(
            "{:<8} {:>7} {:>5} {:>5} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6}",
            "pass", "M", "N", "K", "ours/w", "ours/cpu", "%peak", "nd/w", "nd/cpu", "%peak"
        );
        let shapes: [(&str, Pass, usize, usize, usize); 12] = [
            ("fwd", Pass::Forward, 128 * 32 * 32, 16, 27),
            ("fwd", Pass::Forward, 128 * 32 * 32, 16, 144),
            ("fwd", Pass::Forward, 128 * 16 * 16, 32, 288),
            ("fwd", Pass::Forward, 128 * 8 * 8, 64, 576),
            ("bwd-d", Pass::BackwardData, 128 * 32 * 32, 16, 144),
            ("bwd-d", Pass::BackwardData, 128 * 16 * 16, 32, 288),
            ("bwd-d", Pass::BackwardData, 128 * 8 * 8, 64, 576),
            ("bwd-w", Pass::BackwardWeight, 16, 27, 128 * 32 * 32),
            ("bwd-w", Pass::BackwardWeight, 16, 144, 128 * 32 * 32),
            ("bwd-w", Pass::BackwardWeight, 32, 288, 128 * 16 * 16),
            ("bwd-w", Pass::BackwardWeight, 64, 576, 128 * 8 * 8),
            ("fwd-1x1", Pass::Forward, 128 * 16 * 16, 32, 16),
        ];
        for (name, pass, m, n, k) in shapes {
            // For bwd-d the product is [m, n]·[n, k]: print it as (M, N=k, K=n).
            let (pm, pn, pk) = match pass {
                Pass::BackwardData => (m, k, n),
                _ => (m, n, k),
            };
            let [ours, nd] = bench_shape(pass, m, n, k);
            println!(
                "{name:<8} {pm:>7} {pn:>5} {pk:>5} | {:>8.1} {:>8.1} {:>5.0}% | {:>8.1} {:>8.1} {:>5.0}%",
                ours.0,
                ours.1,
                100.0 * ours.1 / peak_c,
                nd.0,
                nd.1,
                100.0 * nd.1 / peak_c
            );
        }
    });
    println!(
        "total: {:.1} s wall, {:.1} s CPU; load average (1 min) before {:?}, after {:?}",
        wall0.elapsed().as_secs_f64(),
        process_cpu_seconds() - cpu0,
        load0,
        load_average_1min()
    );
}
