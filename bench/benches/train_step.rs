//! Training-step throughput of `zoo:resnet20` built from the IR at batch 128, fp32 and SBM 8/8
//! (spec §1.4 scope: all convs quantized, FC fp32), on synthetic 3×32×32 inputs. The same
//! measurement as `cptsim bench train` (see `cptsim_bench::harness::train_steps`).
//!
//! Run: `cargo bench -p cptsim-bench --bench train_step` (env `CPTSIM_BENCH_THREADS`, default 1;
//! `CPTSIM_BENCH_STEPS`, default 5). Reports wall and CPU-time throughput and the load average.
//! Reference: PyTorch, one thread: ≈164 images per CPU-second fp32, ≈156 with 8-bit
//! fake quantization.

use cptsim_bench::harness::train_steps;
use cptsim_nn::build::{build_network, BuildOptions};
use cptsim_nn::Result;

fn run(bits: u32, steps: usize) -> Result<()> {
    let graph = cptsim_models::load_graph("zoo:resnet20", 128)
        .map_err(|e| cptsim_nn::SimError::invalid("model", e.to_string()))?;
    let mut net = build_network(&graph, &BuildOptions::default())?;
    net.set_bits(bits, bits)?;
    let r = train_steps(&mut net, 128, steps, 1.0, 0.0)?;
    println!(
        "{:<8} step median {:7.1} ms | {:6.1} img/s wall | {:6.1} img per CPU-second | GEMM {:5.1} of {:5.1} GFLOP/s per core | load {:?}",
        if bits == 0 { "fp32".to_string() } else { format!("sbm {bits}/{bits}") },
        r.step_ms_median,
        r.images_per_s,
        r.images_per_cpu_s,
        r.gemm_gflops,
        r.peak_gflops,
        r.load_avg
    );
    Ok(())
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let threads = env("CPTSIM_BENCH_THREADS", 1);
    let steps = env("CPTSIM_BENCH_STEPS", 5).max(1);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot build a {threads}-thread pool: {e}");
            std::process::exit(2);
        }
    };
    println!("zoo:resnet20, batch 128, {steps} steps, {threads} thread(s)");
    for bits in [0, 8] {
        if let Err(e) = pool.install(|| run(bits, steps)) {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
