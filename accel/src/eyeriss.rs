//! Eyeriss (Chen et al., ISCA 2016 / JSSC 2017) as the Bit Fusion paper's baseline: a 12×14 array
//! of 16-bit PEs running the row-stationary (RS) dataflow.
//!
//! RS maps each 2-D convolution (one input channel, one filter, one sample) onto a *PE set* of
//! `R × E` PEs — `R` filter rows down the array, `E` output rows across it — each PE running the
//! 1-D convolution of one filter row over one input row: `S·F` MACs (`S` filter columns, `F`
//! output columns). A set taller than the array's rows is folded over `⌈R/rows⌉` passes and one
//! wider than its columns over `⌈E/cols⌉` strips; smaller sets are replicated
//! `⌊rows/R⌋ · ⌊cols/E⌋` times and work on different (channel, filter, sample) triples, which the
//! PE scratchpads reuse. Cycles of a tile: `⌈C·M·N / sets⌉ · ⌈R/rows⌉ · ⌈E/cols⌉ · S · F`.
//! One MAC per PE per cycle at up to 16 bits: lower precision gains nothing; wider operands run
//! as `⌈p/16⌉` passes each with the multi-pass extension.

use crate::gemm::{ConvProblem, OperandBits};
use crate::tiling::{ArrayLaw, Tile};

/// Width of the PEs' operands.
pub const NATIVE_BITS: u32 = 16;

/// The row-stationary law of an Eyeriss array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EyerissLaw {
    /// PE rows (filter rows of a set).
    pub rows: u64,
    /// PE columns (output rows of a set).
    pub cols: u64,
}

fn passes(p: u32) -> u64 {
    u64::from(p.max(1)).div_ceil(u64::from(NATIVE_BITS))
}

/// Operands as Eyeriss stores and moves them: whole 16-bit words (Eyeriss is a 16-bit
/// fixed-point design, and the Bit Fusion authors' Eyeriss data count DRAM and buffer accesses
/// in 16-bit words whatever the layer's bits), so a 4-bit operand occupies and moves 16 bits.
/// Cycles are unchanged: [`passes`] of a rounded width equals that of the width.
pub fn stored_bits(bits: OperandBits) -> OperandBits {
    let word = |p: u32| p.max(1).div_ceil(NATIVE_BITS).saturating_mul(NATIVE_BITS);
    OperandBits {
        stream: word(bits.stream),
        stationary: word(bits.stationary),
    }
}

impl ArrayLaw for EyerissLaw {
    fn tile_cycles(&self, problem: &ConvProblem, t: &Tile, bits: OperandBits) -> u64 {
        let (r, s) = (problem.kernel_h.max(1), problem.kernel_w.max(1));
        let (e, f) = (t.oh.max(1), t.ow.max(1));
        let sets = (self.rows / r).max(1) * (self.cols / e).max(1);
        let work = t.ic * t.oc * t.b;
        work.div_ceil(sets)
            * r.div_ceil(self.rows)
            * e.div_ceil(self.cols)
            * s
            * f
            * passes(bits.stream)
            * passes(bits.stationary)
    }

    fn oc_granule(&self) -> u64 {
        1
    }

    fn padded_reduction(&self, len: u64, _bits: OperandBits) -> u64 {
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EYERISS: EyerissLaw = EyerissLaw { rows: 12, cols: 14 };
    const B16: OperandBits = OperandBits {
        stream: 16,
        stationary: 16,
    };

    fn whole(p: &ConvProblem) -> Tile {
        Tile::whole(p)
    }

    #[test]
    fn alexnet_layers_by_hand() {
        // conv1 (one tower): 3 → 48, 11×11 stride 4, 227 → 55, batch 16. One 11×55 set folded
        // into ⌈55/14⌉ = 4 strips: 3·48·16 · 4 · 11 · 55 = 5 575 680 cycles (the Bit Fusion
        // authors' Eyeriss results list the same count for this layer)
        let c1 = ConvProblem::conv(16, 3, 48, 227, 11, 4, 0);
        assert_eq!(EYERISS.tile_cycles(&c1, &whole(&c1), B16), 5_575_680);
        // conv2: 48 → 128, 5×5, 27×27: two 5-row sets, 2 strips: 48·128·16/2 · 2 · 5 · 27
        let c2 = ConvProblem::conv(16, 48, 128, 27, 5, 1, 2);
        assert_eq!(EYERISS.tile_cycles(&c2, &whole(&c2), B16), 13_271_040);
    }

    #[test]
    fn precision_gains_nothing_below_16_bits() {
        let p = ConvProblem::conv(2, 16, 16, 8, 3, 1, 1);
        let t = whole(&p);
        let b4 = OperandBits {
            stream: 4,
            stationary: 4,
        };
        assert_eq!(
            EYERISS.tile_cycles(&p, &t, b4),
            EYERISS.tile_cycles(&p, &t, B16)
        );
        let b32 = OperandBits {
            stream: 32,
            stationary: 16,
        };
        assert_eq!(
            EYERISS.tile_cycles(&p, &t, b32),
            2 * EYERISS.tile_cycles(&p, &t, B16)
        );
    }

    #[test]
    fn operands_are_stored_as_16_bit_words() {
        let b = OperandBits {
            stream: 4,
            stationary: 17,
        };
        let s = stored_bits(b);
        assert_eq!((s.stream, s.stationary), (16, 32));
        assert_eq!(stored_bits(B16), B16);
        let p = ConvProblem::conv(2, 16, 16, 8, 3, 1, 1);
        let t = whole(&p);
        assert_eq!(
            EYERISS.tile_cycles(&p, &t, s),
            EYERISS.tile_cycles(&p, &t, b)
        );
    }

    #[test]
    fn fc_fills_every_pe() {
        // 1×1 sets: 168 of them share 4096·1000·16 MACs
        let p = ConvProblem::fc(16, 4096, 1000);
        assert_eq!(
            EYERISS.tile_cycles(&p, &whole(&p), B16),
            (4096u64 * 1000 * 16).div_ceil(168)
        );
    }
}
