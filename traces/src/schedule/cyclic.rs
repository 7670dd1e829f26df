//! Cyclic schedules: a profile (§4.1) repeated over segments in one of three forms — repeated
//! growth (CPT, W&K `<profile>_growth`), triangular (W&K `<profile>_decay`: decay on even
//! segments, growth on odd ones) and annealing (decay restarted every segment, CPT Table 6
//! "cosine annealing").
//!
//! Segments are laid out by [`Segments`]: either N whole segments over the run (the remainder of
//! `T/N` spread one iteration at a time, so the last segment ends on the run's last iteration) or
//! a fixed length from iteration 0 (W&K's code, whose last segment the run's end cuts short).

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

/// Where the segments of a run begin and end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segments {
    /// `count` whole segments over `total` iterations: segment `k` covers
    /// `⌊k·T/N⌋ .. ⌊(k+1)·T/N⌋`, so lengths differ by at most one and the last segment ends on the
    /// last iteration. When N divides T this is `Fixed(T/N)` exactly (CPT's code).
    Whole {
        /// Iterations of the run, T ≥ 1.
        total: u64,
        /// Segments, 1 ≤ N ≤ T.
        count: u64,
    },
    /// Segments of a fixed length from iteration 0; the run may end inside the last one.
    Fixed(u64),
}

/// One segment: its index, first iteration and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// 0-based segment index.
    pub index: u64,
    /// First iteration of the segment.
    pub start: u64,
    /// Length in iterations (≥ 1).
    pub len: u64,
}

impl Segment {
    /// One past the segment's last iteration (saturating).
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }
}

impl Segments {
    /// The segment holding iteration `t` (any `t`: past the run the layout continues).
    pub fn locate(&self, t: u64) -> Segment {
        match *self {
            Segments::Fixed(len) => {
                let len = len.max(1);
                let index = t / len;
                Segment {
                    index,
                    start: index * len,
                    len,
                }
            }
            Segments::Whole { total, count } => {
                let (total, count) = (u128::from(total.max(1)), u128::from(count.max(1)));
                // The k with ⌊kT/N⌋ ≤ t < ⌊(k+1)T/N⌋ is ⌈(t+1)N/T⌉ − 1.
                let k = ((u128::from(t) + 1) * count - 1) / total;
                let boundary = |k: u128| k * total / count;
                let (start, end) = (boundary(k), boundary(k + 1));
                // t < 2^64 and T ≥ 1, so k ≤ (t+1)·N/T and both boundaries fit in u64 when
                // t < T; past the run they saturate.
                let cast = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
                Segment {
                    index: cast(k),
                    start: cast(start),
                    len: cast(end - start).max(1),
                }
            }
        }
    }
}

/// One cyclic schedule shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cyclic {
    /// The curve inside a segment.
    pub profile: Profile,
    /// How segments follow each other.
    pub form: Form,
    /// Where segments begin and end.
    pub segments: Segments,
}

impl Cyclic {
    /// Real-valued precision at iteration `t` for range `r`, before rounding.
    pub fn value(&self, t: u64, r: BitRange) -> f64 {
        let seg = self.segments.locate(t);
        let z = (t - seg.start) as f64 / seg.len as f64;
        match self.form {
            Form::Repeated => self.profile.growth(z, r),
            Form::Triangular(flip) if seg.index.is_multiple_of(2) => self.profile.decay(z, r, flip),
            Form::Triangular(_) => self.profile.growth(z, r),
            Form::Anneal => self.profile.decay(z, r, Flip::Vertical),
        }
    }

    /// Bits at iteration `t`: `value` rounded half-to-even and kept inside `r`.
    pub fn bits(&self, t: u64, r: BitRange) -> u8 {
        r.round(self.value(t, r))
    }

    /// One past the last iteration of the segment holding `t`: inside a segment the bits are
    /// monotone in `t` (every profile is), which [`super::Schedule::spans`] relies on.
    pub fn segment_end(&self, t: u64) -> u64 {
        self.segments.locate(t).end()
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
            segments: Segments::Fixed(period),
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
            segments: Segments::Fixed(2000),
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
