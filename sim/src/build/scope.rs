//! Which conv/linear layers run quantized (spec §1.4), with per-role overrides.

use cptsim_models::{LayerRole, ModelSummary};

/// Input resolutions of at least this many pixels per side get the ImageNet defaults (fp32 stem
/// and shortcuts); smaller inputs (CIFAR, MNIST) get the CIFAR defaults.
pub const IMAGENET_MIN_SIDE: usize = 64;

/// Quantization scope: which layer roles follow the precision schedule. `None` picks the
/// reference code's default for the model family (spec §1.4); `Some` overrides it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuantScope {
    /// The first conv/linear layer (default: quantized on CIFAR-sized inputs, fp32 on ImageNet).
    pub first: Option<bool>,
    /// The classifier (default: fp32).
    pub last: Option<bool>,
    /// 1×1 projection convs on residual shortcuts (default: as `first`).
    pub shortcut: Option<bool>,
    /// Depthwise convs (default: quantized, following the schedule).
    pub depthwise: Option<bool>,
}

impl QuantScope {
    /// Whether each layer of `summary` (same order) is quantized under this scope.
    pub fn resolve(&self, summary: &ModelSummary) -> Vec<bool> {
        let side = summary.input.iter().skip(2).copied().min().unwrap_or(0);
        let cifar = side < IMAGENET_MIN_SIDE;
        summary
            .layers
            .iter()
            .map(|l| match l.role {
                LayerRole::First => self.first.unwrap_or(cifar),
                LayerRole::Last => self.last.unwrap_or(false),
                LayerRole::Shortcut => self.shortcut.unwrap_or(cifar),
                LayerRole::Depthwise => self.depthwise.unwrap_or(true),
                LayerRole::Body => true,
            })
            .collect()
    }
}
