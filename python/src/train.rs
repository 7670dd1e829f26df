//! `train`: a training run of the train crate ([`Run`]) from a plan, its progress handed to a
//! Python hook after every iteration. The run trains on a thread of its own with the interpreter
//! released; the calling thread polls for signals, so that Ctrl-C stops the run as it stops
//! `cptsim train` (a checkpoint of the iteration reached written when the plan has an `out`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use cptsim_train::run::{Notice, Outputs, Progress};
use cptsim_train::{
    ErrorKind, EvalRecord, Observer, Run, RunError, SavedRun, StepReport, TrainPlan,
};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyBool;
use serde_json::json;

use crate::errors::{chain, Failure, Kind};
use crate::trace::{from_row, Row};

/// Stack of the thread a run trains on: a main thread's default size, as the program's.
const STACK: usize = 8 << 20;

/// How often the calling thread looks for signals while the run trains.
const POLL: Duration = Duration::from_millis(50);

/// Trains the plan in `text` (`format` `json` or `toml`, `source` naming it), or continues the
/// run checkpointed in `resume` (`text` then holding only invocation keys), calling `hook` with
/// each iteration's progress; returns the run as JSON and its trace rows (none when the run was
/// stopped before its end without an `out` to checkpoint into).
#[pyfunction]
#[pyo3(signature = (text, format, source, hook=None, resume=None))]
pub fn train_json(
    py: Python<'_>,
    text: &str,
    format: &str,
    source: &str,
    hook: Option<Py<PyAny>>,
    resume: Option<PathBuf>,
) -> PyResult<(String, Option<Vec<Row>>)> {
    let run = match resume {
        None => {
            let plan = crate::plan::parse(text, format, source)?;
            py.detach(|| Run::new(&plan))
        }
        Some(dir) => {
            let request = crate::plan::parse_resumed(text, format, source)?;
            py.detach(|| resumed(&dir, request))
        }
    }
    .map_err(failure)?;
    let model = run.model().clone();
    let plan = run.plan().clone();
    let stop = AtomicBool::new(false);
    let gate = Gate::default();
    let mut obs = Hooked {
        hook: hook.as_ref(),
        stop: &stop,
        gate: &gate,
        error: None,
        notices: Vec::new(),
        evals: Vec::new(),
        rows: None,
        iterations: None,
        done: 0,
    };
    let mut interrupt = None;
    let outcome = std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("cptsim-train".into())
            .stack_size(STACK)
            .spawn_scoped(s, || run.execute(&mut obs))
            .map_err(|e| Failure {
                kind: Kind::Runtime,
                message: format!("starting the training thread: {e}"),
            })?;
        while !worker.is_finished() {
            py.detach(|| gate.wait_for_call(POLL));
            if let Err(e) = py.check_signals() {
                interrupt.get_or_insert(e);
                stop.store(true, Ordering::SeqCst);
            }
            gate.checked();
        }
        worker.join().map_err(|_| Failure {
            kind: Kind::Runtime,
            message: "the training thread failed".into(),
        })
    })?;
    if let Some(e) = obs.error.take() {
        return Err(e);
    }
    let (result, stopped) = match (outcome, interrupt) {
        // Ctrl-C: KeyboardInterrupt saying where the checkpoint is; another signal handler's
        // exception as it raised it.
        (Err(e), Some(signal)) if e.kind() == ErrorKind::Interrupted => {
            return Err(match signal.is_instance_of::<PyKeyboardInterrupt>(py) {
                true => PyKeyboardInterrupt::new_err(chain(&e)),
                false => signal,
            });
        }
        // A signal that came as the run finished (its outputs complete) is raised all the same.
        (_, Some(signal)) => return Err(signal),
        (Ok(r), None) => (Some(r), None),
        (Err(e), None) if e.kind() == ErrorKind::Interrupted => (None, Some(chain(&e))),
        (Err(e), None) => return Err(failure(e)),
    };
    let rows: Option<Vec<Row>> = match &result {
        Some(r) => Some(r.trace.iter().map(from_row).collect()),
        None => obs.rows.take(),
    };
    let doc = json!({
        "plan": plan.to_json(),
        "model_name": model.name,
        "layer_names": model.layers.iter().map(|l| l.name.clone()).collect::<Vec<_>>(),
        "batch": plan.batch,
        "iterations": run_length(&result, &obs, &plan),
        "iteration": result.as_ref().map_or(obs.last_iteration(), |r| r.iteration),
        "summary": result.as_ref().and_then(|r| r.summary.clone()),
        "evals": result.as_ref().map_or(&obs.evals, |r| &r.evals),
        "out": plan.out,
        "stopped": stopped,
        "notices": obs.notices,
    });
    let text = serde_json::to_string(&doc).map_err(|e| Failure::of("train", &e))?;
    Ok((text, rows))
}

/// The run checkpointed in `dir`, with the invocation keys of `request`.
fn resumed(dir: &Path, request: TrainPlan) -> Result<Run, RunError> {
    let mut saved = SavedRun::open(dir)?;
    saved.plan.out = request.out;
    saved.plan.stop_at = request.stop_at;
    saved.plan.checkpoint_minutes = request.checkpoint_minutes;
    saved.plan.threads = request.threads;
    Run::resume(saved)
}

