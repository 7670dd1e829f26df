//! A row-stationary mapping: JSSC 2017's mapping parameters (`e`, `r`, `t`, `p`, `q`, `n`, `m`)
//! plus the strips per GLB block, what they give in passes and cycles, and whether they fit the
//! PE array, the scratchpads and the global buffer.

use serde::Serialize;

use super::shape::Shape;
use crate::architecture::eyeriss::RowStationary;

/// Mapping parameters of one group of a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RsMapping {
    /// Output rows of a PE set (its width): `⌈E/e⌉` strips.
    pub e: u64,
    /// Sets of different channels stacked in a column.
    pub r: u64,
    /// Copies of that stack for different filters.
    pub t: u64,
    /// Channels per PE (ifmap spad `q·S`).
    pub q: u64,
    /// Filters per PE (filter spad `p·q·S`, psum spad `p`).
    pub p: u64,
    /// Images per pass: the filters stay in the spads while they stream through.
    pub n: u64,
    /// Filters whose partial sums stay in the GLB over all channels (a multiple of `p·t`, or M).
    pub m: u64,
    /// Strips whose partial sums and ifmap rows share one GLB block.
    pub sr: u64,
}

impl RsMapping {
    /// Output-row strips.
    pub(crate) fn strips(&self, s: &Shape) -> u64 {
        s.e.div_ceil(self.e)
    }

    /// Filter groups of `p·t` filters (over all filter blocks: `m` is a multiple of `p·t`).
    pub(crate) fn filter_groups(&self, s: &Shape) -> u64 {
        s.m.div_ceil(self.p * self.t)
    }

    /// Channel groups of `q·r` channels.
    pub(crate) fn channel_groups(&self, s: &Shape) -> u64 {
        s.c.div_ceil(self.q * self.r)
    }

    /// Passes per image block: filter groups × channel groups × strips × filter folds.
    pub(crate) fn passes(&self, s: &Shape) -> u64 {
        self.filter_groups(s) * self.channel_groups(s) * self.strips(s) * s.fr * s.fs
    }

    /// PEs a pass uses.
    pub(crate) fn pes(&self, s: &Shape) -> u64 {
        s.rr * self.e * self.r * self.t
    }

    /// Cycles of the whole group: every image runs every pass, `p·q·S·F` MACs per PE (a pass
    /// with fewer real filters, channels or rows than the mapping holds takes as long).
    pub(crate) fn compute_cycles(&self, s: &Shape) -> u64 {
        s.n * self.passes(s) * self.p * self.q * s.ss * s.f * s.passes
    }

    /// Strip blocks and the output rows of a full block.
    pub(crate) fn strip_blocks(&self, s: &Shape) -> u64 {
        self.strips(s).div_ceil(self.sr)
    }

    pub(crate) fn block_rows(&self, s: &Shape) -> u64 {
        (self.sr * self.e).min(s.e)
    }

    /// Bits of one block's ifmap rows of one channel group, all filter rows (the GLB's ifmap part).
    pub(crate) fn ifmap_chunk_bits(&self, s: &Shape) -> u64 {
        let rows = s.rowspan(self.block_rows(s), s.r);
        let words = self.n * (self.q * self.r).min(s.c) * rows * s.colspan(s.s);
        s.input_scale.of(words * s.b_in)
    }

    /// Bits of one block's partial sums (the GLB's psum part).
    pub(crate) fn psum_block_bits(&self, s: &Shape) -> u64 {
        let words = self.n * self.m.min(s.m) * self.block_rows(s) * s.f;
        s.output_scale.of(words * s.b_out)
    }

    /// Whether the sets fit the array and the per-PE data the scratchpads.
    pub(crate) fn fits_array(&self, s: &Shape, hw: &RowStationary) -> bool {
        let stacks_down = hw.rows / s.rr / self.r.max(1);
        self.e >= 1
            && self.e <= hw.cols
            && self.r >= 1
            && self.t >= 1
            && self.t <= stacks_down * (hw.cols / self.e)
            && self.q * s.ss <= hw.ifmap_spad
            && self.p * self.q * s.ss <= hw.filter_spad
            && self.p >= 1
            && self.p <= hw.psum_spad
    }

