//! The precision-policy seam of the trainer: [`Policy`] is everything [`crate::Trainer`] asks of
//! whatever decides the bits — set the layers' bits for iteration `t` and record the trace rows,
//! optionally run the forward/backward pass itself (gated execution), observe each step's loss
//! and accuracy, own trainable parameters, save and restore its state, report target/achieved and
//! write its own files. The trainer has no branch on which policy runs.
//!
//! The policies, one module (or folder) each: [`schedule`] (static and cyclic/CPT schedules),
//! [`pfq`], [`prt`] (the Precision Range Test), [`dfq`] (DFQ and FracTrain), [`ldp`], and the
//! [`plateau`] indicator that PFQ and FracTrain share.
//!
//! Adding a policy: one module here implementing [`Policy`], one argument struct in the CLI and
//! one line in its registry (`cli/src/cmd/train/policies.rs`); see README "Adding a precision
//! policy".

use std::any::Any;
use std::path::Path;

use cptsim_traces::schedule::Precision;
use cptsim_traces::{Bits, TraceRow};
use serde::Serialize;

pub mod dfq;
pub mod ldp;
pub mod pfq;
pub mod plateau;
pub mod prt;
pub mod schedule;

use crate::net::TrainNet;
use crate::recorder::Recorder;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Mode, Param, Tensor};

/// A precision policy with its state, driven by the trainer once per iteration in this order:
/// [`Policy::apply`], [`Policy::forward`], [`Policy::backward`], optimiser step (over the
/// network's and [`Policy::params_mut`]'s parameters), [`Policy::record`], [`Policy::observe`],
/// then (at check points) [`Policy::check`]. A `&dyn Policy` upcasts to `&dyn Any` for callers
/// that need the concrete policy ([`crate::Trainer::policy_as`]).
pub trait Policy: Any {
    /// The policy's name (stored in checkpoints with its state).
    fn name(&self) -> &'static str;

    /// The uniform precision of iteration `t` (before the step; in progress lines, evaluations
    /// and the divergence message).
    fn precision(&self, t: u64) -> Precision;

    /// Sets the bits of every quantizable layer for iteration `t`; returns the (trace layer,
    /// bits) pairs [`Policy::record`] receives. `quantize` false runs everything in fp32.
    /// Default: every in-scope layer at [`Policy::precision`] ([`apply_uniform`]).
    fn apply(&mut self, t: u64, net: &mut TrainNet, quantize: bool) -> Result<Vec<(u32, Bits)>> {
        apply_uniform(net, self.precision(t), quantize)
    }

    /// The forward pass (override for gated execution).
    fn forward(&mut self, net: &mut TrainNet, x: Tensor, mode: Mode) -> Result<Tensor> {
        net.graph.forward(x, mode)
    }

    /// The backward pass of the loss gradient `grad` (override for gated execution or to learn
    /// from the gradients it leaves, before the optimiser step).
    fn backward(&mut self, net: &mut TrainNet, grad: Tensor) -> Result<()> {
        net.graph.backward_params(grad)?;
        Ok(())
    }

    /// Records iteration `t`'s trace rows (`bits` from [`Policy::apply`], `samples` per layer)
    /// and returns the precision the step reports.
    fn record(
        &mut self,
        t: u64,
        bits: &[(u32, Bits)],
        samples: u64,
        recorder: &mut Recorder,
    ) -> Precision {
        recorder.record(t, bits, samples);
        self.precision(t)
    }

    /// Feeds the step's minibatch loss and training accuracy (fraction).
    fn observe(&mut self, _loss: f32, _train_acc: f64) -> Result<()> {
        Ok(())
    }

    /// A check point after iteration `t` (every evaluation, or every `check_every`).
    fn check(&mut self, _t: u64) {}

    /// Whether the trainer should keep a copy of the weights, optimiser and quantizer state
    /// before iteration `t`, to come back to when [`Policy::diverged`] absorbs a divergence.
    fn recovery_point(&mut self, _t: u64) -> bool {
        false
    }

