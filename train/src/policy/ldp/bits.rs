//! LDP's map from the learnable scalar β of a layer to its forward bits (spec §8, both readings).

use serde::{Deserialize, Serialize};

use cptsim_nn::error::{Result, SimError};

/// How β becomes bits; the spec leaves the reading of `b = Round(β·N)` open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Reading 1 (default): `N = B_max`, `b = clamp(rne(β·N), B_min, B_max)`.
    Scaled,
    /// Reading 2: `b = B_min + rne(β·(B_max − B_min))` (clamped to the range too).
    Offset,
}

/// A β → bits map over the range `B_min..=B_max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitMap {
    /// Which reading.
    pub mapping: Mapping,
    /// Lowest forward bits.
    pub b_min: u8,
    /// Highest forward bits.
    pub b_max: u8,
}

impl BitMap {
    /// A map over `b_min..=b_max` (needs `1 ≤ b_min < b_max ≤ 32`: a fixed precision leaves
    /// nothing to learn).
    pub fn new(mapping: Mapping, b_min: u8, b_max: u8) -> Result<Self> {
        if b_min == 0 || b_min >= b_max || b_max > 32 {
            return Err(SimError::invalid(
                "LDP bit range",
                format!(
                    "{b_min}:{b_max} (LDP learns bits between B_min and B_max: needs 1 ≤ B_min < B_max ≤ 32)"
                ),
            ));
        }
        Ok(Self {
            mapping,
            b_min,
            b_max,
        })
    }

    /// `∂b/∂β` of the straight-through map: `B_max` (reading 1) or `B_max − B_min` (reading 2).
    pub fn n(&self) -> f64 {
        match self.mapping {
            Mapping::Scaled => f64::from(self.b_max),
            Mapping::Offset => f64::from(self.b_max - self.b_min),
        }
    }

    fn offset(&self) -> f64 {
        match self.mapping {
            Mapping::Scaled => 0.0,
            Mapping::Offset => f64::from(self.b_min),
        }
    }

    /// The unrounded precision `β·N` (+ `B_min` for reading 2).
    pub fn continuous(&self, beta: f64) -> f64 {
        self.offset() + beta * self.n()
    }

    /// The bits of `β`: round half to even, then clamp to the range.
    pub fn bits(&self, beta: f64) -> u8 {
        let b = (beta * self.n()).round_ties_even() + self.offset();
        // Clamped to 1..=32 first, so the cast is exact.
        b.clamp(f64::from(self.b_min), f64::from(self.b_max)) as u8
    }

    /// The β whose unrounded precision is `bits` (the initialisation).
    pub fn beta_for(&self, bits: f64) -> f64 {
        (bits - self.offset()) / self.n()
    }

    /// The β interval whose unrounded precision lies within `[B_min − ½, B_max + ½]`: outside it
    /// the bits are clamped anyway, and clipping β there keeps it from drifting out of reach.
    pub fn beta_bounds(&self) -> (f64, f64) {
        (
            self.beta_for(f64::from(self.b_min) - 0.5),
            self.beta_for(f64::from(self.b_max) + 0.5),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_one_scales_by_b_max_and_clamps() {
        let m = BitMap::new(Mapping::Scaled, 3, 8).unwrap();
        assert_eq!(m.n(), 8.0);
        assert_eq!(m.bits(5.0 / 8.0), 5);
        assert_eq!(m.bits(0.1), 3, "0.8 bits clamps to B_min");
        assert_eq!(m.bits(2.0), 8, "16 bits clamps to B_max");
        // Ties go to even: 5.5 → 6, 4.5 → 4, 6.5 → 6.
        assert_eq!(m.bits(5.5 / 8.0), 6);
        assert_eq!(m.bits(4.5 / 8.0), 4);
        assert_eq!(m.bits(6.5 / 8.0), 6);
        assert_eq!(m.bits(m.beta_for(5.5)), 6, "middle of 3:8 starts at 6 bits");
    }

    #[test]
    fn reading_two_offsets_by_b_min() {
        let m = BitMap::new(Mapping::Offset, 3, 8).unwrap();
        assert_eq!(m.n(), 5.0);
        assert_eq!(m.bits(0.0), 3);
        assert_eq!(m.bits(1.0), 8);
        assert_eq!(m.bits(0.5), 5, "3 + rne(2.5) = 3 + 2");
        let m4 = BitMap::new(Mapping::Offset, 2, 6).unwrap();
        assert_eq!(m4.bits(0.625), 4, "2 + rne(2.5) = 2 + 2");
        assert_eq!(m4.bits(0.875), 6, "2 + rne(3.5) = 2 + 4");
        assert_eq!(m.bits(-1.0), 3);
        assert_eq!(m.bits(3.0), 8);
        assert!((m.continuous(m.beta_for(6.25)) - 6.25).abs() < 1e-12);
    }

    #[test]
    fn bounds_map_to_half_a_bit_outside_the_range() {
        for mapping in [Mapping::Scaled, Mapping::Offset] {
            let m = BitMap::new(mapping, 2, 6).unwrap();
            let (lo, hi) = m.beta_bounds();
            assert!((m.continuous(lo) - 1.5).abs() < 1e-12);
            assert!((m.continuous(hi) - 6.5).abs() < 1e-12);
        }
    }

    #[test]
    fn fixed_or_bad_ranges_are_rejected() {
        for (lo, hi) in [(8, 8), (0, 8), (6, 4), (3, 33)] {
            let e = BitMap::new(Mapping::Scaled, lo, hi)
                .unwrap_err()
                .to_string();
            assert!(e.contains("B_min < B_max"), "{e}");
        }
    }
}
