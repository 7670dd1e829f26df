//! Flags choosing which conv/linear layers are quantized (docs/src/guide/shared-flags.md), shared
//! by every command that decides it (`run`, `train`, `forward`, `bench`). An unset flag leaves its
//! role to the command's base scope: the reference code's default for the model family, or `run
//! --policy`'s preset.

use clap::Args;
use cptsim_traces::QuantScope;

/// `--quantize-first/last/shortcut/depthwise true|false`.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct ScopeArgs {
    /// Quantize the first conv/linear layer [default: true for CIFAR-sized inputs, false for
    /// ImageNet-sized ones (side ≥ 64); `run`: as its --policy].
    #[arg(long, value_name = "BOOL")]
    pub quantize_first: Option<bool>,
    /// Quantize the classifier (last layer) [default: false; `run`: as its --policy].
    #[arg(long, value_name = "BOOL")]
    pub quantize_last: Option<bool>,
    /// Quantize 1×1 projection convs on residual shortcuts [default: as --quantize-first; `run`:
    /// as its --policy].
    #[arg(long, value_name = "BOOL")]
    pub quantize_shortcut: Option<bool>,
    /// Quantize depthwise convs [default: true, following the schedule].
    #[arg(long, value_name = "BOOL")]
    pub quantize_depthwise: Option<bool>,
}

impl ScopeArgs {
    /// The roles these flags set (unset roles take the family default when resolved).
    pub fn scope(&self) -> QuantScope {
        QuantScope {
            first: self.quantize_first,
            last: self.quantize_last,
            shortcut: self.quantize_shortcut,
            depthwise: self.quantize_depthwise,
        }
    }
}
