//! The training loop of a [`Run`]: iterations until the end or `stop_at`, a checkpoint (with the
//! outputs so far) at every evaluation and every `checkpoint_minutes`, divergence and collapse
//! handling, the observer told of each step and asked whether to stop, and the summary at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use cptsim_models::ModelSummary;
use cptsim_nn::collapse::CollapseDetector;
use cptsim_nn::data::text::TextData;
use cptsim_nn::SimError;
use cptsim_traces::schedule::BitRange;
use cptsim_traces::Bits;

use super::error::{ErrorKind, RunError};
use super::observer::{Checkpointed, Clock, Notice, Observer, Outputs, Start};
use super::outputs::{self, Summary, CHECKPOINT};
use super::spike::LossRise;
use super::{saved, Inputs, Out, Run, RunResult};
use crate::checkpoint::{self, Checkpoint};
use crate::plan::TrainPlan;
use crate::{Policy, StepReport, Trainer};

/// A run in progress.
struct Driver<'a> {
    plan: &'a TrainPlan,
    tr: Trainer<'a>,
    model: &'a ModelSummary,
    text: Option<&'a TextData>,
    obs: &'a mut dyn Observer,
    out: Out,
    clock: Clock,
    collapse: CollapseDetector,
    /// Whether the run collapsed at some evaluation (warned once; summary `collapsed`).
    collapsed: bool,
    /// Watches the training loss for a climb far above its start.
    rise: LossRise,
    seconds_before: f64,
    iterations: u64,
    baseline: (BitRange, BitRange),
}

impl Run {
    /// Builds the trainer (restoring the checkpoint of a resumed run) and trains.
    pub(super) fn drive(self, obs: &mut dyn Observer) -> Result<RunResult, RunError> {
        let Run {
            plan,
            seconds_before,
            resume,
            model,
            net,
            policy,
            inputs,
            iterations,
            baseline,
            collapse,
            notices,
            out,
        } = self;
        for n in &notices {
            obs.notice(n);
        }
        let config = plan.train_config(iterations, baseline.0, baseline.1);
        let policy: Box<dyn Policy> = policy;
        let (tr, text) = match &inputs {
            Inputs::Images(d) => (Trainer::new(net, d, config, policy)?, None),
            Inputs::Text(t) => (Trainer::new_text(net, t, config, policy)?, Some(t)),
            Inputs::Tokens(t) => (Trainer::new_tokens(net, t, config, policy)?, None),
        };
        if let Some(a) = tr.adaptation().filter(|a| a.is_needed()) {
            obs.notice(&Notice::Note(a.describe()));
        }
        let mut driver = Driver {
            plan: &plan,
            tr,
            model: &model,
            text,
            obs,
            out,
            clock: Clock::new(0),
            collapse,
            collapsed: false,
            rise: LossRise::new(plan.lr),
            seconds_before,
            iterations,
            baseline,
        };
        if let Some(ck) = resume {
            driver.restore(ck)?;
        }
        driver.train()
    }
}

