//! The training loop: per iteration the precision policy picks the bits, the layer-role rules
//! map them onto each quantizable layer, then forward, backward and an SGD step run; the trace is
//! recorded run-length encoded, the test set is evaluated every `eval_every` iterations (at the
//! bits of the last training iteration, spec §1.5), and a NaN or exploding loss stops the run.

use std::any::Any;

use cptsim_traces::schedule::Precision;
use cptsim_traces::TraceRow;
use serde::{Deserialize, Serialize};

pub use super::feed::TrainData;
use super::feed::{logits_rows, rows_back, Feed};
use super::net::TrainNet;
use super::policy::{apply_uniform, Policy};
use super::recorder::Recorder;
use super::snapshot::{all_params, Snapshot};
use cptsim_kernels::cputime::process_cpu_seconds;
use cptsim_nn::data::text::{Streams, TextData};
use cptsim_nn::data::{eval_batches, Adaptation, Dataset, Loader};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Mode, Param, SoftmaxCrossEntropy};
use cptsim_nn::optim::{LrPolicy, Sgd};

/// Settings of a run (everything but the network, data and precision policy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Iterations of the whole run.
    pub iterations: u64,
    /// Samples per iteration.
    pub batch: usize,
    /// Learning rate and its schedule.
    pub lr: LrPolicy,
    /// SGD momentum.
    pub momentum: f32,
    /// Weight decay (every parameter, as the reference code).
    pub weight_decay: f32,
    /// Seed of the data order and augmentation.
    pub seed: u64,
    /// Evaluate (and call the policy's check point) every this many iterations, and at the end.
    pub eval_every: u64,
    /// Call the PFQ/FracTrain indicator's check point every this many iterations instead of at
    /// the evaluations (which is what the reference code does, at its 390–400 iterations).
    #[serde(default)]
    pub check_every: Option<u64>,
    /// Images per evaluation batch.
    pub eval_batch: usize,
    /// Random crop and flip when the dataset asks for it.
    pub augment: bool,
    /// A loss above this (or NaN) stops the run.
    pub max_loss: f32,
    /// False runs every layer in fp32 (`--quantizer none`).
    pub quantize: bool,
    /// The precision evaluations run at.
    #[serde(default)]
    pub eval_bits: EvalBits,
    /// Clip the global L2 norm of the gradients to this before each step (`--clip-grad`).
    #[serde(default)]
    pub clip_grad: Option<f32>,
}

/// The precision of an evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvalBits {
    /// The bits the policy set for the iteration the evaluation follows (the papers' practice).
    #[default]
    Current,
    /// Every in-scope layer at this forward/backward precision (`--eval-bits max`).
    Fixed {
        /// Forward bits.
        fw: u8,
        /// Backward bits.
        bw: u8,
    },
    /// Every layer in fp32; recorded as 0/0 bits, the traces' fp32 code.
    Fp32,
}

impl TrainConfig {
    /// The paper's optimiser (momentum 0.9, weight decay 1e-4) at a constant rate `lr`, evaluating
    /// every 390 iterations, batch 128.
    pub fn new(iterations: u64, lr: f32) -> Self {
        Self {
            iterations,
            batch: 128,
            lr: LrPolicy {
                base_lr: lr,
                schedule: cptsim_nn::optim::LrSchedule::Constant,
                warmup: 0,
            },
            momentum: 0.9,
            weight_decay: 1e-4,
            seed: 0,
            eval_every: 390,
            check_every: None,
            eval_batch: 500,
            augment: true,
            max_loss: 1e3,
            quantize: true,
            eval_bits: EvalBits::Current,
            clip_grad: None,
        }
    }
}

