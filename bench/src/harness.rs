//! Benchmarks shared by `cptsim bench` and the cargo benches: timing with CPU time (the machine
//! is shared, so wall time alone is noisy), the training-step and evaluation-forward throughput of
//! a built network, and the rate of each GEMM shape the step runs (to compare with the core's FMA
//! peak, [`crate::peak`]).

use std::mem::MaybeUninit;
use std::time::Instant;

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::peak::{cpu_model, fma_peak};
use cptsim_kernels::cputime::{load_average_1min, process_cpu_seconds};
use cptsim_kernels::gemm::{matmul_into, matmul_uninit, profile, PackedB, REDUCE_CHUNK, ROW_TILE};
use cptsim_kernels::VectorPath;
use cptsim_models::{LayerKind, LayerRole, ModelSummary};
use cptsim_nn::build::Network;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::conv2d::batch_gemms;
use cptsim_nn::layers::{Conv2dSpec, Mode, SoftmaxCrossEntropy, Tensor};
use cptsim_nn::memory::{available_bytes, check_batch, Pass};
use cptsim_nn::optim::Sgd;
use cptsim_train::feed::{logits_rows, rows_back};

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

/// Which GEMM of a layer's training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmPass {
    /// `y = x·Wᵀ` (im2col rows × reduction · reduction × output channels).
    Forward,
    /// The error GEMM `dx = g·W`.
    Error,
    /// The weight-gradient GEMM `dW = gᵀ·x`.
    Weight,
}

impl GemmPass {
    /// The lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            GemmPass::Forward => "forward",
            GemmPass::Error => "error",
            GemmPass::Weight => "weight",
        }
    }
}

/// One GEMM shape `C[m, n] = A[m, k]·B[k, n]` exactly as the trainer calls it in a training step.
#[derive(Clone, Debug, Serialize)]
pub struct GemmShape {
    /// The first layer running this shape and how many more do.
    pub layer: String,
    pub pass: GemmPass,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Calls per training step (all layers, blocks and groups).
    pub calls: usize,
    /// One of a Winograd conv's products per chunk of tiles (its `B` stored as `[k, n]`).
    pub winograd: bool,
    /// `B` is packed once per pass, as the trainer packs a one-group conv's weights for its
    /// direct forward product and a Winograd conv's transformed kernels.
    pub packed_b: bool,
    /// Measured GFLOP per CPU-second on one thread (0 until [`time_gemm_shapes`]).
    pub gflops: f64,
}