    /// GLB banks a block needs: its ifmap rows and its partial sums, each in whole banks.
    pub(crate) fn glb_banks(&self, s: &Shape, hw: &RowStationary) -> u64 {
        let banks = |bits: u64| bits.div_ceil(hw.bank_bits.max(1));
        banks(self.ifmap_chunk_bits(s)) + banks(self.psum_block_bits(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::gemm::{ConvProblem, OperandBits};

    const B16: OperandBits = OperandBits {
        stream: 16,
        stationary: 16,
    };

    fn chip() -> RowStationary {
        RowStationary::of(&crate::architecture::config::load("eyeriss").unwrap()).unwrap()
    }

    #[test]
    fn alexnet_conv1_and_conv2_take_the_bit_fusion_authors_eyeriss_cycles() {
        let hw = chip();
        // conv1 (one tower): 3 → 48, 11×11 stride 4, 227 → 55, batch 16. One 11×14 set (e = 14)
        // in ⌈55/14⌉ = 4 strips, 16 filters per PE: 3 channel groups × 3 filter groups × 4
        // strips per image, 16·11·55 cycles each: 5 575 680, the authors' Eyeriss count.
        let c1 = ConvProblem::conv(16, 3, 48, 227, 11, 4, 0);
        let s = Shape::new(&c1, B16, &hw).unwrap();
        let m = RsMapping {
            e: 14,
            r: 1,
            t: 1,
            q: 1,
            p: 16,
            n: 1,
            m: 48,
            sr: 1,
        };
        assert!(m.fits_array(&s, &hw));
        assert_eq!(m.compute_cycles(&s), 5_575_680);
        // conv2: 48 → 128, 5×5, 27×27: two 5×14 sets (a stack of two channel sets), 2 strips,
        // q = 2, p = 16: 16 images × 8 filter groups × 12 channel groups × 2 strips × 16·2·5·27
        let c2 = ConvProblem::conv(16, 48, 128, 27, 5, 1, 2);
        let s = Shape::new(&c2, B16, &hw).unwrap();
        let m = RsMapping {
            e: 14,
            r: 2,
            t: 1,
            q: 2,
            p: 16,
            n: 1,
            m: 128,
            sr: 1,
        };
        assert!(m.fits_array(&s, &hw));
        assert_eq!(m.compute_cycles(&s), 13_271_040);
    }

    #[test]
    fn the_array_and_spads_bound_the_mapping() {
        let hw = chip();
        let p = ConvProblem::conv(1, 64, 64, 16, 3, 1, 1);
        let s = Shape::new(&p, B16, &hw).unwrap();
        let ok = RsMapping {
            e: 14,
            r: 4,
            t: 1,
            q: 4,
            p: 18,
            n: 1,
            m: 18,
            sr: 1,
        };
        assert!(ok.fits_array(&s, &hw));
        // q·S = 15 > 12 ifmap words; p·q·S = 228 > 224 filter words; p = 25 > 24 psums
        assert!(!RsMapping { q: 5, ..ok }.fits_array(&s, &hw));
        assert!(!RsMapping { p: 19, ..ok }.fits_array(&s, &hw));
        assert!(!RsMapping { p: 25, q: 1, ..ok }.fits_array(&s, &hw));
        // four 3-row channel sets fill the 12 rows: no room for a second stack at e = 14 ...
        assert!(!RsMapping { t: 2, ..ok }.fits_array(&s, &hw));
        // ... but at e = 7 two stacks sit side by side, and with r = 1 eight of them
        assert!(RsMapping { e: 7, t: 2, ..ok }.fits_array(&s, &hw));
        assert!(RsMapping {
            e: 7,
            r: 1,
            t: 8,
            ..ok
        }
        .fits_array(&s, &hw));
        assert!(!RsMapping {
            e: 7,
            r: 1,
            t: 9,
            ..ok
        }
        .fits_array(&s, &hw));
    }

    #[test]
    fn glb_blocks_are_counted_in_whole_banks() {
        let hw = chip();
        // 64 → 64, 3×3, 16×16, 2 images: a block of 2 images × 16 channels × 2 strips of 7 rows
        // (16 input rows of 18 columns) and 32 filters' psums of 14 rows × 16 columns
        let p = ConvProblem::conv(2, 64, 64, 16, 3, 1, 1);
        let s = Shape::new(&p, B16, &hw).unwrap();
        let m = RsMapping {
            e: 7,
            r: 4,
            t: 1,
            q: 4,
            p: 16,
            n: 2,
            m: 32,
            sr: 2,
        };
        assert_eq!(m.block_rows(&s), 14);
        assert_eq!(m.ifmap_chunk_bits(&s), 2 * 16 * 16 * 18 * 16);
        assert_eq!(m.psum_block_bits(&s), 2 * 32 * 14 * 16 * 16);
        // 9 216 words = 4.5 banks → 5; 14 336 words = 7 banks
        assert_eq!(m.glb_banks(&s, &hw), 5 + 7);
    }
}