/// One evaluation: training statistics since the previous one and test (and validation) results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    /// Iterations done.
    pub iteration: u64,
    /// Mean training loss since the previous evaluation.
    pub train_loss: f64,
    /// Training accuracy since the previous evaluation (fraction).
    pub train_acc: f64,
    /// Test loss.
    pub test_loss: f64,
    /// Test accuracy (fraction).
    pub test_acc: f64,
    /// Validation accuracy, with `--val-split` (a corpus: its validation split).
    pub val_acc: Option<f64>,
    /// Test perplexity `exp(test_loss)`, for a language model (`test_acc` is then the
    /// next-token accuracy and `test_loss` the mean per token).
    #[serde(default)]
    pub test_ppl: Option<f64>,
    /// Validation perplexity, for a language model.
    #[serde(default)]
    pub val_ppl: Option<f64>,
    /// Forward bits of the last iteration (those evaluated at).
    pub fw: u8,
    /// Backward bits of the last iteration.
    pub bw: u8,
    /// Learning rate of the last iteration.
    pub lr: f32,
}

/// The resumable progress of a run (with the network, optimiser and policy state).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// Iterations done.
    pub iteration: u64,
    /// The trace so far.
    pub recorder: Recorder,
    /// Every evaluation so far.
    pub evals: Vec<EvalRecord>,
    /// Images trained on.
    pub images: u64,
    loss_sum: f64,
    correct: u64,
    seen: u64,
    steps: u64,
    /// The evaluation due after the last iteration, when a stop cut it short: it runs first
    /// when the run resumes ([`Trainer::finish_evaluation`]).
    #[serde(default)]
    pub pending: Option<PendingEval>,
}

/// An evaluation that was due but interrupted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingEval {
    /// Forward and backward bits of the iteration it follows.
    pub fw: u8,
    /// See `fw`.
    pub bw: u8,
    /// Learning rate of that iteration.
    pub lr: f32,
    /// Whether the policy's check point follows it.
    pub check: bool,
}

impl RunState {
    /// Best test accuracy over the evaluations (0 before the first).
    pub fn best_test_acc(&self) -> f64 {
        self.best_eval().map_or(0.0, |e| e.test_acc)
    }

    /// The first evaluation with the best test accuracy (a language model: the lowest test
    /// perplexity).
    pub fn best_eval(&self) -> Option<&EvalRecord> {
        self.evals.iter().reduce(|best, e| {
            let better = match (e.test_ppl, best.test_ppl) {
                (Some(p), Some(q)) => p < q,
                _ => e.test_acc > best.test_acc,
            };
            if better {
                e
            } else {
                best
            }
        })
    }
}

/// What one iteration did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// The 0-based iteration.
    pub iteration: u64,
    /// Minibatch loss.
    pub loss: f32,
    /// Minibatch accuracy (fraction).
    pub train_acc: f64,
    /// The policy's precision.
    pub precision: Precision,
    /// Images in the batch.
    pub samples: usize,
    /// The evaluation run after this iteration, if any.
    pub eval: Option<EvalRecord>,
    /// Wall and CPU seconds the evaluation took (0 without one), to tell training throughput apart.
    pub eval_seconds: (f64, f64),
    /// What the policy did about divergences absorbed on the way to this iteration
    /// ([`Policy::diverged`]), oldest first.
    pub notes: Vec<String>,
}

/// A training run in progress.
pub struct Trainer<'a> {
    /// The network.
    pub net: TrainNet,
    /// Settings.
    pub config: TrainConfig,
    /// Precision policy with its state.
    pub policy: Box<dyn Policy>,
    /// Optimiser with its velocities.
    pub opt: Sgd,
    /// Progress.
    pub state: RunState,
    feed: Feed<'a>,
    loss: SoftmaxCrossEntropy,
    /// The policy's last recovery point ([`Policy::recovery_point`]).
    snapshot: Option<Snapshot>,
    /// Images per forward of an evaluation batch under a stop hook ([`Trainer::eval_forward`]).
    eval_rows: Slicer,
}

/// A hook polled during an evaluation: true stops it ([`Trainer::step_until`]).
type Stop<'s> = Option<&'s dyn Fn() -> bool>;

