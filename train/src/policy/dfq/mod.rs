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
mod config;
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

use super::plateau::Plateau;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Mode, Tensor};
use cptsim_nn::net::Graph;
use sample_bits::PerSampleBits;

pub use blocks::{find_blocks, Block};
pub use config::{DfqConfig, DfqExec, FracTrainConfig, BETA};
pub use cost::{Candidate, CandidateSet};
pub use gate::Gate;

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

#[cfg(test)]
mod tests;
