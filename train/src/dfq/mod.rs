//! DFQ — dynamic fractional quantization (spec §6) and FracTrain (§7): an LSTM gate picks, per
//! sample and residual block, one of K candidate (activation, error) bit pairs; weights run at a
//! fixed precision; a cost term with the sign rule pulls the measured cost `cp` to a target,
//! which FracTrain raises at the PFQ indicator's turning points.
//!
//! Two executions of a block in training ([`DfqExec`]):
//! - `selected` (default, the cheap path of §6.3): one pass per block in which each sample's
//!   activations and errors are quantized at its own candidate's bits, with one range per tensor
//!   as SBM (see [`cptsim_nn::quant::per_sample`]), so batch norm sees the whole batch. The gate's
//!   task-loss gradient `⟨dL/dx, y_k⟩` needs the outputs of unselected candidates, which this
//!   path does not compute: the gate is trained by the cost term only. This is the zeroth-order
//!   estimate `y_k ≈ y_selected`: with equal inner products for every k, the softmax Jacobian
//!   cancels the task term exactly.
//! - `all` (the reference): every candidate runs the block over the whole batch and the masks
//!   mix them; the gate gets the task gradient too ([`exact`]). About K times the block work.
//!
//! Evaluation always runs the selected candidate per sample; with running statistics this
//! equals the reference's mixed output. The trace records the selected candidates either way:
//! it describes the method's work on an accelerator, not the simulator's extra candidates.

pub mod blocks;
pub mod cost;
pub mod dense;
mod exact;
pub mod gate;
pub mod lstm;
mod policy;
mod sample_bits;

use cptsim_models::ModelSummary;
use cptsim_traces::Bits;
use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::plateau::{Plateau, PlateauConfig};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Mode, Tensor};
use cptsim_nn::net::Graph;
use sample_bits::PerSampleBits;

pub use blocks::{find_blocks, Block};
pub use cost::{Candidate, CandidateSet};
pub use gate::Gate;

/// β of the cost term (spec §6.5).
pub const BETA: f64 = 1e-3;

/// FracTrain: the PFQ indicator steps the target `cp_0 + k·Δcp`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FracTrainConfig {
    /// Target increase per turning point Δcp (percent).
    pub cp_step: f64,
    /// Turning points K.
    pub turns: usize,
    /// Indicator threshold ε.
    pub epsilon: f64,
    /// Threshold decay α.
    pub alpha: f64,
}

impl FracTrainConfig {
    /// The plateau indicator's constants: stage `k` (0..=K) is the target `cp_0 + k·Δcp`.
    pub fn plateau(&self) -> PlateauConfig {
        PlateauConfig {
            epsilon: self.epsilon,
            alpha: self.alpha,
            stages: self.turns + 1,
        }
    }
}

/// How a gated block runs in training (spec §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DfqExec {
    /// Only each sample's selected candidate; the gate learns from the cost term alone.
    Selected,
    /// Every candidate over the whole batch, mixed by the masks; the gate also gets the task
    /// gradient `⟨dL/dx, y_k⟩` (needs one network replica per candidate).
    All,
}

/// DFQ settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DfqConfig {
    /// Candidate (activation, error) bit pairs.
    pub candidates: Vec<Candidate>,
    /// Fixed weight bits of the gated layers.
    pub weight_bits: u32,
    /// Target cp in percent (FracTrain: the initial target `cp_0`).
    pub target_cp: f64,
    /// Cost-term weight β.
    pub beta: f64,
    /// Dead band of the sign rule (0 = none).
    pub relax: f64,
    /// FracTrain's target stepping, if on.
    pub fractrain: Option<FracTrainConfig>,
}

impl DfqConfig {
    /// DFQ with the candidate list `set`, weights at `weight_bits`, target `target_cp` %.
    pub fn new(set: CandidateSet, weight_bits: u32, target_cp: f64) -> Self {
        Self {
            candidates: set.candidates(),
            weight_bits,
            target_cp,
            beta: BETA,
            relax: 0.0,
            fractrain: None,
        }
    }