impl<'a> Trainer<'a> {
    /// A run at iteration 0.
    pub fn new(
        net: TrainNet,
        data: &'a TrainData,
        config: TrainConfig,
        policy: Box<dyn Policy>,
    ) -> Result<Self> {
        for (what, d) in [("training set", &data.train), ("test set", &data.test)] {
            if d.classes > net.classes {
                return Err(SimError::invalid(
                    what,
                    format!(
                        "{} has {} classes but the model outputs {}",
                        d.name, d.classes, net.classes
                    ),
                ));
            }
        }
        let augment = config.augment && data.train.augment;
        let loader = Loader::new(&data.train, config.batch, net.input, augment, config.seed)?;
        Adaptation::new(data.test.shape, net.input)?;
        Self::with_feed(net, config, policy, Feed::Images { data, loader })
    }

    /// A language-model run at iteration 0 on `data`, whose streams and windows must fit the
    /// model's token input and whose vocabulary its head.
    pub fn new_text(
        net: TrainNet,
        data: &'a TextData,
        config: TrainConfig,
        policy: Box<dyn Policy>,
    ) -> Result<Self> {
        let source = &data.corpus.source;
        let Some((layout, shape)) = net.tokens.clone() else {
            return Err(SimError::invalid(
                source,
                "the model takes no token ids (a text corpus trains a language model)",
            ));
        };
        if layout != data.layout {
            return Err(SimError::invalid(
                source,
                format!(
                    "streams laid out {:?}, the model reads {layout:?}",
                    data.layout
                ),
            ));
        }
        let probe = data.batch(&data.train, 0)?;
        if probe.ids.shape() != shape.as_slice() {
            return Err(SimError::invalid(
                source,
                format!(
                    "windows of {} tokens × {} streams are ids {:?}; the model takes {shape:?}",
                    data.bptt,
                    data.train.batch,
                    probe.ids.shape()
                ),
            ));
        }
        if data.corpus.vocab.len() > net.classes {
            return Err(SimError::invalid(
                source,
                format!(
                    "{} distinct tokens but the model predicts {}",
                    data.corpus.vocab.len(),
                    net.classes
                ),
            ));
        }
        Self::with_feed(net, config, policy, Feed::Text { data, next: 0 })
    }

    fn with_feed(
        net: TrainNet,
        config: TrainConfig,
        policy: Box<dyn Policy>,
        feed: Feed<'a>,
    ) -> Result<Self> {
        if config.iterations == 0 || config.eval_every == 0 || config.eval_batch == 0 {
            return Err(SimError::invalid(
                "training settings",
                format!(
                    "iterations {}, eval interval {} and eval batch {} must be positive",
                    config.iterations, config.eval_every, config.eval_batch
                ),
            ));
        }
        let opt = Sgd::new(config.momentum, config.weight_decay);
        Ok(Self {
            net,
            config,
            policy,
            opt,
            state: RunState::default(),
            feed,
            loss: SoftmaxCrossEntropy::new(),
            snapshot: None,
            eval_rows: Slicer::default(),
        })
    }

    fn interrupted(&self, stop: Stop<'_>) -> Result<()> {
        match stop {
            Some(requested) if requested() => Err(SimError::Interrupted {
                iteration: self.state.iteration,
            }),
            _ => Ok(()),
        }
    }

    /// Runs the evaluation an interrupt left pending (and the policy's check point after it),
    /// as the uninterrupted run did; `None` when none is pending.
    pub fn finish_evaluation(&mut self) -> Result<Option<EvalRecord>> {
        self.finish_evaluation_with(None)
    }

