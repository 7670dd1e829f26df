//! The ZC706 training engines (docs/src/accelerators/zc706.md): an R×C systolic array (timing from
//! [`crate::architecture::systolic`]) whose MAC step time follows the operand bits, plus the memory-only passes a
//! training step needs (BN / ReLU / quantisation, FP32 master weights).

use cptsim_models::summary::LayerInfo;

use crate::architecture::config::{ArrayShape, Dataflow, Engine, Zc706Params};
use crate::architecture::law::ArrayLaw;
use crate::architecture::systolic::{os_cycles, ws_cycles};
use crate::workload::gemm::{ConvProblem, GemmKind, OperandBits};
use crate::workload::tile::Tile;

/// How long one MAC step takes at given bits: `num / den` cycles per step (`den` steps per `num`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepTime {
    pub num: u64,
    pub den: u64,
}

/// Products of `p₁ × p₂` bits one DSP48E1 computes per cycle by packing operands of the shared
/// port: `1 + floor((port − p₁) / (p₁ + p₂ + guard))` (at least 1).
pub fn dsp_products(p1: u32, p2: u32, port_bits: u32, guard_bits: u32) -> u64 {
    let spacing = p1 + p2 + guard_bits;
    1 + u64::from(port_bits.saturating_sub(p1) / spacing.max(1))
}

/// The systolic law of a ZC706 engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SystolicLaw {
    pub rows: u64,
    pub cols: u64,
    pub engine: Engine,
    pub dataflow: Dataflow,
    /// Fraction of cycles that issue work.
    pub utilisation: f64,
    pub dsp_port_bits: u32,
    pub guard_bits: u32,
}

impl SystolicLaw {
    /// The law of a ZC706 engine on `array`.
    pub fn new(array: &ArrayShape, engine: Engine, z: &Zc706Params) -> Self {
        Self {
            rows: array.rows,
            cols: array.cols,
            engine,
            dataflow: z.dataflow,
            utilisation: z.utilisation,
            dsp_port_bits: z.dsp_port_bits,
            guard_bits: z.guard_bits,
        }
    }

    /// Cycles per MAC step: bit-linear lanes take `(p₁+p₂)/2`; DSP packing takes `1/k` with `k`
    /// packed products (operands wider than 16 bits run as 16-bit passes).
    pub fn step(&self, bits: OperandBits) -> StepTime {
        match self.engine {
            Engine::DspPacking if bits.stream.max(bits.stationary) <= 16 => StepTime {
                num: 1,
                den: dsp_products(
                    bits.stream,
                    bits.stationary,
                    self.dsp_port_bits,
                    self.guard_bits,
                ),
            },
            Engine::DspPacking => StepTime {
                num: u64::from(bits.stream.div_ceil(16) * bits.stationary.div_ceil(16)),
                den: 1,
            },
            _ => StepTime {
                num: u64::from(bits.stream + bits.stationary),
                den: 2,
            },
        }
    }
}

impl ArrayLaw for SystolicLaw {
    /// The im2col GEMM of the tile (`Npx = B·OH·OW`, `Nf = OC`, `T = K·K·IC`) with the streamed
    /// dimension stretched by the step time, divided by the utilisation.
    fn tile_cycles(&self, problem: &ConvProblem, t: &Tile, bits: OperandBits) -> u64 {
        let s = self.step(bits);
        let npx = t.b * t.oh * t.ow;
        let red = problem.taps() * t.ic;
        let raw = match self.dataflow {
            Dataflow::Os => os_cycles(
                npx,
                t.oc,
                (red * s.num).div_ceil(s.den),
                self.rows,
                self.cols,
            ),
            Dataflow::Ws => ws_cycles(
                (npx * s.num).div_ceil(s.den),
                t.oc,
                red,
                self.rows,
                self.cols,
            ),
        };
        (raw as f64 / self.utilisation).ceil() as u64
    }

    fn oc_granule(&self) -> u64 {
        self.cols
    }

    fn padded_reduction(&self, len: u64, _bits: OperandBits) -> u64 {
        len
    }
}

/// DRAM bits of the memory-only passes attached to `gemm` of `layer` per iteration: forward, the
/// BN / ReLU / quantisation pass over the outputs (written at the activation bits); error
/// backprop, the same over the errors (at the error bits); weight gradient, the FP32 master-weight
/// update.
pub fn pass_bits(
    z: &Zc706Params,
    layer: &LayerInfo,
    gemm: GemmKind,
    samples: u64,
    bits: OperandBits,
) -> u64 {
    let outputs = (layer.out_shape[0] * layer.out_shape[1] * layer.out_shape[2]) as u64 * samples;
    match gemm {
        GemmKind::Forward | GemmKind::ErrorBackprop => {
            outputs * (z.elementwise_bits_per_element + u64::from(bits.stream))
        }
        GemmKind::WeightGrad => layer.params * z.master_bits_per_param,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn law(engine: Engine, dataflow: Dataflow) -> SystolicLaw {
        SystolicLaw {
            rows: 16,
            cols: 16,
            engine,
            dataflow,
            utilisation: 1.0,
            dsp_port_bits: 25,
            guard_bits: 2,
        }
    }

    /// 32×32 map, 16 → 16 channels, 3×3 kernel, one tile: `Npx` 1024, `Nf` 16, `T` 144.
    fn stage1_tile(l: SystolicLaw, a: u32, w: u32) -> u64 {
        let p = ConvProblem::conv(1, 16, 16, 32, 3, 1, 1);
        let t = Tile {
            b: 1,
            oc: 16,
            oh: 32,
            ow: 32,
            ic: 16,
        };
        l.tile_cycles(
            &p,
            &t,
            OperandBits {
                stream: a,
                stationary: w,
            },
        )
    }

    #[test]
    fn bit_linear_full_precision_step_is_the_closed_form() {
        // (p₁+p₂)/2 = 1 at 1×1 bits: the plain closed forms
        let (os, ws) = (
            law(Engine::BitLinear, Dataflow::Os),
            law(Engine::BitLinear, Dataflow::Ws),
        );
        assert_eq!(stage1_tile(os, 1, 1), os_cycles(1024, 16, 144, 16, 16));
        assert_eq!(stage1_tile(ws, 1, 1), ws_cycles(1024, 16, 144, 16, 16));
        // 8×8 bits: T stretched 8× in OS: 64 · (1152 + 30)
        assert_eq!(stage1_tile(os, 8, 8), 64 * 1182);
        // 6×8 bits: 7 cycles per step
        assert_eq!(stage1_tile(os, 6, 8), 64 * (144 * 7 + 30));
    }

    #[test]
    fn dsp_packing_products() {
        assert_eq!(dsp_products(8, 8, 25, 2), 1);
        assert_eq!(dsp_products(6, 6, 25, 2), 2);
        assert_eq!(dsp_products(4, 4, 25, 2), 3);
        assert_eq!(dsp_products(2, 2, 25, 2), 4);
        // 3 products per DSP at 4×4: T = 144 → 48 steps
        assert_eq!(
            stage1_tile(law(Engine::DspPacking, Dataflow::Os), 4, 4),
            64 * (48 + 30)
        );
    }
}
