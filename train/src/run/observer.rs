//! What a running [`super::Run`] tells its caller, and how the caller stops it: the
//! [`Observer`] trait (every method has a no-op default) and the values it receives.

use std::path::Path;
use std::time::Instant;

use cptsim_kernels::cputime::process_cpu_seconds;
use cptsim_models::ModelSummary;
use cptsim_traces::TraceRow;

use super::outputs::Summary;
use crate::{EvalRecord, StepReport, Trainer};

/// Something the user should hear about (`cptsim` prints it on stderr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A remark on the setup or the progress, a whole line (`note: …`, `resumed at …`).
    Note(String),
    /// Something that may be wrong (printed `warning: …`).
    Warning(String),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Note(text) => f.write_str(text),
            Self::Warning(text) => write!(f, "warning: {text}"),
        }
    }
}

/// The run at its first iteration.
#[derive(Clone, Debug)]
pub struct Start {
    /// The iteration it starts at (0, or where a checkpoint resumes it).
    pub iteration: u64,
    /// Iterations of the whole run.
    pub iterations: u64,
    /// The iteration it stops at (`stop_at`, else the end).
    pub stop: u64,
    /// Whether it continues a checkpoint.
    pub resumed: bool,
}

/// How far the run has got after an iteration, and how fast it trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Iterations done.
    pub iteration: u64,
    /// Iterations of the whole run.
    pub iterations: u64,
    /// Training images per second in this invocation (evaluations excluded).
    pub images_per_s: f64,
    /// Estimated seconds to the end.
    pub eta_seconds: f64,
}

/// A checkpoint written.
#[derive(Clone, Debug)]
pub struct Checkpointed<'a> {
    /// The iteration it resumes at.
    pub iteration: u64,
    /// The directory it and the outputs so far were written into (a staging directory while a
    /// run that replaces earlier outputs has not finished).
    pub dir: &'a Path,
}

/// The outputs at a checkpoint or at the end, for files an observer adds beside them.
pub struct Outputs<'a> {
    /// Where they are written.
    pub dir: &'a Path,
    /// The trainer (its policy, state and network).
    pub trainer: &'a Trainer<'a>,
    /// The model's layers.
    pub model: &'a ModelSummary,
    /// Samples per iteration.
    pub batch: u64,
    /// The trace so far.
    pub rows: &'a [TraceRow],
    /// The summary, once the run has finished (`summary.json` is written).
    pub summary: Option<&'a Summary>,
}

/// Hears a run's progress, evaluations and checkpoints, adds files to its outputs and may stop
/// it. Methods are called on the thread that runs it.
pub trait Observer: Send {
    /// The run is set up (a checkpoint restored) and starts training.
    fn started(&mut self, _start: &Start) {}

    /// A note or warning.
    fn notice(&mut self, _notice: &Notice) {}

    /// One iteration done (its evaluation, if one was due, is in `step.eval`).
    fn iteration(&mut self, _step: &StepReport, _progress: &Progress) {}

    /// An evaluation done (after [`Observer::iteration`] of its iteration).
    fn evaluated(&mut self, _eval: &EvalRecord) {}

    /// A checkpoint and the outputs so far written.
    fn checkpointed(&mut self, _at: &Checkpointed<'_>) {}

    /// Writes files of its own beside the outputs, after each checkpoint and once at the end
    /// (`cptsim` draws its figures here); an error fails the run.
    fn write_extras(&mut self, _outputs: &Outputs<'_>) -> anyhow::Result<()> {
        Ok(())
    }

    /// Polled between iterations and between evaluation batches: `true` stops the run. A run
    /// writing into its output directory checkpoints the last whole iteration first (one whose
    /// evaluation was cut short runs again on resume); a run that would replace earlier outputs
    /// leaves them as they were.
    fn should_stop(&self) -> bool {
        false
    }
}

/// An observer that hears nothing and never stops the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Observer for Silent {}

/// The training-only wall and CPU time (evaluations excluded) of this invocation.
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    start: Instant,
    cpu_start: f64,
    first_iteration: u64,
    images: u64,
    eval_wall: f64,
    eval_cpu: f64,
}

impl Clock {
    /// A clock of a run starting (or resuming) at `first_iteration`.
    pub(crate) fn new(first_iteration: u64) -> Self {
        Self {
            start: Instant::now(),
            cpu_start: process_cpu_seconds(),
            first_iteration,
            images: 0,
            eval_wall: 0.0,
            eval_cpu: 0.0,
        }
    }

    /// Counts one iteration and returns the progress after it, of a run of `total`.
    pub(crate) fn step(&mut self, r: &StepReport, total: u64) -> Progress {
        self.images += r.samples as u64;
        self.eval_wall += r.eval_seconds.0;
        self.eval_cpu += r.eval_seconds.1;
        let done = r.iteration + 1 - self.first_iteration.min(r.iteration);
        let secs = self.seconds().max(1e-9);
        Progress {
            iteration: r.iteration + 1,
            iterations: total,
            images_per_s: self.images as f64 / self.train_seconds().max(1e-9),
            eta_seconds: secs / done as f64 * total.saturating_sub(r.iteration + 1) as f64,
        }
    }

    /// Wall seconds since the start of this invocation.
    pub(crate) fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Wall seconds spent training (evaluations excluded).
    pub(crate) fn train_seconds(&self) -> f64 {
        self.seconds() - self.eval_wall
    }

    /// CPU seconds spent training (evaluations excluded).
    pub(crate) fn train_cpu_seconds(&self) -> f64 {
        process_cpu_seconds() - self.cpu_start - self.eval_cpu
    }

    /// Images trained in this invocation.
    pub(crate) fn images(&self) -> u64 {
        self.images
    }
}