    /// [`Trainer::finish_evaluation`] polling `stop` as [`Trainer::step_until`] does.
    pub fn finish_evaluation_until(
        &mut self,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<EvalRecord>> {
        self.finish_evaluation_with(Some(stop))
    }

    fn finish_evaluation_with(&mut self, stop: Stop<'_>) -> Result<Option<EvalRecord>> {
        let Some(p) = self.state.pending.clone() else {
            return Ok(None);
        };
        let e = self.evaluation(Precision { fw: p.fw, bw: p.bw }, p.lr, stop)?;
        self.state.pending = None;
        if p.check {
            self.policy.check(self.state.iteration.saturating_sub(1));
        }
        Ok(Some(e))
    }

    /// The policy as its concrete type `P`, if it is one.
    pub fn policy_as<P: Policy>(&self) -> Option<&P> {
        let any: &dyn Any = self.policy.as_ref();
        any.downcast_ref()
    }

    /// Mutable [`Trainer::policy_as`].
    pub fn policy_as_mut<P: Policy>(&mut self) -> Option<&mut P> {
        let any: &mut dyn Any = self.policy.as_mut();
        any.downcast_mut()
    }

    /// The network's parameters followed by the policy's (the optimiser's order).
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        all_params(&mut self.net, self.policy.as_mut())
    }

    /// A copy of the values of [`Trainer::params_mut`].
    pub fn param_values(&mut self) -> Vec<cptsim_nn::layers::Tensor> {
        self.params_mut().iter().map(|p| p.value.clone()).collect()
    }

    /// How the dataset's images are fitted to the model input (`None` for text).
    pub fn adaptation(&self) -> Option<Adaptation> {
        match &self.feed {
            Feed::Images { loader, .. } => Some(*loader.adaptation()),
            Feed::Text { .. } | Feed::Tokens { .. } => None,
        }
    }

    /// True when every iteration has run.
    pub fn done(&self) -> bool {
        self.state.iteration >= self.config.iterations
    }

    /// The trace so far.
    pub fn rows(&self) -> Vec<TraceRow> {
        self.state.recorder.rows()
    }

    /// Runs one iteration (and the evaluation due after it).
    pub fn step(&mut self) -> Result<StepReport> {
        self.step_with(None)
    }

    /// [`Trainer::step`], polling `stop` during the evaluation: once it returns true the
    /// evaluation stops with [`SimError::Interrupted`], the iteration's training done and the
    /// evaluation left pending ([`RunState::pending`]) for [`Trainer::finish_evaluation`]. Under
    /// a stop hook the evaluation runs in pieces of about half a second, so a stop is honoured
    /// within seconds on any model.
    pub fn step_until(&mut self, stop: &dyn Fn() -> bool) -> Result<StepReport> {
        self.step_with(Some(stop))
    }

    fn step_with(&mut self, stop: Stop<'_>) -> Result<StepReport> {
        let t = self.state.iteration;
        if self.done() {
            return Err(SimError::invalid(
                "iteration",
                format!(
                    "the run already did its {} iterations",
                    self.config.iterations
                ),
            ));
        }
        if self.policy.recovery_point(t) {
            let snap = Snapshot::take(t, &mut self.net, self.policy.as_mut(), &self.opt);
            self.snapshot = Some(snap);
        }
        let planned = self.policy.precision(t);
        let bits = self.policy.apply(t, &mut self.net, self.config.quantize)?;
        let batch = self.feed.next_batch()?;
        let samples = batch.samples;
        let rows = batch.targets.len();
        let out = self
            .policy
            .forward(&mut self.net, batch.input, Mode::Train)?;
        let (out, out_shape) = logits_rows(out)?;
        let (loss, correct) = self.loss.forward(&out, &batch.targets)?;
        if !loss.is_finite() || loss > self.config.max_loss {
            if let Some(snap) = &self.snapshot {
                if let Some(note) = self.policy.diverged(t, loss)? {
                    snap.restore(&mut self.net, self.policy.as_mut(), &mut self.opt);
                    // iteration t runs again on the same batch, so the data stream stays where
                    // a resumed run puts it
                    self.feed.seek(t);
                    let note = format!(
                        "{note} (restored the state before iteration {})",
                        snap.iteration
                    );
                    let mut report = self.step_with(stop)?;
                    report.notes.insert(0, note);
                    return Ok(report);
                }
            }
            return Err(SimError::Diverged {
                iteration: t,
                loss,
                fw: planned.fw,
                bw: planned.bw,
            });
        }
        let grad = rows_back(self.loss.backward()?, &out_shape)?;
        self.policy.backward(&mut self.net, grad)?;
        let lr = self.config.lr.lr_at(t);
        let mut params = all_params(&mut self.net, self.policy.as_mut());
        if let Some(max) = self.config.clip_grad {
            cptsim_nn::optim::clip_grad_norm(&mut params, max);
        }
        self.opt.step(&mut params, lr)?;
        let precision = self
            .policy
            .record(t, &bits, samples as u64, &mut self.state.recorder);
        let train_acc = correct as f64 / rows.max(1) as f64;
        self.policy.observe(loss, train_acc)?;
        let s = &mut self.state;
        s.iteration = t + 1;
        s.images += samples as u64;
        s.loss_sum += f64::from(loss);
        s.correct += correct as u64;
        s.seen += rows as u64;
        s.steps += 1;
        let mut eval_seconds = (0.0, 0.0);
        let evaluate = self.state.iteration.is_multiple_of(self.config.eval_every) || self.done();
        let check = match self.config.check_every {
            Some(n) => self.state.iteration.is_multiple_of(n),
            None => evaluate,
        };
        let eval = if evaluate {
            let (wall, cpu) = (std::time::Instant::now(), process_cpu_seconds());
            self.state.pending = Some(PendingEval {
                fw: precision.fw,
                bw: precision.bw,
                lr,
                check,
            });
            let e = self.evaluation(precision, lr, stop)?;
            self.state.pending = None;
            eval_seconds = (wall.elapsed().as_secs_f64(), process_cpu_seconds() - cpu);
            Some(e)
        } else {
            None
        };
        if check {
            self.policy.check(t);
        }
        Ok(StepReport {
            iteration: t,
            loss,
            train_acc,
            precision,
            samples,
            eval,
            eval_seconds,
            notes: Vec::new(),
        })
    }