/// The distinct GEMM shapes of one training step of `summary` at `batch`: per conv layer (not
/// depthwise, which runs no GEMM) per block of [`block_samples`] samples and per group, as
/// [`block_gemms`](cptsim_nn::layers::conv2d::block_gemms) gives them; per linear layer per row
/// tile ([`ROW_TILE`]) and, for the weight gradient, per reduction chunk ([`REDUCE_CHUNK`]); per
/// matmul (attention) its three products per sample and head. The layer reading the network
/// input runs no input-gradient GEMM. Shapes repeated across layers are merged, in first-seen
/// order.
pub fn step_gemm_shapes(summary: &ModelSummary, batch: usize) -> Result<Vec<GemmShape>> {
    let mut out: Vec<GemmShape> = Vec::new();
    let mut add = |layer: &str,
                   (pass, winograd, packed_b): (GemmPass, bool, bool),
                   (m, k, n): (usize, usize, usize),
                   calls: usize| {
        if m == 0 || k == 0 || n == 0 || calls == 0 {
            return;
        }
        let key = (pass, winograd, packed_b, m, k, n);
        if let Some(s) = out
            .iter_mut()
            .find(|s| (s.pass, s.winograd, s.packed_b, s.m, s.k, s.n) == key)
        {
            s.calls += calls;
        } else {
            let layer = layer.to_string();
            out.push(GemmShape {
                layer,
                pass,
                m,
                k,
                n,
                calls,
                winograd,
                packed_b,
                gflops: 0.0,
            });
        }
    };
    for l in &summary.layers {
        let groups = l.groups.max(1);
        // The layer reading the network input computes no input gradient in training.
        let input_grad = l.role != LayerRole::First;
        match l.kind {
            LayerKind::Conv => {
                let spec = Conv2dSpec {
                    in_channels: l.in_channels(),
                    out_channels: l.out_channels(),
                    kernel: l.kernel,
                    stride: l.stride,
                    pads: l.pads,
                    dilation: l.dilation,
                    groups,
                };
                let in_hw = (l.in_shape[1], l.in_shape[2]);
                let Some(g) = batch_gemms(&spec, &l.name, in_hw, batch, input_grad)? else {
                    continue;
                };
                let calls = groups;
                let shape = |[m, k, n]: [usize; 3]| (m, k, n);
                let [wf, we, ww] = g.winograd;
                let passes = [
                    ((GemmPass::Forward, wf, wf || groups == 1), g.forward),
                    ((GemmPass::Error, we, we), g.error),
                    ((GemmPass::Weight, ww, false), g.weight),
                ];
                for (pass, gemms) in passes {
                    for (s, n) in gemms {
                        add(&l.name, pass, shape(s), calls * n);
                    }
                }
            }
            // Attention's products, one per sample and head: forward `A·B`, backward `dY·Bᵀ`
            // and `Aᵀ·dY` (both operands are activations, so both gradients are computed).
            LayerKind::Matmul => {
                let (count, m, n, k) = l.gemm_dims(batch as u64);
                let dims = [count, m, n, k].map(|d| usize::try_from(d).unwrap_or(usize::MAX));
                let [count, m, n, k] = dims;
                add(&l.name, (GemmPass::Forward, false, false), (m, k, n), count);
                add(&l.name, (GemmPass::Error, false, false), (m, n, k), count);
                add(&l.name, (GemmPass::Weight, false, false), (k, m, n), count);
            }
            LayerKind::Recurrent => {
                let Some(h) = l.hidden.filter(|&h| h > 0) else {
                    continue;
                };
                let (gh, steps) = (l.out_channels(), l.out_pixels().max(1));
                let i = l.in_channels().saturating_sub(h);
                let rows = batch
                    .checked_mul(steps)
                    .ok_or_else(|| SimError::invalid(&l.name, "batch × steps overflows"))?;
                // The recurrent weights' blocks: R whole (LSTM), or R_zr and R_h (GRU: R_h
                // reads r ⊙ ĥ or is gated after it, so it is its own product).
                let blocks_r: &[usize] = if gh == 3 * h { &[2 * h, h] } else { &[gh] };
                // Every step's x̂·Ŵᵀ at once, and after the steps dx = dg·Ŵ and dW = dgᵀ·x̂ over
                // all steps' rows: a linear map over T·B rows.
                linear_gemms(&mut add, &l.name, rows, (i, gh), true);
                // Per step ĥ·R̂ᵀ (R̂ᵀ packed once) and, backward, the state's error through R.
                for &g in blocks_r {
                    add(
                        &l.name,
                        (GemmPass::Forward, false, true),
                        (batch, h, g),
                        steps,
                    );
                    add(
                        &l.name,
                        (GemmPass::Error, false, false),
                        (batch, g, h),
                        steps,
                    );
                }
                // After the steps: dR = dgᵀ·ĥ.
                for (r, count) in blocks(rows, REDUCE_CHUNK) {
                    for &g in blocks_r {
                        add(&l.name, (GemmPass::Weight, false, false), (g, r, h), count);
                    }
                }
            }
            LayerKind::Linear => {
                // Every row of every sample (a Transformer's tokens; 1 for a classifier).
                let rows = batch
                    .checked_mul(l.in_shape[1].max(1))
                    .ok_or_else(|| SimError::invalid(&l.name, "batch × rows overflows"))?;
                let features = (l.in_channels(), l.out_channels());
                linear_gemms(&mut add, &l.name, rows, features, input_grad);
            }
        }
    }
    Ok(out)
}

/// `items` cut into full blocks of `per`, then the remainder: `(block size, count)` pairs.
fn blocks(items: usize, per: usize) -> [(usize, usize); 2] {
    [(per, items / per), (items % per, 1)]
}

