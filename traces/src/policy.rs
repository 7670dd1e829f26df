//! Which precision each conv / linear layer runs at, decided by its [`LayerRole`] (methods.md
//! §1.4): scheduled, kept in fp32, or pinned to fixed bits.

use cptsim_models::LayerRole;

use crate::schedule::Precision;
use crate::Bits;

/// What one role of layer does with the scheduled precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerPrecision {
    /// Weights and activations at the forward bits, errors at the backward bits.
    Scheduled,
    /// Not quantized ([`Bits::FP32`]).
    Fp32,
    /// Fixed bits whatever the schedule says (e.g. FracTrain's depthwise 8/8/16).
    Fixed(Bits),
}

/// A per-role precision policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The first layer (reads the network input).
    pub first: LayerPrecision,
    /// Ordinary body layers.
    pub body: LayerPrecision,
    /// Projection convs on shortcuts.
    pub shortcut: LayerPrecision,
    /// Depthwise convs.
    pub depthwise: LayerPrecision,
    /// The classifier.
    pub last: LayerPrecision,
}

/// Policy names accepted by [`Policy::by_name`].
pub const POLICY_NAMES: &[&str] = &["all", "cifar", "imagenet"];

impl Default for Policy {
    fn default() -> Policy {
        Policy::all_scheduled()
    }
}

impl Policy {
    /// Every conv / linear layer follows the schedule (the papers' cost accounting).
    pub fn all_scheduled() -> Policy {
        use LayerPrecision::Scheduled as S;
        Policy {
            first: S,
            body: S,
            shortcut: S,
            depthwise: S,
            last: S,
        }
    }

    /// CPT's CIFAR code: everything quantized but the final FC.
    pub fn cpt_cifar() -> Policy {
        Policy {
            last: LayerPrecision::Fp32,
            ..Policy::all_scheduled()
        }
    }

    /// CPT's ImageNet code: stem, shortcut convs and FC in fp32.
    pub fn cpt_imagenet() -> Policy {
        use LayerPrecision::Fp32;
        Policy {
            first: Fp32,
            shortcut: Fp32,
            last: Fp32,
            ..Policy::all_scheduled()
        }
    }

    /// Looks a policy up by name (`all`, `cifar`, `imagenet`).
    pub fn by_name(name: &str) -> Option<Policy> {
        match name {
            "all" => Some(Policy::all_scheduled()),
            "cifar" => Some(Policy::cpt_cifar()),
            "imagenet" => Some(Policy::cpt_imagenet()),
            _ => None,
        }
    }

    /// The rule for one role.
    pub fn for_role(&self, role: LayerRole) -> LayerPrecision {
        match role {
            LayerRole::First => self.first,
            LayerRole::Body => self.body,
            LayerRole::Shortcut => self.shortcut,
            LayerRole::Depthwise => self.depthwise,
            LayerRole::Last => self.last,
        }
    }

    /// The bits a layer of `role` runs at when the schedule says `p`.
    pub fn bits(&self, role: LayerRole, p: Precision) -> Bits {
        match self.for_role(role) {
            LayerPrecision::Scheduled => Bits::forward_backward(p.fw, p.bw),
            LayerPrecision::Fp32 => Bits::FP32,
            LayerPrecision::Fixed(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Precision = Precision { fw: 4, bw: 8 };

    #[test]
    fn default_schedules_every_role() {
        let p = Policy::default();
        for role in [
            LayerRole::First,
            LayerRole::Body,
            LayerRole::Shortcut,
            LayerRole::Depthwise,
            LayerRole::Last,
        ] {
            assert_eq!(p.bits(role, P), Bits { w: 4, a: 4, g: 8 });
        }
    }

    #[test]
    fn imagenet_keeps_first_shortcut_last_in_fp32() {
        let p = Policy::cpt_imagenet();
        assert!(p.bits(LayerRole::First, P).is_fp32());
        assert!(p.bits(LayerRole::Shortcut, P).is_fp32());
        assert!(p.bits(LayerRole::Last, P).is_fp32());
        assert_eq!(p.bits(LayerRole::Body, P), Bits { w: 4, a: 4, g: 8 });
        assert!(Policy::cpt_cifar().bits(LayerRole::Last, P).is_fp32());
        assert!(!Policy::cpt_cifar().bits(LayerRole::First, P).is_fp32());
    }

    #[test]
    fn fixed_depthwise_ignores_schedule() {
        let fixed = Bits { w: 8, a: 8, g: 16 };
        let p = Policy {
            depthwise: LayerPrecision::Fixed(fixed),
            ..Policy::default()
        };
        assert_eq!(p.bits(LayerRole::Depthwise, P), fixed);
        assert!(Policy::by_name("imagenet").is_some() && Policy::by_name("x").is_none());
    }
}
