//! Bit Fusion's precision→throughput law (docs/src/accelerators/bitfusion.md): an N×M array of Fusion Units, each
//! fusing 16 BitBricks into `pf(p_a, p_w)` products per cycle along the reduction axis.

use crate::architecture::law::ArrayLaw;
use crate::workload::gemm::{ConvProblem, OperandBits};
use crate::workload::tile::Tile;

/// Widest operand one Fusion Unit multiplies in one pass.
pub const NATIVE_BITS: u32 = 8;

/// Products per Fusion Unit per pass for one operand: `floor(8 / max(p, 2))`, 1-bit as 2-bit.
fn lanes(p: u32) -> u64 {
    u64::from(NATIVE_BITS / p.clamp(2, NATIVE_BITS))
}

/// Passes of the multi-pass extension for one operand: `ceil(p / 8)`.
fn passes(p: u32) -> u64 {
    u64::from(p.max(1)).div_ceil(u64::from(NATIVE_BITS))
}

/// Throughput factor `pf(p_a, p_w) = floor(8/max(p_a,2)) · floor(8/max(p_w,2))`, divided by the
/// passes of the multi-pass extension for operands wider than 8 bits (16×16 → 0.25).
pub fn throughput_factor(bits: OperandBits) -> f64 {
    let (num, den) = pf_ratio(bits);
    num as f64 / den as f64
}

/// `pf` as products per pass over passes.
fn pf_ratio(bits: OperandBits) -> (u64, u64) {
    (
        lanes(bits.stream) * lanes(bits.stationary),
        passes(bits.stream) * passes(bits.stationary),
    )
}

/// The Bit Fusion array law.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitFusionLaw {
    /// Fusion Units along the reduction axis.
    pub n: u64,
    /// Fusion Units along the output channels.
    pub m: u64,
}

impl BitFusionLaw {
    /// Reduction steps for a reduction of `len`: `ceil(len / (N · pf))`.
    pub fn reduction_steps(&self, len: u64, bits: OperandBits) -> u64 {
        let (products, passes) = pf_ratio(bits);
        (len * passes).div_ceil(self.n * products)
    }
}

impl ArrayLaw for BitFusionLaw {
    /// `B_t · ceil(OC_t/M) · OH_t · OW_t · K · K · ceil(IC_t/(N·pf))`, or for the im2col'ed first
    /// layer `B_t · OH_t · OW_t · ceil(OC_t/M) · ceil(K·K·IC_t/(N·pf))`.
    fn tile_cycles(&self, problem: &ConvProblem, t: &Tile, bits: OperandBits) -> u64 {
        let pixels = t.b * t.oc.div_ceil(self.m) * t.oh * t.ow;
        if problem.im2col {
            pixels * self.reduction_steps(problem.taps() * t.ic, bits)
        } else {
            pixels * problem.taps() * self.reduction_steps(t.ic, bits)
        }
    }

    fn oc_granule(&self) -> u64 {
        self.m
    }

    /// The authors' simulator moves the padded tiles and reads partial sums back as often as it
    /// writes them.
    fn reference_dram_rules(&self) -> bool {
        true
    }

    /// Multiples of `N · pf` (N·pf/passes with the multi-pass extension).
    fn padded_reduction(&self, len: u64, bits: OperandBits) -> u64 {
        let (products, passes) = pf_ratio(bits);
        let lanes = (self.n * products / passes).max(1);
        len.next_multiple_of(lanes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(a: u32, w: u32) -> OperandBits {
        OperandBits {
            stream: a,
            stationary: w,
        }
    }

    #[test]
    fn throughput_factor_table() {
        assert_eq!(throughput_factor(b(8, 8)), 1.0);
        assert_eq!(throughput_factor(b(8, 4)), 2.0);
        assert_eq!(throughput_factor(b(4, 4)), 4.0);
        assert_eq!(throughput_factor(b(4, 2)), 8.0);
        assert_eq!(throughput_factor(b(2, 2)), 16.0);
        assert_eq!(throughput_factor(b(1, 1)), 16.0);
        assert_eq!(throughput_factor(b(3, 3)), 4.0);
        assert_eq!(throughput_factor(b(5, 6)), 1.0);
        assert_eq!(throughput_factor(b(16, 16)), 0.25);
        assert_eq!(throughput_factor(b(16, 8)), 0.5);
    }

    #[test]
    fn tile_cycles_formula_by_hand() {
        let law = BitFusionLaw { n: 16, m: 32 };
        let p = ConvProblem::conv(4, 64, 64, 8, 3, 1, 1);
        let t = Tile {
            b: 2,
            oc: 64,
            oh: 4,
            ow: 4,
            ic: 64,
        };
        // 2 · ceil(64/32) · 4 · 4 · 9 · ceil(64/(16·4)) = 2·2·16·9·1 = 576 at 4×4 bits
        assert_eq!(law.tile_cycles(&p, &t, b(4, 4)), 576);
        // 8×8: pf 1 → ceil(64/16) = 4 → 2304
        assert_eq!(law.tile_cycles(&p, &t, b(8, 8)), 2304);
        // 16×16 extension: ceil(64·4/16) = 16 → 9216
        assert_eq!(law.tile_cycles(&p, &t, b(16, 16)), 9216);
        // im2col: 2 · 2 · 16 pixels · ceil(9·64/64) = 576 at 4×4
        assert_eq!(law.tile_cycles(&p.im2col(), &t, b(4, 4)), 2 * 2 * 16 * 9);
    }

    #[test]
    fn weight_padding_follows_lanes() {
        let law = BitFusionLaw { n: 16, m: 32 };
        assert_eq!(law.padded_reduction(3, b(8, 8)), 16);
        assert_eq!(law.padded_reduction(17, b(2, 2)), 256);
        assert_eq!(law.padded_reduction(17, b(16, 16)), 20);
        assert_eq!(law.padded_reduction(17, b(32, 32)), 17);
    }
}
