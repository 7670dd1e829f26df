//! One row of a precision trace: the contract between the trace producers (schedule synthesis,
//! the trainer) and the consumers (BitOPs accounting, accelerator models).

use serde::{Deserialize, Serialize};

/// Bit-widths of the three operand kinds of one layer's training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bits {
    /// Weights.
    pub w: u8,
    /// Activations (the layer's input).
    pub a: u8,
    /// Errors / gradients flowing backward.
    pub g: u8,
}

impl Bits {
    /// All three operands unquantized (full precision). A bit-width of 0 means "fp32", the
    /// convention of the reference code (methods.md notation, §1.5).
    pub const FP32: Bits = Bits { w: 0, a: 0, g: 0 };

    /// The CPT/PFQ convention: weights and activations at `fw`, errors at `bw`.
    pub fn forward_backward(fw: u8, bw: u8) -> Bits {
        Bits {
            w: fw,
            a: fw,
            g: bw,
        }
    }

    /// True when no operand is quantized.
    pub fn is_fp32(&self) -> bool {
        *self == Bits::FP32
    }
}

/// A run-length-encoded span: for every iteration in `iter_start..iter_end`, layer `layer` (its
/// index in `ModelSummary::layers`) ran `samples` samples at `bits`.
///
/// A per-sample mix of precisions within one iteration (DFQ) is several rows with the same span
/// and layer and different bits, whose `samples` add up to the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRow {
    /// First iteration of the span (0-based, inclusive).
    pub iter_start: u64,
    /// One past the last iteration of the span (exclusive).
    pub iter_end: u64,
    /// Index of the layer in the model summary.
    pub layer: u32,
    pub bits: Bits,
    /// Samples per iteration that ran at `bits`.
    pub samples: u64,
}

impl TraceRow {
    /// Iterations covered by the span.
    pub fn iterations(&self) -> u64 {
        self.iter_end.saturating_sub(self.iter_start)
    }
    /// Samples over the whole span (`iterations · samples`), saturating (the readers reject
    /// rows whose product overflows).
    pub fn total_samples(&self) -> u64 {
        self.iterations().saturating_mul(self.samples)
    }
}
