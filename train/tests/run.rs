//! A training run as a library call, in-process: `Run::new(&plan)?.execute(observer)` on a tiny
//! LeNet-5 run on synthetic data. The observer hears the start, every iteration, evaluation and
//! checkpoint; stopping it between iterations, or half-way through an evaluation, keeps a
//! checkpoint that resumes (`SavedRun`, `Run::resume`) to exactly the uninterrupted run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cptsim_train::run::{Checkpointed, Notice, Progress, Silent, Start};
use cptsim_train::{
    ErrorKind, EvalRecord, Observer, Run, RunResult, SavedRun, StepReport, TrainPlan,
};

/// When the observer asks the run to stop.
#[derive(Clone, Copy, Debug, PartialEq)]
enum StopAt {
    Never,
    /// Between iterations, once this many are done.
    After(u64),
    /// During the first evaluation (at its first batch).
    FirstEvaluation,
}

/// Records what the run says.
struct Recorder {
    stop: StopAt,
    started: Vec<(u64, u64)>,
    iterations: Vec<Progress>,
    evals: Vec<EvalRecord>,
    checkpoints: Vec<u64>,
    notices: Vec<Notice>,
    /// Polls since the last iteration report (the first is the one between iterations).
    polls: AtomicUsize,
    stopped: AtomicBool,
}

impl Recorder {
    fn new(stop: StopAt) -> Self {
        Self {
            stop,
            started: Vec::new(),
            iterations: Vec::new(),
            evals: Vec::new(),
            checkpoints: Vec::new(),
            notices: Vec::new(),
            polls: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
        }
    }
}

impl Observer for Recorder {
    fn started(&mut self, s: &Start) {
        self.started.push((s.iteration, s.iterations));
    }

    fn notice(&mut self, n: &Notice) {
        self.notices.push(n.clone());
    }

    fn iteration(&mut self, _step: &StepReport, p: &Progress) {
        self.iterations.push(*p);
        self.polls.store(0, Ordering::SeqCst);
    }

    fn evaluated(&mut self, e: &EvalRecord) {
        self.evals.push(e.clone());
    }

    fn checkpointed(&mut self, at: &Checkpointed<'_>) {
        assert!(at.dir.join("checkpoint.bin").is_file());
        self.checkpoints.push(at.iteration);
    }

    fn should_stop(&self) -> bool {
        let polls = self.polls.fetch_add(1, Ordering::SeqCst);
        let done = self.iterations.last().map_or(0, |p| p.iteration);
        let stop = match self.stop {
            StopAt::Never => false,
            StopAt::After(n) => done >= n,
            // A poll after the one between iterations is one between evaluation batches.
            StopAt::FirstEvaluation => polls >= 1 && self.evals.is_empty(),
        };
        if stop {
            self.stopped.store(true, Ordering::SeqCst);
        }
        stop
    }
}

fn plan(out: &std::path::Path) -> TrainPlan {
    TrainPlan {
        model: "zoo:lenet5".into(),
        data: "synthetic".into(),
        schedule: "cosine".into(),
        cycles: 2,
        iters: Some(12),
        eval_every: 4,
        batch: 16,
        seed: 3,
        out: Some(out.to_path_buf()),
        ..TrainPlan::default()
    }
}

/// The uninterrupted run's result.
fn uninterrupted() -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(&plan(dir.path())).unwrap();
    run.execute(&mut Silent).unwrap()
}

/// Resumes the run in `dir` to its end.
fn resume(dir: &std::path::Path, expect_at: u64) -> (RunResult, Recorder) {
    let saved = SavedRun::open(dir).unwrap();
    assert_eq!(saved.iteration(), expect_at);
    let mut rec = Recorder::new(StopAt::Never);
    let result = Run::resume(saved).unwrap().execute(&mut rec).unwrap();
    (result, rec)
}

#[test]
fn an_observer_hears_the_run_and_a_stop_keeps_a_checkpoint_that_resumes_exactly() {
    let full = uninterrupted();
    assert_eq!(full.evals.len(), 3);
    let summary = full.summary.as_ref().unwrap();
    assert_eq!(summary.iterations, 12);

    let dir = tempfile::tempdir().unwrap();
    let run = Run::new(&plan(dir.path())).unwrap();
    assert!(run.checkpoints_on_stop());
    assert_eq!(run.iterations(), 12);
    let mut rec = Recorder::new(StopAt::After(6));
    let e = run.execute(&mut rec).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Interrupted, "{e}");
    assert!(
        e.to_string().contains("interrupted at iteration 6/12"),
        "{e}"
    );
    // Progress, evaluations and checkpoints reached the observer.
    assert_eq!(rec.started, [(0, 12)]);
    let seen: Vec<u64> = rec.iterations.iter().map(|p| p.iteration).collect();
    assert_eq!(seen, (1..=6).collect::<Vec<_>>());
    assert!(rec.iterations.iter().all(|p| p.iterations == 12));
    assert_eq!(rec.evals, full.evals[..1]);
    assert_eq!(rec.checkpoints, [4, 6], "at the evaluation and at the stop");
    assert!(dir.path().join("metrics.csv").is_file());
    assert!(!dir.path().join("summary.json").exists());

    let (resumed, rec) = resume(dir.path(), 6);
    assert!(rec
        .notices
        .contains(&Notice::Note("resumed at iteration 6/12".into())));
    assert_eq!(rec.started, [(6, 12)]);
    assert_eq!(resumed.evals, full.evals);
    assert_eq!(resumed.trace, full.trace);
    let s = resumed.summary.unwrap();
    assert_eq!(
        (s.final_test_acc, s.gbitops),
        (summary.final_test_acc, summary.gbitops)
    );
    assert!(dir.path().join("summary.json").is_file());
}

#[test]
fn a_stop_during_an_evaluation_checkpoints_it_pending_and_the_resumed_run_evaluates_first() {
    let full = uninterrupted();
    let dir = tempfile::tempdir().unwrap();
    let mut rec = Recorder::new(StopAt::FirstEvaluation);
    let e = Run::new(&plan(dir.path()))
        .unwrap()
        .execute(&mut rec)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Interrupted, "{e}");
    assert!(rec.stopped.load(Ordering::SeqCst));
    // The evaluation after iteration 4 was cut short: the checkpoint is of iteration 4 with that
    // evaluation pending, and no evaluation was reported; the resumed run evaluates first.
    assert!(
        e.to_string()
            .contains("interrupted at iteration 4/12 during its evaluation"),
        "{e}"
    );
    assert!(rec.evals.is_empty());
    assert_eq!(rec.checkpoints, [4]);
    let (resumed, _) = resume(dir.path(), 4);
    assert_eq!(resumed.evals, full.evals);
    assert_eq!(resumed.trace, full.trace);
}

#[test]
fn a_bad_plan_is_an_error_naming_its_key_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let bad = TrainPlan {
        cycles: 40,
        ..plan(&out)
    };
    let e = Run::new(&bad).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Usage);
    assert!(e.to_string().contains("--cycles"), "{e}");
    assert!(!out.exists());
    let missing = TrainPlan {
        data: "mnist:/nonexistent/mnist".into(),
        ..plan(&out)
    };
    let e = Run::new(&missing).err().unwrap();
    assert!(e.to_string().contains("/nonexistent/mnist"), "{e}");
}
