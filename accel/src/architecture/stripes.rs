//! Stripes and its DaDianNao baseline (docs/src/accelerators/stripes.md): 16 tiles × 16 filter lanes × 16 input
//! lanes. DaDianNao computes one window per tile per cycle with 16-bit bit-parallel MACs; Stripes
//! computes 16 windows per tile bit-serially in the streamed operand (one step takes `p` cycles).
//!
//! Two rules of the Stripes group's own simulator (DNNsim): a conv with 3 input channels and
//! stride `s > 1` (an image-facing first layer) runs as a stride-1 conv with `3·s²` channels and
//! a `⌈K/s⌉` kernel ([`space_to_depth`]); a Stripes FC layer takes DaDianNao's cycles plus `p − 1`
//! (the bit-serial pipeline's fill, [`StripesLaw::fixed_cycles`]). As in DNNsim, a problem's
//! compute cycles do not depend on how it is tiled for the buffers ([`StripesLaw::tiled_cycles`]).

use crate::architecture::law::ArrayLaw;
use crate::workload::gemm::{ConvProblem, OperandBits};
use crate::workload::tile::Tile;

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

/// DNNsim's first-layer rule: a conv over 3 channels with stride `s > 1` becomes the stride-1 conv
/// over the `3·s²` channels of the space-to-depth input with a `⌈K/s⌉` kernel (same outputs);
/// any other problem is returned unchanged.
pub fn space_to_depth(p: &ConvProblem) -> ConvProblem {
    let s = p.stride;
    if p.in_ch != 3 || s <= 1 || p.groups > 1 || p.im2col {
        return *p;
    }
    ConvProblem {
        in_ch: 3 * s * s,
        kernel_h: p.kernel_h.div_ceil(s),
        kernel_w: p.kernel_w.div_ceil(s),
        stride: 1,
        ..*p
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

    /// Stripes on a problem without window parallelism (FC): DaDianNao's cycles plus `p − 1`.
    fn fixed_cycles(&self, problem: &ConvProblem, bits: OperandBits) -> u64 {
        if self.serial && !self.runs_serial(problem) {
            u64::from(bits.stream.max(1) - 1)
        } else {
            0
        }
    }

    fn padded_reduction(&self, len: u64, _bits: OperandBits) -> u64 {
        len.next_multiple_of(self.input_lanes)
    }

    /// The 16 input lanes: a tile's reduction steps 16 channels at a time (DNNsim's dataflow), so
    /// a memory-bound layer is not split into narrower tiles that would leave lanes idle.
    fn ic_granule(&self) -> u64 {
        self.input_lanes
    }

    /// The whole problem's count, whatever the memory tiling: windows stream through the lanes
    /// across spatial tiles (Stripes' groups of 16 windows are formed from the layer's window
    /// sequence, not per tile) and a partial last tile steps only its real channels and filters,
    /// as in DNNsim.
    fn tiled_cycles(
        &self,
        problem: &ConvProblem,
        _tile: &Tile,
        _tiles: u64,
        bits: OperandBits,
    ) -> u64 {
        self.tile_cycles(problem, &Tile::whole(problem), bits)
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
        Tile::whole(p)
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
    fn first_layer_runs_space_to_depth() {
        // AlexNet conv1: 3 → 96, 11×11 stride 4, 227 → 55. DNNsim: 48 channels, 3×3 kernel:
        // 3025 windows · 9 · ceil(48/16) · ceil(96/256) = 81 675 DaDianNao cycles (not
        // 3025 · 121 · 1 = 366 025)
        let p = ConvProblem::conv(1, 3, 96, 227, 11, 4, 0);
        assert_eq!(p.out_h, 55);
        let q = space_to_depth(&p);
        assert_eq!((q.in_ch, q.kernel_h, q.stride), (48, 3, 1));
        assert_eq!(q.out_h, 55);
        let full = OperandBits {
            stream: 16,
            stationary: 16,
        };
        assert_eq!(DADN.tile_cycles(&q, &whole(&q), full), 81_675);
        // ResNet-18 conv1: 7×7 stride 2 → 12 channels, 4×4 kernel
        let r = space_to_depth(&ConvProblem::conv(1, 3, 64, 224, 7, 2, 3));
        assert_eq!((r.in_ch, r.kernel_h, r.out_h), (12, 4, 112));
        // stride 1 or more channels: unchanged
        let s1 = ConvProblem::conv(1, 3, 16, 32, 3, 1, 1);
        assert_eq!(space_to_depth(&s1), s1);
        let c16 = ConvProblem::conv(1, 16, 16, 32, 3, 2, 1);
        assert_eq!(space_to_depth(&c16), c16);
    }

    #[test]
    fn tiling_does_not_change_the_count() {
        // AlexNet conv1 after space-to-depth: 55 × 55 windows. In 8 × 8 spatial tiles (7 × 7 of
        // them, the last row and column partial) Stripes still forms ⌈3025/16⌉ = 190 groups of
        // windows, not 49 · ⌈64/16⌉ = 196; a 32-channel tile of 48 channels steps 3 lane groups
        let q = space_to_depth(&ConvProblem::conv(1, 3, 96, 227, 11, 4, 0));
        let bits = OperandBits {
            stream: 8,
            stationary: 16,
        };
        let t = Tile {
            b: 1,
            oc: 96,
            oh: 8,
            ow: 8,
            ic: 32,
        };
        let tiles = 7 * 7 * 2;
        assert_eq!(STR.tiled_cycles(&q, &t, tiles, bits), 190 * 9 * 3 * 8);
        assert_eq!(STR.tiled_cycles(&q, &t, tiles, bits), 41_040);
        assert_eq!(
            DADN.tiled_cycles(&q, &t, tiles, bits),
            DADN.tile_cycles(&q, &whole(&q), bits)
        );
    }

    #[test]
    fn stripes_fc_is_dadiannao_plus_p_minus_1() {
        let p = ConvProblem::fc(1, 4096, 1000);
        for pa in [4u32, 9, 16] {
            let bits = OperandBits {
                stream: pa,
                stationary: 16,
            };
            assert_eq!(STR.fixed_cycles(&p, bits), u64::from(pa) - 1);
            assert_eq!(DADN.fixed_cycles(&p, bits), 0);
        }
        // convs have no such term
        let c = ConvProblem::conv(1, 64, 64, 16, 3, 1, 1);
        let bits = OperandBits {
            stream: 8,
            stationary: 16,
        };
        assert_eq!(STR.fixed_cycles(&c, bits), 0);
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