    /// Iteration `t` diverged (`loss` not finite or above the limit) before its backward pass.
    /// `Some(note)` absorbs it: the trainer restores the last [`Policy::recovery_point`] and runs
    /// iteration `t` again under the policy's new state, reporting `note`. `None` (the default)
    /// stops the run.
    fn diverged(&mut self, _t: u64, _loss: f32) -> Result<Option<String>> {
        Ok(None)
    }

    /// Trainable parameters of the policy itself (stepped with the network's, after them).
    fn params_mut(&mut self) -> Vec<&mut Param> {
        Vec::new()
    }

    /// The state a checkpoint keeps (the configuration comes from the run's settings).
    fn state(&self) -> Result<serde_json::Value>;

    /// Restores [`Policy::state`] into a policy built from the same settings.
    fn restore(&mut self, state: serde_json::Value) -> Result<()>;

    /// What the summary reports of the policy after `iterations` iterations with trace `rows`.
    fn report(&self, _net: &mut TrainNet, _rows: &[TraceRow], _iterations: u64) -> PolicyReport {
        PolicyReport::default()
    }

    /// Writes the policy's own files into `dir` (with every checkpoint).
    fn write_artefacts(&self, _dir: &Path, _iterations: u64) -> Result<()> {
        Ok(())
    }
}

/// What a policy adds to the run summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyReport {
    /// The target the policy steers to, at the end (its unit is the policy's).
    pub target: Option<f64>,
    /// What it achieved (mean over the last 10 % of iterations).
    pub achieved: Option<f64>,
    /// Per-layer bits learned, with the inference cost.
    pub layers: Option<LayerBitsReport>,
    /// A Precision Range Test's bound.
    pub prt_bits: Option<u8>,
    /// The test's steps whose training diverged (their forward bits), ascending.
    pub prt_diverged: Vec<u8>,
    /// Turning points of a plateau indicator.
    pub turns: Option<Vec<u64>>,
}

/// One layer's forward bits at the end of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerBits {
    /// Layer name.
    pub layer: String,
    /// Forward bits.
    pub bits: u8,
}

/// Final per-layer forward bits and the inference cost they give.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerBitsReport {
    /// Forward bits of each controlled layer in the last iteration.
    pub final_bits: Vec<LayerBits>,
    /// Inference cost Σ_l MAC_l·b_l² of one image at the final bits, in GBitOPs.
    pub inference_gbitops: f64,
    /// The same at the top of the bit range everywhere.
    pub static_inference_gbitops: f64,
}

/// Sets every in-scope quantizable layer of `net` to precision `p` (a layer's fixed precision
/// overrides it; out-of-scope layers, and every layer when `quantize` is false, run fp32);
/// returns the (trace layer, bits) pairs.
pub fn apply_uniform(net: &mut TrainNet, p: Precision, quantize: bool) -> Result<Vec<(u32, Bits)>> {
    let slots = &net.slots;
    let mut out = Vec::with_capacity(slots.len());
    for ((name, q), slot) in net.graph.quant_layers_mut().into_iter().zip(slots) {
        let bits = if quantize && slot.quantized {
            slot.fixed
                .unwrap_or_else(|| Bits::forward_backward(p.fw, p.bw))
        } else {
            Bits::FP32
        };
        q.set_bits(u32::from(bits.w), u32::from(bits.g))
            .map_err(|e| match e {
                SimError::Invalid { what, msg } => {
                    SimError::invalid(&format!("{what} of layer `{name}`"), msg)
                }
                e => e,
            })?;
        out.push((slot.layer, bits));
    }
    Ok(out)
}

/// `value` as a policy state.
pub fn to_state(name: &str, value: &impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| SimError::invalid("checkpoint", format!("{name} state: {e}")))
}

