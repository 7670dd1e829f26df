//! `cptsim bench train`: training-step throughput of a model built from the IR, the GEMM rate it
//! reaches, the core's fp32 FMA peak (an independent kernel at the widest vector width the CPU
//! runs) and, per GEMM shape of the step, its single-thread rate as a fraction of that peak.
//! `cptsim bench eval`: fp32 evaluation-forward throughput, the model built outside the timing
//! (what an inference runtime's session reports).

use std::io::Write;

use crate::cmd::shared::{OutputFormat, QuantizerArg};

use super::arith::ArithArgs;
use super::quant_scope::ScopeArgs;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use cptsim_bench::bandwidth::StreamRates;
use cptsim_bench::harness::{eval_passes, train_steps, EvalBench, TrainBench};
use cptsim_bench::peak::cpu_model;
use cptsim_kernels::gemm::{self, ShapeTime};
use cptsim_kernels::VectorPath;
use cptsim_models::load_graph_with;
use cptsim_nn::build::{build_network, BuildOptions, Network};
use cptsim_nn::quant::arith::ArithSpec;
use cptsim_nn::quant::QuantMethod;
use serde_json::json;

/// Arguments of `cptsim bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

/// What to benchmark.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Training steps (forward, backward, SGD) on synthetic data.
    Train(TrainArgs),
    /// Evaluation-mode forward passes on synthetic data (fp32, or SBM at `--bits`).
    Eval(EvalArgs),
}

/// Arguments of `cptsim bench eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    #[arg(long)]
    pub model: String,
    /// Batch size.
    #[arg(long, default_value_t = 128)]
    pub batch: usize,
    /// Tokens per sample of a sequence model (default: a zoo model's own; required for an ONNX
    /// file with a symbolic sequence axis).
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Timed forward passes (after one warm-up pass).
    #[arg(long, default_value_t = 10)]
    pub passes: usize,
    /// Quantize the in-scope conv/linear layers with SBM at this many forward bits (input
    /// activations with each batch's own range) [default: fp32].
    #[arg(long)]
    pub bits: Option<u32>,
    /// Which layers `--bits` quantizes.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// How the quantized layers multiply.
    #[command(flatten)]
    pub arith: ArithArgs,
    /// Rayon threads (default: rayon's choice, one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// CPU seconds spent measuring the core's FMA peak (after the passes).
    #[arg(long, default_value_t = 0.5)]
    pub peak_secs: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Arguments of `cptsim bench train`.
#[derive(Args)]
pub struct TrainArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    #[arg(long)]
    pub model: String,
    /// Batch size.
    #[arg(long, default_value_t = 128)]
    pub batch: usize,
    /// Tokens per sample of a sequence model (default: a zoo model's own; required for an ONNX
    /// file with a symbolic sequence axis).
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Timed steps (after one warm-up step).
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// `none` (fp32) or `sbm` (in-scope layers at `--bits`; see docs/src/guide/shared-flags.md).
    #[arg(long, value_enum, default_value_t = QuantizerArg::None)]
    pub quantizer: QuantizerArg,
    /// Forward and backward bits with `--quantizer sbm`.
    #[arg(long, default_value_t = 8)]
    pub bits: u32,
    /// Which layers are quantized.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// How the quantized layers multiply.
    #[command(flatten)]
    pub arith: ArithArgs,
    /// Rayon threads (default: rayon's choice, one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// CPU seconds spent measuring the core's FMA peak, and seconds for each of the two
    /// streaming-rate measurements (one thread, all threads).
    #[arg(long, default_value_t = 0.5)]
    pub peak_secs: f64,
    /// CPU seconds spent timing each GEMM shape of the step (0: no per-shape table).
    #[arg(long, default_value_t = 0.05)]
    pub shape_secs: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Runs the command.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    crate::malloc::keep_large_blocks();
    match &args.what {
        BenchCommand::Train(a) => train(a, out),
        BenchCommand::Eval(a) => eval(a, out),
    }
}

/// A load average for the tables (`n/a` where unknown).
fn load(l: Option<f64>) -> String {
    l.map_or("n/a".to_string(), |v| format!("{v:.2}"))
}

/// A thread pool of `--threads` threads (rayon's choice without it).
fn pool(threads: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut pool = rayon::ThreadPoolBuilder::new();
    if let Some(t) = threads {
        if t == 0 {
            anyhow::bail!("--threads must be at least 1");
        }
        pool = pool.num_threads(t);
    }
    pool.build()
        .context("--threads: cannot build the thread pool")
}

