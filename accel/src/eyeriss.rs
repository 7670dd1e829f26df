//! Eyeriss (Chen, Emer & Sze, ISCA 2016; Chen et al., JSSC 2017) as the Bit Fusion paper's
//! baseline: an array of 16-bit PEs running the row-stationary (RS) dataflow, with its own data
//! movement model (not the shared tiler of the other arrays).
//!
//! **Compute.** RS maps the 2-D convolution of one channel, one filter and one image onto a
//! *logical PE set* of `R × E` PEs — filter rows down, output rows across — each PE running the
//! 1-D convolution of one filter row over one ifmap row (`S·F` MACs). Sets wider than the array
//! are strip-mined into `⌈E/e⌉` strips of `e ≤ cols` output rows; taller ones are folded over
//! `⌈R/rows⌉` passes. Inside a PE the scratchpads hold `q` channels (`q·S ≤` ifmap spad) of `p`
//! filters (`p·q·S ≤` filter spad, `p ≤` psum spad). In the array, `r` sets of different
//! channels are stacked in a column (their partial sums chain upward) and that stack is copied
//! `t` times for different filters. A *pass* computes `p·t` filters × `q·r` channels × one strip
//! for `n` images in turn, the filters staying in the spads: `n·p·q·S·F` cycles. Mapping
//! parameters and their names are JSSC 2017's ([`RsMapping`]); one MAC per PE per cycle at up to
//! 16 bits, wider operands as `⌈p/16⌉` passes each (multi-pass extension).
//!
//! **Storage and data movement** ([`Movement`]). Filters go from DRAM over the array's network
//! straight into the filter spads (they bypass the global buffer, GLB). The GLB holds, per block
//! of `n` images × `m` filters × `sr` strips, the partial sums of the block (accumulated there
//! over every channel group, so never spilled to DRAM) and the ifmap rows of the current channel
//! group (read once from DRAM per block of `m` filters and reused by the `⌈m/(p·t)⌉` filter groups),
//! each allocated in whole GLB banks. Loop nest, outermost first: image blocks, filter blocks,
//! strip blocks, channel groups, filter groups, strips of the block, the pass.
//!
//! **Energy by level**, with Eyeriss's normalised costs per 16-bit access (ISCA 2016: ALU 1×, RF
//! 1×, array 2×, GLB 6×, DRAM 200×): ALU and four RF accesses per MAC (`mac_pj`), array words
//! (ifmap and filter deliveries to PEs, psum hops between PEs; `array_pj_per_bit`), GLB accesses
//! (ifmap fills and reads, psum reads and writes; `[energy]` `input_*`/`output_*`), DRAM.
//!
//! **Choice.** The least energy × delay (energy with the ALU and RF, delay in total cycles), then
//! the fewest cycles. Eyeriss's own mapper optimises energy, the rest of cptsim cycles; either
//! alone buys little at a high price on the Bit Fusion benchmarks (least energy: the 12×14 array
//! 1.45× slower for 1 % less energy; fewest cycles: FC layers 0.5 % faster at 1.3× the energy,
//! their partial sums going through the GLB every 4 channels), and the product needs no
//! weighting constant.

use crate::config::AccelConfig;
use crate::gemm::OperandBits;

mod mapping;
mod movement;
mod search;
mod shape;

pub use mapping::RsMapping;
pub use movement::Movement;
pub use search::RsCost;

/// Width of the PEs' operands.
pub const NATIVE_BITS: u32 = 16;

/// Operands as Eyeriss stores and moves them: whole 16-bit words (Eyeriss is a 16-bit
/// fixed-point design, and the Bit Fusion authors' Eyeriss data count DRAM and buffer accesses
/// in 16-bit words whatever the layer's bits), so a 4-bit operand occupies and moves 16 bits.
/// Cycles are unchanged: the passes of a rounded width equal those of the width.
pub fn stored_bits(bits: OperandBits) -> OperandBits {
    let word = |p: u32| p.max(1).div_ceil(NATIVE_BITS).saturating_mul(NATIVE_BITS);
    OperandBits {
        stream: word(bits.stream),
        stationary: word(bits.stationary),
    }
}

/// Bits of an output (partial sum, ofmap) word for these operands: 16 (Eyeriss's psum spads,
/// GLB and ofmaps hold 16-bit words), or the wider operand's multi-pass width.
pub fn output_bits(bits: OperandBits) -> u32 {
    let s = stored_bits(bits);
    s.stream.max(s.stationary)
}

/// An Eyeriss array as the row-stationary model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStationary {
    /// PE rows (filter rows of the sets; channel sets stack along them).
    pub rows: u64,
    /// PE columns (output rows of the sets).
    pub cols: u64,
    /// Global buffer banks and the bits of each.
    pub banks: u64,
    pub bank_bits: u64,
    /// Scratchpads of a PE, in 16-bit words.
    pub ifmap_spad: u64,
    pub filter_spad: u64,
    pub psum_spad: u64,
    /// Energy of a bit crossing the array's network, pJ.
    pub array_pj_per_bit: f64,
}

impl RowStationary {
    /// The array of a configuration: `[array]` and `[row_stationary]`. Without the section
    /// (a configuration built in code; validation requires it) the storage is empty and no
    /// layer maps.
    pub fn of(config: &AccelConfig) -> Self {
        let (rows, cols) = (config.array.rows, config.array.cols);
        match &config.row_stationary {
            Some(p) => {
                let banks = p.glb_banks.max(1);
                Self {
                    rows,
                    cols,
                    banks,
                    bank_bits: p.glb_kib.saturating_mul(8 * 1024) / banks,
                    ifmap_spad: p.ifmap_spad_words,
                    filter_spad: p.filter_spad_words,
                    psum_spad: p.psum_spad_words,
                    array_pj_per_bit: p.array_pj_per_bit,
                }
            }
            None => Self {
                rows,
                cols,
                banks: 0,
                bank_bits: 0,
                ifmap_spad: 0,
                filter_spad: 0,
                psum_spad: 0,
                array_pj_per_bit: 0.0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_stored_as_16_bit_words() {
        let b = OperandBits {
            stream: 4,
            stationary: 17,
        };
        let s = stored_bits(b);
        assert_eq!((s.stream, s.stationary), (16, 32));
        assert_eq!(output_bits(b), 32);
        let b16 = OperandBits {
            stream: 16,
            stationary: 16,
        };
        assert_eq!(stored_bits(b16), b16);
        assert_eq!(
            output_bits(stored_bits(OperandBits {
                stream: 1,
                stationary: 2
            })),
            16
        );
    }

    #[test]
    fn the_builtin_is_the_eyeriss_chip() {
        // 12×14 PEs; 108 KiB GLB in 27 banks of 4 KiB; spads of 12, 224 and 24 words
        let c = crate::config::load("eyeriss").unwrap();
        let hw = RowStationary::of(&c);
        assert_eq!((hw.rows, hw.cols, hw.banks), (12, 14, 27));
        assert_eq!(hw.bank_bits, 4 * 8192);
        assert_eq!((hw.ifmap_spad, hw.filter_spad, hw.psum_spad), (12, 224, 24));
    }
}