/// A policy state read back from a checkpoint.
pub fn from_state<T: serde::de::DeserializeOwned>(
    name: &str,
    state: serde_json::Value,
) -> Result<T> {
    serde_json::from_value(state).map_err(|e| {
        SimError::invalid(
            "checkpoint",
            format!("{name} state does not fit this policy: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    //! A test-only toy policy: everything a new policy needs is this module (the `impl Policy`)
    //! — the trainer, the checkpoint and the recorder take it unchanged.

    use super::*;
    use crate::checkpoint;
    use crate::trainer::tests::{config, small_data, small_net_scoped};
    use crate::Trainer;
    use serde::Deserialize;

    /// Alternates 4 and 8 forward bits, and counts the losses it saw (its state).
    #[derive(Default)]
    struct Toggle {
        seen: Seen,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Seen {
        losses: u64,
        checks: Vec<u64>,
    }

    impl Policy for Toggle {
        fn name(&self) -> &'static str {
            "toggle"
        }

        fn precision(&self, t: u64) -> Precision {
            Precision {
                fw: if t.is_multiple_of(2) { 4 } else { 8 },
                bw: 8,
            }
        }

        fn observe(&mut self, _loss: f32, _acc: f64) -> Result<()> {
            self.seen.losses += 1;
            Ok(())
        }

        fn check(&mut self, t: u64) {
            self.seen.checks.push(t);
        }

        fn state(&self) -> Result<serde_json::Value> {
            to_state(self.name(), &self.seen)
        }

        fn restore(&mut self, state: serde_json::Value) -> Result<()> {
            self.seen = from_state(self.name(), state)?;
            Ok(())
        }

        fn report(&self, _net: &mut TrainNet, _rows: &[TraceRow], _n: u64) -> PolicyReport {
            PolicyReport {
                achieved: Some(self.seen.losses as f64),
                ..PolicyReport::default()
            }
        }
    }

    fn trainer(data: &crate::TrainData) -> Trainer<'_> {
        let net = small_net_scoped(5, true);
        Trainer::new(net, data, config(12), Box::<Toggle>::default()).unwrap()
    }

    #[test]
    fn a_toy_policy_drives_the_trainer_and_resumes_exactly() {
        let data = small_data();
        let mut full = trainer(&data);
        while !full.done() {
            full.step().unwrap();
        }
        let rows = full.rows();
        // one span per iteration and layer: the bits alternate
        assert_eq!(rows.len(), 24);
        assert!(rows
            .iter()
            .all(|r| r.bits.w == if r.iter_start % 2 == 0 { 4 } else { 8 }));
        let toy = full.policy_as::<Toggle>().unwrap();
        assert_eq!(toy.seen.losses, 12);
        assert_eq!(toy.seen.checks, vec![9, 11]);
        let n = full.state.iteration;
        assert_eq!(
            full.policy.report(&mut full.net, &rows, n).achieved,
            Some(12.0)
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut part = trainer(&data);
        for _ in 0..5 {
            part.step().unwrap();
        }
        checkpoint::save(&path, &mut part, serde_json::Value::Null).unwrap();
        let mut resumed = trainer(&data);
        checkpoint::load(&path)
            .unwrap()
            .restore(&mut resumed)
            .unwrap();
        assert_eq!(resumed.policy_as::<Toggle>().unwrap().seen.losses, 5);
        while !resumed.done() {
            resumed.step().unwrap();
        }
        assert_eq!(resumed.rows(), rows);
        assert_eq!(resumed.param_values(), full.param_values());
    }

    #[test]
    fn a_checkpoint_of_another_policy_is_rejected() {
        let data = small_data();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut tr = trainer(&data);
        tr.step().unwrap();
        checkpoint::save(&path, &mut tr, serde_json::Value::Null).unwrap();
        let s = cptsim_traces::schedule::ScheduleArgs::new("static", 12)
            .build()
            .unwrap();
        let mut other = Trainer::new(
            small_net_scoped(5, true),
            &data,
            config(12),
            Box::new(crate::SchedulePolicy(s)),
        )
        .unwrap();
        let e = checkpoint::load(&path)
            .unwrap()
            .restore(&mut other)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`toggle`") && e.contains("`schedule`"), "{e}");
    }
}
