//! DFQ's addition to a gated layer's quantizer: the (activation, error) bits the gate chose for
//! each sample of the pass.

use std::any::Any;

use cptsim_nn::quant::hook::QuantHook;

/// Per-sample (activation bits, error bits) of one gated layer for one pass, in batch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerSampleBits(pub Vec<(u32, u32)>);

impl PerSampleBits {
    /// The hook a gated layer holds for this pass.
    pub fn hook(bits: Vec<(u32, u32)>) -> Option<Box<dyn QuantHook>> {
        Some(Box::new(PerSampleBits(bits)))
    }
}

impl QuantHook for PerSampleBits {
    fn per_sample_bits(&self) -> Option<&[(u32, u32)]> {
        Some(&self.0)
    }

    fn clone_box(&self) -> Box<dyn QuantHook> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