/// The GEMMs of a linear map of `i` → `o` features over `rows` rows, as the trainer splits them:
/// forward and (with `input_grad`) input gradient per tile of [`ROW_TILE`] rows, weight gradient
/// per chunk of [`REDUCE_CHUNK`] rows.
fn linear_gemms(
    add: &mut impl FnMut(&str, (GemmPass, bool, bool), (usize, usize, usize), usize),
    layer: &str,
    rows: usize,
    (i, o): (usize, usize),
    input_grad: bool,
) {
    for (r, count) in blocks(rows, ROW_TILE) {
        add(layer, (GemmPass::Forward, false, false), (r, i, o), count);
        if input_grad {
            add(layer, (GemmPass::Error, false, false), (r, o, i), count);
        }
    }
    for (r, count) in blocks(rows, REDUCE_CHUNK) {
        add(layer, (GemmPass::Weight, false, false), (o, r, i), count);
    }
}

/// Times each shape for at least `secs` on the calling thread with the operand layouts the
/// trainer uses (forward: `B` is the transposed weight matrix, packed once where the trainer
/// packs it ([`GemmShape::packed_b`]; the packing is not timed, as the trainer packs once for
/// many products); weight gradient: `A` is transposed, the error or the patches), filling in
/// [`GemmShape::gflops`]. The operands are dense matrices: where the trainer reads a conv's
/// patches in place from its padded input, this times the same product on a dense copy of them.
pub fn time_gemm_shapes(shapes: &mut [GemmShape], secs: f64) -> Result<()> {
    for s in shapes.iter_mut() {
        let (m, k, n) = (s.m, s.k, s.n);
        // Stored operands: A as [m, k] or, transposed, [k, m]; B as [k, n] or [n, k].
        let a = match s.pass {
            GemmPass::Weight => random_matrix(k, m, 1),
            _ => random_matrix(m, k, 1),
        };
        // A direct forward product reads the weights transposed; Winograd's reads its
        // transformed kernels as stored.
        let b_transposed = s.pass == GemmPass::Forward && !s.winograd;
        let b = match b_transposed {
            true => random_matrix(n, k, 2),
            false => random_matrix(k, n, 2),
        };
        let bv = if b_transposed { b.t() } else { b.view() };
        let av = match s.pass {
            GemmPass::Weight => a.t(),
            _ => a.view(),
        };
        let mut c = Array2::<f32>::zeros((m, n));
        let mut fresh = vec![MaybeUninit::new(0.0f32); m * n];
        let packed = s.packed_b.then(|| PackedB::new(bv));
        let mut result = Ok(());
        let (_, cpu) = time_it(secs, || {
            if result.is_ok() {
                result = match &packed {
                    Some(p) => matmul_uninit(&mut fresh, av, p).map(|_| ()),
                    None => matmul_into(c.view_mut(), av, bv, false),
                };
            }
        });
        result?;
        s.gflops = 2.0 * (m * k * n) as f64 / cpu.max(1e-9) / 1e9;
    }
    Ok(())
}

/// What [`timed`] measured.
struct Timed {
    /// Wall and process CPU seconds over all timed runs.
    wall: f64,
    cpu: f64,
    /// Median wall seconds of one run.
    median: f64,
    /// GEMM FLOPs and thread CPU time inside GEMMs over one more, profiled run.
    gemm: cptsim_kernels::gemm::GemmProfile,
    /// Process CPU seconds of the profiled run.
    profiled_cpu: f64,
    /// 1-minute load average before and after.
    load_avg: [Option<f64>; 2],
}

