//! The `cptsim` command line: argument parsing, progress and printing. All work happens in the
//! library crates; each subcommand lives in its own module under `cmd/`. `src/main.rs` only calls
//! [`main`]. This is a library too so the sweep plan checks can be fuzzed and tested from outside
//! ([`sweep_plan`]; `tests/src/fuzz.rs`).

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cmd;
mod exit;
mod interrupt;
mod malloc;

/// Simulate dynamic-precision training: import models, synthesise or record precision traces,
/// train with simulated low precision and cost runs on accelerator models.
#[derive(Parser)]
#[command(name = "cptsim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Cost a training run in BitOPs: synthesise a precision schedule's trace (or read one) and
    /// compare it with the static baseline.
    Run(cmd::run::RunArgs),
    /// Cost one run on several accelerator configurations, one table row each.
    Compare(cmd::compare::CompareArgs),
    /// Cost models' inference (forward pass at per-layer bits) on accelerators, per image.
    Infer(cmd::infer::InferArgs),
    /// Cost one inference layer on one accelerator.
    Layer(cmd::layer::Args),
    /// List the built-in accelerators or print one's TOML config.
    Accel(cmd::accel::Args),
    /// Recompute every published figure cptsim claims to match; fail if one is off.
    Validate(cmd::validate::ValidateArgs),
    /// Per-layer shapes, parameters and MACs of a model (ONNX file or zoo:NAME), with totals.
    Inspect(cmd::inspect::InspectArgs),
    /// List the built-in models and export them as ONNX files.
    Zoo(cmd::zoo::ZooArgs),
    /// Train a model with simulated low precision under a schedule, PFQ or PRT; record its trace.
    Train(Box<cmd::train::TrainArgs>),
    /// One eval-mode forward pass of a model on an .npy input (fp32, or quantized with --bits).
    Forward(cmd::forward::ForwardArgs),
    /// Benchmarks: training-step throughput and GEMM rate against this machine's peak.
    Bench(cmd::bench::BenchArgs),
    /// Figures (SVG or PNG): schedules, trace heat maps, sweep Pareto plots, accelerator
    /// breakdowns and training curves.
    Plot(cmd::plot::PlotArgs),
    /// Studies: run a plan's grid of run/train cells on a local pool or a Slurm job array,
    /// resumably, into one results table.
    Sweep(cmd::sweep_args::SweepArgs),
}

/// The `cptsim` program: parses the process's arguments, runs the subcommand, maps its error to
/// an exit code.
pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    interrupt::install();
    // The GEMMs' vector path (`CPTSIM_VECTOR_PATH`) is fixed before any work starts.
    let chosen = cptsim_kernels::gemm::choose_vector_path()
        .map_err(cptsim_nn::SimError::from)
        .map_err(anyhow::Error::from);
    let result: anyhow::Result<()> = chosen.and_then(|_| match cli.command {
        // The commands that train or run forward passes run on a thread of their rayon pool.
        Command::Forward(args) => in_pool(move || cmd::forward::run(&args)),
        Command::Train(mut args) => {
            args.given = cmd::train::given_flags(matches.subcommand_matches("train"));
            in_pool(move || cmd::train::run(*args, &mut std::io::stdout()))
        }
        Command::Run(args) => in_pool(move || cmd::run::run(args, &mut std::io::stdout())),
        Command::Infer(args) => in_pool(move || cmd::infer::run(args, &mut std::io::stdout())),
        Command::Bench(args) => to_stdout(|out| cmd::bench::run(&args, out)),
        Command::Inspect(args) => to_stdout(|out| cmd::inspect::run(&args, out)),
        Command::Zoo(args) => to_stdout(|out| cmd::zoo::run(args, out)),
        Command::Layer(args) => to_stdout(|out| cmd::layer::run(args, out)),
        Command::Accel(args) => to_stdout(|out| cmd::accel::run(args, out)),
        Command::Validate(args) => to_stdout(|out| cmd::validate::run(&args, out)),
        Command::Compare(args) => to_stdout(|out| cmd::compare::run(args, out)),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Sweep(args) => to_stdout(|out| cmd::sweep_args::run(args, out)),
    });
    let result = result.and_then(|()| Ok(std::io::stdout().flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let exit = exit::classify(&e);
            if exit != exit::Exit::Ok {
                eprintln!("error: {}", exit::message(&e));
            }
            exit.code()
        }
    }
}

/// Runs `f` on the main thread with standard output locked for it.
fn to_stdout(f: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    f(&mut std::io::stdout().lock())
}

/// Stack of the pool threads that run a command (the main thread's default size: the command
/// ran on the main thread before).
const COMMAND_STACK: usize = 8 << 20;

/// Runs `f` on a thread of a new rayon pool of `RAYON_NUM_THREADS` threads (default: one per
/// core), which then also runs the parallel loops `f` starts. On the main thread instead, each
/// loop would be handed to the pool and the main thread would sleep until it ended, then wake
/// (40–110 µs on this project's VMs, a few hundred times per training step); a pool thread
/// joins them itself.
fn in_pool(f: impl FnOnce() -> anyhow::Result<()> + Send) -> anyhow::Result<()> {
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(COMMAND_STACK)
        .thread_name(|i| format!("cptsim-{i}"))
        .build()?;
    pool.install(f)
}

/// Sweep plans checked without running them, for the fuzz target `sweep_plan` and tests:
/// [`Plan::parse`] reads the TOML, [`expand`] lists the cells, [`Study::check`] makes every check
/// `cptsim sweep run` makes before anything runs (keys against the keys of the train crate's
/// `TrainPlan` / `CostPlan`, each cell read into those plans and validated) short of loading
/// models and accelerators.
pub mod sweep_plan {
    pub use crate::cmd::sweep::grid::{expand, CellSpec};
    pub use crate::cmd::sweep::plan::Plan;
    pub use crate::cmd::sweep::study::Study;
    /// The readers of a cell's files, for the fuzz target `sweep_cells`: the results row
    /// ([`cell_rows`]) and `sweep status` ([`print_status`]).
    pub use crate::cmd::sweep::{collect::cell_rows, status::print as print_status};
}
