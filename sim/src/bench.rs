//! Benchmarks shared by `cptsim bench` and the cargo benches: timing with CPU time (the machine
//! is shared, so wall time alone is noisy), this machine's single-core GEMM peak, and the
//! training-step throughput of a built network.

use std::time::Instant;

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::build::Network;
use crate::cputime::{load_average_1min, process_cpu_seconds};
use crate::error::{Result, SimError};
use crate::gemm::{matmul_into, profile};
use crate::layers::{Mode, SoftmaxCrossEntropy, Tensor};
use crate::optim::Sgd;

/// Runs `f` once to warm up, then repeatedly for at least `min_secs` wall seconds (and at least
/// 3 times); returns `(wall, cpu)` seconds per call.
pub fn time_it(min_secs: f64, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let (w0, c0) = (Instant::now(), process_cpu_seconds());
    let mut reps = 0u32;
    while w0.elapsed().as_secs_f64() < min_secs || reps < 3 {
        f();
        reps += 1;
    }
    let wall = w0.elapsed().as_secs_f64() / reps as f64;
    let cpu = (process_cpu_seconds() - c0) / reps as f64;
    (wall, cpu)
}

/// A `[r, c]` matrix of uniform values in `[-1, 1)` from `seed`.
pub fn random_matrix(r: usize, c: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
}

/// This machine's single-core fp32 GEMM peak: GFLOP per CPU-second of a `size`³ square
/// [`matmul_into`] on the calling thread, timed for at least `min_secs`.
pub fn peak_gflops(size: usize, min_secs: f64) -> Result<f64> {
    let (a, b) = (random_matrix(size, size, 7), random_matrix(size, size, 8));
    let mut c = Array2::<f32>::zeros((size, size));
    let mut result = Ok(());
    let (_, cpu) = time_it(min_secs, || {
        if result.is_ok() {
            result = matmul_into(c.view_mut(), a.view(), b.view(), false);
        }
    });
    result?;
    Ok(2.0 * (size as f64).powi(3) / cpu.max(1e-9) / 1e9)
}

/// Training-step throughput of one network.
#[derive(Clone, Debug, Serialize)]
pub struct TrainBench {
    /// Images per wall-clock second over the timed steps.
    pub images_per_s: f64,
    /// Images per CPU-second of this process (all threads).
    pub images_per_cpu_s: f64,
    /// Median wall time of one step, milliseconds.
    pub step_ms_median: f64,
    /// GFLOP/s of the conv/linear GEMMs over the thread CPU time spent inside them, summed over
    /// threads (a per-core rate, comparable with `peak_gflops`).
    pub gemm_gflops: f64,
    /// Share of the process CPU time spent inside GEMMs.
    pub gemm_cpu_share: f64,
    /// GEMM GFLOP per step.
    pub gemm_gflop_per_step: f64,
    /// Single-core peak measured in the same run ([`peak_gflops`]).
    pub peak_gflops: f64,
    /// 1-minute load average at the start and end of the timed steps.
    pub load_avg: [Option<f64>; 2],
}

/// Times `steps` training steps (forward, softmax cross-entropy, backward, SGD with the paper's
/// momentum and weight decay at lr 0.1) of `net` on one seeded synthetic batch of `batch` images,
/// after one warm-up step; then measures the GEMM peak for `peak_secs`.
pub fn train_steps(
    net: &mut Network,
    batch: usize,
    steps: usize,
    peak_secs: f64,
) -> Result<TrainBench> {
    if batch == 0 || steps == 0 {
        return Err(SimError::invalid(
            "benchmark",
            "batch and steps must be ≥ 1",
        ));
    }
    crate::memory::check_train_batch(
        net.summary(),
        batch,
        "--batch",
        crate::memory::available_bytes(),
    )?;
    let [c, h, w] = net.input_chw();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let x_ir = Tensor::from_shape_simple_fn(vec![batch, c, h, w], || rng.random_range(-2.0..2.0));
    let x_ir = if net.summary().input.len() == 2 {
        x_ir.into_shape_with_order(vec![batch, c])
            .map_err(|e| SimError::shape("input", e.to_string()))?
    } else {
        x_ir
    };
    let x = net.input_from_ir(&x_ir)?;
    let classes = net
        .summary()
        .layers
        .last()
        .map_or(1, |l| l.out_channels().max(1));
    let labels: Vec<usize> = (0..batch).map(|i| i % classes).collect();
    let mut loss = SoftmaxCrossEntropy::new();
    let mut opt = Sgd::paper();
    let mut step = |net: &mut Network| -> Result<()> {
        let out = net.forward(x.clone(), Mode::Train)?;
        loss.forward(&out, &labels)?;
        net.backward(loss.backward()?)?;
        opt.step(&mut net.params_mut(), 0.1)
    };
    step(net)?;
    let load0 = load_average_1min();
    profile(true);
    let (w0, c0) = (Instant::now(), process_cpu_seconds());
    let mut times = Vec::with_capacity(steps);
    for _ in 0..steps {
        let t = Instant::now();
        step(net)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let (wall, cpu) = (w0.elapsed().as_secs_f64(), process_cpu_seconds() - c0);
    let gemm = profile(false);
    let load1 = load_average_1min();
    times.sort_by(f64::total_cmp);
    let images = (batch * steps) as f64;
    Ok(TrainBench {
        images_per_s: images / wall.max(1e-9),
        images_per_cpu_s: images / cpu.max(1e-9),
        step_ms_median: times.get(times.len() / 2).copied().unwrap_or(0.0) * 1e3,
        gemm_gflops: gemm.flops as f64 / gemm.seconds.max(1e-9) / 1e9,
        gemm_cpu_share: gemm.seconds / cpu.max(1e-9),
        gemm_gflop_per_step: gemm.flops as f64 / steps as f64 / 1e9,
        peak_gflops: peak_gflops(1536, peak_secs)?,
        load_avg: [load0, load1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{build_network, BuildOptions};

    #[test]
    fn train_bench_counts_the_gemm_flops_of_the_model() {
        let g = cptsim_models::load_graph("zoo:lenet5", 8).unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        // Its own pool, so GEMMs of tests running in parallel are not counted.
        let r = crate::tests::with_threads(2, || train_steps(&mut net, 8, 2, 0.05)).unwrap();
        // Three GEMMs per conv/linear layer (forward, error, weight gradient) at 2 FLOPs per MAC;
        // the first layer's error GEMM runs too (the network returns the input gradient).
        let want = 6.0 * 8.0 * net.summary().total_macs() as f64 / 1e9;
        let got = r.gemm_gflop_per_step;
        assert!(
            (got / want - 1.0).abs() < 1e-9,
            "GEMM GFLOP per step {got}, expected {want}"
        );
        assert!(r.images_per_s > 0.0 && r.peak_gflops > 0.0 && r.gemm_gflops > 0.0);
        assert!(
            r.gemm_cpu_share > 0.0 && r.gemm_cpu_share <= 1.5,
            "{}",
            r.gemm_cpu_share
        );
    }
}
