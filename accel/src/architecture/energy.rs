//! What a mapped problem moves (DRAM traffic and on-chip buffer accesses, in bits) and its energy,
//! split into compute, on-chip SRAM and DRAM, from the configuration's per-cycle and per-bit
//! constants.

use serde::{Deserialize, Serialize};

use super::config::EnergyConstants;
use super::dram::Timing;

/// Energy in joules, split by where it is spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnergySplit {
    /// The array (core energy per computing cycle).
    pub compute_j: f64,
    /// On-chip buffers.
    pub sram_j: f64,
    /// Off-chip memory.
    pub dram_j: f64,
}

impl EnergySplit {
    /// Sum of the three parts.
    pub fn total_j(&self) -> f64 {
        self.compute_j + self.sram_j + self.dram_j
    }

    /// `self + other · k`.
    pub fn add_scaled(&mut self, other: &EnergySplit, k: f64) {
        self.compute_j += other.compute_j * k;
        self.sram_j += other.sram_j * k;
        self.dram_j += other.dram_j * k;
    }
}

/// DRAM traffic of a mapping in bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// Streamed-operand (activation) reads.
    pub input: u64,
    /// Stationary-operand (weight) reads.
    pub weight: u64,
    /// Partial sums read back.
    pub output_read: u64,
    /// Outputs / partial sums written.
    pub output_write: u64,
}

impl Traffic {
    /// All DRAM bits moved.
    pub fn total(&self) -> u64 {
        self.input + self.weight + self.output_read + self.output_write
    }
}

/// On-chip buffer accesses of a mapping in bits (array side plus DRAM fills and drains).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SramAccess {
    pub input_read: u64,
    pub input_write: u64,
    pub weight_read: u64,
    pub weight_write: u64,
    pub output_read: u64,
    pub output_write: u64,
}

impl SramAccess {
    /// All SRAM bits accessed.
    pub fn total(&self) -> u64 {
        self.input_read
            + self.input_write
            + self.weight_read
            + self.weight_write
            + self.output_read
            + self.output_write
    }
}

const PJ: f64 = 1e-12;

/// Energy of a mapped problem: (total − stall) cycles × core energy + SRAM bits × pJ/bit + DRAM
/// bits × pJ/bit (docs/src/accelerators/bitfusion.md).
pub fn energy_of(
    c: &EnergyConstants,
    timing: &Timing,
    dram: &Traffic,
    sram: &SramAccess,
) -> EnergySplit {
    let sram_pj = sram.input_read as f64 * c.input_read_pj_per_bit
        + sram.input_write as f64 * c.input_write_pj_per_bit
        + sram.weight_read as f64 * c.weight_read_pj_per_bit
        + sram.weight_write as f64 * c.weight_write_pj_per_bit
        + sram.output_read as f64 * c.output_read_pj_per_bit
        + sram.output_write as f64 * c.output_write_pj_per_bit;
    EnergySplit {
        compute_j: (timing.total_cycles - timing.stall_cycles) as f64 * c.core_pj_per_cycle * PJ,
        sram_j: sram_pj * PJ,
        dram_j: dram.total() as f64 * c.dram_pj_per_bit * PJ,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_uses_its_constant() {
        let c = EnergyConstants {
            core_pj_per_cycle: 2.0,
            input_read_pj_per_bit: 1.0,
            input_write_pj_per_bit: 10.0,
            weight_read_pj_per_bit: 100.0,
            weight_write_pj_per_bit: 1000.0,
            output_read_pj_per_bit: 0.1,
            output_write_pj_per_bit: 0.01,
            dram_pj_per_bit: 15.0,
            mac_pj: 0.0,
        };
        let t = Timing {
            compute_cycles: 7,
            stall_cycles: 3,
            total_cycles: 10,
            mem_cycles: 9,
        };
        let d = Traffic {
            input: 1,
            weight: 2,
            output_read: 3,
            output_write: 4,
        };
        let s = SramAccess {
            input_read: 1,
            input_write: 1,
            weight_read: 1,
            weight_write: 1,
            output_read: 1,
            output_write: 1,
        };
        let e = energy_of(&c, &t, &d, &s);
        assert!((e.compute_j - 14e-12).abs() < 1e-20);
        assert!((e.sram_j - 1111.11e-12).abs() < 1e-18);
        assert!((e.dram_j - 150e-12).abs() < 1e-20);
        assert!((e.total_j() - (14.0 + 1111.11 + 150.0) * 1e-12).abs() < 1e-18);
    }
}
