//! Evaluation-mode epilogues: the per-channel element-wise layers that follow a producing layer
//! (batch norm with its running statistics, ReLU / ReLU6), applied by that layer to each block of
//! its output while the block is still in cache, instead of as separate passes over the whole
//! tensor. Each step calls the very function its own layer runs, so the values are the same bit
//! for bit; only the memory traffic changes.

use super::Tensor;
use crate::error::{Result, SimError};

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
}

/// The steps fused after a layer, in graph order (empty: none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue(pub Vec<EpilogueStep>);

impl Epilogue {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Applies every step to `block`, whole rows of `channels` values.
    pub fn apply(&self, block: &mut [f32], channels: usize) -> Result<()> {
        for step in &self.0 {
            match step {
                EpilogueStep::Normalize { layer, per_channel } => {
                    if per_channel[0].len() != channels
                        || !block.len().is_multiple_of(channels.max(1))
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
                    super::batchnorm::normalize(block, None, [mean, inv_std, gamma, beta]);
                }
                EpilogueStep::Clamp { hi } => super::activation::clamp_in_place(block, *hi),
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
        self.apply(data, channels)
    }
}
