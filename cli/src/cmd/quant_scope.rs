//! Flags choosing which conv/linear layers are quantized (spec §1.4), shared by the commands
//! that build a network. Unset flags keep the reference code's default for the model family.

use clap::Args;
use cptsim_sim::build::QuantScope;

/// `--quantize-first/last/shortcut/depthwise true|false`.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct ScopeArgs {
    /// Quantize the first conv/linear layer [default: true for CIFAR-sized inputs, false for
    /// ImageNet-sized ones (side ≥ 64)].
    #[arg(long, value_name = "BOOL")]
    pub quantize_first: Option<bool>,
    /// Quantize the classifier (last layer) [default: false].
    #[arg(long, value_name = "BOOL")]
    pub quantize_last: Option<bool>,
    /// Quantize 1×1 projection convs on residual shortcuts [default: as --quantize-first].
    #[arg(long, value_name = "BOOL")]
    pub quantize_shortcut: Option<bool>,
    /// Quantize depthwise convs [default: true, following the schedule].
    #[arg(long, value_name = "BOOL")]
    pub quantize_depthwise: Option<bool>,
}

impl ScopeArgs {
    /// The library's scope for these flags.
    pub fn scope(&self) -> QuantScope {
        QuantScope {
            first: self.quantize_first,
            last: self.quantize_last,
            shortcut: self.quantize_shortcut,
            depthwise: self.quantize_depthwise,
        }
    }
}
