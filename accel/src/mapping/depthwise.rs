//! The ZC706 engines' depthwise mode (`depthwise = "channel-lanes"`), from first principles.
//!
//! The design followed is a separate depthwise unit as in Bai, Zhao & Huang (IEEE TCAS-II 2018)
//! built from the array's own lanes: channels go across the `cols` lanes of a row, the outputs of
//! one channel down the `rows` lanes of its column. Each lane holds its channel's weights and is
//! fed its own window from line buffers, so lanes exchange nothing and a lane finishes one output
//! every `T` MAC steps (`T` = the reduction of one output: `K²` in forward and error backprop,
//! `B·H_out·W_out` in the weight gradient). When a channel has fewer outputs than rows (the weight
//! gradient's `K²`), its reduction is split over `⌊rows / outputs⌋` row groups and summed by an
//! adder tree. Folds stream back to back; the pipeline fills once per problem.
//!
//! Cycles: `⌈C/cols⌉ · ⌈outputs/rows⌉ · ⌈T/split⌉ · step + rows + cols − 2 + ⌈log₂ split⌉`,
//! divided by the engine's utilisation (`step` = the engine's MAC step at the operand bits).
//!
//! DRAM: the line buffers hold `K_h` input rows of `cols` channels, so every input element is read
//! once, every weight once and every output written once (32 bits, the reduction never leaves
//! the lane): the compulsory traffic. Operands stream in MAC step by MAC step, so only the first
//! step's operands load before compute starts, and the last fold's outputs store after it ends;
//! the rest overlaps compute.

use crate::architecture::config::BufferBits;
use crate::architecture::dram::overlap_total;
use crate::architecture::energy::{SramAccess, Traffic};
use crate::architecture::zc706::SystolicLaw;
use crate::mapping::tiling::{Mapping, TilingError};
use crate::workload::gemm::{ConvProblem, OperandBits, PSUM_BITS};
use crate::workload::tile::Tile;

