//! `cptsim sweep`: studies, not single runs. A plan (TOML) expands to cells — each a typed
//! training and/or cost plan of the train crate, run as `cptsim train` / `cptsim run` child
//! processes in `DIR/cells/<id>/` (a crash stays in its cell; Slurm runs the same commands) — by
//! an executor (a local pool or a Slurm job array), resumable, collected into one tidy
//! `DIR/results.csv`. The command line is read elsewhere (`cmd::sweep_args`) into a
//! [`Request`].

pub mod cell;
pub mod collect;
pub mod command;
pub mod dry_run;
pub mod execute;
pub mod executor;
pub mod grid;
pub mod lock;
pub mod plan;
pub mod runner;
pub mod select;
pub mod spans;
pub mod status;
pub mod study;
pub mod typed;
pub mod unplanned;

use std::io::Write;
use std::path::PathBuf;

use study::Study;

/// What `cptsim sweep` is asked to do.
#[derive(Debug)]
pub enum Request {
    /// Run a plan's cells not yet done, then collect.
    Run(RunOptions),
    /// Run cell `index` of `plan` (a Slurm array task).
    Cell {
        plan: PathBuf,
        out: PathBuf,
        index: usize,
    },
    /// Print where the sweep in `dir` stands.
    Status { dir: PathBuf, json: bool },
    /// Rebuild `dir`'s results table; `drop_unplanned`: leave out done cells the plan no
    /// longer has instead of refusing.
    Collect {
        dir: PathBuf,
        drop_unplanned: bool,
        json: bool,
    },
}

/// Where cells run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutorKind {
    Local,
    Slurm,
}

/// How to run a plan.
#[derive(Debug)]
pub struct RunOptions {
    pub plan: PathBuf,
    /// The study's directory, else the plan's `out`.
    pub out: Option<PathBuf>,
    pub executor: ExecutorKind,
    /// Cells at once (local workers; Slurm's array throttle).
    pub jobs: Option<usize>,
    /// Worker threads per cell.
    pub threads: usize,
    /// Extra sbatch options.
    pub slurm_args: Vec<String>,
    /// Slurm: wait for the job to leave the queue.
    pub wait: bool,
    /// Check and list the cells; run and write nothing.
    pub dry_run: bool,
    /// `--only KEY=VALUE` selections.
    pub only: Vec<String>,
}

/// Runs the request.
pub fn run(request: Request, out: &mut dyn Write) -> anyhow::Result<()> {
    match request {
        Request::Run(options) => runner::run_plan(&options, out),
        Request::Cell { plan, out, index } => runner::run_cell(&plan, &out, index),
        Request::Status { dir, json } => {
            let study = Study::open(&dir)?;
            match json {
                true => status::print_json(&study, out),
                false => status::print(&study, out),
            }
        }
        Request::Collect {
            dir,
            drop_unplanned,
            json,
        } => runner::collect(&Study::open(&dir)?, drop_unplanned, json, out),
    }
}