    /// The cp (percent) of the cheapest and of the dearest candidate, every sample on it.
    pub fn cp_range(&self) -> (f64, f64) {
        let cps = self
            .candidates
            .iter()
            .map(|c| cost::cp_percent(c.cost(self.weight_bits), 1, 1.0));
        cps.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), cp| {
            (lo.min(cp), hi.max(cp))
        })
    }

    /// The targets of the run (FracTrain: every step) outside [`DfqConfig::cp_range`]: there the
    /// sign rule never flips, and the gate piles every sample onto one end.
    pub fn unreachable_targets(&self) -> Vec<f64> {
        let (lo, hi) = self.cp_range();
        let steps = self.fractrain.as_ref().map_or(0, |f| f.turns);
        (0..=steps)
            .map(|k| match &self.fractrain {
                Some(f) => cost::fractrain_target(self.target_cp, f.cp_step, k),
                None => self.target_cp,
            })
            .filter(|&t| t <= lo || t > hi)
            .collect()
    }

    /// Checks the bits and target.
    pub fn validate(&self) -> Result<()> {
        if !(2..=32).contains(&self.weight_bits) {
            return Err(SimError::invalid(
                "--weight-bits",
                format!("{} (DFQ weight bits must be in 2..=32)", self.weight_bits),
            ));
        }
        cost::check_target("--target-cp", self.target_cp)?;
        if self.candidates.is_empty()
            || self
                .candidates
                .iter()
                .any(|c| !(1..=32).contains(&c.act) || !(1..=32).contains(&c.err))
        {
            return Err(SimError::invalid(
                "--candidates",
                "every candidate needs activation and error bits in 1..=32",
            ));
        }
        if let Some(f) = &self.fractrain {
            if f.cp_step.is_nan() || f.cp_step < 0.0 || f.turns == 0 {
                return Err(SimError::invalid(
                    "--cp-step",
                    format!(
                        "{} with {} turning points (need Δcp ≥ 0, K ≥ 1)",
                        f.cp_step, f.turns
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One gated block mapped onto the engine graph.
#[derive(Clone, Debug)]
struct GatedBlock {
    /// The value whose arrival triggers this block's decision (the block's input).
    attach: usize,
    /// Engine node indices of the gated convs.
    nodes: Vec<usize>,
    /// Their summary indices (trace layers).
    layers: Vec<u32>,
}

/// The resumable part of a DFQ run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DfqState {
    /// cp (percent) of every training iteration so far.
    pub cp: Vec<f64>,
    /// The gate's confidence at every training iteration: the mean probability it gave the
    /// options it chose (1 = saturated softmax, whose gradients vanish).
    #[serde(default)]
    pub confidence: Vec<f64>,
    /// Exact execution only: per iteration the norm of the gate's logit gradient from the task
    /// loss over that from the cost term (what the selected-only path leaves out, in scale).
    #[serde(default)]
    pub task_to_cost: Vec<f64>,
    /// The FracTrain plateau indicator (named `pfq` in checkpoints since format 1).
    pub pfq: Option<Plateau>,
}

/// The DFQ controller of one network: gate, blocks, cost rule and state.
pub struct Dfq {
    /// Settings.
    pub config: DfqConfig,
    blocks: Vec<GatedBlock>,
    /// The gate.
    pub gate: Gate,
    /// Resumable state.
    pub state: DfqState,
    /// Decisions of the current forward pass, per block (one option index per sample).
    choices: Vec<Vec<usize>>,
    gated_nodes: Vec<usize>,
    exact: Option<exact::Exact>,
    /// Sum of the chosen options' probabilities in the last training pass.
    chosen_prob: f64,
}

impl Dfq {
    /// The controller for `graph` (built from the model of `summary`) with residual `blocks`;
    /// the gate is initialised from `seed`.
    pub fn new(
        config: DfqConfig,
        blocks: &[Block],
        summary: &ModelSummary,
        graph: &mut Graph,
        seed: u64,
    ) -> Result<Self> {
        config.validate()?;
        let quant_nodes = graph.quant_nodes();
        let mut mapped = Vec::with_capacity(blocks.len());
        let mut channels = Vec::with_capacity(blocks.len());
        for (i, b) in blocks.iter().enumerate() {
            let nodes = b
                .layers
                .iter()
                .map(|&l| {
                    quant_nodes.get(l as usize).copied().ok_or_else(|| {
                        SimError::invalid(
                            "dfq",
                            format!("block {i}: layer {l} is not in the network"),
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let first = *nodes
                .first()
                .ok_or_else(|| SimError::invalid("dfq", format!("block {i} has no gated layer")))?;
            let attach = graph
                .node_inputs(first)
                .and_then(|v| v.first().copied())
                .ok_or_else(|| SimError::invalid("dfq", format!("block {i}: no input")))?;
            let info = summary.layers.get(b.layers[0] as usize).ok_or_else(|| {
                SimError::invalid("dfq", format!("block {i}: layer missing in the summary"))
            })?;
            channels.push(info.in_shape[0]);
            mapped.push(GatedBlock {
                attach,
                nodes,
                layers: b.layers.clone(),
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cptsim_nn::quant::mix64(seed ^ 0xDF0));
        let gate = Gate::new(&mut rng, &channels, config.candidates.len());
        let pfq = match &config.fractrain {
            Some(f) => Some(Plateau::new(&f.plateau())?),
            None => None,
        };
        let gated_nodes = mapped.iter().flat_map(|b| b.nodes.clone()).collect();
        Ok(Self {
            config,
            blocks: mapped,
            gate,
            state: DfqState {
                pfq,
                ..DfqState::default()
            },
            choices: Vec::new(),
            gated_nodes,
            exact: None,
            chosen_prob: 0.0,
        })
    }

    /// Switches training to the exact execution ([`DfqExec::All`]) with `replicas`, one network
    /// per candidate, each built exactly like `graph`.
    pub fn with_replicas(mut self, graph: &Graph, replicas: Vec<Graph>) -> Result<Self> {
        let k = self.config.candidates.len();
        if replicas.len() != k {
            return Err(SimError::invalid(
                "--dfq-exec all",
                format!("{} replicas for {k} candidates", replicas.len()),
            ));
        }
        let attach: Vec<usize> = self.blocks.iter().map(|b| b.attach).collect();
        let last: Vec<usize> = self
            .blocks
            .iter()
            .map(|b| b.nodes.iter().copied().max().unwrap_or(b.attach))
            .collect();
        let ranges = exact::block_ranges(graph, &attach, &last)?;
        self.exact = Some(exact::Exact::new(graph, replicas, ranges)?);
        Ok(self)
    }

    /// How blocks run in training.
    pub fn exec(&self) -> DfqExec {
        match self.exact {
            Some(_) => DfqExec::All,
            None => DfqExec::Selected,
        }
    }

    /// Number of gated blocks.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Sets every conv/linear layer's static bits: gated layers at the weight bits (their
    /// activation and error bits come per sample), every other layer fp32. Returns the trace
    /// bits of the non-gated layers (`slots[i]` = summary index of quantizable layer `i`).
    pub fn apply_bits(&self, graph: &mut Graph, slots: &[u32]) -> Result<Vec<(u32, Bits)>> {
        let nodes = graph.quant_nodes();
        let max_err = self
            .config
            .candidates
            .iter()
            .map(|c| c.err)
            .max()
            .unwrap_or(8);
        let mut out = Vec::new();
        for ((i, (name, q)), node) in graph.quant_layers_mut().into_iter().enumerate().zip(nodes) {
            let gated = self.gated_nodes.contains(&node);
            let (fw, bw) = if gated {
                (self.config.weight_bits, max_err)
            } else {
                (0, 0)
            };
            q.set_bits(fw, bw).map_err(|e| {
                SimError::invalid(&format!("bits of layer `{name}`"), e.to_string())
            })?;
            if !gated {
                q.hook = None;
                out.push((slots.get(i).copied().unwrap_or(i as u32), Bits::FP32));
            }
        }
        Ok(out)
    }

    /// Runs the network with the gate deciding each block's per-sample bits.
    pub fn forward(&mut self, graph: &mut Graph, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.gate.reset();
        self.choices.clear();
        if mode == Mode::Train && self.exact.is_some() {
            return self.forward_exact(graph, x);
        }
        let train = mode == Mode::Train;
        self.chosen_prob = 0.0;
        let (blocks, gate, choices, cands, chosen) = (
            &self.blocks,
            &mut self.gate,
            &mut self.choices,
            &self.config.candidates,
            &mut self.chosen_prob,
        );
        let out = graph.forward_with(x, mode, &mut |v, t, mut pending| {
            while let Some(b) = blocks.get(choices.len()).filter(|b| b.attach == v) {
                let i = choices.len();
                let probs = gate.step(i, t, train)?;
                let pick = gate::argmax_rows(&probs);
                *chosen += chosen_sum(&probs, &pick);
                let bits: Vec<(u32, u32)> =
                    pick.iter().map(|&k| (cands[k].act, cands[k].err)).collect();
                for &n in &b.nodes {
                    let q = pending.quant(n).ok_or_else(|| {
                        SimError::invalid("dfq", format!("block {i}'s layer ran before its gate"))
                    })?;
                    q.hook = PerSampleBits::hook(bits.clone());
                }
                choices.push(pick);
            }
            Ok(())
        })?;
        if self.choices.len() != self.blocks.len() {
            return Err(SimError::invalid(
                "dfq",
                format!(
                    "only {} of {} block gates ran (a block input was never produced)",
                    self.choices.len(),
                    self.blocks.len()
                ),
            ));
        }
        Ok(out)
    }

    fn forward_exact(&mut self, graph: &mut Graph, x: Tensor) -> Result<Tensor> {
        let Some(ex) = self.exact.as_mut() else {
            return Err(SimError::invalid(
                "dfq",
                "no replicas for the exact execution",
            ));
        };
        ex.ys.clear();
        self.chosen_prob = 0.0;
        let bits: Vec<(u32, u32)> = self
            .config
            .candidates
            .iter()
            .map(|c| (c.act, c.err))
            .collect();
        let mut cur = x;
        let mut at = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            let range = ex.ranges[i].clone();
            cur = graph.forward_range(at..range.start, cur, Mode::Train)?;
            let probs = self.gate.step(i, &cur, true)?;
            let pick = gate::argmax_rows(&probs);
            self.chosen_prob += chosen_sum(&probs, &pick);
            let ys = ex.forward_block(graph, i, &b.nodes, &bits, &cur)?;
            cur = exact::mix(&ys, &pick)?;
            ex.ys.push(ys);
            self.choices.push(pick);
            at = range.end;
        }
        graph.forward_range(at..graph.len(), cur, Mode::Train)
    }

    /// After a training forward pass: back-propagates the loss gradient `grad` through the
    /// network (in the exact execution through every chosen candidate), then records cp,
    /// applies the sign rule and back-propagates into the gate, through the straight-through
    /// masks, the cost term `reg·β·cost/mean(info)` (info = 1 per block) plus, in the exact
    /// execution, the task gradient of the masks. Returns `(cp, reg)`.
    pub fn backward(&mut self, graph: &mut Graph, grad: Tensor) -> Result<(f64, f64)> {
        let task = match self.exact.as_ref().is_some_and(|e| !e.ys.is_empty()) {
            true => self.backward_exact(graph, grad)?,
            false => {
                graph.backward_params(grad)?;
                Vec::new()
            }
        };
        self.gate_backward(&task)
    }

    /// The network part of [`Dfq::backward`] in the exact execution; returns the task gradient
    /// of the masks per block.
    fn backward_exact(&mut self, graph: &mut Graph, grad: Tensor) -> Result<Vec<Array2<f32>>> {
        let Some(ex) = self.exact.as_mut() else {
            return Err(SimError::invalid(
                "dfq",
                "no replicas for the exact execution",
            ));
        };
        let mut g = grad;
        let mut at = graph.len();
        let mut task = Vec::with_capacity(self.blocks.len());
        for i in (0..self.blocks.len()).rev() {
            let range = ex.ranges[i].clone();
            g = graph.backward_range(range.end..at, g)?;
            let ys = ex.ys.pop().ok_or_else(|| {
                SimError::invalid("dfq", format!("block {i}: no candidate outputs kept"))
            })?;
            task.push(exact::task_dprobs(&g, &ys));
            let pick = self
                .choices
                .get(i)
                .ok_or_else(|| SimError::invalid("dfq", format!("block {i}: no decisions kept")))?;
            g = ex.backward_block(graph, i, pick, &g)?;
            at = range.start;
        }
        graph.backward_params_range(0..at, g)?;
        task.reverse();
        Ok(task)
    }

    /// The target (percent) in force at training iteration `t` (FracTrain: from the turning
    /// points so far, each the first iteration of its stage).
    pub fn target_at(&self, t: u64) -> f64 {
        match (&self.config.fractrain, &self.state.pfq) {
            (Some(f), Some(p)) => {
                let stage = p.turns.iter().filter(|&&turn| turn <= t).count();
                cost::fractrain_target(self.config.target_cp, f.cp_step, stage)
            }
            _ => self.config.target_cp,
        }
    }

    /// The cost target (percent) now: the configured one, or FracTrain's current step.
    pub fn target(&self) -> f64 {
        match (&self.config.fractrain, &self.state.pfq) {
            (Some(f), Some(p)) => cost::fractrain_target(self.config.target_cp, f.cp_step, p.stage),
            _ => self.config.target_cp,
        }
    }

    /// cp (percent) of the last forward pass.
    pub fn last_cp(&self) -> f64 {
        let w = self.config.weight_bits;
        let cost: f64 = self
            .choices
            .iter()
            .flatten()
            .map(|&k| self.config.candidates[k].cost(w))
            .sum();
        let samples = self.choices.first().map_or(0, Vec::len);
        cost::cp_percent(cost, samples, self.blocks.len() as f64)
    }

    /// The gate part of [`Dfq::backward`], given the task gradient of the masks (empty on the
    /// selected path).
    fn gate_backward(&mut self, task: &[Array2<f32>]) -> Result<(f64, f64)> {
        let cp = self.last_cp();
        let reg = cost::reg_sign(cp, self.target(), self.config.relax);
        let w = self.config.weight_bits;
        let scale = reg * self.config.beta;
        let row: Vec<f32> = self
            .config
            .candidates
            .iter()
            .map(|c| (scale * c.cost(w)) as f32)
            .collect();
        let mut dprobs: Vec<Array2<f32>> = self
            .choices
            .iter()
            .map(|pick| Array2::from_shape_fn((pick.len(), row.len()), |(_, k)| row[k]))
            .collect();
        if !task.is_empty() {
            let ratio = self.gate.logit_grad_norm(task) / self.gate.logit_grad_norm(&dprobs);
            self.state.task_to_cost.push(ratio);
            dprobs.iter_mut().zip(task).for_each(|(d, t)| *d += t);
        }
        self.gate.backward(&dprobs)?;
        let decisions: usize = self.choices.iter().map(Vec::len).sum();
        self.state.cp.push(cp);
        self.state
            .confidence
            .push(self.chosen_prob / decisions.max(1) as f64);
        Ok((cp, reg))
    }

    /// The trace rows of the gated layers for the last forward pass: per layer one
    /// `(layer, bits, samples)` per candidate chosen, in option order.
    pub fn trace_rows(&self) -> Vec<(u32, Bits, u64)> {
        let k = self.config.candidates.len();
        let to8 = |b: u32| u8::try_from(b).unwrap_or(u8::MAX);
        let mut rows = Vec::new();
        for (b, pick) in self.blocks.iter().zip(&self.choices) {
            let mut counts = vec![0u64; k];
            pick.iter().for_each(|&c| counts[c] += 1);
            for &layer in &b.layers {
                for (c, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
                    let cand = self.config.candidates[c];
                    let bits = Bits {
                        w: to8(self.config.weight_bits),
                        a: to8(cand.act),
                        g: to8(cand.err),
                    };
                    rows.push((layer, bits, n));
                }
            }
        }
        rows
    }

    /// Mean cp over the last 10 % of the iterations (at least one).
    pub fn achieved(&self) -> f64 {
        let n = self.state.cp.len();
        let tail = (n / 10).max(1).min(n);
        if tail == 0 {
            return 0.0;
        }
        self.state.cp[n - tail..].iter().sum::<f64>() / tail as f64
    }
}

/// Sum over the rows of `probs` of the probability at the chosen column.
fn chosen_sum(probs: &Array2<f32>, pick: &[usize]) -> f64 {
    pick.iter()
        .enumerate()
        .map(|(s, &k)| f64::from(probs.get((s, k)).copied().unwrap_or(0.0)))
        .sum()
}

/// Test helper: checks every `stride`-th entry of each parameter's stored gradient against a
/// central finite difference (step 1e-2) of `loss`; returns how many entries were checked.
#[cfg(test)]
pub(crate) fn check_param_grads<T>(
    model: &mut T,
    params: fn(&mut T) -> Vec<&mut cptsim_nn::layers::Param>,
    loss: impl Fn(&mut T) -> f64,
    stride: usize,
    rel_tol: f64,
) -> usize {
    let eps = 1e-2f32;
    let mut checked = 0;
    for p in 0..params(model).len() {
        let n = params(model)[p].value.len();
        for j in (0..n).step_by(stride) {
            let analytic = params(model)[p]
                .grad
                .iter()
                .nth(j)
                .copied()
                .unwrap_or(f32::NAN);
            let nudge = |m: &mut T, d: f32| {
                if let Some(v) = params(m)[p].value.iter_mut().nth(j) {
                    *v += d;
                }
            };
            nudge(model, eps);
            let up = loss(model);
            nudge(model, -2.0 * eps);
            let down = loss(model);
            nudge(model, eps);
            let numeric = (up - down) / (2.0 * f64::from(eps));
            let analytic = f64::from(analytic);
            assert!(
                (analytic - numeric).abs() <= 3e-4 + rel_tol * numeric.abs().max(analytic.abs()),
                "param {p}[{j}]: analytic {analytic} vs numeric {numeric}"
            );
            checked += 1;
        }
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{checkpoint, TrainConfig, TrainData, TrainNet, Trainer};
    use cptsim_nn::build::{build_network, BuildOptions, Init};
    use cptsim_nn::data::synthetic;

    fn data() -> TrainData {
        let all = synthetic(96, [3, 32, 32], 10, 20.0, 3).unwrap();
        let (train, test) = all.split_validation(32.0 / 96.0, 1).unwrap();
        TrainData {
            train,
            test,
            val: None,
        }
    }

    /// FracTrain's CIFAR steps (Δcp 0.5, 3 turning points) with indicator constants ε, α.
    fn fractrain_steps(epsilon: f64, alpha: f64) -> FracTrainConfig {
        FracTrainConfig {
            cp_step: 0.5,
            turns: 3,
            epsilon,
            alpha,
        }
    }

    fn trainer(data: &TrainData, iters: u64, fractrain: bool) -> Trainer<'_> {
        let cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
        trainer_with(data, iters, fractrain, cfg, DfqExec::Selected)
    }

    fn trainer_with(
        data: &TrainData,
        iters: u64,
        fractrain: bool,
        mut cfg: DfqConfig,
        exec: DfqExec,
    ) -> Trainer<'_> {
        let ir = cptsim_models::load_graph("zoo:resnet20", 8).unwrap();
        let summary = ir.summary();
        let opts = BuildOptions {
            init: Init::Seeded(1),
            ..BuildOptions::default()
        };
        let build = || TrainNet::from_network(build_network(&ir, &opts).unwrap()).unwrap();
        let mut net = build();
        let blocks = find_blocks(&ir, &summary).unwrap();
        if fractrain {
            cfg.target_cp = 1.5;
            // ε = 10 with α = 1: every fifth check is a plateau.
            cfg.fractrain = Some(fractrain_steps(10.0, 1.0));
        }
        let k = cfg.candidates.len();
        let mut dfq = Dfq::new(cfg, &blocks, &summary, &mut net.graph, 1).unwrap();
        if exec == DfqExec::All {
            let replicas = (0..k).map(|_| build().graph).collect();
            dfq = dfq.with_replicas(&net.graph, replicas).unwrap();
        }
        let config = TrainConfig {
            batch: 8,
            eval_every: 1,
            eval_batch: 16,
            ..TrainConfig::new(iters, 0.05)
        };
        Trainer::new(net, data, config, Box::new(dfq)).unwrap()
    }

    /// The trainer's DFQ policy.
    fn dfq<'t>(tr: &'t Trainer<'_>) -> &'t Dfq {
        tr.policy_as::<Dfq>().unwrap()
    }

    fn finish(
        mut tr: Trainer<'_>,
    ) -> (
        Vec<cptsim_traces::TraceRow>,
        Vec<Tensor>,
        Vec<Vec<f32>>,
        Vec<f64>,
    ) {
        while !tr.done() {
            tr.step().unwrap();
        }
        let params = tr.param_values();
        let buffers = tr.net.graph.buffer_values();
        let cp = dfq(&tr).state.cp.clone();
        (tr.rows(), params, buffers, cp)
    }

    #[test]
    fn exact_execution_with_one_candidate_is_the_selected_path_bit_for_bit() {
        let data = data();
        let one = || {
            let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
            cfg.candidates = vec![Candidate { act: 4, err: 8 }];
            cfg
        };
        let selected = finish(trainer_with(&data, 3, false, one(), DfqExec::Selected));
        let tr = trainer_with(&data, 3, false, one(), DfqExec::All);
        assert_eq!(tr.policy_as::<Dfq>().map(Dfq::exec), Some(DfqExec::All));
        // nine back-to-back blocks; the last ends like the plain block before it, after the
        // residual add and its ReLU (conv, bn, relu, conv, bn, add, relu)
        let ranges = &dfq(&tr).exact.as_ref().unwrap().ranges;
        assert_eq!(ranges.len(), 9);
        assert!(
            ranges.windows(2).all(|w| w[0].end == w[1].start),
            "{ranges:?}"
        );
        assert_eq!(ranges[8].len(), 7);
        assert_eq!(ranges[7].len(), 7);
        let all = finish(tr);
        assert_eq!(selected, all);
    }

    #[test]
    fn exact_execution_gives_the_gate_the_task_gradient_and_is_deterministic() {
        let data = data();
        let gate_grads = |exec: DfqExec| {
            let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
            cfg.beta = 0.0;
            let mut tr = trainer_with(&data, 1, false, cfg, exec);
            tr.step().unwrap();
            let d = tr.policy_as_mut::<Dfq>().unwrap();
            d.gate
                .params_mut()
                .iter()
                .map(|p| p.grad.iter().map(|v| v.abs()).sum::<f32>())
                .sum::<f32>()
        };
        // without the cost term the selected path leaves the gate untouched; the exact one not
        assert_eq!(gate_grads(DfqExec::Selected), 0.0);
        assert!(gate_grads(DfqExec::All) > 0.0);
        let mut tr = trainer_with(
            &data,
            2,
            false,
            DfqConfig::new(CandidateSet::Cifar, 4, 3.0),
            DfqExec::All,
        );
        tr.step().unwrap();
        tr.step().unwrap();
        let ratios = &dfq(&tr).state.task_to_cost;
        assert!(
            ratios.len() == 2 && ratios.iter().all(|r| r.is_finite() && *r > 0.0),
            "{ratios:?}"
        );

        let run = |threads: usize| {
            cptsim_testdata::with_threads(threads, || {
                let cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
                finish(trainer_with(&data, 2, false, cfg, DfqExec::All))
            })
            .unwrap()
        };
        let (rows, params, buffers, cp) = run(1);
        assert_eq!(run(2), (rows.clone(), params, buffers, cp));
        let per_iter: u64 = rows
            .iter()
            .filter(|r| r.iter_start == 0 && r.layer == 1)
            .map(|r| r.samples)
            .sum();
        assert_eq!(per_iter, 8);

        // checkpoint after 1 of 2 iterations, resume with fresh replicas: the same run
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let cfg = || DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
        let mut part = trainer_with(&data, 2, false, cfg(), DfqExec::All);
        part.step().unwrap();
        checkpoint::save(&path, &mut part, serde_json::Value::Null).unwrap();
        let mut resumed = trainer_with(&data, 2, false, cfg(), DfqExec::All);
        checkpoint::load(&path)
            .unwrap()
            .restore(&mut resumed)
            .unwrap();
        assert_eq!(finish(resumed), run(1));
    }

    #[test]
    fn resnet20_trains_with_per_sample_mix_in_the_trace_and_resumes_exactly() {
        let data = data();
        let mut tr = trainer(&data, 3, false);
        assert_eq!(tr.policy_as::<Dfq>().map(Dfq::blocks), Some(9));
        while !tr.done() {
            tr.step().unwrap();
        }
        let rows = tr.rows();
        let roles: Vec<_> = cptsim_models::load_summary("zoo:resnet20", 1)
            .unwrap()
            .layers
            .iter()
            .map(|l| l.role)
            .collect();
        assert_eq!(roles.len(), 22);
        for t in 0..3 {
            for layer in 0..22u32 {
                let at: Vec<_> = rows
                    .iter()
                    .filter(|r| r.layer == layer && r.iter_start == t)
                    .collect();
                let n: u64 = at.iter().map(|r| r.samples).sum();
                assert_eq!(n, 8, "layer {layer}, iteration {t}");
                let gated = at.iter().all(|r| r.bits.w == 4 && r.bits.a > 0);
                let fp32 = at.iter().all(|r| r.bits.is_fp32());
                assert!(gated != fp32, "layer {layer}: {at:?}");
                // stem, 1×1 projection shortcuts and classifier stay fp32
                let role = roles[layer as usize];
                assert_eq!(
                    fp32,
                    role != cptsim_models::LayerRole::Body,
                    "layer {layer}"
                );
            }
        }
        let d = dfq(&tr);
        assert_eq!(d.state.cp.len(), 3);
        assert!((0..3).all(|t| d.target_at(t) == 3.0));
        assert!(
            d.state.confidence.iter().all(|&c| c > 0.2 && c <= 1.0),
            "{:?}",
            d.state.confidence
        );
        assert!(d.state.cp.iter().all(|&c| (1.75..=4.7).contains(&c)));
        assert!((d.achieved() - d.state.cp[2]).abs() < 1e-12);

        // checkpoint after 2 iterations, resume, finish: identical to the uninterrupted run
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut part = trainer(&data, 3, false);
        part.step().unwrap();
        part.step().unwrap();
        checkpoint::save(&path, &mut part, serde_json::Value::Null).unwrap();
        let mut resumed = trainer(&data, 3, false);
        checkpoint::load(&path)
            .unwrap()
            .restore(&mut resumed)
            .unwrap();
        resumed.step().unwrap();
        assert_eq!(resumed.rows(), rows);
        assert_eq!(dfq(&resumed).state, d.state);
        assert_eq!(resumed.param_values(), tr.param_values());
    }

    #[test]
    fn one_and_two_threads_give_the_same_run() {
        let data = data();
        let run = |threads: usize| {
            cptsim_testdata::with_threads(threads, || {
                let mut tr = trainer(&data, 2, false);
                while !tr.done() {
                    tr.step().unwrap();
                }
                let params = tr.param_values();
                (tr.rows(), params)
            })
            .unwrap()
        };
        assert_eq!(run(1), run(2));
    }

    #[test]
    fn cost_term_pushes_the_gate_towards_the_target() {
        // Far below a high target the sign is −1: the gate's cost gradient raises expensive
        // options, so cp rises over a few steps with a large β; far above a low target it falls.
        let data = data();
        for (target, rising) in [(20.0, true), (0.5, false)] {
            let mut tr = trainer(&data, 12, false);
            if let Some(d) = tr.policy_as_mut::<Dfq>() {
                d.config.target_cp = target;
                d.config.beta = 2.0;
            }
            while !tr.done() {
                tr.step().unwrap();
            }
            let cp = &dfq(&tr).state.cp;
            let (first, last) = (cp[0], cp[cp.len() - 1]);
            assert!(
                if rising { last > first } else { last < first },
                "target {target}: {cp:?}"
            );
        }
    }

    #[test]
    fn fractrain_steps_the_target_at_turning_points() {
        let data = data();
        // ε = 10 with α = 1: every fifth check is a plateau.
        let mut tr = trainer(&data, 10, true);
        assert_eq!(dfq(&tr).target(), 1.5);
        while !tr.done() {
            tr.step().unwrap();
        }
        let d = dfq(&tr);
        assert_eq!(
            d.state.pfq.as_ref().map(|p| p.turns.clone()),
            Some(vec![5, 10])
        );
        assert_eq!(d.target(), 2.5);
        // the turning point after iteration t raises the target from iteration t + 1 on
        let targets: Vec<f64> = (0..6).map(|t| d.target_at(t)).collect();
        assert_eq!(targets, [1.5, 1.5, 1.5, 1.5, 1.5, 2.0]);
        assert_eq!(d.target_at(9), 2.0);
        assert_eq!(d.target_at(10), 2.5);
    }

    #[test]
    fn targets_outside_the_candidates_reach_are_found() {
        let mut cfg = DfqConfig::new(CandidateSet::Cifar, 4, 3.0);
        let (lo, hi) = cfg.cp_range();
        assert!((lo - 1.7578125).abs() < 1e-9 && (hi - 4.6875).abs() < 1e-9);
        assert!(cfg.unreachable_targets().is_empty());
        cfg.target_cp = 1.5;
        cfg.fractrain = Some(fractrain_steps(0.05, 0.3));
        assert_eq!(cfg.unreachable_targets(), vec![1.5]);
        cfg.target_cp = 1.8;
        assert!(cfg.unreachable_targets().is_empty());
    }

    #[test]
    fn bad_settings_are_rejected() {
        assert!(DfqConfig::new(CandidateSet::Cifar, 1, 3.0)
            .validate()
            .is_err());
        assert!(DfqConfig::new(CandidateSet::Cifar, 4, 0.0)
            .validate()
            .is_err());
        assert!(DfqConfig::new(CandidateSet::Imagenet, 6, 3.0)
            .validate()
            .is_ok());
    }
}
