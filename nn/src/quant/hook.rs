//! What a precision policy adds to one layer's quantizer: a [`QuantHook`] the layer holds and
//! consults, whose type and state belong to the policy that set it (DFQ's per-sample bits in
//! `dfq::PerSampleBits`, LDP's step-size probe in `ldp::StepProbe`). The quantizer itself
//! ([`super::LayerQuant`]) knows no policy.

use std::any::Any;
use std::fmt::Debug;

/// A policy's per-layer addition to the quantizer. Every method has a neutral default.
pub trait QuantHook: Debug + Send {
    /// (activation, error) bits per sample of the batch, overriding the layer's uniform bits for
    /// the activation and the error (SBM's per-sample form; weights stay at `bits_fw`).
    fn per_sample_bits(&self) -> Option<&[(u32, u32)]> {
        None
    }

    /// Whether training passes should report the step-size sensitivity
    /// `Σ dL/dQ·(Q − I)` over the forward operands ([`super::lsq`]) to [`QuantHook::step_residual`].
    fn wants_step_residual(&self) -> bool {
        false
    }

    /// Receives `Σ dL/dQ·(Q − I)` of the last backward pass (0 when the layer ran fp32).
    fn step_residual(&mut self, _dot: f64) {}

    /// A boxed copy (a layer's quantizer is cloned with its hook, e.g. into DFQ's replicas).
    fn clone_box(&self) -> Box<dyn QuantHook>;

    /// The hook as [`Any`], for the policy that set it to read its state back.
    fn as_any(&self) -> &dyn Any;
}

impl Clone for Box<dyn QuantHook> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}