/// Runs `f` `runs` times, timing each run and the whole, then once more under the GEMM profiler.
/// The profiler reads the thread's CPU clock twice per GEMM call (a system call each), which in a
/// Winograd eval pass of ResNet-20 (≈ 8 000 GEMMs) cost a few per cent: the timed runs go without.
fn timed(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Timed> {
    let load0 = load_average_1min();
    let (w0, c0) = (Instant::now(), process_cpu_seconds());
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let (wall, cpu) = (w0.elapsed().as_secs_f64(), process_cpu_seconds() - c0);
    let load1 = load_average_1min();
    profile(true);
    let c1 = process_cpu_seconds();
    let profiled = f();
    let profiled_cpu = process_cpu_seconds() - c1;
    let gemm = profile(false);
    profiled?;
    times.sort_by(f64::total_cmp);
    Ok(Timed {
        wall,
        cpu,
        median: times.get(times.len() / 2).copied().unwrap_or(0.0),
        gemm,
        profiled_cpu,
        load_avg: [load0, load1],
    })
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
    /// Share of the process CPU time spent inside GEMMs (in the profiled run).
    pub gemm_cpu_share: f64,
    /// GEMM GFLOP per step.
    pub gemm_gflop_per_step: f64,
    /// The core's fp32 FMA peak, GFLOP per CPU-second, measured in the same run
    /// ([`crate::peak::fma_peak`] on the widest vector path).
    pub peak_gflops: f64,
    /// The vector path the peak ran on.
    pub vector_path: &'static str,
    /// The CPU model from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// The step's GEMM shapes timed one by one on one thread ([`step_gemm_shapes`]); empty when
    /// not asked for.
    pub shapes: Vec<GemmShape>,
    /// The GEMM calls of one step run after the timed ones under the profiler (the same work and
    /// layouts as the timed steps), per shape and operand kind, the largest
    /// share of GEMM time first: operands as the layers left them in cache, which the one-by-one
    /// timing above does not see.
    #[serde(skip)]
    pub step_shapes: Vec<cptsim_kernels::gemm::ShapeTime>,
    /// 1-minute load average at the start and end of the timed steps.
    pub load_avg: [Option<f64>; 2],
}

/// Times `steps` training steps (forward, softmax cross-entropy, backward, SGD with the paper's
/// momentum and weight decay at lr 0.1) of `net` on one seeded synthetic batch of `batch` images,
/// after one warm-up step, and profiles the GEMMs of one more; then measures the FMA peak for
/// `peak_secs` and, when `shape_secs > 0`, times each of the step's GEMM shapes for `shape_secs`.
pub fn train_steps(
    net: &mut Network,
    batch: usize,
    steps: usize,
    peak_secs: f64,
    shape_secs: f64,
) -> Result<TrainBench> {
    let x = synthetic_input(net, batch, steps, Pass::Train)?;
    let classes = net
        .summary()
        .layers
        .last()
        .map_or(1, |l| l.out_channels().max(1));
    // A label per row of logits: one per image, or per token of a language model.
    let mut labels = Vec::new();
    let mut loss = SoftmaxCrossEntropy::new();
    let mut opt = Sgd::paper();
    let mut step = |net: &mut Network| -> Result<()> {
        let (out, shape) = logits_rows(net.forward(x.clone(), Mode::Train)?)?;
        if labels.len() != out.shape()[0] {
            labels = (0..out.shape()[0]).map(|i| i % classes).collect();
        }
        loss.forward(&out, &labels)?;
        net.backward_params(rows_back(loss.backward()?, &shape)?)?;
        opt.step(&mut net.params_mut(), 0.1)
    };
    step(net)?;
    let run = timed(steps, || step(net))?;
    let peak = fma_peak(VectorPath::detect(), peak_secs);
    let mut shapes = Vec::new();
    if shape_secs > 0.0 {
        shapes = step_gemm_shapes(net.summary(), batch)?;
        time_gemm_shapes(&mut shapes, shape_secs)?;
    }
    let (images, cpu, gemm) = ((batch * steps) as f64, run.cpu.max(1e-9), &run.gemm);
    Ok(TrainBench {
        images_per_s: images / run.wall.max(1e-9),
        images_per_cpu_s: images / cpu,
        step_ms_median: run.median * 1e3,
        gemm_gflops: gemm.gflops(),
        gemm_cpu_share: gemm.seconds / run.profiled_cpu.max(1e-9),
        gemm_gflop_per_step: gemm.flops as f64 / 1e9,
        peak_gflops: peak.gflops,
        vector_path: peak.path.describe_as_widest(),
        cpu_model: cpu_model(),
        shapes,
        step_shapes: by_gemm_time(run.gemm.shapes.clone()),
        load_avg: run.load_avg,
    })
}

/// `shapes` ordered by CPU time, the largest first (ties in their given order).
fn by_gemm_time(
    mut shapes: Vec<cptsim_kernels::gemm::ShapeTime>,
) -> Vec<cptsim_kernels::gemm::ShapeTime> {
    shapes.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    shapes
}

/// One seeded batch of `batch` synthetic inputs in `[-2, 2)`, in the network's own layout, for
/// `runs` timed runs of `pass`: an error when either is 0 or the batch cannot fit in memory.
fn synthetic_input(net: &Network, batch: usize, runs: usize, pass: Pass) -> Result<Tensor> {
    if batch == 0 || runs == 0 {
        return Err(SimError::invalid(
            "benchmark",
            "batch and the number of timed runs must be ≥ 1",
        ));
    }
    check_batch(net.summary(), batch, "--batch", available_bytes(), pass)?;
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    if let Some(vocab) = net.token_vocab() {
        // A language model: ids of its built shape (`[T, B]` or `[B, T]`), uniform over the
        // vocabulary.
        let ids = Tensor::from_shape_simple_fn(net.summary().input.clone(), || {
            rng.random_range(0..vocab.max(1)) as f32
        });
        return net.input_from_ir(&ids);
    }
    let [c, h, w] = net.input_chw();
    let x_ir = Tensor::from_shape_simple_fn(vec![batch, c, h, w], || rng.random_range(-2.0..2.0));
    let x_ir = if net.summary().input.len() == 2 {
        x_ir.into_shape_with_order(vec![batch, c])
            .map_err(|e| SimError::shape("input", e.to_string()))?
    } else {
        x_ir
    };
    net.input_from_ir(&x_ir)
}

/// Evaluation-forward throughput of one network.
#[derive(Clone, Debug, Serialize)]
pub struct EvalBench {
    /// Images per wall-clock second over the timed passes.
    pub images_per_s: f64,
    /// Images per CPU-second of this process (all threads).
    pub images_per_cpu_s: f64,
    /// Median wall time of one pass, milliseconds.
    pub pass_ms_median: f64,
    /// Share of the process CPU time spent inside GEMMs (in the profiled run).
    pub gemm_cpu_share: f64,
    /// GFLOP/s of the GEMMs over the thread CPU time spent inside them, summed over threads.
    pub gemm_gflops: f64,
    /// The core's fp32 FMA peak, measured after the passes (as in [`TrainBench`]).
    pub peak_gflops: f64,
    /// The vector path the peak ran on.
    pub vector_path: &'static str,
    /// The GEMM calls of one pass run after the timed ones under the profiler, per shape and
    /// operand kind, the largest share of GEMM time first.
    #[serde(skip)]
    pub pass_shapes: Vec<cptsim_kernels::gemm::ShapeTime>,
    /// 1-minute load average at the start and end of the timed passes.
    pub load_avg: [Option<f64>; 2],
}

/// Times `passes` evaluation-mode forward passes of `net` (running statistics, no cache for
/// backward) on one seeded synthetic batch of `batch` inputs, after one warm-up pass, and
/// profiles the GEMMs of one more; the network is built beforehand, so only the passes are timed.
/// Then measures the FMA peak for `peak_secs`.
pub fn eval_passes(
    net: &mut Network,
    batch: usize,
    passes: usize,
    peak_secs: f64,
) -> Result<EvalBench> {
    let x = synthetic_input(net, batch, passes, Pass::Eval)?;
    net.forward(x.clone(), Mode::Eval)?;
    let run = timed(passes, || {
        let y = net.forward(x.clone(), Mode::Eval)?;
        match y.iter().find(|v| !v.is_finite()) {
            Some(v) => Err(SimError::invalid(
                "benchmark",
                format!("the forward pass produced {v} on finite inputs"),
            )),
            None => Ok(()),
        }
    })?;
    let peak = fma_peak(VectorPath::detect(), peak_secs);
    let (images, cpu, gemm) = ((batch * passes) as f64, run.cpu.max(1e-9), &run.gemm);
    Ok(EvalBench {
        images_per_s: images / run.wall.max(1e-9),
        images_per_cpu_s: images / cpu,
        pass_ms_median: run.median * 1e3,
        gemm_cpu_share: gemm.seconds / run.profiled_cpu.max(1e-9),
        gemm_gflops: gemm.gflops(),
        peak_gflops: peak.gflops,
        vector_path: peak.path.describe_as_widest(),
        pass_shapes: by_gemm_time(gemm.shapes.clone()),
        load_avg: run.load_avg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_kernels::gemm::OperandKind;
    use cptsim_nn::build::{build_network, BuildOptions};

    #[test]
    fn train_bench_counts_the_gemm_flops_of_the_model() {
        let g = cptsim_models::load_graph("zoo:lenet5", 8).unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        // Its own pool, so GEMMs of tests running in parallel are not counted.
        let r = cptsim_testdata::with_threads(2, || train_steps(&mut net, 8, 2, 0.05, 0.0))
            .unwrap()
            .unwrap();
        // Three GEMMs per conv/linear layer (forward, error, weight gradient) at 2 FLOPs per MAC,
        // but none for the input gradient of the first layer (training does not need it).
        let sum = net.summary();
        let want = (6 * sum.total_macs() - 2 * sum.layers[0].macs) as f64 * 8.0 / 1e9;
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
        // The profiled step's shapes add up to the same FLOPs, largest GEMM time first, and name how
        // `A` was read: LeNet-5's first conv reads its patches in place, forward and transposed
        // for the weight gradient.
        let flops: u64 = r.step_shapes.iter().map(|s| s.flops).sum();
        assert!((flops as f64 / 1e9 / want - 1.0).abs() < 1e-9, "{flops}");
        assert!(r
            .step_shapes
            .windows(2)
            .all(|w| w[0].seconds >= w[1].seconds));
        let first = &sum.layers[0];
        let (k, n) = (first.reduction_len(), first.out_channels());
        let forward = r.step_shapes.iter().find(|s| (s.k, s.n) == (k, n));
        assert_eq!(
            forward.map(|s| s.operand),
            Some(OperandKind::Patches),
            "{:?}",
            r.step_shapes
        );
        let weight = r.step_shapes.iter().find(|s| (s.m, s.n) == (k, n));
        assert_eq!(
            weight.map(|s| s.operand),
            Some(OperandKind::PatchesT),
            "{:?}",
            r.step_shapes
        );
        // Every block of the profiled step, none of the warm-up or timed steps.
        let blocks = 8_usize.div_ceil(cptsim_kernels::gemm::block_samples(first.out_pixels()));
        assert_eq!(forward.map(|s| s.calls), Some(blocks as u64));
    }

    #[test]
    fn eval_bench_times_forward_passes_and_rejects_empty_runs() {
        let g = cptsim_models::load_graph("zoo:lenet5", 4).unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        let r = cptsim_testdata::with_threads(1, || eval_passes(&mut net, 4, 2, 0.01))
            .unwrap()
            .unwrap();
        assert!(r.images_per_s > 0.0 && r.images_per_cpu_s > 0.0 && r.pass_ms_median > 0.0);
        assert!(r.gemm_cpu_share > 0.0, "{}", r.gemm_cpu_share);
        assert!(r.gemm_gflops > 0.0 && r.peak_gflops > 0.0);
        // The profiled pass's shapes: LeNet-5's first conv read as patches in blocks of whole
        // samples, every block of the pass; the FLOPs are 2 per MAC of the model, for 4 samples.
        let sum = net.summary();
        let l0 = &sum.layers[0];
        let spb = cptsim_kernels::gemm::block_samples(l0.out_pixels()).min(4);
        let dims = (spb * l0.out_pixels(), l0.reduction_len(), l0.out_channels());
        let conv1 = r.pass_shapes.iter().find(|s| (s.m, s.k, s.n) == dims);
        let calls = 4_usize.div_ceil(spb) as u64;
        let found = conv1.map(|s| (s.operand, s.calls));
        assert_eq!(found, Some((OperandKind::Patches, calls)));
        let flops: u64 = r.pass_shapes.iter().map(|s| s.flops).sum();
        assert_eq!(flops, 2 * 4 * sum.total_macs());
        let e = eval_passes(&mut net, 4, 0, 0.01).unwrap_err().to_string();
        assert!(e.contains("timed runs"), "{e}");
    }

    #[test]
    fn step_shapes_cover_every_gemm_flop_of_the_step() {
        let sum = cptsim_models::load_summary("zoo:resnet20", 128).unwrap();
        let shapes = step_gemm_shapes(&sum, 128).unwrap();
        let flops: usize = shapes.iter().map(|s| 2 * s.m * s.k * s.n * s.calls).sum();
        // Two FLOPs per MAC in each of the three passes, less the first conv's input gradient,
        // less what Winograd saves: F(4×4)'s products do 9/4 of a 3×3 conv's 9 multiplies per
        // output (27/36 saved), F(2×2)'s 4 (20/36 saved; even output sides). F(4×4) runs the
        // forward pass of the 32–512-channel convs and the input gradient of those with 32–512
        // output channels, F(2×2) the weight gradient of 32–256 (ResNet-20 has 16–64).
        let saved: u64 = sum
            .layers
            .iter()
            .filter(|l| l.kind == LayerKind::Conv && l.kernel == [3, 3] && l.stride == [1, 1])
            .map(|l| {
                let by_tile = |c: usize| match c {
                    32..=512 => 27,
                    _ => 0,
                };
                let error = by_tile(l.out_channels()) * u64::from(l.role != LayerRole::First);
                let weight = if (32..=256).contains(&l.in_channels()) {
                    20
                } else {
                    0
                };
                2 * l.macs * (by_tile(l.in_channels()) + error + weight) / 36
            })
            .sum();
        assert!(saved > 0);
        assert_eq!(
            flops as u64,
            128 * (6 * sum.total_macs() - 2 * sum.layers[0].macs - saved)
        );
        // ResNet-20's first conv: 32×32 pixels per sample, one sample per block, 3·3·3 taps;
        // its weight gradient reads the patches in place; it has no input gradient.
        fn row(s: &GemmShape) -> (&str, GemmPass, usize, usize, usize, usize) {
            (s.layer.as_str(), s.pass, s.m, s.k, s.n, s.calls)
        }
        assert_eq!(
            row(&shapes[0]),
            ("conv1", GemmPass::Forward, 1024, 27, 16, 128)
        );
        assert_eq!(
            row(&shapes[1]),
            ("conv1", GemmPass::Weight, 27, 1024, 16, 128)
        );
        // The trainer packs a one-group conv's weights (direct forward) and Winograd's
        // transformed kernels (forward and input gradient); no weight gradient, no linear layer.
        for s in &shapes {
            let packed = s.layer != "fc"
                && (s.pass == GemmPass::Forward || (s.pass == GemmPass::Error && s.winograd));
            assert_eq!(s.packed_b, packed, "{s:?}");
        }
        // The next conv's input gradient is the transposed conv: 3·3·16 taps into 16 channels.
        assert_eq!(row(&shapes[3]).1, GemmPass::Error);
        assert_eq!((shapes[3].m, shapes[3].k, shapes[3].n), (1024, 144, 16));
        // Stage 2's 3×3 convs (16 × 16 outputs, 32 channels) run Winograd's products in all
        // three passes, [tiles, C, O] / [O, tiles, C]: F(4×4) in the forward pass and input
        // gradient (blocks of 16 samples, 256 tiles, in 2 chunks of 128), F(2×2) in the
        // weight gradient (blocks of 4 samples, 256 tiles, one chunk).
        let wino = |pass: GemmPass, dims: (usize, usize, usize)| {
            shapes
                .iter()
                .find(|s| s.pass == pass && (s.m, s.k, s.n) == dims)
                .map(|s| s.winograd)
        };
        assert_eq!(wino(GemmPass::Forward, (128, 32, 32)), Some(true));
        assert_eq!(wino(GemmPass::Error, (128, 32, 32)), Some(true));
        assert_eq!(wino(GemmPass::Weight, (32, 256, 32)), Some(true));
        assert!(!shapes[0].winograd && !shapes[1].winograd && !shapes[3].winograd);
        let mut timed = shapes[..2].to_vec();
        timed.extend(shapes.iter().filter(|s| s.winograd).take(3).cloned());
        time_gemm_shapes(&mut timed, 0.001).unwrap();
        assert!(timed.iter().all(|s| s.gflops.is_finite() && s.gflops > 0.0));
    }

    #[test]
    fn step_shapes_split_remainders_and_skip_depthwise() {
        let sum = cptsim_models::load_summary("zoo:mobilenetv2", 3).unwrap();
        let shapes = step_gemm_shapes(&sum, 3).unwrap();
        let dw_macs: u64 = sum
            .layers
            .iter()
            .filter(|l| l.groups > 1 && l.groups == l.in_channels())
            .map(|l| l.macs)
            .sum();
        let flops: usize = shapes.iter().map(|s| 2 * s.m * s.k * s.n * s.calls).sum();
        let first = sum.layers[0].macs;
        assert_eq!(
            flops as u64,
            3 * (6 * (sum.total_macs() - dw_macs) - 2 * first)
        );
    }
}