impl Driver<'_> {
    /// Continues from `ck`: the trainer's state, and the collapse detector fed the evaluations.
    fn restore(&mut self, ck: Checkpoint) -> Result<(), RunError> {
        ck.restore(&mut self.tr)
            .context("--resume")
            .map_err(RunError::from)?;
        let at = self.tr.state.iteration;
        self.obs.notice(&Notice::Note(format!(
            "resumed at iteration {at}/{}",
            self.iterations
        )));
        for e in &self.tr.state.evals {
            if self.collapse.observe(e.test_loss, e.test_acc).is_some() {
                self.collapsed = true;
            }
        }
        self.clock = Clock::new(at);
        Ok(())
    }

    fn train(mut self) -> Result<RunResult, RunError> {
        let stop = self
            .plan
            .stop_at
            .unwrap_or(self.iterations)
            .min(self.iterations);
        self.obs.started(&Start {
            iteration: self.tr.state.iteration,
            iterations: self.iterations,
            stop,
            resumed: self.tr.state.iteration > 0,
        });
        // Between evaluations, a checkpoint every `checkpoint_minutes` (not for a staged run,
        // whose outputs only count once it completes).
        let minutes = self.plan.checkpoint_minutes;
        let every = (minutes > 0.0 && !self.out.is_staged())
            .then(|| Duration::from_secs_f64(minutes * 60.0));
        self.finish_pending()?;
        let mut last_save = Instant::now();
        while self.tr.state.iteration < stop {
            if self.obs.should_stop() {
                return Err(self.interrupted());
            }
            let report = self.step()?;
            for note in &report.notes {
                self.obs.notice(&Notice::Warning(note.clone()));
            }
            if let Some(w) = self.rise.observe(report.iteration, report.loss) {
                self.obs.notice(&Notice::Warning(w));
            }
            let progress = self.clock.step(&report, self.iterations);
            self.obs.iteration(&report, &progress);
            if report.eval.is_none() && every.is_some_and(|d| last_save.elapsed() >= d) {
                self.save()?;
                last_save = Instant::now();
            }
            if let Some(e) = &report.eval {
                self.obs.evaluated(e);
                self.save()?;
                last_save = Instant::now();
                self.check_collapse(&report)?;
            }
        }
        if !self.tr.done() {
            self.save()?;
            let (at, dir) = (self.tr.state.iteration, self.out.shown());
            self.commit()?;
            self.obs.notice(&Notice::Note(format!(
                "stopped at iteration {stop}/{} (--stop-at); continue with --resume {dir}",
                self.iterations
            )));
            return Ok(self.result(None, at));
        }
        self.finish()
    }

    /// One iteration and its evaluation. A stop during the evaluation leaves it pending in the
    /// trainer's state: the checkpoint [`Driver::interrupted`] writes runs it first on resume.
    fn step(&mut self) -> Result<StepReport, RunError> {
        let obs = &*self.obs;
        match self.tr.step_until(&|| obs.should_stop()) {
            Ok(r) => Ok(r),
            Err(SimError::Interrupted { .. }) => Err(self.interrupted()),
            Err(e @ SimError::Diverged { .. }) => Err(self.diverged(e)),
            Err(e) => Err(e.into()),
        }
    }

    /// The evaluation a stop left pending in a resumed checkpoint, run before the next iteration
    /// as the uninterrupted run would have.
    fn finish_pending(&mut self) -> Result<(), RunError> {
        let obs = &*self.obs;
        match self.tr.finish_evaluation_until(&|| obs.should_stop()) {
            Ok(Some(e)) => {
                self.obs.evaluated(&e);
                self.save()?;
                if self.collapse.observe(e.test_loss, e.test_acc).is_some() {
                    self.collapsed = true;
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(SimError::Interrupted { .. }) => Err(self.interrupted()),
            Err(e) => Err(e.into()),
        }
    }

    /// What the checkpoint keeps besides the trainer: the plan and the training time so far.
    fn settings(&self) -> serde_json::Value {
        saved::settings(self.plan, self.seconds_before + self.clock.seconds())
    }

    /// Writes the checkpoint and the outputs so far (nothing without `out`).
    fn save(&mut self) -> Result<(), RunError> {
        let Some(dir) = self.out.work.clone() else {
            return Ok(());
        };
        self.write(&dir)
            .map_err(|e| RunError::from(e).relabel(|t| self.out.staged.unstage(t)))
    }

    fn write(&mut self, dir: &Path) -> anyhow::Result<()> {
        let settings = self.settings();
        checkpoint::save(&dir.join(CHECKPOINT), &mut self.tr, settings)?;
        let (iteration, batch) = (self.tr.state.iteration, self.plan.batch as u64);
        let rows = self.tr.rows();
        outputs::write_traces(dir, self.model, batch, iteration, &rows)?;
        self.tr
            .policy
            .write_artefacts(dir, iteration)
            .with_context(|| format!("--out {}", dir.display()))?;
        outputs::write_metrics(dir, &self.tr.state.evals)?;
        self.obs.write_extras(&Outputs {
            dir,
            trainer: &self.tr,
            model: self.model,
            batch,
            rows: &rows,
            summary: None,
        })?;
        self.obs.checkpointed(&Checkpointed { iteration, dir });
        Ok(())
    }

    fn commit(&mut self) -> Result<(), RunError> {
        let staged = std::mem::take(&mut self.out.staged);
        staged.commit().context("--out").map_err(RunError::from)
    }

    /// The observer stopped the run: a run writing in place checkpoints first.
    fn interrupted(&mut self) -> RunError {
        let (at, n, dir) = (self.tr.state.iteration, self.iterations, self.out.shown());
        if self.out.in_place() {
            if let Err(e) = self.save() {
                return e;
            }
            let during = match self.tr.state.pending {
                Some(_) => " during its evaluation",
                None => "",
            };
            return RunError::new(
                ErrorKind::Interrupted,
                format!(
                    "interrupted at iteration {at}/{n}{during}: checkpoint written; continue with \
                     --resume {dir}"
                ),
            );
        }
        let kept = match self.out.target.is_some() {
            true => format!("{dir} keeps its earlier outputs (this run's were discarded)"),
            false => "no --out, so no checkpoint".into(),
        };
        RunError::new(
            ErrorKind::Interrupted,
            format!("interrupted at iteration {at}/{n}: {kept}"),
        )
    }

    fn diverged(&self, e: SimError) -> RunError {
        let kept = match (&self.out.target, self.tr.state.evals.last()) {
            (Some(dir), _) if self.out.is_staged() => format!(
                "; {} keeps its earlier outputs (this run's were discarded)",
                dir.display()
            ),
            (Some(dir), Some(last)) => format!(
                "; the last good checkpoint (iteration {}) is {}",
                last.iteration,
                dir.join(CHECKPOINT).display()
            ),
            (Some(_), None) => "; no checkpoint was written yet".into(),
            (None, _) => "; no --out, so no checkpoint".into(),
        };
        RunError::new(
            ErrorKind::Diverged,
            format!("{e}: stopped{kept} (try a lower --lr or higher --bits)"),
        )
    }

    /// Warns once of a collapse to chance, or stops the run with `stop_on_collapse`.
    fn check_collapse(&mut self, report: &StepReport) -> Result<(), RunError> {
        let Some(e) = &report.eval else {
            return Ok(());
        };
        let Some(c) = self.collapse.observe(e.test_loss, e.test_acc) else {
            return Ok(());
        };
        if self.collapsed {
            return Ok(());
        }
        self.collapsed = true;
        if self.plan.stop_on_collapse {
            let kept = match self.out.is_staged() {
                true => "--out keeps its earlier outputs (this run's were discarded)",
                false => "outputs kept",
            };
            return Err(RunError::new(
                ErrorKind::Collapsed,
                format!(
                    "training collapsed at iteration {}: {c}; stopped (--stop-on-collapse), {kept}",
                    e.iteration
                ),
            ));
        }
        self.obs.notice(&Notice::Warning(format!(
            "training collapsed at iteration {}: {c}",
            e.iteration
        )));
        Ok(())
    }

    /// The summary of the finished run, written with the figures the observer adds.
    fn finish(mut self) -> Result<RunResult, RunError> {
        let summary = self.summary()?;
        if let Some(dir) = self.out.work.clone() {
            let rows = self.tr.rows();
            let written = outputs::write_summary(&dir, &summary).and_then(|()| {
                self.obs.write_extras(&Outputs {
                    dir: &dir,
                    trainer: &self.tr,
                    model: self.model,
                    batch: self.plan.batch as u64,
                    rows: &rows,
                    summary: Some(&summary),
                })
            });
            written.map_err(|e| RunError::from(e).relabel(|t| self.out.staged.unstage(t)))?;
        }
        self.commit()?;
        let at = self.tr.state.iteration;
        Ok(self.result(Some(summary), at))
    }

    fn summary(&mut self) -> Result<Summary, RunError> {
        let (fw, bw) = self.baseline;
        let rows = self.tr.rows();
        let baseline = Bits::forward_backward(fw.max, bw.max);
        let (gbitops, static_gbitops) = outputs::cost(self.model, &rows, baseline)?;
        let cpu = self.clock.train_cpu_seconds();
        let images = self.clock.images() as f64;
        let iterations = self.tr.state.iteration;
        let report = self.tr.policy.report(&mut self.tr.net, &rows, iterations);
        let (state, text) = (&self.tr.state, self.text);
        let last = state.evals.last();
        let best = state.best_eval();
        Ok(Summary {
            policy: self.plan.policy,
            target: report.target,
            achieved: report.achieved,
            ldp: report.layers,
            final_test_acc: last.map_or(0.0, |e| e.test_acc),
            best_test_acc: state.best_test_acc(),
            final_test_ppl: last.and_then(|e| e.test_ppl),
            best_test_ppl: best.and_then(|e| e.test_ppl),
            vocab: text.map(|t| t.corpus.vocab.len()),
            seq_len: text.map(|t| t.bptt),
            unigram_test_ppl: text.map(|t| {
                let c = &t.corpus;
                cptsim_nn::data::text::unigram_perplexity(&c.train, &c.test, c.vocab.len())
            }),
            arithmetic: self
                .plan
                .arith()
                .ok()
                .filter(|a| a.arithmetic == cptsim_nn::quant::arith::Arithmetic::Int)
                .map(|a| a.to_string()),
            accumulator: self
                .plan
                .arith()
                .ok()
                .filter(|a| a.arithmetic == cptsim_nn::quant::arith::Arithmetic::Int)
                .map(|a| a.forward.into()),
            eval_bits: self.plan.eval_bits,
            final_eval_bits: last.map(|e| [e.fw, e.bw]),
            best_eval_bits: best.map(|e| [e.fw, e.bw]),
            best_iteration: best.map(|e| e.iteration),
            collapsed: self.collapsed,
            gbitops,
            static_gbitops,
            iterations,
            seconds: self.seconds_before + self.clock.seconds(),
            images_per_s: images / self.clock.train_seconds().max(1e-9),
            cpu_seconds: cpu,
            images_per_cpu_s: images / cpu.max(1e-9),
            load_average: cptsim_kernels::cputime::load_average_1min(),
            prt_bits: report.prt_bits,
            prt_diverged_bits: report.prt_diverged,
            pfq_turns: report.turns,
        })
    }

    fn result(&self, summary: Option<Summary>, iteration: u64) -> RunResult {
        let (fw, bw) = self.baseline;
        RunResult {
            summary,
            iteration,
            iterations: self.iterations,
            evals: self.tr.state.evals.clone(),
            trace: self.tr.rows(),
            out: self.out.target.clone(),
            baseline: Bits::forward_backward(fw.max, bw.max),
        }
    }
}
