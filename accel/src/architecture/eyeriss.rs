//! Eyeriss (Chen, Emer & Sze, ISCA 2016; Chen et al., JSSC 2017) as the Bit Fusion paper's
//! baseline: an array of 16-bit PEs with three scratchpads each and a banked global buffer,
//! running the row-stationary dataflow ([`crate::mapping::row_stationary`]). Operands are stored
//! and moved as 16-bit words ([`stored_bits`]).

use super::config::{ArrayShape, RowStationaryParams};
use crate::workload::gemm::OperandBits;

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
    /// The array of `[array]` with the storage of `[row_stationary]`.
    pub fn new(array: &ArrayShape, p: &RowStationaryParams) -> Self {
        let banks = p.glb_banks.max(1);
        Self {
            rows: array.rows,
            cols: array.cols,
            banks,
            bank_bits: p.glb_kib.saturating_mul(8 * 1024) / banks,
            ifmap_spad: p.ifmap_spad_words,
            filter_spad: p.filter_spad_words,
            psum_spad: p.psum_spad_words,
            array_pj_per_bit: p.array_pj_per_bit,
        }
    }

    /// The array of a built-in or file configuration of the `eyeriss` engine (`None` for other
    /// engines).
    pub fn of(config: &super::config::AccelConfig) -> Option<Self> {
        match &config.engine {
            super::config::EngineConfig::Eyeriss(e) => {
                Some(Self::new(&config.array, &e.row_stationary))
            }
            _ => None,
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
        let c = crate::architecture::config::load("eyeriss").unwrap();
        let hw = RowStationary::of(&c).unwrap();
        assert_eq!((hw.rows, hw.cols, hw.banks), (12, 14, 27));
        assert_eq!(hw.bank_bits, 4 * 8192);
        assert_eq!((hw.ifmap_spad, hw.filter_spad, hw.psum_spad), (12, 224, 24));
    }
}
