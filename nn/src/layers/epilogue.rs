//! Evaluation-mode epilogues: the element-wise layers that follow a producing layer (batch norm
//! with its running statistics, ReLU / ReLU6, sigmoid, SiLU (a sigmoid and the product with its
//! input), HardSwish and the other parameter-free functions, a residual add of a value computed
//! earlier),
//! applied by that layer to each block of its output while the block is still in cache, instead
//! of as separate passes over the whole tensor. Each step calls the very kernel its own layer
//! runs ([`cptsim_kernels::elementwise`]), so the values are the same bit for bit; only the
//! memory traffic changes.

use super::{unary, Tensor};
use crate::error::{Result, SimError};
use cptsim_kernels::elementwise::{add_in_place, clamp_in_place, normalize, normalize_add_clamp};
use cptsim_kernels::fastexp::{sigmoid_in_place, silu_in_place};
use cptsim_models::ir::Unary;

/// One per-channel element-wise step (channels are the last axis).
#[derive(Clone, Debug, PartialEq)]
pub enum EpilogueStep {
    /// Batch norm in evaluation: `y = γ·((x − mean)·inv_std) + β`.
    Normalize {
        /// The batch-norm layer (named in errors).
        layer: String,
        /// `[mean, inv_std, γ, β]`, one value per channel each.
        per_channel: [Vec<f32>; 4],
    },
    /// An activation: `y = clamp(x, 0, hi)`.
    Clamp {
        /// The upper bound (`+∞` for ReLU, 6 for ReLU6).
        hi: f32,
    },
    /// A sigmoid: `y = 1 / (1 + e^(−x))` ([`cptsim_kernels::fastexp::sigmoid`]).
    Sigmoid,
    /// SiLU, a sigmoid and the product of its input with it: `y = x·sigmoid(x)`.
    Silu,
    /// A parameter-free function of the IR's `Unary` op (HardSwish, …); a NaN result is an
    /// error naming the layer.
    Unary {
        /// The layer (named in errors).
        layer: String,
        /// The function.
        f: Unary,
    },
    /// A residual add: `y = x + other`, `other` (standard layout) being the add's other operand,
    /// of the output's shape, handed over by the graph since the add was its last reader.
    Add {
        /// The add layer (named in errors).
        layer: String,
        /// The other operand, whole.
        other: Tensor,
    },
}

/// Values (16 KiB) per slice of rows the steps run over together.
const L1_SLICE: usize = 4096;

/// The steps fused after a layer, in graph order (empty: none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue(pub Vec<EpilogueStep>);

impl Epilogue {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Applies every step to `block`, whole rows of `channels` values, which starts at value
    /// `start` of the layer's output (where a residual add reads its other operand).
    pub fn apply(&self, block: &mut [f32], channels: usize, start: usize) -> Result<()> {
        let steps = self.resolve(block.len(), channels, start)?;
        // The steps run over slices of whole rows that fit in L1 (a block larger than the core's
        // caches makes one trip through memory, not one per step), and the usual chain of
        // batch norm, residual add and ReLU in one pass. Every element gets the same operations
        // in the same order either way.
        let rows = (L1_SLICE / channels.max(1)).max(1);
        let len = rows.saturating_mul(channels.max(1));
        for (i, part) in block.chunks_mut(len).enumerate() {
            let (at, n) = (i * len, part.len());
            match steps.as_slice() {
                [Step::Norm(p), Step::Clamp(hi)] => normalize_add_clamp(part, *p, None, *hi),
                [Step::Norm(p), Step::Add(o), Step::Clamp(hi)] => {
                    normalize_add_clamp(part, *p, Some(&o[at..at + n]), *hi)
                }
                steps => {
                    for step in steps {
                        match step {
                            Step::Norm(p) => normalize(part, None, *p),
                            Step::Clamp(hi) => clamp_in_place(part, *hi),
                            Step::Add(o) => add_in_place(part, &o[at..at + n]),
                            Step::Sigmoid => sigmoid_in_place(part),
                            Step::Silu => silu_in_place(part),
                            Step::Unary(layer, f) => unary::map_checked(layer, *f, part)?,
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The steps' operands for a block of `len` values from value `start` of the output, each
    /// checked: a batch norm's channels, a residual add's other operand (its part for the block).
    fn resolve(&self, len: usize, channels: usize, start: usize) -> Result<Vec<Step<'_>>> {
        self.0
            .iter()
            .map(|step| match step {
                EpilogueStep::Normalize { layer, per_channel } => {
                    if per_channel.iter().any(|v| v.len() != channels)
                        || !len.is_multiple_of(channels.max(1))
                    {
                        return Err(SimError::shape(
                            layer,
                            format!(
                                "expects {} channels, its input has {channels}",
                                per_channel[0].len()
                            ),
                        ));
                    }
                    let [mean, inv_std, gamma, beta] = per_channel;
                    Ok(Step::Norm([mean, inv_std, gamma, beta]))
                }
                EpilogueStep::Clamp { hi } => Ok(Step::Clamp(*hi)),
                EpilogueStep::Sigmoid => Ok(Step::Sigmoid),
                EpilogueStep::Silu => Ok(Step::Silu),
                EpilogueStep::Unary { layer, f } => Ok(Step::Unary(layer, *f)),
                EpilogueStep::Add { layer, other } => other
                    .as_slice()
                    .and_then(|o| o.get(start..start.checked_add(len)?))
                    .map(Step::Add)
                    .ok_or_else(|| operands_differ(layer)),
            })
            .collect()
    }

    /// Checks the whole output `y` against the steps: a residual add's other operand must have
    /// its shape (the blocks have read only as much of it as they cover).
    pub fn check_output(&self, y: &Tensor) -> Result<()> {
        self.check_shape(y.shape())
    }

    /// [`Epilogue::check_output`] of an output of shape `shape`, which need not be stored whole.
    pub fn check_shape(&self, shape: &[usize]) -> Result<()> {
        for step in &self.0 {
            if let EpilogueStep::Add { layer, other } = step {
                if other.shape() != shape {
                    return Err(operands_differ(layer));
                }
            }
        }
        Ok(())
    }

    /// Applies every step to the whole of `y` (channels: its last axis), for layers that do not
    /// produce their output in blocks.
    pub fn apply_to(&self, y: &mut Tensor) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        if y.ndim() < 2 {
            if let Some(EpilogueStep::Normalize { layer, .. }) = self.0.first() {
                let shape = y.shape();
                return Err(SimError::shape(
                    layer,
                    format!("expects [N, …, C] (channels last), got {shape:?}"),
                ));
            }
        }
        if y.as_slice_mut().is_none() {
            *y = y.as_standard_layout().into_owned();
        }
        let channels = y.shape().last().copied().unwrap_or(1);
        let data = y.as_slice_mut().unwrap_or_default();
        self.apply(data, channels, 0)
    }
}

/// An [`EpilogueStep`] with its operands resolved for one block.
enum Step<'a> {
    /// `[mean, inv_std, γ, β]`.
    Norm([&'a [f32]; 4]),
    Clamp(f32),
    /// The other operand's values for the block.
    Add(&'a [f32]),
    Sigmoid,
    Silu,
    /// The layer's name and its function.
    Unary(&'a str, Unary),
}

/// The error of a residual add whose operands' shapes differ.
fn operands_differ(layer: &str) -> SimError {
    SimError::shape(layer, "operand shapes differ")
}