/// Checks a `--*-secs` flag: finite seconds in `[0, 60]`.
fn check_secs(flag: &str, v: f64) -> Result<()> {
    if !(v.is_finite() && (0.0..=60.0).contains(&v)) {
        anyhow::bail!("{flag} {v}: expected seconds between 0 and 60");
    }
    Ok(())
}

fn eval(a: &EvalArgs, out: &mut dyn Write) -> Result<()> {
    if a.batch == 0 || a.passes == 0 {
        anyhow::bail!("--batch and --passes must be at least 1");
    }
    check_secs("--peak-secs", a.peak_secs)?;
    let pool = pool(a.threads)?;
    let json = a.format.json_or_table("bench eval")?;
    let graph = load_graph_with(&a.model, a.batch, a.seq_len)?;
    let opts = BuildOptions {
        scope: a.scope.scope(),
        ..BuildOptions::default()
    };
    let mut net = build_network(&graph, &opts).with_context(|| format!("model {}", a.model))?;
    let arith = a.arith.spec(QuantizerArg::Sbm)?;
    match a.bits {
        Some(b) => {
            net.set_bits(b, 0).context("--bits")?;
            net.use_batch_ranges_in_eval(true);
            net.use_arithmetic(arith);
        }
        None if arith != ArithSpec::default() => {
            anyhow::bail!("--arithmetic / --accumulator: need --bits (an fp32 pass has no codes)")
        }
        None => {}
    }
    let threads = pool.current_num_threads();
    let unit = samples(&net);
    let r: EvalBench = pool.install(|| eval_passes(&mut net, a.batch, a.passes, a.peak_secs))?;
    let pct = |g: f64| 100.0 * g / r.peak_gflops.max(1e-9);
    match json {
        true => writeln!(
            out,
            "{:#}",
            json!({
                "model": a.model,
                "batch": a.batch,
                "samples": unit,
                "passes": a.passes,
                "threads": threads,
                "bits": a.bits.unwrap_or(0),
                "arithmetic": arith.to_string(),
                "images_per_s": r.images_per_s,
                "images_per_cpu_s": r.images_per_cpu_s,
                "pass_ms_median": r.pass_ms_median,
                "gemm_cpu_share": r.gemm_cpu_share,
                "gemm_gflops": r.gemm_gflops,
                "peak_gflops": r.peak_gflops,
                "vector_path": r.vector_path,
                "gemm_path": gemm::vector_path().name(),
                "cpu_model": cpu_model(),
                "gemm_shapes_in_pass": in_run_json(&r.pass_shapes, r.peak_gflops, "pass"),
                "load_avg": r.load_avg[0],
                "load_avg_end": r.load_avg[1],
            })
        )?,
        false => write!(
            out,
            "{} batch {} {} eval, {} passes, {threads} thread(s)\n\
             CPU             {}, {}{}\n\
             throughput      {:9.1} {unit}/s, {:.1} {unit} per CPU-second\n\
             pass (median)   {:9.1} ms\n\
             GEMM            {:9.1} GFLOP/s per core ({:.0} % of peak, {:.0} % of CPU time)\n\
             peak            {:9.1} GFLOP/s (FMA-throughput loop, one thread, same run)\n\
             load average    {} → {}\n\
             \nGEMM shapes in a profiled pass after the timed ones (C[m,n] = A[m,k]·B[k,n]), by GEMM time:\n{}",
            a.model,
            a.batch,
            match a.bits {
                Some(b) => format!("SBM {b}-bit, {arith} arithmetic,"),
                None => "fp32".to_string(),
            },
            a.passes,
            cpu_model().as_deref().unwrap_or("unknown CPU model"),
            r.vector_path,
            gemm_path_note(),
            r.images_per_s,
            r.images_per_cpu_s,
            r.pass_ms_median,
            r.gemm_gflops,
            pct(r.gemm_gflops),
            100.0 * r.gemm_cpu_share,
            r.peak_gflops,
            load(r.load_avg[0]),
            load(r.load_avg[1]),
            in_run_table(&r.pass_shapes, r.peak_gflops, "pass"),
        )?,
    }
    Ok(())
}

