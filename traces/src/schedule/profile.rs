//! The four precision profiles of Wolfe & Kyrillidis (methods.md §4.1) as real-valued curves over
//! one segment, before rounding: cosine (CPT), linear, exponential (k = 4) and "demon" (β = 0.9).

use std::f64::consts::PI;

use super::BitRange;

/// Steepness of the exponential profile.
const EXP_K: f64 = 4.0;
/// β of the Demon-shaped profile: `y/(1 − β + β·y)`.
const DEMON_BETA: f64 = 0.9;

/// A profile family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Half-cosine, `g(z) = lo + ½(hi − lo)(1 − cos πz)`, evaluated as W&K's code does.
    Cosine,
    /// The same half-cosine evaluated as CPT's code writes it, `lo + ½(hi − lo)(1 + cos(πz + π))`.
    /// The two differ in the last bit at some phases, which decides exact ties (§3.1).
    CosineCpt,
    /// Straight line.
    Linear,
    /// `hi − (hi − lo)·e^{−4z}`: reaches the top early.
    Exp,
    /// `hi − (hi − lo)·y/(0.1 + 0.9y)` with `y = 1 − z`: stays low, rises late.
    Demon,
}

/// Which mirror image of the growth curve a decaying segment uses (§4.1 "flips").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flip {
    /// Reflect the growth curve in the value axis: `d(z) = lo + hi − g(z)`.
    Vertical,
    /// Reflect the growth curve in time: `d(z) = g(1 − z)`.
    Horizontal,
}

fn demon(y: f64) -> f64 {
    y / (1.0 - DEMON_BETA + DEMON_BETA * y)
}

impl Profile {
    /// The growth curve at phase `z ∈ [0, 1)`, rising from `r.min` towards `r.max`.
    pub fn growth(self, z: f64, r: BitRange) -> f64 {
        let (lo, hi) = (f64::from(r.min), f64::from(r.max));
        match self {
            Profile::Cosine => lo + 0.5 * (hi - lo) * (1.0 - (PI * z).cos()),
            Profile::CosineCpt => lo + 0.5 * (hi - lo) * (1.0 + (PI * z + PI).cos()),
            Profile::Linear => lo + (hi - lo) * z,
            Profile::Exp => hi - (hi - lo) * (-EXP_K * z).exp(),
            Profile::Demon => hi - (hi - lo) * demon(1.0 - z),
        }
    }

    /// The decay curve at phase `z ∈ [0, 1)`, falling from `r.max` towards `r.min`.
    ///
    /// Cosine and linear are symmetric, so both flips give the same curve for them.
    pub fn decay(self, z: f64, r: BitRange, flip: Flip) -> f64 {
        let (lo, hi) = (f64::from(r.min), f64::from(r.max));
        match (self, flip) {
            (Profile::Cosine | Profile::CosineCpt, _) => {
                hi - 0.5 * (hi - lo) * (1.0 - (PI * z).cos())
            }
            (Profile::Linear, _) => hi - (hi - lo) * z,
            (Profile::Exp, Flip::Vertical) => lo + (hi - lo) * (-EXP_K * z).exp(),
            (Profile::Exp, Flip::Horizontal) => hi - (hi - lo) * (-EXP_K * (1.0 - z)).exp(),
            (Profile::Demon, Flip::Vertical) => lo + (hi - lo) * demon(1.0 - z),
            (Profile::Demon, Flip::Horizontal) => hi - (hi - lo) * demon(z),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: BitRange = BitRange { min: 3, max: 8 };

    #[test]
    fn growth_starts_at_min_and_approaches_max() {
        for p in [
            Profile::Cosine,
            Profile::Linear,
            Profile::Exp,
            Profile::Demon,
        ] {
            assert!((p.growth(0.0, R) - 3.0).abs() < 1e-12, "{p:?}");
            assert!((p.growth(1.0, R) - 8.0).abs() < 0.1, "{p:?}");
        }
    }

    #[test]
    fn decay_starts_at_max_and_approaches_min() {
        for p in [
            Profile::Cosine,
            Profile::Linear,
            Profile::Exp,
            Profile::Demon,
        ] {
            for f in [Flip::Vertical, Flip::Horizontal] {
                assert!((p.decay(0.0, R, f) - 8.0).abs() < 0.1, "{p:?} {f:?}");
                assert!((p.decay(1.0, R, f) - 3.0).abs() < 0.1, "{p:?} {f:?}");
            }
        }
    }

    #[test]
    fn cpt_tie_at_half_phase_is_exactly_half() {
        // (3,8) at r = ½ must evaluate to exactly 5.5 so that round-half-even gives 6.
        assert_eq!(Profile::CosineCpt.growth(0.5, R), 5.5);
    }
}
