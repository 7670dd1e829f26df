//! Stripes and its DaDianNao baseline (accelerators.md §2): 16 tiles × 16 filter lanes × 16 input
//! lanes. DaDianNao computes one window per tile per cycle with 16-bit bit-parallel MACs; Stripes
//! computes 16 windows per tile bit-serially in the streamed operand (one step takes `p` cycles).

use crate::gemm::{ConvProblem, OperandBits};
use crate::tiling::{ArrayLaw, Tile};

/// Width of the bit-parallel operands.
pub const NATIVE_BITS: u32 = 16;
/// Windows a Stripes tile processes at once.
pub const WINDOW_LANES: u64 = 16;

/// The Stripes (bit-serial) or DaDianNao (bit-parallel) law.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripesLaw {
    /// Input lanes per tile (reduction).
    pub input_lanes: u64,
    /// Filters across all tiles (16 tiles × 16 filter lanes).
    pub filter_lanes: u64,
    /// Stripes when true, DaDianNao when false.
    pub serial: bool,
}

fn passes(p: u32) -> u64 {
    u64::from(p.max(1)).div_ceil(u64::from(NATIVE_BITS))
}

impl StripesLaw {
    /// Whether `problem` runs bit-serially: Stripes needs window parallelism, so a problem with one
    /// window per sample (an FC layer) runs as DaDianNao does.
    pub fn runs_serial(&self, problem: &ConvProblem) -> bool {
        self.serial && problem.pixels() > 1
    }
}

impl ArrayLaw for StripesLaw {
    /// DaDianNao: `B · windows · K·K · ceil(C_in/16) · ceil(C_out/256)` (× passes beyond 16 bits);
    /// Stripes: `B · ceil(windows/16) · K·K · ceil(C_in/16) · ceil(C_out/256) · p_stream`.
    fn tile_cycles(&self, problem: &ConvProblem, t: &Tile, bits: OperandBits) -> u64 {
        let common = t.b
            * problem.taps()
            * t.ic.div_ceil(self.input_lanes)
            * t.oc.div_ceil(self.filter_lanes);
        let windows = t.oh * t.ow;
        if self.runs_serial(problem) {
            common
                * windows.div_ceil(WINDOW_LANES)
                * u64::from(bits.stream)
                * passes(bits.stationary)
        } else {
            common * windows * passes(bits.stream) * passes(bits.stationary)
        }
    }

    fn oc_granule(&self) -> u64 {
        self.filter_lanes
    }

    fn padded_reduction(&self, len: u64, _bits: OperandBits) -> u64 {
        len.next_multiple_of(self.input_lanes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DADN: StripesLaw = StripesLaw {
        input_lanes: 16,
        filter_lanes: 256,
        serial: false,
    };
    const STR: StripesLaw = StripesLaw {
        input_lanes: 16,
        filter_lanes: 256,
        serial: true,
    };

    fn whole(p: &ConvProblem) -> Tile {
        Tile {
            b: p.batch,
            oc: p.out_ch,
            oh: p.out_h,
            ow: p.out_w,
            ic: p.in_ch,
        }
    }

    #[test]
    fn conv_speedup_is_16_over_pa_when_windows_fill_the_lanes() {
        let p = ConvProblem::conv(1, 64, 128, 16, 3, 1, 1); // 256 windows
        let t = whole(&p);
        for pa in 1..=16u32 {
            let bits = OperandBits {
                stream: pa,
                stationary: 16,
            };
            let d = DADN.tile_cycles(&p, &t, bits);
            let s = STR.tile_cycles(&p, &t, bits);
            assert_eq!(d * u64::from(pa), s * 16, "p_a = {pa}");
            // weights stay bit-parallel: p_w does not change time
            let bits2 = OperandBits {
                stream: pa,
                stationary: 4,
            };
            assert_eq!(STR.tile_cycles(&p, &t, bits2), s);
        }
        // hand value: 256 windows · 9 · ceil(64/16) · ceil(128/256) = 9216 DaDianNao cycles
        assert_eq!(
            DADN.tile_cycles(
                &p,
                &t,
                OperandBits {
                    stream: 16,
                    stationary: 16
                }
            ),
            9216
        );
    }

    #[test]
    fn fc_gains_nothing() {
        let p = ConvProblem::fc(1, 1024, 512);
        let t = whole(&p);
        for pa in [2u32, 8, 16] {
            let bits = OperandBits {
                stream: pa,
                stationary: 16,
            };
            assert_eq!(
                STR.tile_cycles(&p, &t, bits),
                DADN.tile_cycles(&p, &t, bits)
            );
        }
    }
}