fn train(a: &TrainArgs, out: &mut dyn Write) -> Result<()> {
    if a.batch == 0 || a.steps == 0 {
        anyhow::bail!("--batch and --steps must be at least 1");
    }
    check_secs("--peak-secs", a.peak_secs)?;
    check_secs("--shape-secs", a.shape_secs)?;
    let pool = pool(a.threads)?;
    let graph = load_graph_with(&a.model, a.batch, a.seq_len)?;
    let json = a.format.json_or_table("bench train")?;
    let opts = BuildOptions {
        method: a.quantizer.method().unwrap_or(QuantMethod::Sbm),
        scope: a.scope.scope(),
        ..BuildOptions::default()
    };
    let mut net = build_network(&graph, &opts).with_context(|| format!("model {}", a.model))?;
    let bits = bench_bits(a);
    net.set_bits(bits, bits).context("--bits")?;
    net.use_arithmetic(a.arith.spec(a.quantizer)?);
    let threads = pool.current_num_threads();
    let unit = samples(&net);
    let r = pool.install(|| train_steps(&mut net, a.batch, a.steps, a.peak_secs, a.shape_secs))?;
    let stream = StreamRates::measure(threads, a.peak_secs);
    match json {
        true => writeln!(out, "{:#}", to_json(&r, a, threads, unit, &stream))?,
        false => write!(out, "{}", table(&r, a, threads, unit, &stream))?,
    }
    Ok(())
}

/// What a batch holds, for the throughput line: images, or a language model's token sequences
/// (the JSON keeps its `images_per_s` keys and names the unit in `samples`).
fn samples(net: &Network) -> &'static str {
    match net.tokens() {
        Some(_) => "sequences",
        None => "images",
    }
}

/// The bits the in-scope layers run at: `--bits`, or 0 (fp32) with `--quantizer none`.
fn bench_bits(a: &TrainArgs) -> u32 {
    match a.quantizer.method() {
        Some(_) => a.bits,
        None => 0,
    }
}

fn to_json(
    r: &TrainBench,
    a: &TrainArgs,
    threads: usize,
    unit: &str,
    stream: &StreamRates,
) -> serde_json::Value {
    json!({
        "model": a.model,
        "batch": a.batch,
        "samples": unit,
        "steps": a.steps,
        "threads": threads,
        "quantizer": a.quantizer.name(),
        "bits": bench_bits(a),
        "arithmetic": a.arith.spec(a.quantizer).map(|s| s.to_string()).unwrap_or_default(),
        "images_per_s": r.images_per_s,
        "images_per_cpu_s": r.images_per_cpu_s,
        "step_ms_median": r.step_ms_median,
        "gemm_gflops": r.gemm_gflops,
        "gemm_gflops_basis": "GEMM FLOPs over thread CPU time inside GEMM calls, summed over threads (per core)",
        "gemm_cpu_share": r.gemm_cpu_share,
        "gemm_gflop_per_step": r.gemm_gflop_per_step,
        "peak_gflops": r.peak_gflops,
        "peak_basis": "independent FMA-throughput loop on one thread, GFLOP per CPU-second",
        "vector_path": r.vector_path,
        "gemm_path": gemm::vector_path().name(),
        "cpu_model": r.cpu_model,
        "gemm_shapes": r.shapes.iter().map(|s| json!({
            "layer": s.layer,
            "pass": s.pass.name(),
            "winograd": s.winograd,
            "m": s.m,
            "k": s.k,
            "n": s.n,
            "calls_per_step": s.calls,
            "gflops": s.gflops,
            "fraction_of_peak": s.gflops / r.peak_gflops.max(1e-9),
        })).collect::<Vec<_>>(),
        "gemm_shapes_in_step": in_run_json(&r.step_shapes, r.peak_gflops, "step"),
        "stream_gbs": stream.one,
        "stream_gbs_all_threads": stream.all,
        "stream_basis": STREAM_BASIS,
        "load_avg": r.load_avg[0],
        "load_avg_end": r.load_avg[1],
    })
}

/// CPU seconds inside the GEMMs of `shapes` (at least a nanosecond, to divide by).
fn gemm_seconds(shapes: &[ShapeTime]) -> f64 {
    shapes.iter().map(|s| s.seconds).sum::<f64>().max(1e-9)
}

/// The GEMM shapes of one profiled `run` (step or pass) as JSON rows, with `calls_per_step` or
/// `calls_per_pass`.
fn in_run_json(shapes: &[ShapeTime], peak: f64, run: &str) -> Vec<serde_json::Value> {
    let total = gemm_seconds(shapes);
    shapes
        .iter()
        .map(|s| {
            let mut row = json!({
                "operand": s.operand.name(),
                "m": s.m,
                "k": s.k,
                "n": s.n,
                "gflops": s.gflops(),
                "fraction_of_peak": s.gflops() / peak.max(1e-9),
                "fraction_of_gemm_time": s.seconds / total,
            });
            row[format!("calls_per_{run}")] = json!(s.calls);
            row
        })
        .collect()
}

