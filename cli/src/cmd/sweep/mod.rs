//! `cptsim sweep`: studies, not single runs. A plan (TOML) expands to cells — each a typed
//! training and/or cost plan of the train crate, run as `cptsim train` / `cptsim run` child
//! processes in `DIR/cells/<id>/` (a crash stays in its cell; Slurm runs the same commands) — by
//! an executor (a local pool or a Slurm job array), resumable, collected into one tidy
//! `DIR/results.csv`.

pub mod cell;
pub mod collect;
pub mod command;
pub mod execute;
pub mod executor;
pub mod grid;
pub mod lock;
pub mod plan;
pub mod select;
pub mod spans;
pub mod status;
pub mod study;
pub mod typed;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};

use cell::Outcome;
use executor::{local::Local, slurm::Slurm, Executor, Finished};
use study::{Study, PLAN_COPY};

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
    },
    /// (Re)build DIR/results.csv and DIR/results.json from the cells on disk.
    Collect {
        /// The sweep's output directory.
        dir: PathBuf,
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
    /// Check the plan and print each cell's id and command lines; run and write nothing.
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

/// Runs the subcommand.
pub fn run(args: SweepArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match args.command {
        SweepCommand::Run(a) => run_plan(a, out),
        SweepCommand::Cell(a) => run_cell(&a),
        SweepCommand::Status { dir } => Ok(status::print(&Study::open(&dir)?, out)?),
        SweepCommand::Collect { dir } => {
            let study = Study::open(&dir)?;
            let rows = collect::write_results(&study)?;
            writeln!(
                out,
                "{rows} rows: {}",
                study.dir.join("results.csv").display()
            )?;
            Ok(())
        }
    }
}

fn run_plan(args: RunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.jobs == Some(0) {
        bail!("--jobs: at least 1");
    }
    let study = Study::load(&args.plan, args.out.as_deref())?;
    let only = select::Only::parse(&args.only, &study.cells)?;
    let selected: Vec<&cell::Cell> = study.cells.iter().filter(|c| only.keeps(&c.spec)).collect();
    let chosen = if only.is_empty() {
        String::new()
    } else {
        format!(" ({} chosen by --only)", selected.len())
    };
    if args.dry_run {
        return Ok(print_cells(&study, &selected, &chosen, out)?);
    }
    let executor: Box<dyn Executor> = match args.executor {
        ExecutorArg::Local => Box::new(Local::new(args.jobs, args.threads)),
        ExecutorArg::Slurm => Box::new(Slurm::new(
            args.jobs,
            args.slurm_arg.clone(),
            args.threads,
            !args.no_wait,
        )?),
    };
    std::fs::create_dir_all(&study.dir)
        .with_context(|| format!("--out {}", study.dir.display()))?;
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("plan {}", args.plan.display()))?;
    cell::write_file(&study.dir.join(PLAN_COPY), &text)?;
    let pending: Vec<&cell::Cell> = selected.iter().copied().filter(|c| !c.is_done()).collect();
    eprintln!(
        "sweep {}: {} cells{chosen}, {} to run, in {}",
        study.plan.name,
        study.cells.len(),
        pending.len(),
        study.dir.display()
    );
    if !pending.is_empty() {
        if let Finished::Submitted(job) = executor.execute(&study, &pending)? {
            writeln!(out, "{job}")?;
            return Ok(());
        }
    }
    let rows = collect::write_results(&study)?;
    if crate::interrupt::requested() {
        return Err(crate::exit::Stopped {
            exit: crate::exit::Exit::Interrupted,
            message: format!(
                "interrupted: the running cells stopped (training cells checkpointed the \
                 iteration they reached); rerun the same command to finish {}",
                study.dir.display()
            ),
        }
        .into());
    }
    let [done, running, failed, waiting] = status::counts(&study);
    writeln!(
        out,
        "{rows} rows: {}",
        study.dir.join("results.csv").display()
    )?;
    if done == study.cells.len() {
        let prov = cptsim_plot::report::Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
        cptsim_plot::report::write_sweep_index(&study.dir, "schedule", &prov)
            .with_context(|| format!("{}/index.html", study.dir.display()))?;
    }
    if done < study.cells.len() && !only.is_empty() && selected.iter().all(|c| c.is_done()) {
        eprintln!(
            "{} of {} cells not done yet, all outside --only: rerun without it for the rest",
            study.cells.len() - done,
            study.cells.len()
        );
        return Ok(());
    }
    if done < study.cells.len() {
        bail!(
            "{} of {} cells are not done ({failed} failed, {running} running elsewhere, \
             {waiting} not run); see `cptsim sweep status {}`",
            study.cells.len() - done,
            study.cells.len(),
            study.dir.display()
        );
    }
    Ok(())
}

/// `--dry-run`: each chosen cell's index, id, state and command lines (`chosen`: how many
/// `--only` chose, for the heading).
fn print_cells(
    study: &Study,
    cells: &[&cell::Cell],
    chosen: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "sweep {}: {} cells{chosen} in {}",
        study.plan.name,
        study.cells.len(),
        study.dir.join("cells").display()
    )?;
    for cell in cells {
        let done = if cell.is_done() { " (done)" } else { "" };
        writeln!(out, "#{} {}{done}", cell.index, cell.id)?;
        let c = &cell.commands;
        for argv in c.train.iter().chain([&c.inspect, &c.cost]) {
            writeln!(out, "  cptsim {}", argv.join(" "))?;
        }
    }
    Ok(())
}

fn run_cell(args: &CellArgs) -> anyhow::Result<()> {
    let study = Study::read(&args.plan, Some(&args.out))?;
    let Some(cell) = study.cells.get(args.index) else {
        bail!(
            "--index {}: the plan has {} cells (0-{})",
            args.index,
            study.cells.len(),
            study.cells.len().saturating_sub(1)
        );
    };
    let id = &cell.id;
    // One line per step, not the children's progress lines (those are in the cell's log).
    let step = std::cell::RefCell::new(String::new());
    let report = |phase: &str| {
        let name = phase.split(':').next().unwrap_or(phase);
        if *step.borrow() != name {
            eprintln!("cell {id}: {name}");
            *step.borrow_mut() = name.to_string();
        }
    };
    match cell.execute(None, &report)? {
        Outcome::Ran => eprintln!("cell {id}: done"),
        Outcome::AlreadyDone => eprintln!("cell {id}: already done"),
        Outcome::Busy(owner) => eprintln!("cell {id}: running elsewhere ({owner})"),
    }
    Ok(())
}
