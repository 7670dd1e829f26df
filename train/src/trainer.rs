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
}

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
        })
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
            Feed::Text { .. } => None,
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
                    let mut report = self.step()?;
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
            let e = self.evaluation(precision, lr)?;
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

    fn evaluation(&mut self, p: Precision, lr: f32) -> Result<EvalRecord> {
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
                let (test_loss, test_acc) = self.evaluate(&data.test)?;
                let val_acc = match &data.val {
                    Some(v) => Some(self.evaluate(v)?.1),
                    None => None,
                };
                (test_loss, test_acc, val_acc, None, None)
            }
            Feed::Text { data, .. } => {
                let (test_loss, test_acc) = self.evaluate_text(data, &data.test)?;
                let (val_loss, val_acc) = self.evaluate_text(data, &data.valid)?;
                let ppl = |l: f64| l.exp();
                (
                    test_loss,
                    test_acc,
                    Some(val_acc),
                    Some(ppl(test_loss)),
                    Some(ppl(val_loss)),
                )
            }
        };
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
        let (mut loss, mut correct) = (0.0f64, 0usize);
        let chunk = self.config.eval_batch;
        let mut start = 0;
        while start < data.len() {
            let end = (start + chunk).min(data.len());
            let part = data.select(&(start..end).collect::<Vec<_>>());
            for b in eval_batches(&part, chunk, self.net.input)? {
                let out = self.policy.forward(&mut self.net, b.images, Mode::Eval)?;
                let (l, c) = self.loss.forward(&out, &b.labels)?;
                loss += f64::from(l) * b.labels.len() as f64;
                correct += c;
            }
            start = end;
        }
        let n = data.len().max(1) as f64;
        Ok((loss / n, correct as f64 / n))
    }

    /// Mean loss per token and next-token accuracy over the whole windows of `streams`, in
    /// evaluation mode at the current bits.
    pub fn evaluate_text(&mut self, data: &TextData, streams: &Streams) -> Result<(f64, f64)> {
        let (mut loss, mut correct, mut tokens) = (0.0f64, 0usize, 0usize);
        for k in 0..data.windows(streams) {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::net::QuantSlot;
    use cptsim_nn::data::synthetic;
    use cptsim_nn::init::{conv_weight, linear_weight_bias};
    use cptsim_nn::layers::*;
    use cptsim_nn::net::Graph;
    use cptsim_nn::quant::{LayerQuant, QuantMethod};
    use cptsim_traces::schedule::ScheduleArgs;
    use cptsim_traces::Bits;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// conv-bn-relu-pool → fc on 1×8×8 inputs, 4 classes; slots 0 (first) and 1 (last).
    /// All layers quantized when `all`, else the classifier stays fp32.
    pub(crate) fn small_net_scoped(seed: u64, all: bool) -> TrainNet {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut g = Graph::new();
        let spec = Conv2dSpec::square(1, 6, 3, 1, 1);
        let q = |i: u64| LayerQuant::new(QuantMethod::Sbm, seed ^ i);
        g.then(Conv2d::new("c1", spec, conv_weight(&mut rng, 6, [3, 3], 1), None, q(1)).unwrap())
            .unwrap();
        g.then(BatchNorm::new("b1", 6)).unwrap();
        g.then(Activation::new("r1", ActivationKind::Relu)).unwrap();
        g.then(Pool2d::new("p1", PoolKind::Max, PoolSpec::square(2, 2)).unwrap())
            .unwrap();
        g.then(Flatten::new("flat")).unwrap();
        let (w, b) = linear_weight_bias(&mut rng, 4, 6 * 4 * 4);
        g.then(Linear::new("fc", w, Some(b), q(2)).unwrap())
            .unwrap();
        let slots = vec![
            QuantSlot {
                layer: 0,
                quantized: true,
                fixed: None,
            },
            QuantSlot {
                layer: 1,
                quantized: false,
                fixed: None,
            },
        ];
        let mut net = TrainNet::new(g, slots, [1, 8, 8], 4).unwrap();
        net.slots[1].quantized = all;
        net
    }

    /// The classifier stays fp32 (CIFAR scope).
    pub(crate) fn small_net(seed: u64) -> TrainNet {
        small_net_scoped(seed, false)
    }

    pub(crate) fn small_data() -> TrainData {
        let all = synthetic(712, [1, 8, 8], 4, 40.0, 5).unwrap();
        let (train, test) = all.split_validation(200.0 / 712.0, 1).unwrap();
        TrainData {
            train,
            test,
            val: None,
        }
    }

    pub(crate) fn config(iters: u64) -> TrainConfig {
        TrainConfig {
            batch: 32,
            eval_every: 10,
            ..TrainConfig::new(iters, 0.05)
        }
    }

    fn cosine(iters: u64) -> Box<dyn Policy> {
        let s = ScheduleArgs::new("cosine", iters)
            .cycles(2)
            .build()
            .unwrap();
        Box::new(crate::SchedulePolicy(s))
    }

    #[test]
    fn learns_records_rle_trace_and_evaluates() {
        let data = small_data();
        let mut tr = Trainer::new(small_net(1), &data, config(40), cosine(40)).unwrap();
        let mut evals = 0;
        while !tr.done() {
            evals += usize::from(tr.step().unwrap().eval.is_some());
        }
        assert_eq!(evals, 4);
        let last = tr.state.evals.last().unwrap();
        assert!(last.test_acc > 0.8, "{last:?}");
        assert_eq!((last.fw, last.bw), (8, 8), "end of a cycle is B_max");
        let rows = tr.rows();
        // Two cycles of 20 iterations, FW 3..8: six spans each, two layers per span.
        let spans: Vec<_> = rows.iter().filter(|r| r.layer == 0).collect();
        assert_eq!(spans.len(), 12);
        assert_eq!(spans[0].bits, Bits::forward_backward(3, 8));
        assert_eq!(spans.last().map(|r| r.iter_end), Some(40));
        assert!(rows
            .iter()
            .filter(|r| r.layer == 1)
            .all(|r| r.bits.is_fp32()));
        let covered: u64 = spans.iter().map(|r| r.iterations()).sum();
        assert_eq!(covered, 40);
        assert!(tr.step().is_err(), "no iteration past the end");
    }

    #[test]
    fn same_seed_same_run_and_threads_do_not_matter() {
        let data = small_data();
        let run = |threads: usize| {
            cptsim_testdata::with_threads(threads, || {
                let mut tr = Trainer::new(small_net(2), &data, config(15), cosine(15)).unwrap();
                while !tr.done() {
                    tr.step().unwrap();
                }
                (
                    tr.state.clone(),
                    tr.net
                        .graph
                        .params_mut()
                        .iter()
                        .map(|p| p.value.clone())
                        .collect::<Vec<_>>(),
                )
            })
            .unwrap()
        };
        assert_eq!(run(1), run(2));
    }

    #[test]
    fn exploding_loss_stops_with_a_clear_error() {
        let data = small_data();
        let cfg = TrainConfig {
            lr: LrPolicy {
                base_lr: 1e4,
                ..config(1).lr
            },
            max_loss: 50.0,
            ..config(30)
        };
        let mut tr = Trainer::new(small_net(3), &data, cfg, cosine(30)).unwrap();
        let err = loop {
            match tr.step() {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        let msg = err.to_string();
        assert!(matches!(err, SimError::Diverged { .. }), "{msg}");
        assert!(msg.contains("diverged at iteration"), "{msg}");
    }

    #[test]
    fn quantizer_none_records_fp32() {
        let data = small_data();
        let cfg = TrainConfig {
            quantize: false,
            ..config(3)
        };
        let mut tr = Trainer::new(small_net(4), &data, cfg, cosine(3)).unwrap();
        while !tr.done() {
            tr.step().unwrap();
        }
        assert!(tr.rows().iter().all(|r| r.bits.is_fp32()));
    }
}
