//! `cptsim sweep`'s command line: the flags, read into the sweep's own
//! [`Request`](super::sweep::Request) (the sweep itself knows no argument parser).

use std::io::Write;
use std::path::PathBuf;

use super::shared::OutputFormat;
use super::sweep::{self, ExecutorKind, Request, RunOptions};

/// Arguments of `cptsim sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    #[command(subcommand)]
    command: SweepCommand,
}

#[derive(clap::Subcommand, Debug)]
enum SweepCommand {
    /// Run every cell of PLAN not yet done (rerun after a crash or kill to finish the rest),
    /// then collect DIR/results.csv.
    Run(RunArgs),
    /// Run one cell of PLAN (what each Slurm array task runs).
    Cell(CellArgs),
    /// Done / running / failed / pending counts of the sweep in DIR, and each failure's error.
    Status {
        /// The sweep's output directory.
        dir: PathBuf,
        /// Output format: table or json.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// (Re)build DIR/results.csv and DIR/results.json from the cells on disk. Refuses (exit 3)
    /// when done cells on disk are no longer in DIR/plan.toml (it was edited after they ran).
    Collect {
        /// The sweep's output directory.
        dir: PathBuf,
        /// Write the table from the plan's cells only, leaving out the rows of done cells the
        /// plan no longer has (their directories stay).
        #[arg(long)]
        drop_unplanned: bool,
        /// Output format: table or json.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
}

/// `--executor` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExecutorArg {
    Local,
    Slurm,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The plan (TOML): [grid], optional [train], [[cell]], [[exclude]], [slurm].
    plan: PathBuf,
    /// Output directory [default: the plan's `out`].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where cells run.
    #[arg(long, value_enum, default_value_t = ExecutorArg::Local)]
    executor: ExecutorArg,
    /// Cells at once: local worker processes [default: cores / --threads]; Slurm's array
    /// throttle %MAX [default: all].
    #[arg(long)]
    jobs: Option<usize>,
    /// Worker threads per cell (RAYON_NUM_THREADS of its processes; Slurm --cpus-per-task).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Extra sbatch option, after the plan's [slurm] table (repeatable), e.g.
    /// --slurm-arg=--qos=short.
    #[arg(long, value_name = "OPTION", allow_hyphen_values = true)]
    slurm_arg: Vec<String>,
    /// Slurm: print the job id and return once submitted.
    #[arg(long)]
    no_wait: bool,
    /// Check the plan and every cell as `train` / `run` would, and list the cells: where each
    /// comes from ([grid] or a [[cell]]), its settings with the defaults it takes, its id and
    /// command lines; run and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Run only the cells with this value of a plan key, e.g. `--only seed=0` (repeatable:
    /// values of one key are alternatives, different keys must all match). The cells keep
    /// their ids, so a later run without it runs the rest.
    #[arg(long, value_name = "KEY=VALUE")]
    only: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct CellArgs {
    /// The plan (a sweep directory's plan.toml).
    plan: PathBuf,
    /// The sweep's output directory.
    #[arg(long)]
    out: PathBuf,
    /// The cell's position in the plan (the Slurm array index).
    #[arg(long)]
    index: usize,
}

/// Runs `cptsim sweep`.
pub fn run(args: SweepArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let request = match args.command {
        SweepCommand::Run(a) => Request::Run(RunOptions {
            plan: a.plan,
            out: a.out,
            executor: match a.executor {
                ExecutorArg::Local => ExecutorKind::Local,
                ExecutorArg::Slurm => ExecutorKind::Slurm,
            },
            jobs: a.jobs,
            threads: a.threads,
            slurm_args: a.slurm_arg,
            wait: !a.no_wait,
            dry_run: a.dry_run,
            only: a.only,
        }),
        SweepCommand::Cell(a) => Request::Cell {
            plan: a.plan,
            out: a.out,
            index: a.index,
        },
        SweepCommand::Status { dir, format } => Request::Status {
            dir,
            json: format.json_or_table("sweep status")?,
        },
        SweepCommand::Collect {
            dir,
            drop_unplanned,
            format,
        } => Request::Collect {
            dir,
            drop_unplanned,
            json: format.json_or_table("sweep collect")?,
        },
    };
    sweep::run(request, out)
}
