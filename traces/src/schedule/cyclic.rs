//! Cyclic schedules: a profile (§4.1) repeated over segments of `period` iterations in one of three
//! forms — repeated growth (CPT, W&K `<profile>_growth`), triangular (W&K `<profile>_decay`:
//! decay on even segments, growth on odd ones) and annealing (decay restarted every segment, CPT
//! Table 6 "cosine annealing").

use super::profile::{Flip, Profile};
use super::BitRange;

/// How segments are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Every segment rises from min to max, then jumps back (CPT).
    Repeated,
    /// Segments alternate decay (even index, starting at max) and growth (odd index); the decay
    /// segments use the given flip. `cycles` counts segments, i.e. half-triangles (§4.2).
    Triangular(Flip),
    /// Every segment falls from max to min, then jumps back up (SGDR-style).
    Anneal,
}

/// One cyclic schedule shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cyclic {
    /// The curve inside a segment.
    pub profile: Profile,
    /// How segments follow each other.
    pub form: Form,
    /// Segment length in iterations (≥ 1).
    pub period: u64,
}

impl Cyclic {
    /// Real-valued precision at iteration `t` for range `r`, before rounding.
    pub fn value(&self, t: u64, r: BitRange) -> f64 {
        let period = self.period.max(1);
        let segment = t / period;
        let z = (t % period) as f64 / period as f64;
        match self.form {
            Form::Repeated => self.profile.growth(z, r),
            Form::Triangular(flip) if segment.is_multiple_of(2) => self.profile.decay(z, r, flip),
            Form::Triangular(_) => self.profile.growth(z, r),
            Form::Anneal => self.profile.decay(z, r, Flip::Vertical),
        }
    }

    /// Bits at iteration `t`: `value` rounded half-to-even and kept inside `r`.
    pub fn bits(&self, t: u64, r: BitRange) -> u8 {
        r.round(self.value(t, r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: BitRange = BitRange { min: 3, max: 8 };

    fn bits(profile: Profile, form: Form, period: u64, ts: &[u64]) -> Vec<u8> {
        let c = Cyclic {
            profile,
            form,
            period,
        };
        ts.iter().map(|&t| c.bits(t, R)).collect()
    }

    #[test]
    fn cpt_sample_values() {
        // methods.md §3.1: FW(3,8), P = 2000.
        let got = bits(
            Profile::Cosine,
            Form::Repeated,
            2000,
            &[0, 500, 1000, 1500, 1999, 2000],
        );
        assert_eq!(got, [3, 4, 6, 7, 8, 3]);
    }

    #[test]
    fn cpt_ties_round_half_even() {
        // §3.1: at r = ½, (3,8) → 5.5 → 6; (3,6) → 4.5 → 4; (5,8) → 6.5 → 6.
        let c = Cyclic {
            profile: Profile::Cosine,
            form: Form::Repeated,
            period: 2000,
        };
        assert_eq!(c.bits(1000, BitRange { min: 3, max: 8 }), 6);
        assert_eq!(c.bits(1000, BitRange { min: 3, max: 6 }), 4);
        assert_eq!(c.bits(1000, BitRange { min: 5, max: 8 }), 6);
        // Near-ties that are not ties: 4.49993 → 4 and 6.50007 → 7.
        assert_eq!(c.bits(738, R), 4);
        assert_eq!(c.bits(1262, R), 7);
    }

    /// §4.2 sample values, (3,8), P = 8001.
    const TS: [u64; 10] = [0, 1000, 2000, 4000, 6000, 8000, 8001, 9000, 12000, 16002];

    #[test]
    fn wolfe_kyrillidis_sample_values() {
        use Flip::{Horizontal as H, Vertical as V};
        let cases: [(Profile, Form, [u8; 10]); 9] = [
            (
                Profile::Cosine,
                Form::Repeated,
                [3, 3, 4, 5, 7, 8, 3, 3, 5, 3],
            ),
            (
                Profile::Cosine,
                Form::Triangular(V),
                [8, 8, 7, 6, 4, 3, 3, 3, 5, 8],
            ),
            (
                Profile::Linear,
                Form::Repeated,
                [3, 4, 4, 5, 7, 8, 3, 4, 5, 3],
            ),
            (Profile::Exp, Form::Repeated, [3, 5, 6, 7, 8, 8, 3, 5, 7, 3]),
            (
                Profile::Exp,
                Form::Triangular(V),
                [8, 6, 5, 4, 3, 3, 3, 5, 7, 8],
            ),
            (
                Profile::Exp,
                Form::Triangular(H),
                [8, 8, 8, 7, 6, 3, 3, 5, 7, 8],
            ),
            (
                Profile::Demon,
                Form::Repeated,
                [3, 3, 3, 3, 4, 8, 3, 3, 3, 3],
            ),
            (
                Profile::Demon,
                Form::Triangular(V),
                [8, 8, 8, 8, 7, 3, 3, 3, 3, 8],
            ),
            (
                Profile::Demon,
                Form::Triangular(H),
                [8, 5, 4, 3, 3, 3, 3, 3, 3, 8],
            ),
        ];
        for (profile, form, want) in cases {
            assert_eq!(bits(profile, form, 8001, &TS), want, "{profile:?} {form:?}");
        }
    }

    #[test]
    fn anneal_falls_within_each_segment() {
        let got = bits(Profile::Cosine, Form::Anneal, 2000, &[0, 1000, 1999, 2000]);
        assert_eq!(got, [8, 6, 3, 8]);
    }
}