/// The channel-lanes mapping of a depthwise problem (all channels) on `law`'s lanes with
/// `buffers` and DRAM at `dram_bits_per_cycle`.
pub fn channel_lanes(
    law: &SystolicLaw,
    buffers: BufferBits,
    dram_bits_per_cycle: f64,
    p: &ConvProblem,
    bits: OperandBits,
) -> Result<Mapping, TilingError> {
    let (rows, cols) = (law.rows, law.cols);
    let channels = p.groups.max(1);
    let outputs = p.batch * p.pixels() * p.out_ch;
    let reduction = p.in_ch * p.taps();
    let split = if outputs < rows {
        rows / outputs.max(1)
    } else {
        1
    };
    let step = law.step(bits);
    let folds = channels.div_ceil(cols) * outputs.div_ceil(rows);
    let per_fold = (reduction.div_ceil(split) * step.num).div_ceil(step.den);
    let tree = u64::from(split.next_power_of_two().trailing_zeros());
    let raw = folds * per_fold + rows + cols - 2 + tree;
    let compute = (raw as f64 / law.utilisation).ceil() as u64;

    // Line buffer of the forward / error-backprop form (one input channel per lane column): K_h
    // input rows (with halo) of `cols` channels in half the input buffer. The weight gradient
    // streams X through the same buffers in its reduction order.
    let line_bits = if p.in_ch == 1 {
        p.kernel_h * p.in_cols(p.out_w) * cols.min(channels) * u64::from(bits.stream)
    } else {
        0
    };
    if line_bits > buffers.input / 2 {
        return Err(TilingError::NoFit {
            input: line_bits,
            weight: 0,
            output: 0,
            buffers,
        });
    }
    let one = ConvProblem { groups: 1, ..*p };
    let input = channels
        * one.input_scale.of(one.batch
            * one.in_ch
            * one.in_rows(one.out_h)
            * one.in_cols(one.out_w)
            * u64::from(bits.stream));
    let weight = channels * one.out_ch * one.in_ch * one.taps() * u64::from(bits.stationary);
    let output = channels * one.output_scale.of(outputs * PSUM_BITS);
    let dram = Traffic {
        input,
        weight,
        output_read: 0,
        output_write: output,
    };
    // Operands stream in step by step: the first MAC step of the first fold waits for its data.
    let steps = reduction.div_ceil(split).max(1);
    let first_load = (input + weight) / (folds.max(1) * steps);
    let last_store = output / folds.max(1);
    let timing = overlap_total(
        compute,
        dram.total(),
        first_load,
        last_store,
        dram_bits_per_cycle,
    );
    let macs = p.macs();
    let sram = SramAccess {
        // every MAC reads its window element from the line buffer; weights load into the lanes
        // once per fold; outputs leave the lanes once
        input_read: macs * u64::from(bits.stream),
        input_write: input,
        weight_read: weight * outputs.div_ceil(rows),
        weight_write: weight,
        output_read: output,
        output_write: output,
    };
    Ok(Mapping {
        tile: Tile {
            b: p.batch,
            oc: cols.min(channels),
            oh: p.out_h,
            ow: p.out_w,
            ic: p.in_ch,
        },
        order: Vec::new(),
        timing,
        dram,
        sram,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::accelerator::Accelerator;

    fn zc706() -> (SystolicLaw, crate::architecture::config::AccelConfig) {
        let config = crate::architecture::config::load("zc706").unwrap();
        let z = config.engine.zc706().unwrap();
        let law = SystolicLaw::new(&config.array, config.engine.kind(), z);
        (law, config)
    }

    fn lanes(
        (law, config): &(SystolicLaw, crate::architecture::config::AccelConfig),
        p: &ConvProblem,
    ) -> Mapping {
        let buffers = config.engine.buffers().unwrap().bits();
        channel_lanes(law, buffers, config.dram_bits_per_cycle(), p, B8).unwrap()
    }

    fn dw(batch: u64, ch: u64, hw: u64) -> ConvProblem {
        ConvProblem {
            groups: ch,
            depthwise: true,
            ..ConvProblem::conv(batch, 1, 1, hw, 3, 1, 1)
        }
    }

    const B8: OperandBits = OperandBits {
        stream: 8,
        stationary: 8,
    };

    #[test]
    fn forward_cycles_by_hand() {
        // 64 channels of 16×16 at batch 4 on 64×32 lanes, 8×8 bits (8 cycles per MAC step):
        // 2 channel folds · 16 output folds (1024 outputs / 64 rows) · 9 · 8 + 94 fill
        let z = zc706();
        let law = z.0;
        let c = lanes(&z, &dw(4, 64, 16));
        let raw = 2 * 16 * 72 + 94;
        assert_eq!(
            c.timing.compute_cycles,
            (raw as f64 / law.utilisation).ceil() as u64
        );
        // compulsory traffic: 4·64·18·18 inputs, 64·9 weights at 8 bits, 4·64·256 outputs at 32
        assert_eq!(
            c.dram.total(),
            4 * 64 * 324 * 8 + 64 * 9 * 8 + 4 * 64 * 256 * 32
        );
    }

    #[test]
    fn weight_gradient_splits_the_reduction_over_rows() {
        // 9 outputs per channel on 64 rows: 7 row groups share the 4·16·16 = 1024-long reduction
        let z = zc706();
        let law = z.0;
        let layer_like = ConvProblem {
            batch: 1,
            in_ch: 1024,
            out_ch: 1,
            out_h: 9,
            out_w: 1,
            kernel_h: 1,
            kernel_w: 1,
            ..dw(4, 32, 16)
        };
        let c = lanes(&z, &layer_like);
        let raw = 147 * 8 + 94 + 3; // ⌈1024/7⌉ = 147 steps, adder tree of 7 → 3 levels
        assert_eq!(
            c.timing.compute_cycles,
            (raw as f64 / law.utilisation).ceil() as u64
        );
    }

    #[test]
    fn a_depthwise_mac_costs_about_a_dense_mac_in_compute() {
        // Same MACs: 64-channel 3×3 depthwise at batch 256 vs a dense 3×3 conv 64 → 64 at batch 4
        let acc = Accelerator::load("zc706").unwrap();
        let d = acc.cost_problem(&dw(256, 64, 16), B8, false).unwrap();
        let dense = ConvProblem::conv(4, 64, 64, 16, 3, 1, 1);
        let n = acc.cost_problem(&dense, B8, false).unwrap();
        assert_eq!(dw(256, 64, 16).macs(), dense.macs());
        let r = d.timing.compute_cycles as f64 / n.timing.compute_cycles as f64;
        assert!((0.8..1.25).contains(&r), "{r}");
    }
}