    fn evaluation(&mut self, p: Precision, lr: f32, stop: Stop<'_>) -> Result<EvalRecord> {
        // The next step's `Policy::apply` sets the training bits again.
        let p = match self.config.eval_bits {
            EvalBits::Current => p,
            EvalBits::Fixed { fw, bw } => {
                let fixed = Precision { fw, bw };
                apply_uniform(&mut self.net, fixed, self.config.quantize)?;
                fixed
            }
            EvalBits::Fp32 => {
                apply_uniform(&mut self.net, p, false)?;
                Precision { fw: 0, bw: 0 }
            }
        };
        let (test_loss, test_acc, val_acc, test_ppl, val_ppl) = match self.feed {
            Feed::Images { data, .. } => {
                let (test_loss, test_acc) = self.evaluate_with(&data.test, stop)?;
                let val_acc = match &data.val {
                    Some(v) => Some(self.evaluate_with(v, stop)?.1),
                    None => None,
                };
                (test_loss, test_acc, val_acc, None, None)
            }
            Feed::Text { data, .. } => {
                let (test_loss, test_acc) = self.evaluate_text_with(data, &data.test, stop)?;
                let (val_loss, val_acc) = self.evaluate_text_with(data, &data.valid, stop)?;
                let ppl = |l: f64| l.exp();
                (
                    test_loss,
                    test_acc,
                    Some(val_acc),
                    Some(ppl(test_loss)),
                    Some(ppl(val_loss)),
                )
            }
            Feed::Tokens { data, .. } => {
                let (test_loss, test_acc) = self.evaluate_tokens_with(data, &data.test, stop)?;
                (test_loss, test_acc, None, None, None)
            }
        };
        self.interrupted(stop)?;
        let s = &mut self.state;
        let rec = EvalRecord {
            iteration: s.iteration,
            train_loss: s.loss_sum / s.steps.max(1) as f64,
            train_acc: s.correct as f64 / s.seen.max(1) as f64,
            test_loss,
            test_acc,
            val_acc,
            test_ppl,
            val_ppl,
            fw: p.fw,
            bw: p.bw,
            lr,
        };
        (s.loss_sum, s.correct, s.seen, s.steps) = (0.0, 0, 0, 0);
        s.evals.push(rec.clone());
        Ok(rec)
    }