/// The GEMM shapes of one profiled `run` (step or pass) as a table.
fn in_run_table(shapes: &[ShapeTime], peak: f64, run: &str) -> String {
    let mut t = format!(
        "{:<10} {:>6} {:>6} {:>6} {:>10} {:>9} {:>7} {:>11}\n",
        "operand",
        "m",
        "k",
        "n",
        format!("calls/{run}"),
        "GFLOP/s",
        "% peak",
        "% GEMM time"
    );
    let total = gemm_seconds(shapes);
    for s in shapes {
        t.push_str(&format!(
            "{:<10} {:>6} {:>6} {:>6} {:>10} {:>9.1} {:>6.0} % {:>9.1} %\n",
            s.operand.name(),
            s.m,
            s.k,
            s.n,
            s.calls,
            s.gflops(),
            100.0 * s.gflops() / peak.max(1e-9),
            100.0 * s.seconds / total,
        ));
    }
    t
}

/// `; GEMMs on PATH (CPTSIM_VECTOR_PATH)` when the GEMMs run on another path than the peak's
/// (the widest this CPU has), else nothing.
fn gemm_path_note() -> String {
    let path = gemm::vector_path();
    match path == VectorPath::detect() {
        true => String::new(),
        false => format!("; GEMMs on {} ({})", path.describe(), gemm::PATH_VAR),
    }
}

/// How the streaming rates are measured (the JSON's `stream_basis`).
const STREAM_BASIS: &str = "c = a + b over 48 MiB per thread (192 MiB in all at most), bytes read and written per second of wall time: one thread alone, then every thread at once";

/// The memory line: one thread's streaming rate, and all threads' with their gain over it.
fn stream_line(s: &StreamRates) -> String {
    let mut line = format!("{:9.1} GB/s streaming (c = a + b, one thread)", s.one);
    if s.threads > 1 {
        line.push_str(&format!(
            "; {:.1} GB/s on {} at once ({:.2}×)",
            s.all,
            s.threads,
            s.all / s.one.max(1e-9)
        ));
    }
    line
}

fn table(
    r: &TrainBench,
    a: &TrainArgs,
    threads: usize,
    unit: &str,
    stream: &StreamRates,
) -> String {
    let q = match a.quantizer.method() {
        None => "fp32".to_string(),
        Some(_) => format!(
            "{} {1}/{1}, {2} arithmetic,",
            a.quantizer.name().to_uppercase(),
            a.bits,
            a.arith
                .spec(a.quantizer)
                .map(|s| s.to_string())
                .unwrap_or_default()
        ),
    };
    let pct = |g: f64| 100.0 * g / r.peak_gflops.max(1e-9);
    let mut t = format!(
        "{} batch {} {q}, {} steps, {threads} thread(s)\n\
         CPU             {}, {}{}\n\
         throughput      {:9.1} {unit}/s, {:.1} {unit} per CPU-second\n\
         step (median)   {:9.1} ms\n\
         GEMM            {:9.1} GFLOP/s per core ({:.0} % of peak; {:.2} GFLOP per step, {:.0} % of CPU time)\n\
         peak            {:9.1} GFLOP/s (FMA-throughput loop, one thread, same run)\n\
         memory          {}\n\
         load average    {} → {}\n",
        a.model,
        a.batch,
        a.steps,
        r.cpu_model.as_deref().unwrap_or("unknown CPU model"),
        r.vector_path,
        gemm_path_note(),
        r.images_per_s,
        r.images_per_cpu_s,
        r.step_ms_median,
        r.gemm_gflops,
        pct(r.gemm_gflops),
        r.gemm_gflop_per_step,
        100.0 * r.gemm_cpu_share,
        r.peak_gflops,
        stream_line(stream),
        load(r.load_avg[0]),
        load(r.load_avg[1]),
    );
    if !r.shapes.is_empty() {
        t.push_str("\nGEMM shapes of one step, one thread each (C[m,n] = A[m,k]·B[k,n]):\n");
        t.push_str(&format!(
            "{:<24} {:<10} {:>6} {:>6} {:>6} {:>7} {:>9} {:>7}\n",
            "layer", "pass", "m", "k", "n", "calls", "GFLOP/s", "% peak"
        ));
        for s in &r.shapes {
            // `/W`: one of a Winograd conv's 16 products per chunk of tiles.
            let pass = format!("{}{}", s.pass.name(), if s.winograd { "/W" } else { "" });
            t.push_str(&format!(
                "{:<24} {:<10} {:>6} {:>6} {:>6} {:>7} {:>9.1} {:>6.0} %\n",
                s.layer,
                pass,
                s.m,
                s.k,
                s.n,
                s.calls,
                s.gflops,
                pct(s.gflops)
            ));
        }
        t.push_str(
            "\nThe same in a profiled step after the timed ones (operands as the layers left them), by GEMM time:\n",
        );
        t.push_str(&in_run_table(&r.step_shapes, r.peak_gflops, "step"));
    }
    t
}