/// Iterations of the whole run.
fn run_length(
    result: &Option<cptsim_train::RunResult>,
    obs: &Hooked<'_>,
    plan: &TrainPlan,
) -> Option<u64> {
    match result {
        Some(r) => Some(r.iterations),
        None => obs.iterations.or(plan.fixed_iterations()),
    }
}

/// A run's failure as the exception of its class.
fn failure(e: RunError) -> PyErr {
    let kind = match e.kind() {
        ErrorKind::Usage => Kind::Usage,
        ErrorKind::BadInput => Kind::BadInput,
        ErrorKind::Diverged => Kind::Diverged,
        ErrorKind::Collapsed => Kind::Collapsed,
        ErrorKind::Runtime | ErrorKind::Interrupted | ErrorKind::PipeClosed => Kind::Runtime,
    };
    Failure {
        kind,
        message: chain(&e),
    }
    .into()
}

/// Where the training thread, after each call of the hook, waits for the calling thread to have
/// looked for signals: a signal the hook raised (`os.kill`, or Ctrl-C while it ran) stops the run
/// before its next iteration however fast the iterations are, instead of at the next poll.
#[derive(Default)]
struct Gate {
    /// Hook calls made, and calls after which the signals were looked at.
    counts: Mutex<(u64, u64)>,
    changed: Condvar,
}

impl Gate {
    /// The calling thread: waits until a hook call is waiting or `timeout` has passed.
    fn wait_for_call(&self, timeout: Duration) {
        let Ok(counts) = self.counts.lock() else {
            return;
        };
        if counts.0 == counts.1 {
            let _ = self.changed.wait_timeout(counts, timeout);
        }
    }

    /// The calling thread: the signals were looked at after every hook call so far.
    fn checked(&self) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.1 = counts.0;
            self.changed.notify_all();
        }
    }

    /// The training thread, after a hook call: waits until the signals were looked at.
    fn called(&self) {
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        counts.0 += 1;
        let call = counts.0;
        self.changed.notify_all();
        while counts.1 < call {
            match self.changed.wait(counts) {
                Ok(c) => counts = c,
                Err(_) => return,
            }
        }
    }
}

/// The observer: hands each iteration to the hook, keeps the notices and evaluations, and stops
/// the run when the hook returns `False` or raises, or a signal arrived.
struct Hooked<'a> {
    hook: Option<&'a Py<PyAny>>,
    stop: &'a AtomicBool,
    gate: &'a Gate,
    /// What the hook raised.
    error: Option<PyErr>,
    notices: Vec<String>,
    evals: Vec<EvalRecord>,
    /// The trace at the last checkpoint.
    rows: Option<Vec<Row>>,
    /// Iterations of the whole run and the last done, as the progress said.
    iterations: Option<u64>,
    done: u64,
}

impl Hooked<'_> {
    fn last_iteration(&self) -> u64 {
        self.done
    }

    fn call(&mut self, step: &StepReport, p: &Progress) {
        let Some(hook) = self.hook else {
            return;
        };
        let outcome = Python::attach(|py| -> PyResult<bool> {
            let eval = step.eval.as_ref().map(eval_tuple);
            let args = (
                p.iteration,
                p.iterations,
                step.loss,
                step.train_acc,
                step.precision.fw,
                step.precision.bw,
                p.images_per_s,
                p.eta_seconds,
                eval,
            );
            let answer = hook.call1(py, args)?;
            let answer = answer.bind(py);
            Ok(answer.is_instance_of::<PyBool>() && !answer.extract::<bool>()?)
        });
        self.gate.called();
        match outcome {
            Ok(false) => {}
            Ok(true) => self.stop.store(true, Ordering::SeqCst),
            Err(e) => {
                self.error = Some(e);
                self.stop.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// An evaluation as the hook receives it: iteration, train loss and accuracy, test loss and
/// accuracy, validation accuracy.
fn eval_tuple(e: &EvalRecord) -> (u64, f64, f64, f64, f64, Option<f64>) {
    (
        e.iteration,
        e.train_loss,
        e.train_acc,
        e.test_loss,
        e.test_acc,
        e.val_acc,
    )
}

impl Observer for Hooked<'_> {
    fn notice(&mut self, notice: &Notice) {
        self.notices.push(notice.to_string());
    }

    fn iteration(&mut self, step: &StepReport, progress: &Progress) {
        self.iterations = Some(progress.iterations);
        self.done = progress.iteration;
        if !self.stop.load(Ordering::SeqCst) {
            self.call(step, progress);
        }
    }

    fn evaluated(&mut self, eval: &EvalRecord) {
        if self
            .evals
            .last()
            .is_none_or(|e| e.iteration < eval.iteration)
        {
            self.evals.push(eval.clone());
        }
    }

    fn write_extras(&mut self, o: &Outputs<'_>) -> anyhow::Result<()> {
        self.rows = Some(o.rows.iter().map(from_row).collect());
        // Every evaluation so far, those of the invocations before a resume too.
        self.evals.clone_from(&o.trainer.state.evals);
        Ok(())
    }

    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}