    /// Mean loss and accuracy on `data` in evaluation mode at the current bits.
    pub fn evaluate(&mut self, data: &Dataset) -> Result<(f64, f64)> {
        self.evaluate_with(data, None)
    }

    fn evaluate_with(&mut self, data: &Dataset, stop: Stop<'_>) -> Result<(f64, f64)> {
        let (mut loss, mut correct) = (0.0f64, 0usize);
        let chunk = self.config.eval_batch;
        let mut start = 0;
        while start < data.len() {
            let end = (start + chunk).min(data.len());
            let part = data.select(&(start..end).collect::<Vec<_>>());
            for b in eval_batches(&part, chunk, self.net.input)? {
                let out = self.eval_forward(b.images, stop)?;
                let (l, c) = self.loss.forward(&out, &b.labels)?;
                loss += f64::from(l) * b.labels.len() as f64;
                correct += c;
            }
            start = end;
        }
        let n = data.len().max(1) as f64;
        Ok((loss / n, correct as f64 / n))
    }

    /// The evaluation-mode forward of a batch of images: in one piece without a stop hook; with
    /// one, in pieces the [`Slicer`] sizes (about [`slices::SLICE`] of work each, a forward's
    /// fixed costs amortized over several images), polling the hook before each. Each image's
    /// output does not depend on the batch it is in (no layer mixes samples in evaluation mode),
    /// so the pieces give the same logits.
    fn eval_forward(
        &mut self,
        images: cptsim_nn::layers::Tensor,
        stop: Stop<'_>,
    ) -> Result<cptsim_nn::layers::Tensor> {
        use ndarray::{Axis, Slice};
        let n = images.shape().first().copied().unwrap_or(0);
        if stop.is_none() || n <= 1 {
            return self.policy.forward(&mut self.net, images, Mode::Eval);
        }
        let mut outs = Vec::new();
        let mut start = 0;
        while start < n {
            self.interrupted(stop)?;
            let rows = self.eval_rows.rows().clamp(1, n - start);
            let part = images
                .slice_axis(Axis(0), Slice::from(start..start + rows))
                .to_owned();
            let began = std::time::Instant::now();
            outs.push(self.policy.forward(&mut self.net, part, Mode::Eval)?);
            self.eval_rows.took(rows, began.elapsed());
            start += rows;
        }
        let views: Vec<_> = outs.iter().map(|o| o.view()).collect();
        ndarray::concatenate(Axis(0), &views)
            .map_err(|e| SimError::shape("evaluation", format!("joining the batch's pieces: {e}")))
    }

    /// Mean loss per token and next-token accuracy over the whole windows of `streams`, in
    /// evaluation mode at the current bits.
    pub fn evaluate_text(&mut self, data: &TextData, streams: &Streams) -> Result<(f64, f64)> {
        self.evaluate_text_with(data, streams, None)
    }

    fn evaluate_text_with(
        &mut self,
        data: &TextData,
        streams: &Streams,
        stop: Stop<'_>,
    ) -> Result<(f64, f64)> {
        let (mut loss, mut correct, mut tokens) = (0.0f64, 0usize, 0usize);
        for k in 0..data.windows(streams) {
            self.interrupted(stop)?;
            let b = data.batch(streams, k as u64)?;
            let out = self.policy.forward(&mut self.net, b.ids, Mode::Eval)?;
            let (out, _) = logits_rows(out)?;
            let (l, c) = self.loss.forward(&out, &b.targets)?;
            loss += f64::from(l) * b.targets.len() as f64;
            correct += c;
            tokens += b.targets.len();
        }
        let n = tokens.max(1) as f64;
        Ok((loss / n, correct as f64 / n))
    }

    /// Puts the data stream where it is after `iterations` (used when resuming).
    pub(crate) fn seek_data(&mut self, iterations: u64) {
        self.feed.seek(iterations);
    }
}

mod slices;
mod tokens;

use slices::Slicer;

#[cfg(test)]
pub(crate) mod tests;
