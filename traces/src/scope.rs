//! Which conv/linear layers run quantized (methods.md §1.4): the one scope type of every command.
//! A layer in scope follows the precision schedule (or policy); one out of scope runs in fp32.

use cptsim_models::{LayerRole, ModelSummary};
use serde::{Deserialize, Serialize};

/// Input resolutions of at least this many pixels per side get the ImageNet defaults (fp32 stem
/// and shortcuts); smaller inputs (CIFAR, MNIST) get the CIFAR defaults.
pub const IMAGENET_MIN_SIDE: usize = 64;

/// Quantization scope: whether each layer role follows the precision schedule. `None` takes the
/// reference code's default for the model family (§1.4); `Some` sets the role. Body layers are
/// always in scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Every conv/linear layer in scope (the papers' cost accounting, §2.3).
    pub const ALL: QuantScope = QuantScope::roles(true, true, true, true);

    /// CPT's CIFAR code: every layer but the classifier.
    pub const CPT_CIFAR: QuantScope = QuantScope::roles(true, false, true, true);

    /// CPT's ImageNet code: stem, shortcut convs and classifier in fp32.
    pub const CPT_IMAGENET: QuantScope = QuantScope::roles(false, false, false, true);

    /// A scope that sets every role.
    const fn roles(first: bool, last: bool, shortcut: bool, depthwise: bool) -> QuantScope {
        QuantScope {
            first: Some(first),
            last: Some(last),
            shortcut: Some(shortcut),
            depthwise: Some(depthwise),
        }
    }

    /// This scope, with the roles it leaves unset taken from `base`.
    pub fn or(self, base: QuantScope) -> QuantScope {
        QuantScope {
            first: self.first.or(base.first),
            last: self.last.or(base.last),
            shortcut: self.shortcut.or(base.shortcut),
            depthwise: self.depthwise.or(base.depthwise),
        }
    }

    /// Whether a layer of `role` is in scope in a model whose inputs are CIFAR-sized (sides below
    /// [`IMAGENET_MIN_SIDE`]) or not.
    pub fn quantizes(&self, role: LayerRole, cifar_sized: bool) -> bool {
        match role {
            LayerRole::First => self.first.unwrap_or(cifar_sized),
            LayerRole::Last => self.last.unwrap_or(false),
            LayerRole::Shortcut => self.shortcut.unwrap_or(cifar_sized),
            LayerRole::Depthwise => self.depthwise.unwrap_or(true),
            LayerRole::Body => true,
        }
    }

    /// Whether each layer of `summary` (same order) is in scope.
    pub fn resolve(&self, summary: &ModelSummary) -> Vec<bool> {
        let side = summary.input.iter().skip(2).copied().min().unwrap_or(0);
        let cifar_sized = side < IMAGENET_MIN_SIDE;
        summary
            .layers
            .iter()
            .map(|l| self.quantizes(l.role, cifar_sized))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_model::model;

    const ROLES: [LayerRole; 5] = [
        LayerRole::First,
        LayerRole::Body,
        LayerRole::Shortcut,
        LayerRole::Depthwise,
        LayerRole::Last,
    ];

    #[test]
    fn family_defaults_follow_the_input_size() {
        let mut m = model(&ROLES);
        // CIFAR-sized inputs: only the classifier in fp32; ImageNet-sized: stem, shortcut too.
        for (side, want, preset) in [
            (8, [true, true, true, true, false], QuantScope::CPT_CIFAR),
            (
                224,
                [false, true, false, true, false],
                QuantScope::CPT_IMAGENET,
            ),
        ] {
            m.input = vec![1, 3, side, side];
            let family = QuantScope::default().resolve(&m);
            assert_eq!(family, want, "side {side}");
            assert_eq!(family, preset.resolve(&m), "side {side}");
            assert!(QuantScope::ALL.resolve(&m).iter().all(|&q| q));
        }
    }

    #[test]
    fn set_roles_override_the_base() {
        let m = model(&ROLES);
        let flags = QuantScope {
            last: Some(true),
            depthwise: Some(false),
            ..QuantScope::default()
        };
        let s = flags.or(QuantScope::CPT_IMAGENET);
        assert_eq!(s.resolve(&m), [false, true, false, false, true]);
        assert_eq!(QuantScope::default().or(QuantScope::ALL), QuantScope::ALL);
    }
}
